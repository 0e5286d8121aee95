//! One editor connection's state, shared by the loop, the intake and the request tasks, and the
//! ways to write to the editor: answers, notifications, requests of ours and their answers.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use lsp_bridge::documents::DocumentMirror;
use lsp_bridge::framing::{FrameWriter, RawResult};
use lsp_bridge::jsonrpc;
use lsp_bridge::{Bridge, Child};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::lanes::Lane;
use super::{CHILD_REQUEST_TIMEOUT, Reply, ResponseError, agent, codes, prompts};
use crate::config::Config;

/// State shared by the loop and the request tasks.
pub struct Shared {
    /// Message bodies (JSON text) for the editor, in order, from any thread.
    pub(super) out: Arc<FrameWriter>,
    pub(super) config: Config,
    /// `--workspace`, used when the editor names no workspace folder.
    pub(super) default_workspace: Option<PathBuf>,
    pub(super) bridge: OnceLock<Bridge>,
    pub(super) documents: Arc<DocumentMirror>,
    pub(super) client_capabilities: OnceLock<Value>,
    /// Editor request id (as JSON text) → its cancellation token.
    pub(super) in_flight: Mutex<HashMap<String, CancellationToken>>,
    /// Our ids of requests sent to the editor → who waits for the answer.
    pub(super) to_editor: Mutex<HashMap<i64, oneshot::Sender<Reply>>>,
    pub(super) next_id: AtomicI64,
    /// For `*/resolve` requests, which carry no document: the child that answered the request
    /// that produced the item.
    pub(super) resolve_routes: Mutex<HashMap<&'static str, Arc<Child>>>,
    /// Originating methods (`textDocument/completion`, ...) whose items two running children
    /// resolve: their answers are parsed and each item tagged with its child.
    pub(super) ambiguous_origins: Mutex<std::collections::HashSet<&'static str>>,
    /// Document path → the lane of its server, so a message does not redo pattern matching
    /// and the root marker search (several `stat`s per ancestor) every time.
    pub(super) routes: Mutex<HashMap<PathBuf, Arc<Lane>>>,
    /// Document URI, as the editor writes it, → its lane, for the intake's hot path; filled
    /// when the loop first routes a request about a (non-prompt) document.
    pub(super) document_routes: Mutex<HashMap<String, Arc<Lane>>>,
    /// One lane per (server, root): what the editor sends a child waits there, in order.
    pub(super) lanes: Mutex<HashMap<(String, PathBuf), Arc<Lane>>>,
    /// Set by `shutdown`: no lane starts a child from then on.
    pub(super) shutting_down: std::sync::atomic::AtomicBool,
    /// The agent: its session, the running turn.
    pub(crate) host: agent::Host,
    pub(super) prompt_documents: prompts::PromptDocuments,
    /// The workspace's paths for `@path` completion, started at `initialize`.
    pub(super) files: OnceLock<crate::file_index::LiveIndex>,
    /// Capability methods announced at `initialize`; a child starting later gets the others
    /// registered dynamically.
    pub(super) announced: Mutex<std::collections::HashSet<String>>,
    /// Servers whose failure to start the editor was shown, so it is shown once per server
    /// (every document of theirs that opens would fail the same way).
    pub(super) start_failures_shown: Mutex<std::collections::HashSet<String>>,
    /// Where commands (agent turns, with their model streaming, tool runs and log writes)
    /// run: off the proxy's thread, so a turn never delays the editor's requests.
    pub(super) agent_runtime: tokio::runtime::Handle,
    /// This editor's bridge offered to the workspace's other processes (`run`, `tool`,
    /// `mcp serve`), published from `initialize` as soon as no other process owns one.
    pub(super) shared_bridge: OnceLock<Arc<crate::shared_bridge::SharedBridge>>,
    /// Inline completion, set at `initialize` when `[completion]` is on.
    pub(super) inline: OnceLock<Arc<crate::completion::Engine>>,
}

impl Shared {
    pub(super) fn new(
        out: Arc<FrameWriter>,
        config: Config,
        default_workspace: Option<PathBuf>,
        prompt_documents: prompts::PromptDocuments,
        agent_runtime: tokio::runtime::Handle,
    ) -> Shared {
        Shared {
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
            lanes: Mutex::new(HashMap::new()),
            shutting_down: Default::default(),
            host: agent::Host::default(),
            prompt_documents,
            files: OnceLock::new(),
            announced: Mutex::new(Default::default()),
            start_failures_shown: Mutex::new(Default::default()),
            agent_runtime,
            shared_bridge: OnceLock::new(),
            inline: OnceLock::new(),
        }
    }

    pub(super) fn send(&self, message: Value) {
        // A failed send means the editor left: nothing to tell it.
        let _ = self
            .out
            .send(&serde_json::to_vec(&message).expect("a Value serializes"));
    }

    /// Answer a request with a child's result as the child wrote it (no parse, no
    /// re-serialization: the proxy's hot path).
    pub(super) fn respond_raw(&self, id: &Value, result: &RawResult) {
        let id = serde_json::to_string(id).expect("an id serializes");
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{}}}"#, result.get());
        let _ = self.out.send(body.as_bytes());
    }

    pub(super) fn respond(&self, id: Value, reply: Reply) {
        self.send(jsonrpc::reply(&id, &reply));
    }

    pub(crate) fn notify_editor(&self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Send a request to the editor and wait for its answer.
    pub(crate) async fn request_editor(&self, method: &str, params: Value) -> Reply {
        let (id, receiver) = self.write_request_to_editor(method, params);
        self.editor_answer(id, method, receiver).await
    }

    /// Write a request to the editor now, and return the wait for its answer: for the thread
    /// that reads a child, which writes the child's requests in order with its notifications.
    /// On a thread it waits while the editor's queue is full, as the child's notifications do.
    pub(super) fn request_editor_now(
        self: Arc<Self>,
        method: &str,
        params: Value,
    ) -> futures_util::future::BoxFuture<'static, Reply> {
        let (id, receiver) = self.write_request_to_editor(method, params);
        let method = method.to_owned();
        Box::pin(async move { self.editor_answer(id, &method, receiver).await })
    }

    fn write_request_to_editor(
        &self,
        method: &str,
        params: Value,
    ) -> (i64, oneshot::Receiver<Reply>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = oneshot::channel();
        self.to_editor
            .lock()
            .expect("pending editor requests")
            .insert(id, sender);
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        // A failed send means the editor left: the wait below ends at its bound.
        let _ = self
            .out
            .send_waiting(&serde_json::to_vec(&message).expect("a Value serializes"));
        (id, receiver)
    }

    async fn editor_answer(
        &self,
        id: i64,
        method: &str,
        receiver: oneshot::Receiver<Reply>,
    ) -> Reply {
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

    /// Show a warning to the person at the editor: something they should know of that did not
    /// stop the work (a hook that blocked a call or failed).
    pub(crate) fn show_warning(&self, message: &str) {
        self.notify_editor(
            "window/showMessage",
            json!({"type": 2, "message": format!("agent-lsp: {message}")}),
        );
    }

    pub(crate) fn bridge(&self) -> Result<&Bridge, ResponseError> {
        self.bridge.get().ok_or(ResponseError::new(
            codes::SERVER_NOT_INITIALIZED,
            "the server is not initialized".to_owned(),
        ))
    }

    /// The child serving `path`, started if needed (for the agent's own questions; the
    /// editor's messages go through the lanes).
    pub(crate) async fn child_for(
        &self,
        path: &std::path::Path,
    ) -> Result<Arc<Child>, lsp_bridge::Error> {
        let bridge = self.bridge.get().ok_or(lsp_bridge::Error::NotReady {
            server: "agent-lsp".into(),
        })?;
        // Boxed: starting a child is a large future.
        let child = Box::pin(bridge.child_for(path)).await?;
        // A restarted child has none of the editor's documents open.
        if let Err(error) = self.documents.reopen_for_editor(&child, path).await {
            tracing::warn!(server = child.name(), path = %path.display(), "cannot reopen the document: {error}");
        }
        Ok(child)
    }

    /// The lane of the server for `path` (the child is not started here), or `None` when no
    /// server handles it.
    pub(super) async fn lane_for(self: &Arc<Self>, path: &std::path::Path) -> Option<Arc<Lane>> {
        if let Some(lane) = self.routes.lock().expect("routes").get(path) {
            return Some(lane.clone());
        }
        let bridge = self.bridge.get()?;
        let Some(config) = bridge.config_for_async(path).await else {
            tracing::debug!(path = %path.display(), "no server: {}", bridge.no_server_reason(path));
            return None;
        };
        let root = bridge.root_for(&config, path);
        let lane = self.lane(&config.name, root);
        self.routes
            .lock()
            .expect("routes")
            .insert(path.to_owned(), lane.clone());
        Some(lane)
    }

    /// The lane of a running child.
    pub(super) fn lane_of(self: &Arc<Self>, child: &Child) -> Arc<Lane> {
        self.lane(child.name(), child.root().to_owned())
    }

    fn lane(self: &Arc<Self>, server: &str, root: PathBuf) -> Arc<Lane> {
        self.lanes
            .lock()
            .expect("lanes")
            .entry((server.to_owned(), root))
            .or_insert_with(|| Lane::start(self, server))
            .clone()
    }

    pub(super) fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// The editor cancelled request `id`, which was forwarded to a child as it is: that child
    /// answers it with `RequestCancelled` and gets the cancellation. `false` when no child has
    /// it pending. Every running child is asked, whatever happened to the request's document
    /// since (closed, and its routes forgotten).
    pub(super) fn cancel_forwarded(&self, id: i64) -> bool {
        let children = self
            .bridge
            .get()
            .map(|bridge| bridge.running())
            .unwrap_or_default();
        children.iter().any(|child| child.cancel_forwarded(id))
    }

    /// The editor closed `uri`: its routes go (a long session opens thousands of files), and
    /// the next message about it looks its lane up again.
    pub(super) fn forget_routes(&self, uri: &lsp_bridge::lsp_types::Url) {
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

    /// The editor's text of `path`, unsaved changes included, when it has the file open;
    /// `None` means the disk has what the programmer sees.
    pub(crate) fn editor_text(&self, path: &Path) -> Option<String> {
        let uri = lsp_bridge::documents::uri_of(path).ok()?;
        if !self.documents.is_editor_open(&uri) {
            return None;
        }
        self.documents.snapshot(&uri).map(|snapshot| snapshot.text)
    }

    /// The editor's text of `path` when it has the file open, else the disk's.
    pub(crate) fn text_or_disk(&self, path: &Path) -> std::io::Result<String> {
        match self.editor_text(path) {
            Some(text) => Ok(text),
            None => std::fs::read_to_string(path),
        }
    }

    /// Whether the request's document is a prompt document.
    pub(super) fn is_prompt_document(&self, params: &Value) -> bool {
        super::document_path(params).is_some_and(|path| self.prompt_documents.matches(&path))
    }

    pub(super) fn client_supports(&self, pointer: &str) -> bool {
        self.client_capabilities
            .get()
            .and_then(|caps| caps.pointer(pointer))
            .is_some_and(|value| value == true)
    }
}
