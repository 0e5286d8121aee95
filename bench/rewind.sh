#!/usr/bin/env bash
# What the rewind's file checkpoints cost, through the real binary: RUNS times, one
# `agent-lsp tool shell` call that appends a line to one file of WORKSPACE, each a turn of its
# own in one session (turn start, before and after the command, turn end: four captures, each a
# walk with the stat cache warm from the capture before). Prints the captures' own durations
# from the session log (median and max per reason), the first capture of a fresh store (no stat
# cache yet: every file read and stored), and the store's growth per turn against the bytes of
# the changed file, then the time of `agent-lsp rewind --files` of the last turn.
#
#   bench/rewind.sh WORKSPACE [AGENT_LSP] [RUNS]
#
# The file changed is WORKSPACE/.rewind-bench (removed at the end). AGENT_LSP defaults to
# target/release/agent-lsp.
set -euo pipefail
workspace=$(cd "$1" && pwd)
agent=$(realpath "${2:-target/release/agent-lsp}")
runs=${3:-20}
state=$(mktemp -d)
trap 'rm -rf "$state" "$workspace/.rewind-bench"' EXIT
: > "$state/config.toml"
export AGENT_LSP_STATE_DIR="$state" AGENT_LSP_CONFIG="$state/config.toml"
cd "$workspace"
echo "workspace: $workspace ($(git ls-files 2>/dev/null | wc -l) tracked files)"
printf 'start\n' > .rewind-bench
# `off`: the sandbox's own cost is measured by bench/sandbox.sh, not here.
mkdir -p "$state/presets"
"$agent" preset show standard | sed 's/^mode = "workspace-write"/mode = "off"/' > "$state/presets/unboxed.toml"
shell() { # flags, turn
  "$agent" tool shell --yes $1 \
    --args "{\"command\": \"echo turn $2 >> .rewind-bench\"}" > /dev/null 2>&1
}
shell "--preset $state/presets/unboxed.toml" 0
store=$(ls -d "$state"/workspaces/*/checkpoints)
before=$(du -sb "$store" | cut -f1)
for run in $(seq 1 "$runs"); do shell "--session last" "$run"; done
after=$(du -sb "$store" | cut -f1)
log=$(ls "$state"/workspaces/*/sessions/*.jsonl)
python3 - "$log" "$before" "$after" "$runs" <<'PY'
import json, statistics, sys
log, before, after, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
by = {}
first = None
for line in open(log):
    event = json.loads(line)
    if event["kind"] != "files/checkpoint":
        continue
    p = event["payload"]
    if first is None:
        first = p
        continue
    by.setdefault(p["reason"], []).append(p["duration_ms"])
print(f"first capture (fresh store): {first['duration_ms']} ms, {first['changed_total']} files")
for reason, times in by.items():
    print(f"{reason:>12}: median {statistics.median(times):.0f} ms, max {max(times)} ms over {len(times)}")
print(f"store growth: {(after - before) / runs / 1024:.1f} KiB per turn of one changed line ({before // 1024} KiB after the first turn)")
PY
start=$(date +%s%N)
"$agent" rewind last --files > /dev/null
echo "rewind --files of the last turn: $(( ($(date +%s%N) - start) / 1000000 )) ms (a process: open, capture, plan, restore, capture)"
