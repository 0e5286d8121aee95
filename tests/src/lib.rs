//! Test support for agent-lsp end-to-end tests.
