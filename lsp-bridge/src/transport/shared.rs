//! The state both sides of the wire share: the table of our pending requests and of the editor's
//! forwarded ones (answered, cancelled, timed out, swept), cancellation and the hung-server
//! verdict, and what happens to everything pending when the wire closes.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::{Closed, FIRST_OWN_ID, INTERNAL_ERROR, RawResult, Shared, error_body};
use crate::error::{Error, Result};

impl Shared {
    pub(super) fn send(&self, message: &Value) {
        self.send_frame(serde_json::to_vec(message).expect("a Value serializes"));
    }

    /// Frame `body` and write it to the server.
    pub(super) fn send_frame(&self, body: Vec<u8>) {
        // A failed send means the pipe broke: the reader sees the end of output and fails what
        // is pending, so there is nothing more to do here.
        let _ = self.writer.send(&body);
    }

    pub(super) fn stderr_tail(&self) -> Vec<String> {
        self.stderr_tail.lock().unwrap().iter().cloned().collect()
    }

    pub(super) fn not_delivered(&self) -> Error {
        Error::NotDelivered {
            server: self.server.clone(),
        }
    }

    pub(super) fn closed_error(&self, closed: &Closed) -> Error {
        match closed {
            Closed::Exited => Error::ServerExited {
                server: self.server.clone(),
                stderr_tail: self.stderr_tail(),
            },
            Closed::Protocol(message) => Error::Protocol {
                server: self.server.clone(),
                message: message.clone(),
            },
        }
    }

    pub(super) fn cancel(shared: &Arc<Shared>, id: i64, grace: Duration) {
        let method = {
            let table = shared.pending.lock().unwrap();
            if table.closed.is_some() {
                return;
            }
            match table.requests.get(&id) {
                Some(pending) => pending.method.clone(),
                None => return,
            }
        };
        shared.send_cancel(id);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let shared = shared.clone();
        runtime.spawn(async move {
            tokio::time::sleep(grace).await;
            let unanswered = {
                let mut table = shared.pending.lock().unwrap();
                table.closed.is_none() && table.requests.remove(&id).is_some()
            };
            if unanswered {
                shared.mark_hung(&method, id, grace);
            }
        });
    }

    /// End the connection for `reason` (the first reason wins) and fail every pending request.
    pub(super) fn close(&self, reason: Closed) {
        let (drained, forwarded) = {
            let mut table = self.pending.lock().unwrap();
            if table.closed.is_some() {
                return;
            }
            table.closed = Some(reason.clone());
            (
                std::mem::take(&mut table.requests),
                std::mem::take(&mut table.forwarded),
            )
        };
        self.writer.close();
        // Published before anyone waiting is told: a caller woken by its failed request (on
        // another thread than this reader) must already see the connection closed.
        self.closed.send_replace(Some(reason.clone()));
        let error = self.closed_error(&reason).to_string();
        for (id, forwarded) in forwarded {
            if let Some(editor) = forwarded.editor {
                editor.send(&error_body(id, INTERNAL_ERROR, &error));
            }
        }
        match &reason {
            Closed::Exited => {
                tracing::info!(server = %self.server, pending = drained.len(), "language server output ended")
            }
            Closed::Protocol(message) => {
                tracing::warn!(server = %self.server, pending = drained.len(), "language server broke the protocol: {message}")
            }
        }
        for (_, pending) in drained {
            let _ = pending.reply.send(Err(self.closed_error(&reason)));
        }
    }

    /// If `id` is a forwarded request, send its answer (`body`, as the server wrote it) to the
    /// editor, or drop it when the request was answered here already; whether it was one.
    pub(super) fn answer_forwarded(&self, id: &Value, body: &[u8]) -> bool {
        let Some(id) = id.as_i64().filter(|id| *id < FIRST_OWN_ID) else {
            return false;
        };
        let Some(forwarded) = self.pending.lock().unwrap().forwarded.remove(&id) else {
            return false;
        };
        match forwarded.editor {
            Some(editor) => {
                editor.send_waiting(body);
            }
            None => {
                tracing::debug!(server = %self.server, id, method = %forwarded.method, "late answer to a forwarded request that was answered here")
            }
        }
        true
    }

    /// Time forwarded requests out: answer the editor and cancel at the server; when the server
    /// does not answer a cancelled request within the grace, it is hung. Runs while any
    /// forwarded request is pending.
    pub(super) async fn sweep_forwarded(self: Arc<Self>) {
        loop {
            let now = Instant::now();
            let mut expired = Vec::new();
            let next = {
                let mut table = self.pending.lock().unwrap();
                if table.closed.is_some() || table.forwarded.is_empty() {
                    table.sweeping = false;
                    table.sweep_until = None;
                    return;
                }
                let mut hung = Vec::new();
                for (&id, forwarded) in table.forwarded.iter_mut() {
                    if forwarded.deadline > now {
                        continue;
                    }
                    match forwarded.editor.take() {
                        Some(editor) => {
                            forwarded.deadline = now + self.cancel_grace;
                            expired.push((id, forwarded.method.clone(), editor));
                        }
                        None => hung.push(id),
                    }
                }
                for id in hung {
                    if let Some(forwarded) = table.forwarded.remove(&id) {
                        self.mark_hung(&forwarded.method, id, self.cancel_grace);
                    }
                }
                let next = table
                    .forwarded
                    .values()
                    .map(|forwarded| forwarded.deadline)
                    .min();
                table.sweep_until = next;
                next
            };
            for (id, method, editor) in expired {
                tracing::debug!(server = %self.server, id, %method, "forwarded request timed out: cancelling");
                self.send_cancel(id);
                let message = format!("{} did not answer `{method}` in time", self.server);
                editor.send(&error_body(id, INTERNAL_ERROR, &message));
            }
            if let Some(next) = next {
                tokio::select! {
                    () = tokio::time::sleep_until(next) => {}
                    () = self.sweep.notified() => {}
                }
            }
        }
    }

    /// The server did not answer `id` within `grace` of its `$/cancelRequest`: it is hung (the
    /// first reason is kept).
    pub(super) fn mark_hung(&self, method: &str, id: i64, grace: Duration) {
        let reason =
            format!("did not answer `{method}` (id {id}) within {grace:?} of `$/cancelRequest`");
        tracing::warn!(server = %self.server, "language server is hung: {reason}");
        self.hung.lock().unwrap().get_or_insert(reason);
    }

    pub(super) fn send_cancel(&self, id: i64) {
        self.send(&json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": id}}));
    }

    pub(super) fn complete(&self, id: &Value, outcome: Result<RawResult>) {
        let id = match id {
            Value::Number(number) => number.as_i64(),
            Value::String(text) => text.parse().ok(),
            _ => None,
        };
        let pending = id.and_then(|id| self.pending.lock().unwrap().requests.remove(&id));
        match pending {
            // The caller may have given up already (timeout, cancel, drop): that is fine.
            Some(pending) => {
                if let Some(relay) = pending.relay {
                    relay(&outcome);
                }
                let _ = pending.reply.send(outcome);
            }
            None => {
                tracing::debug!(server = %self.server, ?id, "answer to no pending request (late, after cancellation?)")
            }
        }
    }
}
