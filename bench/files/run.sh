#!/usr/bin/env bash
# `@path` file search benchmarks, side by side with fd and fzf.
#
# Cold: a new process per run, nothing indexed in memory (the file system cache is warm, as
# it is when an editor starts on a checkout it just had open): the time to the first ranked
# answer of `agent-lsp files QUERY`, against `fd` merely listing the same tree and against
# `fd | fzf --filter QUERY`, for several queries, with hyperfine. Warm: the in-process bench
# (`cargo bench -p agent-lsp --bench file_search`): query latency, memory, incremental updates.
#
# Usage: bench/files/run.sh            (tree in target/bench-files-tree, made once by gen.py)
#        FILES_BENCH_TREE=DIR bench/files/run.sh
# Needs fdfind, fzf and hyperfine on PATH (Debian: apt-get install fd-find fzf hyperfine) and
# python3; installs nothing itself. Prints Markdown for BENCHMARKS.md.

set -euo pipefail

missing=()
for tool in fdfind fzf hyperfine python3 cargo; do
    command -v "$tool" > /dev/null || missing+=("$tool")
done
if ((${#missing[@]})); then
    echo "missing: ${missing[*]}" >&2
    echo "install the peers with: apt-get install fd-find fzf hyperfine" >&2
    exit 2
fi

repo=$(cd "$(dirname "$0")/../.." && pwd)
tree=${FILES_BENCH_TREE:-$repo/target/bench-files-tree}
runs=${FILES_BENCH_RUNS:-10}
queries=(${FILES_BENCH_QUERIES:-main parser_test src/lib cmpauth hndlr})

if [[ ! -f $tree/.gitignore ]]; then
    python3 "$repo/bench/files/gen.py" "$tree" >&2
fi
cargo build --release -p agent-lsp --quiet
agent_lsp=$repo/target/release/agent-lsp

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# An empty configuration, so that a user's [files] settings do not change what is measured.
: > "$out/config.toml"
export AGENT_LSP_CONFIG=$out/config.toml

# The same listing for everyone: hidden files included, `.git/` left out, ignore files honoured.
fd=(fdfind --hidden --exclude .git --base-directory "$tree" .)
n_agent=$("$agent_lsp" files --workspace "$tree" --json --limit 1 |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["status"]["entries"])')
n_fd=$("${fd[@]}" | wc -l)
echo "Tree: $tree ($n_fd paths listed by fd, $n_agent indexed by agent-lsp)" >&2

for query in "${queries[@]}"; do
    hyperfine --shell=bash --warmup 2 --runs "$runs" --style basic \
        --export-json "$out/$(echo "$query" | tr '/' '_').json" \
        -n "agent-lsp files" "'$agent_lsp' files --workspace '$tree' --limit 20 '$query'" \
        -n "fd" "${fd[*]@Q} > /dev/null" \
        -n "fd | fzf --filter" "${fd[*]@Q} | fzf --filter '$query' | head -20" >&2
done

python3 - "$out" "$n_fd" "${queries[@]}" <<'EOF'
import json, os, sys

out, n_paths, queries = sys.argv[1], sys.argv[2], sys.argv[3:]
print(f"Cold, new process per run ({n_paths} paths; mean ± σ of hyperfine runs, wall clock):")
print()
print("| query | agent-lsp files (ranked top 20) | fd (listing only) | fd \\| fzf --filter (ranked) | agent-lsp / fd\\|fzf |")
print("|---|---|---|---|---|")
for query in queries:
    with open(os.path.join(out, query.replace("/", "_") + ".json")) as f:
        results = {r["command"]: r for r in json.load(f)["results"]}
    cell = lambda r: f"{r['mean'] * 1000:.0f} ± {r['stddev'] * 1000:.0f} ms"
    agent, fd, fzf = results["agent-lsp files"], results["fd"], results["fd | fzf --filter"]
    print(f"| `{query}` | {cell(agent)} | {cell(fd)} | {cell(fzf)} | {agent['mean'] / fzf['mean']:.2f} |")
EOF

echo
echo "Warm, in process (cargo bench -p agent-lsp --bench file_search):"
echo
FILES_BENCH_TREE=$tree cargo bench -p agent-lsp --bench file_search 2> /dev/null | sed -n '/^|/,$p'
