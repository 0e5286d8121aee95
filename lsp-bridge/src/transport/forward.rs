//! The editor proxy's path through a transport: requests forwarded with the editor's ids and
//! answered to the editor as the server wrote them, the editor's cancellations of them, and the
//! hooks that send the server's notifications and requests on to the editor.
//!
//! Apart from the bridge's own requests in `transport.rs` because none of this is waited for
//! here: whoever reads the server writes to the editor, and a forwarded request the server
//! exits without answering is offered for delivery to the restarted one.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::output::error_body;
use super::{FIRST_OWN_ID, Transport};
use crate::error::Result;
use crate::framing::FrameWriter;
use crate::jsonrpc::code::REQUEST_CANCELLED;

/// Answers a server→client request instead of the built-in answer, or declines with `None`.
/// Called by whoever reads the server, in order with its notifications: whatever it sends on
/// (the request to the editor) must be written before it returns, and only the wait for the
/// answer is the returned future.
pub type RequestHandler = Arc<
    dyn Fn(&str, &Value) -> Option<futures_util::future::BoxFuture<'static, crate::jsonrpc::Reply>>
        + Send
        + Sync,
>;

/// Takes a forwarded request (the editor's id, the method, the request as the editor wrote it)
/// that the server exited without answering, to deliver it to the restarted server; `false`
/// leaves it to be answered with the error. Only requests without effects of their own are
/// offered (not `workspace/executeCommand`), and each only once.
pub type Undelivered = Arc<dyn Fn(i64, &str, Vec<u8>) -> bool + Send + Sync>;

/// A request forwarded for the editor: its answer goes to `editor` as the server wrote it.
pub(super) struct Forwarded {
    pub(super) method: String,
    /// The request as the editor wrote it, to deliver once more to a restarted server when
    /// this one exits without answering ([`Undelivered`]); empty once it was delivered again.
    pub(super) body: Vec<u8>,
    /// Where the answer goes; `None` once it was answered here (cancelled or timed out), while
    /// the server still owes an answer.
    pub(super) editor: Option<Arc<FrameWriter>>,
    /// When it times out; for an abandoned request, when the server counts as hung.
    pub(super) deadline: Instant,
}

/// An editor that gets a server's notifications, and which of them.
pub(super) struct NotificationSink {
    pub(super) editor: Arc<FrameWriter>,
    pub(super) wanted: fn(&str) -> bool,
}

impl Transport {
    /// Forward the editor's request `body` (JSON text, with the editor's `id`) as it is; the
    /// server's answer goes to `editor` as the server writes it. If none comes within
    /// `timeout`, the editor gets an error and the server `$/cancelRequest`; if the server
    /// exits first, the editor gets the reason.
    pub(crate) fn forward(
        &self,
        id: i64,
        method: &str,
        body: &[u8],
        editor: &Arc<FrameWriter>,
        timeout: Duration,
        again: bool,
    ) -> Result<()> {
        debug_assert!(id < FIRST_OWN_ID, "an editor id");
        let deadline = Instant::now() + timeout;
        let (start_sweeping, sooner) = {
            let mut table = self.shared.pending.lock().unwrap();
            if let Some(closed) = &table.closed {
                return Err(self.shared.closed_error(closed));
            }
            let earlier = table.forwarded.insert(
                id,
                Forwarded {
                    method: method.to_owned(),
                    // Kept only while it may be delivered again.
                    body: if again || method == "workspace/executeCommand" {
                        Vec::new()
                    } else {
                        body.to_vec()
                    },
                    editor: Some(editor.clone()),
                    deadline,
                },
            );
            if earlier.is_some_and(|earlier| earlier.editor.is_some()) {
                tracing::warn!(server = %self.shared.server, id, "the editor reused the id of a request still pending: the earlier one gets no answer");
            }
            let sooner = table.sweep_until.is_some_and(|until| deadline < until);
            (!std::mem::replace(&mut table.sweeping, true), sooner)
        };
        if start_sweeping {
            self.shared
                .runtime
                .spawn(self.shared.clone().sweep_forwarded());
        } else if sooner {
            self.shared.sweep.notify_one();
        }
        // From the thread that reads the editor, this waits while the server's input is full:
        // the editor's pipe fills in turn, and nothing grows without bound.
        if !self.shared.writer.send_waiting(body)
            && self
                .shared
                .pending
                .lock()
                .unwrap()
                .forwarded
                .remove(&id)
                .is_some()
        {
            // Never delivered: the caller may send it elsewhere (to a restarted server). Had
            // the connection been closed meanwhile, the editor would have its answer already.
            return Err(self.shared.not_delivered());
        }
        Ok(())
    }

    /// From now on the server's notifications that `wanted` accepts go to `editor` as the
    /// server wrote them, written by whoever reads the server, right where they come among
    /// the forwarded answers: the editor gets them in the server's order, and none is dropped
    /// (the bridge still reads each one for itself).
    pub(crate) fn notify_to(&self, editor: Arc<FrameWriter>, wanted: fn(&str) -> bool) {
        *self.shared.notification_sink.lock().unwrap() = Some(NotificationSink { editor, wanted });
    }

    /// From now on `handler` takes the server's requests first, on the thread that reads the
    /// server (see [`RequestHandler`]); the ones it declines go to the owner.
    pub(crate) fn set_request_handler(&self, handler: RequestHandler) {
        *self.shared.request_handler.write().unwrap() = Some(handler);
    }

    /// From now on `undelivered` is offered the forwarded requests the server exits without
    /// answering (see [`Undelivered`]).
    pub(crate) fn on_undelivered(&self, undelivered: Undelivered) {
        *self.shared.undelivered.lock().unwrap() = Some(undelivered);
    }

    /// The editor cancelled forwarded request `id`: answer it with `RequestCancelled` now and
    /// pass the cancellation on (a server that then does not answer within the grace is hung).
    /// `false` when `id` is not pending here.
    pub(crate) fn cancel_forwarded(&self, id: i64) -> bool {
        let (method, editor) = {
            let mut table = self.shared.pending.lock().unwrap();
            let Some(forwarded) = table.forwarded.get_mut(&id) else {
                return false;
            };
            let Some(editor) = forwarded.editor.take() else {
                return true;
            };
            forwarded.deadline = Instant::now() + self.shared.cancel_grace;
            (forwarded.method.clone(), editor)
        };
        self.shared.sweep.notify_one();
        self.shared.send_cancel(id);
        editor.send(&error_body(
            id,
            REQUEST_CANCELLED,
            &format!("`{method}` was cancelled"),
        ));
        true
    }
}
