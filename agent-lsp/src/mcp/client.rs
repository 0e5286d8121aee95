//! The connection to one MCP server, over the official SDK (`rmcp`): started on first need,
//! restarted after it stopped (at most [`MAX_RESTARTS`] times in a process, then reported as
//! failed, as lsp-bridge does with language servers), and shared by every agent of the
//! process (`run`, `serve` and their sub-agents) through [`server`].
//!
//! Every connection lives on one runtime of its own ([`block_on`], [`spawn_abortable`]): the
//! SDK spawns its tasks on the runtime that connects, and the agents that use a server run on
//! runtimes that come and go (a `serve --listen` connection's, a sub-agent's call). A call's
//! future aborted there (a timeout, a cancelled turn) drops the SDK's request, which sends
//! `notifications/cancelled` to the server.
//!
//! A child's stdout goes through a line filter before the SDK reads it: a line that is not JSON
//! ends the connection with an error naming the line, where the SDK would skip it and leave the
//! request waiting for an answer that never comes.

mod connect;

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::service::{Peer, RoleClient, RunningService, ServiceError};

use super::config::Transport;
use super::state::{self, CachedTool};
use crate::sandbox::Sandbox;

/// Restarts of a server after its first start, in one process; then it is reported as failed.
pub const MAX_RESTARTS: u32 = 3;

/// The runtime every MCP connection lives on.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("mcp")
            .enable_all()
            .build()
            .expect("a runtime for the MCP client")
    })
}

/// Run `future` on the MCP runtime and wait for it from synchronous code (the catalog is
/// needed when a preset is assembled, which is not async).
pub fn block_on<T: Send + 'static>(future: impl Future<Output = T> + Send + 'static) -> T {
    let (sender, receiver) = std::sync::mpsc::channel();
    runtime().spawn(async move {
        let _ = sender.send(future.await);
    });
    receiver
        .recv()
        .expect("the MCP runtime runs every task it is given")
}

/// Run `future` on the MCP runtime; dropping the returned future aborts it there.
pub async fn spawn_abortable<T: Send + 'static>(
    future: impl Future<Output = T> + Send + 'static,
) -> Option<T> {
    struct AbortOnDrop(tokio::task::AbortHandle);
    impl Drop for AbortOnDrop {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let task = runtime().spawn(future);
    let _abort = AbortOnDrop(task.abort_handle());
    task.await.ok()
}

type Table = Mutex<HashMap<(PathBuf, String, Option<String>), Arc<Server>>>;

/// Every server of the process, by (workspace, server digest, sandbox summary).
static SERVERS: OnceLock<Table> = OnceLock::new();

/// Drop every server's connection, killing its child: `main` calls this before it returns,
/// because the runtime the connections live on is never dropped, and a server that ignores
/// its stdin closing would outlive the process.
pub fn stop_all() {
    let Some(servers) = SERVERS.get() else {
        return;
    };
    let servers = servers
        .lock()
        .expect("the server table is never poisoned")
        .values()
        .cloned()
        .collect::<Vec<_>>();
    block_on(async move {
        for server in servers {
            server.state.lock().await.connection = None;
        }
    });
}

/// The server for `transport` in `workspace`, shared by every agent of the process: one
/// connection per (workspace, server digest, sandbox), since a preset that runs its servers in
/// a sandbox (`[sandbox] mcp_servers`) must not share one started outside it.
pub fn server(
    name: &str,
    digest: &str,
    transport: Transport,
    workspace: PathBuf,
    state_root: Option<PathBuf>,
    sandbox: Option<Arc<Sandbox>>,
) -> Arc<Server> {
    let mut servers = SERVERS
        .get_or_init(Default::default)
        .lock()
        .expect("the server table is never poisoned");
    let held = sandbox.as_ref().map(|sandbox| sandbox.summary());
    servers
        .entry((workspace.clone(), digest.to_owned(), held))
        .or_insert_with(|| {
            Arc::new(Server {
                name: name.to_owned(),
                digest: digest.to_owned(),
                transport,
                workspace,
                state_root,
                sandbox,
                state: tokio::sync::Mutex::new(State::default()),
            })
        })
        .clone()
}

/// One server and its connection, when it has one.
pub struct Server {
    /// The server's name as declared: the `SERVER` of its tools' `mcp__SERVER__TOOL` names.
    pub name: String,
    digest: String,
    transport: Transport,
    workspace: PathBuf,
    /// Where its tool list is cached after each start.
    state_root: Option<PathBuf>,
    /// What holds its process (a stdio server), when the preset runs its servers in the
    /// sandbox.
    sandbox: Option<Arc<Sandbox>>,
    state: tokio::sync::Mutex<State>,
}

#[derive(Default)]
struct State {
    connection: Option<Connection>,
    /// Starts so far, the first one included.
    starts: u32,
    /// Why the last connection ended or the last start failed.
    last_error: Option<String>,
    /// Set once the restarts are used up: every later call gets this.
    failed: Option<String>,
}

struct Connection {
    service: RunningService<RoleClient, ()>,
    /// Why the connection broke, as the stdout filter saw it (a line that is not JSON).
    problem: Arc<Mutex<Option<String>>>,
    /// The child's last stderr line.
    stderr_tail: Arc<Mutex<Option<String>>>,
    /// The child (killed when the connection is dropped); `None` over HTTP.
    child: Option<tokio::process::Child>,
    /// The task reading the child's stderr, done once the child closed it.
    stderr_reader: Option<tokio::task::JoinHandle<()>>,
}

impl Connection {
    /// Wait (briefly) for a closed connection's child to have exited and its stderr to be read
    /// to the end, so [`Connection::reason`] has its exit status and its last words.
    async fn settle(&mut self) {
        if self.problem.lock().expect("never poisoned").is_some() {
            return;
        }
        let grace = Duration::from_secs(2);
        if let Some(child) = &mut self.child {
            let _ = tokio::time::timeout(grace, child.wait()).await;
        }
        if let Some(reader) = self.stderr_reader.take() {
            let _ = tokio::time::timeout(grace, reader).await;
        }
    }

    /// Why this connection is closed, in words.
    fn reason(&mut self) -> String {
        if let Some(problem) = self.problem.lock().expect("never poisoned").clone() {
            return problem;
        }
        let status = self
            .child
            .as_mut()
            .and_then(|child| child.try_wait().ok().flatten())
            .map(|status| format!(" ({status})"))
            .unwrap_or_default();
        let tail = self
            .stderr_tail
            .lock()
            .expect("never poisoned")
            .clone()
            .map(|line| format!("; its last stderr line: {line}"))
            .unwrap_or_default();
        format!("the server closed the connection{status}{tail}")
    }
}

impl Server {
    /// The state `agent-lsp mcp list` shows.
    pub async fn status(&self) -> String {
        let mut state = self.state.lock().await;
        if let Some(failed) = &state.failed {
            return format!("failed: {failed}");
        }
        match &mut state.connection {
            Some(connection) if !connection.service.is_closed() => "running".to_owned(),
            Some(connection) => format!("stopped: {}", connection.reason()),
            None => match &state.last_error {
                Some(error) => format!("stopped: {error}"),
                None => "not started".to_owned(),
            },
        }
    }

    /// A live connection's peer: the current one, or a fresh start when there is none (within
    /// `start_timeout`, and while restarts are left).
    async fn peer(&self, start_timeout: Duration) -> Result<Peer<RoleClient>, String> {
        let mut state = self.state.lock().await;
        if let Some(failed) = &state.failed {
            return Err(failed.clone());
        }
        if let Some(connection) = &mut state.connection {
            if !connection.service.is_closed() {
                return Ok(connection.service.peer().clone());
            }
            connection.settle().await;
            let reason = connection.reason();
            state.connection = None;
            state.last_error = Some(reason);
        }
        if state.starts > MAX_RESTARTS {
            let failed = format!(
                "MCP server `{}` stopped {} times and is not started again until agent-lsp restarts; the last time: {}",
                self.name,
                state.starts,
                state.last_error.as_deref().unwrap_or("no reason known"),
            );
            tracing::error!(server = %self.name, "{failed}");
            state.failed = Some(failed.clone());
            return Err(failed);
        }
        state.starts += 1;
        let started = match tokio::time::timeout(start_timeout, self.connect()).await {
            Ok(result) => result,
            Err(_) => Err(format!(
                "it did not complete the MCP handshake within {} s",
                start_timeout.as_secs_f64()
            )),
        };
        match started {
            Ok(connection) => {
                let peer = connection.service.peer().clone();
                state.connection = Some(connection);
                drop(state);
                self.refresh_cache(&peer, start_timeout).await;
                Ok(peer)
            }
            Err(error) => {
                let message = format!("MCP server `{}` did not start: {error}", self.name);
                tracing::warn!(server = %self.name, "{message}");
                state.last_error = Some(error);
                Err(message)
            }
        }
    }

    /// Keep the tool list of a fresh connection for the next session's catalog.
    async fn refresh_cache(&self, peer: &Peer<RoleClient>, timeout: Duration) {
        let Some(state_root) = &self.state_root else {
            return;
        };
        if let Ok(Ok(tools)) = tokio::time::timeout(timeout, peer.list_all_tools()).await {
            let tools = tools.into_iter().map(cached).collect::<Vec<_>>();
            if let Err(error) = state::cache_tools(state_root, &self.digest, &tools) {
                tracing::warn!(server = %self.name, "failed to cache the tool list: {error:#}");
            }
        }
    }

    /// The server's tools, starting it if needed.
    pub async fn list_tools(&self, timeout: Duration) -> Result<Vec<CachedTool>, String> {
        let peer = self.peer(timeout).await?;
        match tokio::time::timeout(timeout, peer.list_all_tools()).await {
            Ok(Ok(tools)) => Ok(tools.into_iter().map(cached).collect()),
            Ok(Err(error)) => Err(self.failure(error).await),
            Err(_) => Err(format!(
                "MCP server `{}` did not list its tools within {} s",
                self.name,
                timeout.as_secs_f64()
            )),
        }
    }

    /// Call `tool` (the server's own name for it) with `arguments`.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
        start_timeout: Duration,
    ) -> Result<CallToolResult, String> {
        let peer = self.peer(start_timeout).await?;
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = arguments;
        match peer.call_tool(params).await {
            Ok(result) => Ok(result),
            Err(error) => Err(self.failure(error).await),
        }
    }

    /// What the model reads of a failed request: the server's own error, or why the connection
    /// ended and what happens next.
    async fn failure(&self, error: ServiceError) -> String {
        if let ServiceError::McpError(error) = &error {
            return format!(
                "MCP server `{}` answered with an error: {}",
                self.name, error.message
            );
        }
        // A closed transport is a broken connection even before the connection's task has
        // noticed; the next call starts the server again.
        let broken = matches!(
            error,
            ServiceError::TransportClosed | ServiceError::TransportSend(_)
        );
        let mut state = self.state.lock().await;
        let Some(connection) = state.connection.as_mut() else {
            return format!("MCP server `{}`: {error}", self.name);
        };
        if !broken && !connection.service.is_closed() {
            return format!("MCP server `{}`: {error}", self.name);
        }
        connection.settle().await;
        let reason = connection.reason();
        state.connection = None;
        state.last_error = Some(reason.clone());
        let left = (MAX_RESTARTS + 1).saturating_sub(state.starts);
        format!(
            "MCP server `{}` stopped during the request: {reason}; it is started again at the next call ({left} restarts left)",
            self.name
        )
    }
}

fn cached(tool: rmcp::model::Tool) -> CachedTool {
    CachedTool {
        name: tool.name.into_owned(),
        description: tool.description.map(|d| d.into_owned()).unwrap_or_default(),
        input_schema: serde_json::Value::Object((*tool.input_schema).clone()),
        read_only: tool
            .annotations
            .and_then(|annotations| annotations.read_only_hint)
            .unwrap_or(false),
    }
}
