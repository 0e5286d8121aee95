//! The tool seam: what a tool is and what it is given for one call. It sits in the plugin
//! layer so a plugin can contribute tools (the compaction plugin's `recall_history`, the memory
//! and plan tools) without importing the tool runtime that runs them; `crate::tools` re-exports
//! everything here under its old paths.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::outcomes::ToolOutput;
use crate::llm::ToolDef;
use crate::workspace::Workspace;

/// What a tool is given for one call.
#[derive(Clone, Debug)]
pub struct ToolContext {
    pub workspace: Arc<Workspace>,
    /// Cancelled when the turn is cancelled or the call timed out; long-running tools (walkers,
    /// processes) watch it and stop.
    pub cancel: CancellationToken,
    pub call_id: String,
    /// The session's log file, for tools that read the session's own history
    /// (`recall_history`); `None` outside of a session.
    pub session_path: Option<PathBuf>,
    /// The session's id and the seq of this call's `tool/call` event, for tools that record
    /// where something came from (a memory's provenance); `None` outside of a session.
    pub session_id: Option<String>,
    pub call_seq: Option<u64>,
    /// The editor's open buffers under `agent-lsp serve`; `None` on the terminal.
    pub buffers: Option<Arc<dyn Buffers>>,
}

impl ToolContext {
    /// Resolve a path argument inside the workspace, or the error output saying why it was
    /// refused. Every file tool goes through this.
    pub fn resolve(&self, user_path: &str) -> Result<PathBuf, ToolOutput> {
        self.workspace.resolve(user_path).map_err(|err| {
            tracing::warn!(path = user_path, %err, "path refused");
            ToolOutput::error(format!(
                "path refused: {err}. Tools only work inside the workspace; give a path relative to its root"
            ))
            .with_meta("refused_path", user_path)
        })
    }
}

/// A tool the model can call.
pub trait Tool: Send + Sync + 'static {
    /// Name, description and JSON schema, as listed in the catalog.
    fn def(&self) -> ToolDef;

    /// Whether the tool only reads, so that it may run concurrently with the other read-only
    /// calls of the same step.
    fn read_only(&self) -> bool;

    /// How long this call may take, when it is not the runtime's default (e.g. the shell's
    /// own `timeout_secs` plus a grace period).
    fn timeout(&self, _args: &Value) -> Option<Duration> {
        None
    }

    /// Run one call. Failures are outputs with `is_error`, never panics: the model reads them.
    fn run(&self, ctx: ToolContext, args: Value) -> BoxFuture<'static, ToolOutput>;
}

/// The editor's open buffers, as the file tools see them.
pub trait Buffers: Send + Sync + std::fmt::Debug {
    /// The editor's current text of `path`, unsaved changes included, when it has the file
    /// open; `None` means "read the disk".
    fn text(&self, path: &Path) -> Option<String>;

    /// Replace the buffer of `path` (open in the editor, with text `before`) by `after`.
    /// Resolves once the editor applied the change and the buffer shows it, or with the reason
    /// the editor refused it.
    fn replace(
        &self,
        path: &Path,
        before: &str,
        after: &str,
    ) -> BoxFuture<'static, Result<(), String>>;
}
