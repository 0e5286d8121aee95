//! Talking to the server: requests with timeouts, cancellation and `ContentModified` retries
//! (the agent's own), requests written now and waited for later (the editor's, on the proxy's
//! loop), requests forwarded with the editor's id, and notifications.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{CONTENT_MODIFIED_DELAY, CONTENT_MODIFIED_RETRIES, Child};
use crate::error::{CONTENT_MODIFIED, Error, Result};
use crate::framing::FrameWriter;

impl Child {
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
        self.send_relayed(method, params, None)
    }

    /// [`Child::send`], with `relay` taking the answer on the thread that reads the server,
    /// in order with its notifications (see [`Relay`](crate::child::Relay)).
    pub fn send_relayed(
        &self,
        method: &str,
        params: &Value,
        relay: Option<crate::child::Relay>,
    ) -> Result<SentRequest> {
        let (id, reply) = self.transport.send_request(method, params, relay)?;
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
        self.transport
            .forward(id, method, body, editor, timeout, false)
    }

    /// [`Child::forward`] of a request an earlier instance exited without answering: if this
    /// one exits without answering too, the editor gets the error.
    pub fn forward_again(
        &self,
        id: i64,
        method: &str,
        body: &[u8],
        editor: &Arc<FrameWriter>,
        timeout: Duration,
    ) -> Result<()> {
        self.transport
            .forward(id, method, body, editor, timeout, true)
    }

    /// Offer `undelivered` the forwarded requests this server exits without answering, to
    /// deliver them to the restarted one (see [`Undelivered`](crate::child::Undelivered)).
    pub fn on_undelivered(&self, undelivered: crate::child::Undelivered) {
        self.transport.on_undelivered(undelivered);
    }

    /// Wait until the server's input has room: a server that stops reading slows whoever writes
    /// to it (the editor's messages wait in the editor's pipe) instead of growing a queue here.
    pub async fn writable(&self) {
        self.transport.writable().await;
    }

    /// Whether the server's input has room now, so a write does not wait (see
    /// [`Child::writable`]): the editor proxy forwards past its lanes only then.
    pub fn has_room(&self) -> bool {
        self.transport.has_room()
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

    /// Send a notification once the server's input has room; an error when the server is
    /// gone, so the caller may send it to the restarted one.
    pub async fn notify(&self, method: &str, params: Value) -> Result<()> {
        self.transport.writable().await;
        self.transport.notify(method, params)
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

/// `now + bound`, where an enormous bound (`Duration::MAX` for "no limit") means a century.
pub(super) fn deadline_after(bound: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(bound)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
}
