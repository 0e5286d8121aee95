//! `agent-lsp mcp serve`: the workspace's code navigation as a Model Context Protocol server,
//! for other agents (Claude Code, Codex, an IDE's assistant) to call over stdio ([`stdio`]), or over
//! streamable HTTP on a loopback port ([`http`]).
//!
//! What it serves, and why it is built this way:
//!
//! - **The session tools, run exactly as a model's calls run.** Every call goes through the
//!   same [`ToolRuntime`] `agent-lsp tool` builds (the preset's permission guard, the per-call
//!   timeout, the output cap, path confinement), so an MCP client gets the answer the agent's
//!   own model would get, byte for byte. The runtime is the `readonly` preset's, or
//!   `standard`'s with `--allow-write` (`--preset` names another).
//! - **An exposed subset of the catalog** ([`tools::exposed`]): the `lsp_*` tools, `read`,
//!   `list`, `glob`, `grep`, `files` (the `@path` ranking), `session_list` and `session_show`;
//!   `write` and `edit` only with `--allow-write`. The shell, sub-agents, memory and the web
//!   stay out: a client agent has its own, and ours would act with this user's rights on
//!   another agent's say-so. A tool outside the subset is an unknown tool (`-32602`), also
//!   when the preset has it.
//! - **Every call is recorded.** The server opens a session of its own at start (its id is
//!   printed on stderr) and records each call with [`ToolRuntime::run_one`], as
//!   `agent-lsp tool` does: `agent-lsp session show` audits what an MCP client ran. Calls
//!   therefore run one at a time (one log, one writer, results in call order); a call that
//!   waits for the lock is still cancelled when the client cancels it.
//! - **Errors in two kinds, as MCP asks.** A call that reached a tool and failed (bad
//!   arguments, a refused permission, a timeout) is a result with `isError` and the text the
//!   model would read; only an unroutable request (an unknown tool) or a failure to record
//!   the call is a JSON-RPC error. rmcp answers malformed messages itself and keeps serving;
//!   on stdio a line that is not JSON, which rmcp would skip, gets a `-32700` answer with a
//!   null id from the line filter in front of it ([`stdio`]).
//!
//! The server identifies itself as `agent-lsp` with the crate's version, and marks the tools
//! that only read with `readOnlyHint` (from [`Tool::read_only`](crate::plugin::tool::Tool)).

pub mod http;
mod sessions;
pub mod stdio;
pub mod tools;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, MetaObject, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::session::Session;
use crate::tools::ToolRuntime;

/// What an MCP client reads about this server on `initialize`.
const INSTRUCTIONS: &str = "agent-lsp answers code-navigation questions about this workspace \
with its real language servers: lsp_definition, lsp_references, lsp_hover, lsp_document_symbols, \
lsp_workspace_symbols, lsp_diagnostics and the other lsp_* tools take a path, a 1-based line and \
the symbol's name (the column is optional). `files` ranks workspace paths for a fuzzy query; \
read, list, glob and grep read files; session_list and session_show show the agent's recorded \
sessions. Every call is recorded in a session of its own.";

/// The MCP server: the exposed tools of a runtime, and the session that records their calls.
#[derive(Clone)]
pub struct McpServer {
    runtime: ToolRuntime,
    /// The exposed tools as MCP lists them, sorted by name.
    listed: Arc<Vec<rmcp::model::Tool>>,
    session: Arc<Mutex<Session>>,
}

impl McpServer {
    /// Serve the tools of `runtime` that [`tools::exposed`] lets through, recording every
    /// call in `session`.
    pub fn new(runtime: ToolRuntime, session: Session, allow_write: bool) -> McpServer {
        let listed = runtime
            .catalog()
            .into_iter()
            .filter(|def| tools::exposed(&def.name, allow_write))
            .map(|def| {
                let read_only = runtime
                    .registry()
                    .get(&def.name)
                    .is_some_and(|tool| tool.read_only());
                tools::to_mcp(def, read_only)
            })
            .collect();
        McpServer {
            runtime,
            listed: Arc::new(listed),
            session: Arc::new(Mutex::new(session)),
        }
    }

    /// The names of the tools a client sees.
    pub fn tool_names(&self) -> impl Iterator<Item = &str> {
        self.listed.iter().map(|tool| tool.name.as_ref())
    }

    /// Run one call of an exposed tool and record it; `Err` only for an unknown tool or a
    /// failure to append to the session log.
    async fn call(
        &self,
        request: CallToolRequestParams,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Result<CallToolResult, ErrorData> {
        let name = request.name.as_ref();
        if !self.listed.iter().any(|tool| tool.name == name) {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool `{name}`; this server's tools are {}",
                    self.tool_names().collect::<Vec<_>>().join(", ")
                ),
                None,
            ));
        }
        // The raw arguments as a model would send them, so the log records what was asked.
        let arguments = Value::Object(request.arguments.unwrap_or_default()).to_string();
        let mut session = tokio::select! {
            session = self.session.lock() => session,
            () = cancel.cancelled() => {
                return Err(ErrorData::internal_error("the call was cancelled before it ran", None));
            }
        };
        let outcome = self
            .runtime
            .run_one(&mut session, name, &arguments, &cancel)
            .await
            .map_err(|error| {
                tracing::error!(%error, tool = name, "failed to record an MCP call");
                ErrorData::internal_error(format!("failed to record the call: {error:#}"), None)
            })?;
        let session_id = session.id().to_owned();
        drop(session);
        let output = outcome.output;
        let content = vec![ContentBlock::text(output.text)];
        let mut result = if output.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        };
        // The facts the log keeps about the result (truncation, source, duration) and where it
        // was recorded, for clients that show them; models read only the text.
        let mut meta = serde_json::Map::new();
        meta.insert("agent-lsp/session".into(), json!(session_id));
        meta.insert("agent-lsp/meta".into(), output.meta);
        result.meta = Some(MetaObject(meta));
        Ok(result)
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("agent-lsp", env!("CARGO_PKG_VERSION"))
                    .with_title("agent-lsp")
                    .with_description(
                        "Code navigation from the workspace's language servers, and the agent's sessions",
                    ),
            )
            .with_instructions(INSTRUCTIONS)
    }

    // `get_tool` stays rmcp's default (`None`): rmcp then does not check arguments against the
    // schema itself, and a bad argument gets the tool's own error, as `agent-lsp tool` shows it.
    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.listed.to_vec()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.call(request, context.ct).await.map(Into::into)
    }
}
