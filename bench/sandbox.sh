#!/usr/bin/env bash
# The time the sandbox adds to one command, through the real binary: `agent-lsp tool shell`
# under a preset whose commands run unconfined, paired (farm-bench --vs) with the same call
# under bubblewrap and under Landlock, for `true` and for `git status` in WORKSPACE.
#
#   bench/sandbox.sh WORKSPACE [AGENT_LSP]
#
# WORKSPACE is a git repository (this one, or a large tree such as the Linux sources); the
# presets are written into its .agent-lsp/presets/. AGENT_LSP defaults to target/debug/agent-lsp.
set -euo pipefail
workspace=$(cd "$1" && pwd)
agent=$(realpath "${2:-target/debug/agent-lsp}")
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
: > "$state/config.toml"
export AGENT_LSP_STATE_DIR="$state" AGENT_LSP_CONFIG="$state/config.toml"

presets="$workspace/.agent-lsp/presets"
mkdir -p "$presets"
standard=$("$agent" preset show standard 2>/dev/null || true)
if [ -z "$standard" ]; then
  echo "cannot read the standard preset from $agent" >&2
  exit 1
fi
write() { # name, [sandbox] table
  printf '%s\n' "$standard" | awk -v table="$2" '
    /^\[sandbox\]$/ { print "[sandbox]"; print table; skip = 1; next }
    skip && /^\[/ { skip = 0 }
    !skip { print }' > "$presets/$1.toml"
}
write open 'mode = "off"'
write bwrap 'mode = "workspace-write"
mechanism = "bubblewrap"'
write landlock 'mode = "workspace-write"
mechanism = "landlock"'

echo "workspace: $workspace ($(git -C "$workspace" ls-files | wc -l) tracked files)"
for command in 'true' 'git status --short >/dev/null'; do
  args=$(printf '{"command": "%s"}' "$command")
  for preset in bwrap landlock; do
    echo "== $preset: $command"
    farm-bench -n 20 --warmup 2 --timeout 600 \
      --vs "$agent --workspace $workspace tool --json --yes --preset open shell --args '$args'" \
      -- "$agent" --workspace "$workspace" tool --json --yes --preset "$preset" shell --args "$args"
  done
done
