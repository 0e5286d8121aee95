#!/usr/bin/env bash
# What the user's hooks add to one tool call, through the real binary: `agent-lsp tool shell
# true` under the `standard` preset (its commands, and so its hooks, held by the sandbox)
# without hooks, paired (farm-bench --vs) with the same call with hooks configured:
#
#   - `true` as a PreToolUse and a PostToolUse hook: the fixed cost of running two hooks;
#   - the Bash command validator of Claude Code's hooks reference (python3, reading the event
#     on stdin), from a Claude Code settings.json: what a typical policy hook costs.
#
#   bench/hooks.sh WORKSPACE [AGENT_LSP]
#
# AGENT_LSP defaults to target/release/agent-lsp.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
workspace=$(cd "$1" && pwd)
agent=$(realpath "${2:-target/release/agent-lsp}")
# Not under /tmp, which the sandbox replaces by a private one: the hooks read their script here.
state=$(mktemp -d -p /var/tmp)
trap 'rm -rf "$state"' EXIT
export AGENT_LSP_STATE_DIR="$state"
: > "$state/none.toml"
cat > "$state/true.toml" <<'TOML'
[[hooks.PreToolUse]]
command = "true"
[[hooks.PostToolUse]]
command = "true"
TOML
cp "$here/tests/e2e/hooks/bash_validator.py" "$state/bash_validator.py"
cat > "$state/settings.json" <<JSON
{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "python3 $state/bash_validator.py"}]}]}}
JSON
printf '[hooks]\nclaude_settings = ["%s"]\n' "$state/settings.json" > "$state/claude.toml"

args='{"command": "true"}'
call() { # config
  echo "env AGENT_LSP_CONFIG=$state/$1.toml $agent --workspace $workspace tool --json --yes --preset standard shell --args '$args'"
}
echo "workspace: $workspace"
for hooks in true claude; do
  echo "== hooks: $hooks"
  farm-bench -n 20 --warmup 2 --timeout 600 --vs "$(call none)" -- sh -c "exec $(call "$hooks")"
done
