//! Child language servers for agent-lsp.
//!
//! This crate owns everything that talks to the workspace's real language servers (pyright,
//! clangd, typescript-language-server, rust-analyzer, gopls, pylsp): the registry of server
//! configurations, their lifecycle, the document mirror, position encodings and the queries that
//! become the agent's `lsp_*` tools.
//!
//! Only this crate and `agent-lsp/src/server/` name LSP types; `agent-lsp` depends on this
//! crate, never the other way round.

#![warn(missing_docs)]

pub mod child;
pub mod config;
pub mod documents;
pub mod error;
pub mod framing;
pub mod jsonrpc;
pub mod position;
pub mod queries;
pub mod registry;
pub mod syntax;
mod transport;

/// The LSP types this crate speaks, so that users name the same version.
pub use lsp_types;

pub use child::{
    Child, ChildState, DiagnosticsEntry, DiagnosticsStore, Relay, RequestHandler, SentRequest,
    Undelivered,
};
pub use config::{BridgeConfig, Launcher, RestartPolicy, ServerConfig, language_id};
pub use error::{Error, Result};
pub use registry::{Bridge, ServerHealth};
pub use transport::FIRST_OWN_ID;
