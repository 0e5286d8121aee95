//! `agent-lsp serve`: the language server editors start. It brokers the workspace's child
//! servers (so the editor keeps their features through one configured server) and shares their
//! warm state and the editor's unsaved buffers with the agent's tools.
//!
//! The editor side speaks raw JSON-RPC over `lsp_bridge::framing`, like the child side: a proxy
//! must pass through methods it does not know, map ids in both directions and forward
//! `$/cancelRequest` for the right id, and owning the loop makes all three plain code (see
//! docs/decisions/0001-raw-json-rpc-proxy.md).
//!
//! How messages run (the table is [`Server::handle`]):
//! - a plain request about a document whose child runs is forwarded by the thread that read
//!   it, and its answer written back by the thread that reads the child ([`intake`]);
//! - notifications run in order on the loop (document sync must stay ordered);
//! - `initialize` and `shutdown` run on the loop;
//! - every other request runs as its own task, cancellable through `$/cancelRequest`;
//! - child → editor requests get fresh ids here and their answers are routed back;
//! - child notifications (diagnostics, progress, log and show messages) are forwarded as they
//!   come.
//!
//! Positions pass unconverted: the editor is offered UTF-16 (which every client supports), and
//! every child is asked for UTF-16 only, which every server supports, so editor and children
//! count the same units.

mod actions;
mod buffers;
mod capabilities;
mod chat;
mod commands;
mod dispatch;
mod documents;
mod host;
mod intake;
mod listen;
mod routing;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::Context;
use lsp_bridge::documents::DocumentMirror;
use lsp_bridge::framing::{FrameWriter, RawResult};
use lsp_bridge::jsonrpc;
use lsp_bridge::position::PositionEncoding;
use lsp_bridge::{Bridge, Child};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::config::Config;
pub use intake::EditorInput;
pub use listen::run as run_listen;

/// JSON-RPC error codes, by their names.
pub use lsp_bridge::jsonrpc::code as codes;

/// How long an editor waits at most for a forwarded child request.
const CHILD_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the server, on its way out, waits for the editor to read what is left to send.
const WRITER_DRAIN: Duration = Duration::from_secs(5);

pub use lsp_bridge::jsonrpc::{Reply, ResponseError};

/// State shared by the loop and the request tasks.
pub struct Shared {
    /// Message bodies (JSON text) for the editor, in order, from any thread.
    out: Arc<FrameWriter>,
    config: Config,
    /// `--workspace`, used when the editor names no workspace folder.
    default_workspace: Option<PathBuf>,
    bridge: OnceLock<Bridge>,
    documents: Arc<DocumentMirror>,
    client_capabilities: OnceLock<Value>,
    /// Editor request id (as JSON text) → its cancellation token.
    in_flight: Mutex<HashMap<String, CancellationToken>>,
    /// Our ids of requests sent to the editor → who waits for the answer.
    to_editor: Mutex<HashMap<i64, oneshot::Sender<Reply>>>,
    next_id: AtomicI64,
    /// For `*/resolve` requests, which carry no document: the child that answered the request
    /// that produced the item.
    resolve_routes: Mutex<HashMap<&'static str, Arc<Child>>>,
    /// Originating methods (`textDocument/completion`, ...) whose items two running children
    /// resolve: their answers are parsed and each item tagged with its child.
    ambiguous_origins: Mutex<std::collections::HashSet<&'static str>>,
    /// Document path → its child, so a request does not redo pattern matching and the root
    /// marker search (several `stat`s per ancestor) every time; a dead child is looked up again.
    routes: Mutex<HashMap<PathBuf, Arc<Child>>>,
    /// Document URI, as the editor writes it, → its child, for the intake's hot path; filled
    /// when the loop first forwards a request about a (non-prompt) document.
    document_routes: Mutex<HashMap<String, Arc<Child>>>,
    /// The agent: its session, the running turn.
    pub(crate) host: host::Host,
    prompt_documents: chat::PromptDocuments,
    /// The workspace's paths for `@path` completion, started at `initialize`.
    files: OnceLock<crate::workspace::watch::LiveIndex>,
    /// Capability methods announced at `initialize`; a child starting later gets the others
    /// registered dynamically.
    announced: Mutex<std::collections::HashSet<String>>,
    /// Servers whose failure to start the editor was shown, so it is shown once per server
    /// (every document of theirs that opens would fail the same way).
    start_failures_shown: Mutex<std::collections::HashSet<String>>,
    /// Where commands (agent turns, with their model streaming, tool runs and log writes)
    /// run: off the proxy's thread, so a turn never delays the editor's requests.
    agent_runtime: tokio::runtime::Handle,
}

impl Shared {
    fn send(&self, message: Value) {
        // A failed send means the editor left: nothing to tell it.
        let _ = self
            .out
            .send(&serde_json::to_vec(&message).expect("a Value serializes"));
    }

    /// Answer a request with a child's result as the child wrote it (no parse, no
    /// re-serialization: the proxy's hot path).
    fn respond_raw(&self, id: &Value, result: &RawResult) {
        let id = serde_json::to_string(id).expect("an id serializes");
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{}}}"#, result.get());
        let _ = self.out.send(body.as_bytes());
    }

    fn respond(&self, id: Value, reply: Reply) {
        self.send(jsonrpc::reply(&id, &reply));
    }

    pub(crate) fn notify_editor(&self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Send a request to the editor and wait for its answer.
    pub(crate) async fn request_editor(&self, method: &str, params: Value) -> Reply {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = oneshot::channel();
        self.to_editor
            .lock()
            .expect("pending editor requests")
            .insert(id, sender);
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        match tokio::time::timeout(CHILD_REQUEST_TIMEOUT, receiver).await {
            Ok(Ok(reply)) => reply,
            _ => {
                self.to_editor
                    .lock()
                    .expect("pending editor requests")
                    .remove(&id);
                Err(ResponseError::new(
                    codes::INTERNAL_ERROR,
                    format!("the editor did not answer `{method}`"),
                ))
            }
        }
    }

    /// Show an error to the person at the editor, saying what to do.
    pub(crate) fn show_error(&self, message: &str) {
        self.notify_editor(
            "window/showMessage",
            json!({"type": 1, "message": format!("agent-lsp: {message}")}),
        );
    }

    pub(crate) fn bridge(&self) -> Result<&Bridge, ResponseError> {
        self.bridge.get().ok_or(ResponseError::new(
            codes::SERVER_NOT_INITIALIZED,
            "the server is not initialized".to_owned(),
        ))
    }

    /// The child serving `path`, started if needed.
    pub(crate) async fn child_for(
        &self,
        path: &std::path::Path,
    ) -> Result<Arc<Child>, lsp_bridge::Error> {
        let cached = self.routes.lock().expect("routes").get(path).cloned();
        if let Some(child) = cached.filter(|child| child.is_healthy()) {
            return Ok(child);
        }
        let bridge = self.bridge.get().ok_or(lsp_bridge::Error::NotReady {
            server: "agent-lsp".into(),
        })?;
        // Boxed: starting a child is a large future, and this runs inside every request's task.
        let child = Box::pin(bridge.child_for(path)).await?;
        // A restarted child has none of the editor's documents open.
        if let Err(error) = self.documents.reopen_for_editor(&child, path).await {
            tracing::warn!(server = child.name(), path = %path.display(), "cannot reopen the document: {error}");
        }
        self.routes
            .lock()
            .expect("routes")
            .insert(path.to_owned(), child.clone());
        Ok(child)
    }

    /// The editor cancelled request `id`, which was forwarded to a child as it is: that child
    /// answers it with `RequestCancelled` and gets the cancellation. `false` when no child has
    /// it pending.
    fn cancel_forwarded(&self, id: i64) -> bool {
        let children = self
            .routes
            .lock()
            .expect("routes")
            .values()
            .cloned()
            .collect::<Vec<_>>();
        children.iter().any(|child| child.cancel_forwarded(id))
    }

    /// The editor closed `uri`: its routes go (a long session opens thousands of files), and
    /// the next request about it looks its child up again.
    fn forget_routes(&self, uri: &lsp_bridge::lsp_types::Url) {
        self.document_routes
            .lock()
            .expect("document routes")
            .remove(uri.as_str());
        if let Ok(path) = uri.to_file_path() {
            self.routes.lock().expect("routes").remove(&path);
        }
    }

    pub(crate) fn documents(&self) -> &Arc<DocumentMirror> {
        &self.documents
    }

    /// Whether the request's document is a prompt document.
    fn is_prompt_document(&self, params: &Value) -> bool {
        routing::document_path(params).is_some_and(|path| self.prompt_documents.matches(&path))
    }

    fn client_supports(&self, pointer: &str) -> bool {
        self.client_capabilities
            .get()
            .and_then(|caps| caps.pointer(pointer))
            .is_some_and(|value| value == true)
    }
}

/// Run the server on stdin/stdout until the editor says `exit` or closes the pipe.
pub fn run_stdio(workspace: Option<PathBuf>) -> anyhow::Result<Ending> {
    let runtime = server_runtime()?;
    runtime.block_on(async {
        let config = Config::load()?;
        // Standard input is read on a thread of its own; standard output, when it is a pipe,
        // is written directly by whichever thread has an answer (see `intake`).
        let output = match stdio_pipe_out() {
            Some(pipe) => FrameWriter::direct("editor", pipe).context("cannot write to stdout")?,
            None => FrameWriter::queued("editor", tokio::io::stdout()),
        };
        let stdin = {
            use std::os::fd::AsFd;
            std::io::stdin()
                .as_fd()
                .try_clone_to_owned()
                .context("cannot read stdin")?
        };
        let input = EditorInput::Blocking(Box::new(intake::Patient(std::fs::File::from(stdin))));
        serve(input, output, config, workspace).await
    })
}

/// The server's loop runs on one thread: a request that is not forwarded by the intake crosses
/// several tasks (request, child writer, editor writer), and on one thread each hand-off is a
/// queue push instead of waking another thread. Blocking and CPU-heavy work (file tools, the
/// file index walk and queries) runs on the blocking pool.
fn server_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// Standard output, when it is a pipe or a socket and not also standard error (logs written to
/// a non-blocking descriptor could fail with `EAGAIN`).
fn stdio_pipe_out() -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::AsFd;
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let fd = std::io::stdout().as_fd().try_clone_to_owned().ok()?;
    let err = std::io::stderr().as_fd().try_clone_to_owned().ok()?;
    let (out, err) = (
        std::fs::File::from(fd.try_clone().ok()?).metadata().ok()?,
        std::fs::File::from(err).metadata().ok()?,
    );
    let kind = out.file_type();
    if (out.dev(), out.ino()) == (err.dev(), err.ino()) || !(kind.is_fifo() || kind.is_socket()) {
        return None;
    }
    Some(fd)
}

/// Serve one editor connection: messages from `input`, to `output` (a writer and the task
/// that flushes it).
pub async fn serve(
    input: EditorInput,
    (out, writer): (Arc<FrameWriter>, tokio::task::JoinHandle<()>),
    config: Config,
    default_workspace: Option<PathBuf>,
) -> anyhow::Result<Ending> {
    let prompt_documents = chat::PromptDocuments::new(&config.editor.prompt_documents)?;
    let agent_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("agent")
        .enable_all()
        .build()
        .context("cannot start the agent's runtime")?;
    let shared = Arc::new(Shared {
        out,
        config,
        default_workspace,
        bridge: OnceLock::new(),
        documents: Arc::new(DocumentMirror::new()),
        client_capabilities: OnceLock::new(),
        in_flight: Mutex::new(HashMap::new()),
        to_editor: Mutex::new(HashMap::new()),
        next_id: AtomicI64::new(1),
        resolve_routes: Mutex::new(HashMap::new()),
        ambiguous_origins: Mutex::new(Default::default()),
        routes: Mutex::new(HashMap::new()),
        document_routes: Mutex::new(HashMap::new()),
        host: host::Host::default(),
        prompt_documents,
        files: OnceLock::new(),
        announced: Mutex::new(Default::default()),
        start_failures_shown: Mutex::new(Default::default()),
        agent_runtime: agent_runtime.handle().clone(),
    });
    let mut server = Server {
        shared: shared.clone(),
        shutdown_requested: false,
        editor_log: None,
    };
    let (mut from_intake, queued) = intake::Intake::start(shared.clone(), input)
        .context("cannot start reading from the editor")?;
    let mut ended = Ok(Ending::InputClosed);
    while let Some(input) = from_intake.recv().await {
        let flow = match input {
            intake::Input::Message(body) => {
                let flow = match jsonrpc::decode(&body) {
                    Ok(message) => server.handle(message).await,
                    Err(refusal) => {
                        server.unreadable(refusal);
                        Flow::Continue
                    }
                };
                // Handled: a request read after it may now be forwarded directly.
                queued.fetch_sub(1, Ordering::AcqRel);
                flow
            }
            intake::Input::Failed(error) => {
                ended = Err(error).context("failed to read from the editor");
                Flow::Exit
            }
        };
        if flow == Flow::Exit {
            if ended.is_ok() {
                ended = Ok(Ending::Exit {
                    after_shutdown: server.shutdown_requested,
                });
            }
            break;
        }
    }
    if let Some(bridge) = shared.bridge.get() {
        bridge.shutdown_all().await;
    }
    // What is logged from here on has no editor to go to.
    server.editor_log = None;
    shared.out.close();
    drop(server);
    drop(shared);
    // A turn still running is cut off here; its log is consistent at every append.
    agent_runtime.shutdown_background();
    // The last answers go out, unless the editor stopped reading without closing its end.
    if tokio::time::timeout(WRITER_DRAIN, writer).await.is_err() {
        tracing::warn!("the editor stopped reading: unsent answers are dropped");
    }
    ended
}

/// How an editor connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// The editor said `exit`: the process then exits with 0 if `shutdown` came first and
    /// with 1 if not, as the protocol says.
    Exit { after_shutdown: bool },
    /// The editor closed its end.
    InputClosed,
}

#[derive(PartialEq, Eq)]
enum Flow {
    Continue,
    Exit,
}

struct Server {
    shared: Arc<Shared>,
    shutdown_requested: bool,
    /// Log lines go to the editor as `window/logMessage` while this is held (from
    /// `initialize` until the connection ends).
    editor_log: Option<crate::logging::EditorLogGuard>,
}

impl Server {
    /// A message the envelope reader refused: its answer (addressed to the request's id when
    /// that could be read, so no request waits forever), and the reason in the log.
    fn unreadable(&self, refusal: jsonrpc::Refusal) {
        tracing::warn!("unreadable message from the editor: {}", refusal.problem);
        if let Some(answer) = refusal.answer {
            self.shared.send(answer);
        }
    }

    /// The dispatch table: what runs on the loop, what runs as a task, what is forwarded.
    async fn handle(&mut self, message: jsonrpc::Message) -> Flow {
        match message {
            // A response to one of our requests to the editor.
            jsonrpc::Message::Response { id, outcome } => {
                let reply = outcome;
                let waiter = id
                    .as_i64()
                    .and_then(|id| self.shared.to_editor.lock().expect("pending").remove(&id));
                match waiter {
                    Some(waiter) => {
                        let _ = waiter.send(reply);
                    }
                    None => {
                        tracing::warn!(%id, "the editor answered a request that was never sent")
                    }
                }
                Flow::Continue
            }
            jsonrpc::Message::Request { id, method, params } => {
                self.request(id, method, params).await;
                Flow::Continue
            }
            jsonrpc::Message::Notification { method, params } => {
                self.notification(&method, params).await
            }
        }
    }

    async fn request(&mut self, id: Value, method: String, params: Value) {
        let shared = self.shared.clone();
        match method.as_str() {
            "initialize" => {
                // From now on the editor may be sent log messages (the protocol allows them
                // while `initialize` is answered), and reads them better than stderr.
                let out = shared.out.clone();
                self.editor_log = Some(crate::logging::to_editor(Arc::new(move |kind, line| {
                    let message = json!({"jsonrpc": "2.0", "method": "window/logMessage",
                                         "params": {"type": kind, "message": line}});
                    let _ = out.send(&serde_json::to_vec(&message).expect("a Value serializes"));
                })));
                let reply = capabilities::initialize(&shared, params).await;
                shared.respond(id, reply);
            }
            _ if shared.bridge.get().is_none() => {
                shared.respond(
                    id,
                    Err(ResponseError::new(
                        codes::SERVER_NOT_INITIALIZED,
                        format!("`{method}` before `initialize`"),
                    )),
                );
            }
            "shutdown" => {
                self.shutdown_requested = true;
                if let Some(bridge) = shared.bridge.get() {
                    bridge.shutdown_all().await;
                }
                shared.respond(id, Ok(Value::Null));
            }
            _ if self.shutdown_requested => {
                shared.respond(
                    id,
                    Err(ResponseError::new(
                        codes::INVALID_REQUEST,
                        "the server is shutting down",
                    )),
                );
            }
            _ => {
                let span = tracing::info_span!("request", %method, %id);
                // What goes to a child is written now, before the next message is read; only
                // the waiting runs as a task.
                let Some(pending) = dispatch::dispatch(&shared, &id, &method, params)
                    .instrument(span.clone())
                    .await
                else {
                    // Forwarded: the child answers the editor; a cancellation goes to the child.
                    return;
                };
                let cancel = CancellationToken::new();
                let key = id.to_string();
                shared
                    .in_flight
                    .lock()
                    .expect("in flight")
                    .insert(key.clone(), cancel.clone());
                let on_agent_runtime = matches!(pending, dispatch::Pending::Own { .. })
                    && method == "workspace/executeCommand";
                let agent_runtime = shared.agent_runtime.clone();
                let task = async move {
                    let handled = std::panic::AssertUnwindSafe(pending.finish(&shared, &cancel));
                    let answer = dispatch::guarded(&method, handled).await;
                    shared.in_flight.lock().expect("in flight").remove(&key);
                    match answer {
                        dispatch::Answer::Raw(result) => shared.respond_raw(&id, &result),
                        dispatch::Answer::Reply(Err(error)) if cancel.is_cancelled() => shared
                            .respond(
                                id,
                                Err(ResponseError::new(
                                    codes::REQUEST_CANCELLED,
                                    format!("`{method}` was cancelled: {}", error.message),
                                )),
                            ),
                        dispatch::Answer::Reply(reply) => shared.respond(id, reply),
                    }
                }
                .instrument(span);
                if on_agent_runtime {
                    agent_runtime.spawn(task);
                } else {
                    // Spawned from the loop's own thread: queued locally, no wake-up.
                    tokio::spawn(task);
                }
            }
        }
    }

    async fn notification(&mut self, method: &str, params: Value) -> Flow {
        let shared = self.shared.clone();
        match method {
            "exit" => return Flow::Exit,
            "initialized" => {}
            "$/cancelRequest" => {
                let key = params["id"].to_string();
                let in_flight = shared
                    .in_flight
                    .lock()
                    .expect("in flight")
                    .get(&key)
                    .cloned();
                match in_flight {
                    Some(cancel) => cancel.cancel(),
                    // Forwarded by the intake; the cancellation came here because the loop
                    // had messages queued (a change typed right after the request).
                    None => {
                        if let Some(id) = params["id"].as_i64() {
                            shared.cancel_forwarded(id);
                        }
                    }
                }
            }
            "window/workDoneProgress/cancel" => shared.host.cancel_progress(&params["token"]),
            "workspace/didChangeWatchedFiles" => {
                actions::watched_files_changed(&shared, &params);
                routing::forward_notification(&shared, method, params).await;
            }
            "textDocument/didOpen"
            | "textDocument/didChange"
            | "textDocument/didClose"
            | "textDocument/didSave" => {
                let synced = match documents::DocumentEvent::decode(method, params) {
                    Ok(event) => {
                        actions::document_event(&shared, &event);
                        documents::sync(&shared, event).await
                    }
                    Err(refused) => {
                        // No answer goes back to a notification: the person at the editor is
                        // told, since their buffer and ours may now differ.
                        shared.show_error(&refused.message);
                        Err(refused)
                    }
                };
                if let Err(ResponseError {
                    message: problem, ..
                }) = synced
                {
                    tracing::warn!(method, "{problem}");
                }
            }
            _ if shared.bridge.get().is_none() => {}
            _ => routing::forward_notification(&shared, method, params).await,
        }
        Flow::Continue
    }
}

/// Ask every child for UTF-16 only, so positions need no conversion between editor and child,
/// and read its output on a thread, where the editor's requests are answered.
pub(crate) fn editor_bridge_config(config: &Config) -> anyhow::Result<lsp_bridge::BridgeConfig> {
    let mut bridge = config.bridge_config()?;
    for server in &mut bridge.servers {
        server.position_encodings = vec![PositionEncoding::Utf16];
        // The editor's requests are forwarded and answered on the child's output thread.
        server.output_thread = true;
    }
    Ok(bridge)
}
