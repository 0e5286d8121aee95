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
//!
//! This file is the child's state and its shutdown; `handshake` starts it (spawn, `initialize`),
//! `messages` is talking to the server, `incoming` what it sends on its own, `diagnostics` the store of what it
//! published, `capabilities` what it is told the client can do.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use lsp_types::ServerCapabilities;
use serde_json::Value;
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::ServerConfig;
use crate::position::PositionEncoding;
use crate::transport::{Closed, Transport};

mod capabilities;
mod diagnostics;
mod handshake;
mod incoming;
mod messages;

pub use capabilities::{client_capabilities, with_editor_capabilities};
pub use diagnostics::{DiagnosticsEntry, DiagnosticsStore};
use incoming::Readiness;
pub use messages::SentRequest;
use messages::deadline_after;

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
/// Where a child is in its life.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChildState {
    /// Spawned, `initialize` not answered yet.
    Starting,
    /// Initialized and answering (its first indexing may still run: see [`Child::wait_ready`]).
    Ready,
    /// Broke the protocol, or stopped answering (hung): it will be recycled.
    Failed {
        /// What went wrong, for `agent-lsp servers` and the restart's log line.
        reason: String,
    },
    /// The process ended (crashed, or shut down).
    Exited,
}

pub use crate::transport::{Relay, RequestHandler, Undelivered};

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
    /// This start of the server, unique in the process (see [`Child`]).
    pub fn instance(&self) -> u64 {
        self.instance
    }

    /// The configured name, which tags its log lines and errors.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// The configuration it was started with (settings, timeouts), shared with its registry
    /// slot so a restart uses the same.
    pub fn config(&self) -> &Arc<ServerConfig> {
        &self.config
    }

    /// The project root it was started in (its `rootUri`): it serves the files under it.
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

    /// Where it is in its life now, read from its connection: what health reports show and
    /// what the registry checks before handing it out.
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

    /// What the server says it is doing now: its newest work-done progress that has not ended
    /// (`Indexing: 12/40 (30%)`), `None` when it reports none.
    pub fn work(&self) -> Option<String> {
        self.readiness.borrow().work()
    }

    /// Whether the server has indexed the workspace, as far as we can tell (see the field).
    pub fn workspace_indexed(&self) -> bool {
        self.workspace_indexed.load(Ordering::Relaxed)
    }

    /// The server gave a non-empty answer to a workspace-wide query.
    pub fn set_workspace_indexed(&self) {
        self.workspace_indexed.store(true, Ordering::Relaxed);
    }

    /// What it published with `textDocument/publishDiagnostics`, by document and version.
    pub fn diagnostics(&self) -> &DiagnosticsStore {
        &self.diagnostics
    }

    /// Every server→client notification from now on, in order.
    pub fn subscribe_notifications(&self) -> broadcast::Receiver<(String, Value)> {
        self.notifications.subscribe()
    }

    /// Let `handler` answer server→client requests first (the editor proxy forwards
    /// `workspace/applyEdit` and friends to the editor); when it declines, the built-in answer
    /// is used. It is called by whoever reads the server, in order with the server's
    /// notifications (see [`RequestHandler`]).
    pub fn set_request_handler(&self, handler: RequestHandler) {
        self.transport.set_request_handler(handler);
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
}
