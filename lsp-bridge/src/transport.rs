//! The wire to one child server process: spawn, `Content-Length` framing, our request ids, and
//! the process's death.
//!
//! Modelled on helix-lsp's transport rather than a framework's client, because the bridge must
//! own the id map: it has to send `$/cancelRequest` for *its own* id when a caller times out,
//! gives up or drops the request, and it has to notice when the server then does not
//! acknowledge the cancellation (a hung server gets recycled). Everything here is bounded: a
//! broken frame fails the pending requests with [`Error::Protocol`] and kills the process, and
//! end of output fails them with [`Error::ServerExited`] at once, with the server's last stderr
//! lines, so no caller waits on a dead server.
//!
//! Server→client requests and notifications are handed, in order, to the owner (the [`Child`])
//! through a bounded channel (a full one stops the reading, and the server's pipe fills);
//! responses to our requests are matched here. What goes to the editor (notifications it
//! wants, the requests it answers, answers to its forwarded requests) is written by whoever
//! reads the server, as it reads them: the editor gets everything in the server's order.
//!
//! The server's input is a [`FrameWriter`], written directly by the caller. For the editor
//! proxy, the output is read on a thread of its own (`ServerConfig::output_thread`), so that a
//! request it forwards ([`Transport::forward`]) goes out and its answer comes back to the
//! editor without waking any other thread or task: the editor's id goes to the server
//! unchanged, and the answer is written to the editor by the thread that read it. Without an
//! editor, the output is read by a task on the runtime where the bridge's callers wait. Our own
//! ids start at [`FIRST_OWN_ID`], far above any editor's, so the two never meet.
//!
//! This file is the process and the writing side; [`spawn`] starts the process and its I/O,
//! [`forward`] is the editor proxy's path (forwarded requests and the hooks that pass the
//! server's messages on to the editor), [`output`] reads the server (output, stderr, exit),
//! [`shared`] keeps what both sides share (the pending requests, cancellation, closing).
//!
//! [`Child`]: crate::child::Child

use std::collections::{HashMap, VecDeque};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::framing::FrameWriter;

mod forward;
mod liveness;
mod output;
mod shared;
mod spawn;

use forward::{Forwarded, NotificationSink};
pub use forward::{RequestHandler, Undelivered};
use output::error_body;

/// How many stderr lines a server keeps for error messages and health reports.
pub(crate) const STDERR_TAIL_LINES: usize = 20;
/// Our first request id: 2^30, above any id an editor reaches in a session, and with room below
/// 2^31: the LSP `integer` is 32-bit, and servers built on `lsp-server` (rust-analyzer, ruff)
/// refuse a larger id as a malformed message.
pub const FIRST_OWN_ID: i64 = 1 << 30;
use crate::jsonrpc::code::INTERNAL_ERROR;
/// Once stdout has ended, how long to wait for the rest of stderr (the reason it died).
const STDERR_DRAIN: Duration = Duration::from_millis(500);
/// Once the process has exited, how long its stdout may stay open (held by a grandchild)
/// before pending requests are failed anyway.
const STDOUT_DRAIN: Duration = Duration::from_secs(1);
/// Messages read from the server that its owner has not taken yet; beyond this the reader
/// waits (the owner handles each one at once: it only records and answers).
const INCOMING_QUEUE: usize = 256;

/// A message the server sent us that is not a response to one of our requests.
#[derive(Debug)]
pub(crate) enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
}

/// Why the connection ended.
#[derive(Clone, Debug)]
pub(crate) enum Closed {
    /// Output ended: the server exited (or was stopped).
    Exited,
    /// The server broke the framing or sent bad JSON; the process was killed.
    Protocol(String),
}

/// A result as the server wrote it: parsed only by whoever needs its content (the editor
/// proxy forwards it as it is).
pub type RawResult = Box<serde_json::value::RawValue>;

struct Pending {
    method: String,
    reply: oneshot::Sender<Result<RawResult>>,
    /// Called with the server's answer by whoever reads it, before `reply` gets it.
    relay: Option<Relay>,
}

/// Takes the server's answer (its result, or the error it answered with) on the thread that
/// reads the server, as it is read: the editor proxy writes its reply to the editor there, in
/// order with the server's notifications. Not called when no answer comes (the request timed
/// out or was cancelled, or the server exited): the waiting side answers then.
pub type Relay = Box<dyn FnOnce(&Result<RawResult>) + Send>;

struct PendingTable {
    /// `Some` once the connection is gone: new requests fail at once with this reason.
    closed: Option<Closed>,
    requests: HashMap<i64, Pending>,
    /// Requests forwarded with the editor's ids, by id.
    forwarded: HashMap<i64, Forwarded>,
    /// Whether the task that times forwarded requests out is running.
    sweeping: bool,
    /// Until when that task sleeps: a request with an earlier deadline wakes it.
    sweep_until: Option<Instant>,
}

/// State shared by the owner and the I/O tasks.
struct Shared {
    server: String,
    pid: Option<u32>,
    next_id: AtomicI64,
    pending: Mutex<PendingTable>,
    writer: Arc<FrameWriter>,
    /// How long a server may take to acknowledge `$/cancelRequest`.
    cancel_grace: Duration,
    /// Wakes the task that times forwarded requests out, when a deadline came closer.
    sweep: tokio::sync::Notify,
    /// The runtime of the I/O tasks, for the threads that forward requests.
    runtime: tokio::runtime::Handle,
    stderr_tail: Mutex<VecDeque<String>>,
    stderr_done: watch::Sender<bool>,
    closed: watch::Sender<Option<Closed>>,
    exit_status: watch::Sender<Option<ExitStatus>>,
    /// Whether it is hung: suspected by an unanswered cancellation, then silent for long.
    liveness: liveness::Liveness,
    /// Where the server's notifications go as the server wrote them, from the thread that
    /// reads it, in order with the answers forwarded there ([`Transport::notify_to`]).
    notification_sink: Mutex<Option<NotificationSink>>,
    /// Takes the server's requests the editor answers ([`Transport::set_request_handler`]).
    request_handler: std::sync::RwLock<Option<RequestHandler>>,
    /// Takes the forwarded requests it exited without answering ([`Transport::on_undelivered`]).
    undelivered: Mutex<Option<Undelivered>>,
}

/// One running server process and its framed stdio. Dropping it kills the process.
pub(crate) struct Transport {
    shared: Arc<Shared>,
    /// Sending (or dropping) this kills the process group.
    kill: Mutex<Option<oneshot::Sender<()>>>,
}

impl Transport {
    pub(crate) fn pid(&self) -> Option<u32> {
        self.shared.pid
    }

    pub(crate) fn has_exited(&self) -> bool {
        self.shared.exit_status.borrow().is_some()
    }

    pub(crate) fn stderr_tail(&self) -> Vec<String> {
        self.shared
            .stderr_tail
            .lock()
            .unwrap()
            .iter()
            .cloned()
            .collect()
    }

    /// Why the connection ended, if it has.
    pub(crate) fn closed(&self) -> Option<Closed> {
        self.shared.closed.borrow().clone()
    }

    /// Why the server is considered hung, if it is.
    pub(crate) fn hung(&self) -> Option<String> {
        self.shared.liveness.hung()
    }

    /// The error a request gets on a closed connection.
    pub(crate) fn closed_error(&self, closed: &Closed) -> Error {
        self.shared.closed_error(closed)
    }

    /// Send a request with a fresh id of ours; the receiver gets its answer, or the reason the
    /// server went away.
    pub(crate) fn send_request(
        &self,
        method: &str,
        params: &Value,
        relay: Option<Relay>,
    ) -> Result<(i64, oneshot::Receiver<Result<RawResult>>)> {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let (reply, receiver) = oneshot::channel();
        {
            let mut table = self.shared.pending.lock().unwrap();
            if let Some(closed) = &table.closed {
                return Err(self.shared.closed_error(closed));
            }
            table.requests.insert(
                id,
                Pending {
                    method: method.to_owned(),
                    reply,
                    relay,
                },
            );
        }
        tracing::trace!(server = %self.shared.server, id, method, "request");
        if !self.shared.writer.send(&request_body(id, method, params))
            && self
                .shared
                .pending
                .lock()
                .unwrap()
                .requests
                .remove(&id)
                .is_some()
        {
            // The server's input is closed: it never gets this request. (Had the connection
            // been closed meanwhile, the request would have its error already.)
            return Err(self.shared.not_delivered());
        }
        Ok((id, receiver))
    }

    pub(crate) fn notify(&self, method: &str, params: Value) -> Result<()> {
        if let Some(closed) = &self.shared.pending.lock().unwrap().closed {
            return Err(self.shared.closed_error(closed));
        }
        tracing::trace!(server = %self.shared.server, method, "notification");
        let message = with_params(json!({"jsonrpc": "2.0", "method": method}), params);
        // The pipe was found closed: the server never gets it (the caller may send it to a
        // restarted one).
        if !self
            .shared
            .writer
            .send(&serde_json::to_vec(&message).expect("a Value serializes"))
        {
            return Err(self.shared.not_delivered());
        }
        Ok(())
    }

    /// Whether the server's input has room now ([`FrameWriter::has_room`]).
    pub(crate) fn has_room(&self) -> bool {
        self.shared.writer.has_room()
    }

    /// Wait until the server's input has room ([`FrameWriter::room`]).
    pub(crate) async fn writable(&self) {
        self.shared.writer.room().await;
    }

    /// Answer a server→client request.
    pub(crate) fn respond(&self, id: Value, reply: crate::jsonrpc::Reply) {
        self.shared.send(&crate::jsonrpc::reply(&id, &reply));
    }

    /// Whether the server's input pipe was found closed: it gets nothing more.
    pub(crate) fn input_closed(&self) -> bool {
        self.shared.writer.is_broken()
    }

    /// We no longer want the answer to `id`: tell the server with `$/cancelRequest`, and if it
    /// does not answer that id at all (result or `RequestCancelled`) within `grace`, consider it
    /// hung. A late answer is dropped when it comes.
    pub(crate) fn cancel(&self, id: i64, grace: Duration) {
        Shared::cancel(&self.shared, id, grace);
    }

    /// A handle that cancels `id` when dropped unless disarmed, for callers whose future may be
    /// dropped mid-request.
    pub(crate) fn cancel_on_drop(&self, id: i64, grace: Duration) -> CancelOnDrop {
        CancelOnDrop {
            shared: Some(self.shared.clone()),
            id,
            grace,
        }
    }

    /// Kill the process group now (idempotent).
    pub(crate) fn kill(&self) {
        if let Some(kill) = self.kill.lock().unwrap().take() {
            let _ = kill.send(());
        }
    }

    /// Wait until the process has exited, at most `bound`; whether it has.
    pub(crate) async fn wait_exit(&self, bound: Duration) -> bool {
        let mut status = self.shared.exit_status.subscribe();
        tokio::time::timeout(bound, status.wait_for(|status| status.is_some()))
            .await
            .is_ok()
    }

    /// Wait until the connection has closed, at most `bound`.
    pub(crate) async fn wait_closed(&self, bound: Duration) -> bool {
        let mut closed = self.shared.closed.subscribe();
        tokio::time::timeout(bound, closed.wait_for(|closed| closed.is_some()))
            .await
            .is_ok()
    }
}

impl Drop for Transport {
    fn drop(&mut self) {
        self.kill();
    }
}

/// See [`Transport::cancel_on_drop`].
pub(crate) struct CancelOnDrop {
    shared: Option<Arc<Shared>>,
    id: i64,
    grace: Duration,
}

impl CancelOnDrop {
    /// The request finished (answered, or already cancelled explicitly): nothing to do on drop.
    pub(crate) fn disarm(mut self) {
        self.shared = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.take() {
            tracing::debug!(server = %shared.server, id = self.id, "request dropped by its caller: cancelling");
            Shared::cancel(&shared, self.id, self.grace);
        }
    }
}

/// A request's JSON text, written straight from borrowed params: the editor proxy's requests
/// go out without building (or cloning, for a retry) a message `Value` around them.
fn request_body(id: i64, method: &str, params: &Value) -> Vec<u8> {
    let mut body = Vec::with_capacity(96 + method.len());
    body.extend_from_slice(format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"#).as_bytes());
    serde_json::to_writer(&mut body, method).expect("a string serializes");
    if !params.is_null() {
        body.extend_from_slice(br#","params":"#);
        serde_json::to_writer(&mut body, params).expect("a Value serializes");
    }
    body.push(b'}');
    body
}

/// JSON-RPC allows `params` to be absent but not `null`: `shutdown` and `exit` go without.
fn with_params(mut message: Value, params: Value) -> Value {
    if !params.is_null() {
        message["params"] = params;
    }
    message
}

fn kill_group(pid: u32) {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    if let Ok(pid) = i32::try_from(pid) {
        // ESRCH (already gone) is the common, harmless case.
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
}
