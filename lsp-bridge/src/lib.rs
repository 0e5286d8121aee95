//! Child language servers for agent-lsp.
//!
//! This crate will own everything that talks to the workspace's real language servers
//! (pyright, clangd, typescript-language-server, rust-analyzer, gopls, pylsp): the registry of
//! server configurations, their lifecycle, the document mirror, position encodings and the
//! queries that become the agent's `lsp_*` tools (issue 4).
//!
//! It is part of the workspace from the start so that the dependency direction is visible:
//! `agent-lsp` depends on `lsp-bridge`, never the other way round, and only these two crates
//! (and `agent-lsp/src/server/`) may name LSP types.
