//! One running language server: the `initialize` handshake, requests with timeouts,
//! cancellation and `ContentModified` retries, the answers to the server's own requests, and
//! what its notifications tell us (readiness, diagnostics).
//!
//! A [`Child`] is handed out only after `initialize` has been answered and `initialized` sent,
//! so nothing can reach a server before its handshake (helix holds requests the same way).
//! Server→client requests get exactly one answer each: the editor proxy may install a handler
//! for the ones the editor should see (`workspace/applyEdit`, `window/showMessageRequest`);
//! everything else is answered here from the configuration, because servers like pyright exit
//! when `workspace/configuration` or `client/registerCapability` go unanswered.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::Duration;

use futures_util::future::BoxFuture;
use lsp_types::{Diagnostic, ServerCapabilities, Url};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::config::ServerConfig;
use crate::error::{CONTENT_MODIFIED, Error, METHOD_NOT_FOUND, Result};
use crate::framing::FrameWriter;
use crate::jsonrpc::ResponseError;
use crate::position::PositionEncoding;
use crate::transport::{Closed, Incoming, Transport};

/// `ContentModified` answers are retried this many times before the error is returned.
const CONTENT_MODIFIED_RETRIES: u32 = 3;
/// Pause before each `ContentModified` retry, times the attempt number.
const CONTENT_MODIFIED_DELAY: Duration = Duration::from_millis(50);
/// When a server has begun no progress at all since `initialized`, it is taken as ready after
/// this much quiet: servers announce their indexing right after the handshake or not at all.
const QUIET_AFTER_INITIALIZED: Duration = Duration::from_millis(300);
/// Bound on the `shutdown` request; a server that does not answer it is killed.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(2);
/// After `exit`, how long a server may take to leave on its own before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(1);
/// Capacity of the notification broadcast; a subscriber that falls further behind loses the
/// oldest ones (and is told so by `broadcast`).
const NOTIFICATION_BUFFER: usize = 1024;

/// Where a child is in its life.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChildState {
    /// Spawned, `initialize` not answered yet.
    Starting,
    Ready,
    /// Broke the protocol, or stopped answering (hung): it will be recycled.
    Failed {
        reason: String,
    },
    /// The process ended (crashed, or shut down).
    Exited,
}

/// Answers a server→client request instead of the built-in answer, or declines with `None`.
/// The error is a JSON-RPC `(code, message)`.
pub type RequestHandler =
    Arc<dyn Fn(&str, &Value) -> Option<BoxFuture<'static, crate::jsonrpc::Reply>> + Send + Sync>;

/// The diagnostics a server last published for one document.
#[derive(Clone, Debug, PartialEq)]
pub struct DiagnosticsEntry {
    /// The document version they were computed on, when the server says (`versionSupport`).
    pub version: Option<i32>,
    pub diagnostics: Vec<Diagnostic>,
    /// The store's generation when they arrived: compare with [`DiagnosticsStore::subscribe`]
    /// to tell fresh from stale.
    pub generation: u64,
}

/// Pushed diagnostics of one child, per document, with a generation counter to wait on.
#[derive(Debug)]
pub struct DiagnosticsStore {
    entries: Mutex<HashMap<Url, DiagnosticsEntry>>,
    generation: watch::Sender<u64>,
    /// Whether the server has ever put a document version on a publish. Such a server's
    /// unversioned publishes (clangd clears a closed document's diagnostics that way) never
    /// describe an open version.
    sends_versions: std::sync::atomic::AtomicBool,
}

impl DiagnosticsStore {
    fn new() -> Self {
        DiagnosticsStore {
            sends_versions: std::sync::atomic::AtomicBool::new(false),
            entries: Mutex::new(HashMap::new()),
            generation: watch::channel(0).0,
        }
    }

    /// The latest diagnostics for `uri`. Servers do not all spell file URIs alike (percent
    /// encoding of non-ASCII names), so a miss falls back to comparing file paths.
    pub fn get(&self, uri: &Url) -> Option<DiagnosticsEntry> {
        let entries = self.entries.lock().unwrap();
        if let Some(entry) = entries.get(uri) {
            return Some(entry.clone());
        }
        let path = uri.to_file_path().ok()?;
        entries
            .iter()
            .find(|(key, _)| key.to_file_path().is_ok_and(|key| key == path))
            .map(|(_, entry)| entry.clone())
    }

    /// Bumps on every `publishDiagnostics`.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    pub fn all(&self) -> Vec<(Url, DiagnosticsEntry)> {
        let mut all: Vec<_> = self
            .entries
            .lock()
            .unwrap()
            .iter()
            .map(|(uri, entry)| (uri.clone(), entry.clone()))
            .collect();
        all.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        all
    }

    /// Whether the server puts versions on its publishes (see the field).
    pub fn sends_versions(&self) -> bool {
        self.sends_versions
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    fn publish(&self, params: lsp_types::PublishDiagnosticsParams) {
        if params.version.is_some() {
            self.sends_versions
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        tracing::debug!(uri = %params.uri, version = ?params.version, n = params.diagnostics.len(), "publishDiagnostics");
        let mut entries = self.entries.lock().unwrap();
        let generation = *self.generation.borrow() + 1;
        entries.insert(
            params.uri,
            DiagnosticsEntry {
                version: params.version,
                diagnostics: params.diagnostics,
                generation,
            },
        );
        self.generation.send_replace(generation);
    }
}

/// What readiness is judged on.
#[derive(Debug, Default)]
struct Readiness {
    initialized_at: Option<Instant>,
    /// Any work-done progress created or begun since start.
    progress_seen: bool,
    active_progress: HashSet<String>,
    diagnostics_seen: bool,
}

impl Readiness {
    /// Ready now, or not yet and when to look again without a change.
    fn judge(&self, now: Instant) -> (bool, Option<Instant>) {
        if self.diagnostics_seen {
            return (true, None);
        }
        if !self.active_progress.is_empty() {
            return (false, None);
        }
        if self.progress_seen {
            return (true, None);
        }
        match self.initialized_at {
            Some(at) if now >= at + QUIET_AFTER_INITIALIZED => (true, None),
            Some(at) => (false, Some(at + QUIET_AFTER_INITIALIZED)),
            None => (false, None),
        }
    }
}

/// What `initialize` told us.
struct Initialized {
    result: Value,
    capabilities: ServerCapabilities,
    encoding: PositionEncoding,
}

/// One running server, shared as `Arc<Child>`.
pub struct Child {
    /// Which start of the server this is: a restarted server is a new instance, which has no
    /// document open yet.
    instance: u64,
    config: Arc<ServerConfig>,
    root: PathBuf,
    workspace_folders: Vec<PathBuf>,
    transport: Transport,
    initialized: OnceLock<Initialized>,
    shutting_down: AtomicBool,
    readiness: watch::Sender<Readiness>,
    diagnostics: DiagnosticsStore,
    notifications: broadcast::Sender<(String, Value)>,
    handler: RwLock<Option<RequestHandler>>,
    registrations: Mutex<Vec<lsp_types::Registration>>,
    /// Whether a workspace-wide query (`workspace/symbol`) has had a non-empty answer: from
    /// then on an empty answer means nothing matched, not that the index is still being built.
    workspace_indexed: AtomicBool,
}

impl std::fmt::Debug for Child {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Child")
            .field("name", &self.config.name)
            .field("root", &self.root)
            .field("pid", &self.transport.pid())
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

impl Child {
    /// Spawn the server in `root`, run the `initialize` handshake (bounded by the config's
    /// `startup_timeout`) and send `initialized`. On failure the process is killed.
    /// `workspace_folders` empty means just `root`.
    pub async fn start(
        config: Arc<ServerConfig>,
        root: PathBuf,
        workspace_folders: Vec<PathBuf>,
    ) -> Result<Arc<Child>> {
        Child::start_reporting(config, root, workspace_folders)
            .await
            .0
    }

    /// [`Child::start`], plus the server's last stderr lines when it failed (the registry
    /// reports them once it gives up).
    pub(crate) async fn start_reporting(
        config: Arc<ServerConfig>,
        root: PathBuf,
        workspace_folders: Vec<PathBuf>,
    ) -> (Result<Arc<Child>>, Vec<String>) {
        let (transport, incoming) = match Transport::spawn(&config, &root) {
            Ok(spawned) => spawned,
            Err(error) => return (Err(error), Vec::new()),
        };
        let workspace_folders = if workspace_folders.is_empty() {
            vec![root.clone()]
        } else {
            workspace_folders
        };
        static INSTANCES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let child = Arc::new(Child {
            instance: INSTANCES.fetch_add(1, Ordering::Relaxed),
            transport,
            root,
            workspace_folders,
            initialized: OnceLock::new(),
            shutting_down: AtomicBool::new(false),
            readiness: watch::channel(Readiness::default()).0,
            diagnostics: DiagnosticsStore::new(),
            notifications: broadcast::channel(NOTIFICATION_BUFFER).0,
            handler: RwLock::new(None),
            registrations: Mutex::new(Vec::new()),
            workspace_indexed: AtomicBool::new(false),
            config,
        });
        // The loop holds a weak reference: dropping the last `Arc<Child>` kills the process,
        // which ends its output and so the loop.
        tokio::spawn(incoming_loop(Arc::downgrade(&child), incoming));
        let span =
            tracing::info_span!("start", server = %child.config.name, root = %child.root.display());
        match child.initialize().instrument(span).await {
            Ok(()) => (Ok(child), Vec::new()),
            Err(error) => {
                tracing::warn!(server = %child.config.name, "language server failed to start: {error}");
                child.kill();
                // Let the last stderr lines (often the reason) arrive.
                child.transport.wait_closed(Duration::from_secs(1)).await;
                let tail = child.stderr_tail();
                let error = match error {
                    // A server that is gone before it could read `initialize` has exited.
                    Error::NotDelivered { server } => Error::ServerExited {
                        server,
                        stderr_tail: tail.clone(),
                    },
                    other => other,
                };
                (Err(error), tail)
            }
        }
    }

    async fn initialize(&self) -> Result<()> {
        let params = self.initialize_params();
        let timeout = self.config.startup_timeout;
        let result = self
            .request_with("initialize", params, timeout, &CancellationToken::new())
            .await?;
        let raw_capabilities = result
            .get("capabilities")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let capabilities = serde_json::from_value::<ServerCapabilities>(raw_capabilities.clone())
            .unwrap_or_else(|error| {
                // A server may use a capability shape lsp-types does not know; the raw result
                // stays available through `initialize_result`.
                tracing::warn!(server = %self.config.name, "capabilities not fully understood: {error}");
                ServerCapabilities::default()
            });
        let encoding = match raw_capabilities
            .get("positionEncoding")
            .and_then(Value::as_str)
        {
            Some(kind) => PositionEncoding::from_lsp(Some(&kind.to_owned().into())),
            // clangd before 15 answers its own `offsetEncoding` extension instead.
            None => PositionEncoding::from_lsp(
                result
                    .get("offsetEncoding")
                    .and_then(Value::as_str)
                    .map(|kind| kind.to_owned().into())
                    .as_ref(),
            ),
        };
        tracing::info!(server = %self.config.name, pid = ?self.pid(), ?encoding, "language server initialized");
        let _ = self.initialized.set(Initialized {
            result,
            capabilities,
            encoding,
        });
        self.transport.notify("initialized", json!({}))?;
        self.readiness
            .send_modify(|readiness| readiness.initialized_at = Some(Instant::now()));
        Ok(())
    }

    fn initialize_params(&self) -> Value {
        let root_uri = directory_uri(&self.root);
        let mut params = json!({
            "processId": std::process::id(),
            "clientInfo": {"name": "agent-lsp", "version": env!("CARGO_PKG_VERSION")},
            "locale": "en",
            "rootPath": self.root.to_string_lossy(),
            "rootUri": root_uri,
            "workspaceFolders": self.workspace_folders_json(),
            "capabilities": with_editor_capabilities(
                client_capabilities(&self.config.position_encodings),
                self.config.editor_text_document.as_ref(),
            ),
            "trace": "off",
        });
        if let Some(options) = &self.config.initialization_options {
            params["initializationOptions"] = options.clone();
        }
        params
    }

    fn workspace_folders_json(&self) -> Value {
        Value::Array(
            self.workspace_folders
                .iter()
                .map(|folder| {
                    let name = folder.file_name().map_or_else(
                        || folder.to_string_lossy().into_owned(),
                        |name| name.to_string_lossy().into_owned(),
                    );
                    json!({"uri": directory_uri(folder), "name": name})
                })
                .collect(),
        )
    }

    /// This start of the server, unique in the process (see [`Child`]).
    pub fn instance(&self) -> u64 {
        self.instance
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    pub fn config(&self) -> &Arc<ServerConfig> {
        &self.config
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The process id while the process runs.
    pub fn pid(&self) -> Option<u32> {
        if self.transport.has_exited() {
            None
        } else {
            self.transport.pid()
        }
    }

    pub fn state(&self) -> ChildState {
        match self.transport.closed() {
            Some(Closed::Protocol(message)) => return ChildState::Failed { reason: message },
            Some(Closed::Exited) => return ChildState::Exited,
            None => {}
        }
        // A closed input pipe means the process is gone, though its output may not have
        // ended yet: nothing sent to it now arrives.
        if self.transport.has_exited() || self.transport.input_closed() {
            return ChildState::Exited;
        }
        if let Some(hung) = self.transport.hung() {
            return ChildState::Failed {
                reason: format!("hung: {hung}"),
            };
        }
        if self.initialized.get().is_some() {
            ChildState::Ready
        } else {
            ChildState::Starting
        }
    }

    /// Whether the child can still be used: initialized, running, answering.
    pub fn is_healthy(&self) -> bool {
        self.state() == ChildState::Ready
    }

    /// The server's capabilities from its `initialize` result (defaults before that).
    pub fn capabilities(&self) -> ServerCapabilities {
        self.initialized
            .get()
            .map(|init| init.capabilities.clone())
            .unwrap_or_default()
    }

    /// The whole `initialize` result as the server sent it (`Null` before), for what
    /// lsp-types does not model (the editor proxy merges raw capabilities).
    pub fn initialize_result(&self) -> Value {
        self.initialized
            .get()
            .map(|init| init.result.clone())
            .unwrap_or(Value::Null)
    }

    /// The negotiated position encoding (UTF-16 unless the server chose otherwise).
    pub fn encoding(&self) -> PositionEncoding {
        self.initialized
            .get()
            .map(|init| init.encoding)
            .unwrap_or_default()
    }

    /// Wait, at most `bound`, until the server looks ready: every work-done progress begun since
    /// start has ended, or it published diagnostics, or it began no progress at all within a
    /// short quiet period after `initialized`. `false` when the bound was hit or it died.
    ///
    /// Some servers only start loading a project when its first document opens (tsserver
    /// answers with the import binding until then): after `didOpen`, the first diagnostics for
    /// that document are the surer sign.
    pub async fn wait_ready(&self, bound: Duration) -> bool {
        let deadline = deadline_after(bound);
        let mut readiness = self.readiness.subscribe();
        loop {
            let (ready, look_again) = readiness.borrow_and_update().judge(Instant::now());
            if ready {
                return true;
            }
            if self.transport.closed().is_some() || Instant::now() >= deadline {
                return false;
            }
            let wake = look_again.map_or(deadline, |at| at.min(deadline));
            tokio::select! {
                changed = readiness.changed() => if changed.is_err() { return false },
                _ = tokio::time::sleep_until(wake) => {}
                _ = self.transport.wait_closed(deadline.saturating_duration_since(Instant::now())) => {}
            }
        }
    }

    /// When `initialized` was sent: how long the server has had to index.
    pub fn initialized_at(&self) -> Option<Instant> {
        self.readiness.borrow().initialized_at
    }

    /// Whether the server reported work-done progress and all of it has ended: a server that
    /// reports its indexing has finished it (an empty answer is then a real one).
    pub fn progress_done(&self) -> bool {
        let readiness = self.readiness.borrow();
        readiness.progress_seen && readiness.active_progress.is_empty()
    }

    /// Whether the server has indexed the workspace, as far as we can tell (see the field).
    pub fn workspace_indexed(&self) -> bool {
        self.workspace_indexed.load(Ordering::Relaxed)
    }

    /// The server gave a non-empty answer to a workspace-wide query.
    pub fn set_workspace_indexed(&self) {
        self.workspace_indexed.store(true, Ordering::Relaxed);
    }

    /// A request bounded by the configured `request_timeout`.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value> {
        self.request_with(
            method,
            params,
            self.config.request_timeout,
            &CancellationToken::new(),
        )
        .await
    }

    /// A request bounded by `timeout` (over all `ContentModified` retries) and `cancel`. On
    /// timeout or cancellation the server gets `$/cancelRequest` for our id; if it does not
    /// acknowledge that within the configured grace, it is marked hung. Dropping the future
    /// mid-request cancels it the same way.
    pub async fn request_with(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<Value> {
        let raw = self
            .request_raw_with(method, params, timeout, cancel)
            .await?;
        serde_json::from_str(raw.get()).map_err(|error| Error::Response {
            server: self.config.name.clone(),
            code: 0,
            message: format!("the result of `{method}` is not JSON: {error}"),
        })
    }

    /// [`Child::request_with`], with the result as the server wrote it: the editor proxy
    /// forwards it without parsing and re-serializing (completion lists run to hundreds of
    /// kilobytes).
    pub async fn request_raw_with(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<crate::transport::RawResult> {
        let deadline = deadline_after(timeout);
        let mut attempt = 0;
        loop {
            let span = tracing::debug_span!("request", server = %self.config.name, method, attempt);
            let outcome = self
                .request_once(method, &params, deadline, timeout, cancel)
                .instrument(span)
                .await;
            match outcome {
                Err(Error::Response {
                    code: CONTENT_MODIFIED,
                    ..
                }) if attempt < CONTENT_MODIFIED_RETRIES => {
                    attempt += 1;
                    let pause = CONTENT_MODIFIED_DELAY * attempt;
                    tracing::debug!(server = %self.config.name, method, attempt, "content modified: retrying");
                    tokio::select! {
                        _ = tokio::time::sleep_until((Instant::now() + pause).min(deadline)) => {}
                        _ = cancel.cancelled() => return Err(Error::Cancelled),
                    }
                }
                outcome => return outcome,
            }
        }
    }

    async fn request_once(
        &self,
        method: &str,
        params: &Value,
        deadline: Instant,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<crate::transport::RawResult> {
        if cancel.is_cancelled() {
            return Err(Error::Cancelled);
        }
        let sent = self.send(method, params)?;
        self.answer_by(sent, deadline, timeout, cancel).await
    }

    /// Write a request to the server now and return the handle its answer comes through.
    ///
    /// The editor proxy writes each request in the order the editor sent it, before it reads
    /// the editor's next message, and waits for the answer elsewhere: a later change must not
    /// reach the server before an earlier request. Nothing is retried here: an editor request
    /// gets the server's answer as the server gave it, `ContentModified` included.
    pub fn send(&self, method: &str, params: &Value) -> Result<SentRequest> {
        let (id, reply) = self.transport.send_request(method, params)?;
        let guard = self.transport.cancel_on_drop(id, self.config.cancel_grace);
        Ok(SentRequest {
            method: method.to_owned(),
            id,
            reply,
            guard,
        })
    }

    /// The answer to a request [`Child::send`] wrote, as the server wrote it, within `timeout`
    /// and unless `cancel` fires first (the server then gets `$/cancelRequest`, and is marked
    /// hung if it does not acknowledge it within the configured grace).
    pub async fn answer(
        &self,
        sent: SentRequest,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<crate::transport::RawResult> {
        self.answer_by(sent, deadline_after(timeout), timeout, cancel)
            .await
    }

    async fn answer_by(
        &self,
        sent: SentRequest,
        deadline: Instant,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<crate::transport::RawResult> {
        let SentRequest {
            method,
            id,
            reply,
            guard,
        } = sent;
        let grace = self.config.cancel_grace;
        let name = &self.config.name;
        tokio::select! {
            biased;
            reply = reply => {
                guard.disarm();
                // The sender only disappears without an answer if the connection is gone.
                reply.unwrap_or_else(|_| Err(match self.transport.closed() {
                    Some(closed) => self.transport.closed_error(&closed),
                    None => Error::ServerExited { server: name.clone(), stderr_tail: self.stderr_tail() },
                }))
            }
            _ = tokio::time::sleep_until(deadline) => {
                guard.disarm();
                tracing::debug!(server = %name, id, method, "request timed out: cancelling");
                self.transport.cancel(id, grace);
                Err(Error::Timeout { server: name.clone(), method, after: timeout })
            }
            _ = cancel.cancelled() => {
                guard.disarm();
                tracing::debug!(server = %name, id, method, "request cancelled by the caller");
                self.transport.cancel(id, grace);
                Err(Error::Cancelled)
            }
        }
    }

    /// Forward an editor's request as it is: `body` is its JSON text with the editor's `id`
    /// (below [`FIRST_OWN_ID`](crate::transport::FIRST_OWN_ID)), and the answer goes to
    /// `editor` as the server writes it, from the thread that reads the server. The editor
    /// proxy's hot path: nothing is parsed or re-serialized, no task runs. Without an answer
    /// within `timeout` the editor gets an error and the server `$/cancelRequest`; if the
    /// server exits, the editor gets the reason. `ContentModified` is the editor's to handle,
    /// as on a direct connection.
    pub fn forward(
        &self,
        id: i64,
        method: &str,
        body: &[u8],
        editor: &Arc<FrameWriter>,
        timeout: Duration,
    ) -> Result<()> {
        self.transport.forward(id, method, body, editor, timeout)
    }

    /// Wait until the server's input has room: a server that stops reading slows whoever writes
    /// to it (the editor's messages wait in the editor's pipe) instead of growing a queue here.
    pub async fn writable(&self) {
        self.transport.writable().await;
    }

    /// Send the server's notifications that `wanted` accepts to `editor` as the server wrote
    /// them, in the server's order among the answers forwarded there, none dropped.
    pub fn notify_to(&self, editor: Arc<FrameWriter>, wanted: fn(&str) -> bool) {
        self.transport.notify_to(editor, wanted);
    }

    /// The editor cancelled forwarded request `id`: it is answered with `RequestCancelled` at
    /// once and the server gets `$/cancelRequest` (not acknowledging it within the configured
    /// grace makes the server hung). `false` when `id` is not a pending forwarded request.
    pub fn cancel_forwarded(&self, id: i64) -> bool {
        self.transport.cancel_forwarded(id)
    }

    pub async fn notify(&self, method: &str, params: Value) -> Result<()> {
        self.transport.writable().await;
        self.transport.notify(method, params)
    }

    pub fn diagnostics(&self) -> &DiagnosticsStore {
        &self.diagnostics
    }

    /// Every server→client notification from now on, in order.
    pub fn subscribe_notifications(&self) -> broadcast::Receiver<(String, Value)> {
        self.notifications.subscribe()
    }

    /// Let `handler` answer server→client requests first (the editor proxy forwards
    /// `workspace/applyEdit` and friends to the editor); when it declines, the built-in answer
    /// is used.
    pub fn set_request_handler(&self, handler: RequestHandler) {
        *self.handler.write().unwrap() = Some(handler);
    }

    /// Capabilities the server registered dynamically and has not unregistered.
    pub fn registrations(&self) -> Vec<lsp_types::Registration> {
        self.registrations.lock().unwrap().clone()
    }

    /// The server's last stderr lines (at most 20).
    pub fn stderr_tail(&self) -> Vec<String> {
        self.transport.stderr_tail()
    }

    /// Whether the server left a cancelled request unanswered past the grace period.
    pub fn is_hung(&self) -> bool {
        self.transport.hung().is_some()
    }

    /// `shutdown`, then `exit`, then kill if it has not left after a short grace. Bounded.
    pub async fn shutdown(&self) {
        if self.shutting_down.swap(true, Ordering::SeqCst) {
            self.transport
                .wait_exit(SHUTDOWN_TIMEOUT + EXIT_GRACE)
                .await;
            return;
        }
        // A child that hangs, or whose input is closed (it can read no `shutdown`), is killed
        // at once: waiting out the handshake would outlive a `serve` that exits meanwhile and
        // leave the process behind.
        if self.transport.closed().is_none() && !self.is_hung() && !self.transport.input_closed() {
            let answered = self
                .request_with(
                    "shutdown",
                    Value::Null,
                    SHUTDOWN_TIMEOUT,
                    &CancellationToken::new(),
                )
                .await;
            if let Err(error) = answered {
                tracing::debug!(server = %self.config.name, "shutdown request failed: {error}");
            }
            let _ = self.transport.notify("exit", Value::Null);
            if self.transport.wait_exit(EXIT_GRACE).await {
                tracing::debug!(server = %self.config.name, "language server shut down cleanly");
                return;
            }
        }
        self.transport.kill();
        self.transport.wait_exit(EXIT_GRACE).await;
    }

    /// Kill the process now, without the shutdown handshake.
    pub fn kill(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        self.transport.kill();
    }

    fn on_notification(&self, method: String, params: Value) {
        match method.as_str() {
            "$/progress" => self.on_progress(&params),
            "textDocument/publishDiagnostics" => {
                match serde_json::from_value::<lsp_types::PublishDiagnosticsParams>(params.clone())
                {
                    Ok(published) => {
                        self.diagnostics.publish(published);
                        self.readiness.send_if_modified(|readiness| {
                            !std::mem::replace(&mut readiness.diagnostics_seen, true)
                        });
                    }
                    Err(error) => {
                        tracing::warn!(server = %self.config.name, "unreadable publishDiagnostics: {error}")
                    }
                }
            }
            "window/logMessage" | "window/showMessage" => {
                let text = params
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let server = &self.config.name;
                match params.get("type").and_then(Value::as_i64) {
                    Some(1) | Some(2) => {
                        tracing::warn!(target: "lsp_bridge::server_log", %server, "{text}")
                    }
                    Some(3) => tracing::info!(target: "lsp_bridge::server_log", %server, "{text}"),
                    _ => tracing::debug!(target: "lsp_bridge::server_log", %server, "{text}"),
                }
            }
            _ => {}
        }
        // Nobody listening is the normal case until the editor proxy subscribes.
        let _ = self.notifications.send((method, params));
    }

    fn on_progress(&self, params: &Value) {
        let Some(token) = params.get("token").map(token_key) else {
            return;
        };
        match params.pointer("/value/kind").and_then(Value::as_str) {
            Some("begin") => self.readiness.send_modify(|readiness| {
                readiness.progress_seen = true;
                readiness.active_progress.insert(token);
            }),
            Some("end") => {
                self.readiness
                    .send_if_modified(|readiness| readiness.active_progress.remove(&token));
            }
            _ => {}
        }
    }

    fn on_request(self: &Arc<Self>, id: Value, method: String, params: Value) {
        let handler = self.handler.read().unwrap().clone();
        if let Some(answer) = handler.and_then(|handler| handler(&method, &params)) {
            let child = Arc::downgrade(self);
            tokio::spawn(async move {
                // Run the handler in its own task so that a panic in it still gets an answer.
                let outcome = tokio::spawn(answer).await.unwrap_or_else(|error| {
                    Err(ResponseError::internal(format!(
                        "request handler failed: {error}"
                    )))
                });
                if let Some(child) = child.upgrade() {
                    child.transport.respond(id, outcome);
                }
            });
            return;
        }
        let outcome = self.builtin_answer(&method, &params);
        if let Err(ResponseError { message, .. }) = &outcome {
            tracing::debug!(server = %self.config.name, %method, "refused server request: {message}");
        }
        self.transport.respond(id, outcome);
    }

    /// The answers this crate gives on its own (see the module doc).
    fn builtin_answer(&self, method: &str, params: &Value) -> crate::jsonrpc::Reply {
        match method {
            "workspace/configuration" => {
                let items = params
                    .get("items")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                Ok(Value::Array(
                    items
                        .iter()
                        .map(|item| {
                            setting(
                                &self.config.settings,
                                item.get("section").and_then(Value::as_str),
                            )
                        })
                        .collect(),
                ))
            }
            "client/registerCapability" => {
                let params =
                    serde_json::from_value::<lsp_types::RegistrationParams>(params.clone())
                        .map_err(|error| ResponseError::invalid_params(error.to_string()))?;
                for registration in &params.registrations {
                    tracing::debug!(server = %self.config.name, method = %registration.method, "capability registered");
                }
                self.registrations
                    .lock()
                    .unwrap()
                    .extend(params.registrations);
                Ok(Value::Null)
            }
            "client/unregisterCapability" => {
                // The protocol spells the field `unregisterations`; accept the fixed spelling too.
                let ids: HashSet<&str> = ["unregisterations", "unregistrations"]
                    .iter()
                    .filter_map(|field| params.get(field).and_then(Value::as_array))
                    .flatten()
                    .filter_map(|entry| entry.get("id").and_then(Value::as_str))
                    .collect();
                self.registrations
                    .lock()
                    .unwrap()
                    .retain(|registration| !ids.contains(registration.id.as_str()));
                Ok(Value::Null)
            }
            "window/workDoneProgress/create" => {
                if let Some(token) = params.get("token").map(token_key) {
                    self.readiness.send_modify(|readiness| {
                        readiness.progress_seen = true;
                        readiness.active_progress.insert(token);
                    });
                }
                Ok(Value::Null)
            }
            "workspace/workspaceFolders" => Ok(self.workspace_folders_json()),
            "window/showMessageRequest" => {
                let text = params
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                tracing::info!(target: "lsp_bridge::server_log", server = %self.config.name, "asks (no answer given): {text}");
                Ok(Value::Null)
            }
            "window/showDocument" => Ok(json!({"success": false})),
            "workspace/applyEdit" => Ok(json!({
                "applied": false,
                "failureReason": "agent-lsp does not apply server-initiated edits without an editor",
            })),
            // `workspace/semanticTokens/refresh`, `.../inlayHint/refresh` and the like: nothing
            // cached here to refresh.
            method if method.starts_with("workspace/") && method.ends_with("/refresh") => {
                Ok(Value::Null)
            }
            method => Err(ResponseError::new(
                METHOD_NOT_FOUND,
                format!("agent-lsp does not handle `{method}`"),
            )),
        }
    }
}

/// A request written to its server, waiting for the answer ([`Child::send`],
/// [`Child::answer`]). Dropping it before the answer cancels the request (`$/cancelRequest`).
pub struct SentRequest {
    method: String,
    id: i64,
    reply: tokio::sync::oneshot::Receiver<Result<crate::transport::RawResult>>,
    guard: crate::transport::CancelOnDrop,
}

async fn incoming_loop(child: Weak<Child>, mut incoming: mpsc::UnboundedReceiver<Incoming>) {
    while let Some(message) = incoming.recv().await {
        let Some(child) = child.upgrade() else { return };
        match message {
            Incoming::Notification { method, params } => child.on_notification(method, params),
            Incoming::Request { id, method, params } => child.on_request(id, method, params),
        }
    }
}

/// `now + bound`, where an enormous bound (`Duration::MAX` for "no limit") means a century.
fn deadline_after(bound: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(bound)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
}

/// Progress tokens are integers or strings; one key space for both.
fn token_key(token: &Value) -> String {
    match token {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The value of a dotted `section` in `settings` (`python.analysis` → `settings.python.analysis`,
/// or a literal `"python.analysis"` key), the whole settings for no section, `null` when absent.
fn setting(settings: &Value, section: Option<&str>) -> Value {
    let Some(section) = section.filter(|section| !section.is_empty()) else {
        return settings.clone();
    };
    if let Some(value) = settings.get(section) {
        return value.clone();
    }
    section
        .split('.')
        .try_fold(settings, |value, key| value.get(key))
        .cloned()
        .unwrap_or(Value::Null)
}

fn directory_uri(path: &Path) -> Value {
    Url::from_directory_path(path)
        .map(|uri| Value::String(uri.to_string()))
        .unwrap_or(Value::Null)
}

/// What this client can do, said honestly: servers shape their answers (and whether they push
/// or expect pulls) by it.
///
/// Pull diagnostics are announced without dynamic registration: servers that offer
/// `diagnosticProvider` statically can be pulled, while pyright (which switches to pull-only
/// when dynamic registration is offered) keeps pushing into the store.
pub fn client_capabilities(encodings: &[crate::position::PositionEncoding]) -> Value {
    let symbol_kinds: Vec<u32> = (1..=26).collect();
    let encodings = encodings
        .iter()
        .map(|encoding| encoding.to_lsp().as_str().to_owned())
        .collect::<Vec<_>>();
    json!({
        "general": {
            "positionEncodings": encodings,
        },
        // clangd before version 15 negotiates with its own extension.
        "offsetEncoding": encodings,
        "window": {
            "workDoneProgress": true,
            "showMessage": {"messageActionItem": {"additionalPropertiesSupport": false}},
            "showDocument": {"support": false},
        },
        "workspace": {
            // The editor proxy forwards `workspace/applyEdit`; without an editor it is refused.
            "applyEdit": true,
            "workspaceEdit": {
                "documentChanges": true,
                "resourceOperations": ["create", "rename", "delete"],
                "failureHandling": "abort",
            },
            "workspaceFolders": true,
            "configuration": true,
            "didChangeConfiguration": {"dynamicRegistration": false},
            "symbol": {
                "dynamicRegistration": false,
                "symbolKind": {"valueSet": symbol_kinds},
                "tagSupport": {"valueSet": [1]},
            },
            "executeCommand": {"dynamicRegistration": false},
        },
        "textDocument": {
            "synchronization": {
                "dynamicRegistration": false,
                "willSave": false,
                "willSaveWaitUntil": false,
                "didSave": true,
            },
            "publishDiagnostics": {
                "relatedInformation": true,
                "versionSupport": true,
                "tagSupport": {"valueSet": [1, 2]},
                "codeDescriptionSupport": true,
                "dataSupport": true,
            },
            "diagnostic": {"dynamicRegistration": false, "relatedDocumentSupport": false},
            "definition": {"dynamicRegistration": false, "linkSupport": true},
            "declaration": {"dynamicRegistration": false, "linkSupport": true},
            "typeDefinition": {"dynamicRegistration": false, "linkSupport": true},
            "implementation": {"dynamicRegistration": false, "linkSupport": true},
            "references": {"dynamicRegistration": false},
            "hover": {"dynamicRegistration": false, "contentFormat": ["markdown", "plaintext"]},
            "documentSymbol": {
                "dynamicRegistration": false,
                "hierarchicalDocumentSymbolSupport": true,
                "symbolKind": {"valueSet": symbol_kinds},
                "tagSupport": {"valueSet": [1]},
            },
            "callHierarchy": {"dynamicRegistration": false},
            "rename": {
                "dynamicRegistration": false,
                "prepareSupport": true,
                "prepareSupportDefaultBehavior": 1,
                "honorsChangeAnnotations": false,
            },
        },
    })
}

/// The bridge's capabilities with the editor's `textDocument` ones beneath them: the editor's
/// fill in what the bridge does not say; where both say something the bridge's stays, and
/// `dynamicRegistration` stays the bridge's (the bridge registers for the editor itself).
pub fn with_editor_capabilities(mut ours: Value, editor: Option<&Value>) -> Value {
    fn fill(into: &mut Value, from: &Value) {
        let (Value::Object(into), Value::Object(from)) = (into, from) else {
            return;
        };
        for (key, value) in from {
            if key == "dynamicRegistration" {
                continue;
            }
            match into.get_mut(key) {
                Some(existing) => fill(existing, value),
                None => {
                    let mut value = value.clone();
                    strip_dynamic_registration(&mut value);
                    into.insert(key.clone(), value);
                }
            }
        }
    }
    fn strip_dynamic_registration(value: &mut Value) {
        if let Value::Object(object) = value {
            object.remove("dynamicRegistration");
            object.values_mut().for_each(strip_dynamic_registration);
        }
    }
    if let Some(editor) = editor {
        fill(&mut ours["textDocument"], editor);
    }
    ours
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_editors_capabilities_fill_in_under_the_bridges() {
        let editor = json!({
            "completion": {"dynamicRegistration": true,
                           "completionItem": {"snippetSupport": true}},
            "documentSymbol": {"hierarchicalDocumentSymbolSupport": false},
            "codeAction": {"codeActionLiteralSupport": {"codeActionKind": {"valueSet": ["quickfix"]}}},
        });
        let merged = with_editor_capabilities(
            client_capabilities(&[crate::position::PositionEncoding::Utf16]),
            Some(&editor),
        );
        let text_document = &merged["textDocument"];
        assert_eq!(
            text_document["completion"]["completionItem"]["snippetSupport"],
            true
        );
        assert!(
            text_document["completion"]
                .get("dynamicRegistration")
                .is_none()
        );
        assert_eq!(
            text_document["codeAction"]["codeActionLiteralSupport"]["codeActionKind"]["valueSet"],
            json!(["quickfix"])
        );
        // The agent reads document symbols as a tree.
        assert_eq!(
            text_document["documentSymbol"]["hierarchicalDocumentSymbolSupport"],
            true
        );
        let _: lsp_types::ClientCapabilities = serde_json::from_value(merged).unwrap();
    }

    #[test]
    fn client_capabilities_are_well_formed_lsp() {
        let capabilities: lsp_types::ClientCapabilities =
            serde_json::from_value(client_capabilities(&[
                crate::position::PositionEncoding::Utf8,
                crate::position::PositionEncoding::Utf16,
            ]))
            .unwrap();
        let general = capabilities.general.unwrap();
        assert_eq!(
            general.position_encodings.unwrap(),
            [
                lsp_types::PositionEncodingKind::UTF8,
                lsp_types::PositionEncodingKind::UTF16
            ]
        );
        assert_eq!(capabilities.window.unwrap().work_done_progress, Some(true));
        let workspace = capabilities.workspace.unwrap();
        assert_eq!(
            (workspace.workspace_folders, workspace.configuration),
            (Some(true), Some(true))
        );
        let text = capabilities.text_document.unwrap();
        assert_eq!(
            text.publish_diagnostics.unwrap().version_support,
            Some(true)
        );
        assert!(text.diagnostic.is_some());
        assert_eq!(text.synchronization.unwrap().did_save, Some(true));
        assert_eq!(
            text.document_symbol
                .unwrap()
                .hierarchical_document_symbol_support,
            Some(true)
        );
        assert_eq!(text.rename.unwrap().prepare_support, Some(true));
        assert_eq!(
            text.hover.unwrap().content_format.unwrap()[0],
            lsp_types::MarkupKind::Markdown
        );
        for present in [
            text.definition.is_some(),
            text.declaration.is_some(),
            text.type_definition.is_some(),
            text.implementation.is_some(),
            text.references.is_some(),
            text.call_hierarchy.is_some(),
            workspace.symbol.is_some(),
        ] {
            assert!(present);
        }
    }

    #[test]
    fn settings_are_found_by_dotted_section() {
        let settings = json!({
            "python": {"analysis": {"typeCheckingMode": "strict"}},
            "flat.key": 1,
        });
        assert_eq!(
            setting(&settings, Some("python.analysis")),
            json!({"typeCheckingMode": "strict"})
        );
        assert_eq!(
            setting(&settings, Some("python.analysis.typeCheckingMode")),
            json!("strict")
        );
        assert_eq!(setting(&settings, Some("flat.key")), json!(1));
        assert_eq!(setting(&settings, Some("pyright")), Value::Null);
        assert_eq!(setting(&settings, None), settings);
    }

    #[test]
    fn readiness_follows_progress_diagnostics_and_quiet() {
        let start = Instant::now();
        let mut readiness = Readiness::default();
        assert_eq!(readiness.judge(start), (false, None));
        readiness.initialized_at = Some(start);
        assert_eq!(
            readiness.judge(start),
            (false, Some(start + QUIET_AFTER_INITIALIZED))
        );
        assert!(readiness.judge(start + QUIET_AFTER_INITIALIZED).0);
        readiness.progress_seen = true;
        readiness.active_progress.insert("indexing".into());
        assert!(!readiness.judge(start + Duration::from_secs(10)).0);
        readiness.active_progress.clear();
        assert!(readiness.judge(start).0);
        readiness.active_progress.insert("again".into());
        readiness.diagnostics_seen = true;
        assert!(readiness.judge(start).0);
    }
}
