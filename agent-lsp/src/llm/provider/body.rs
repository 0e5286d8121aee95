//! What one answer may hold, and reading a response body whole within such a cap.
//!
//! The endpoint is not trusted to stop. A server that ignores `stream: true` answers with one
//! JSON body, and `reqwest::Response::bytes` reads that whole, however large: a 1 GB body took
//! `serve` from 82 MB to 3 GB. An endless event stream grew the assembled answer the same way
//! until the total deadline. So every body is read piece by piece against a cap, and the
//! assembled answer (`stream.rs`, `fim.rs`) counts what it keeps against another, and reading
//! stops with [`ProviderError::TooLarge`] as soon as one is passed.
//!
//! The caps are far above any real answer and far below what would hurt. No model writes more
//! than about 128k tokens in one answer (its `max_tokens`), a few bytes each, so a real answer
//! stays under a few MiB; what enters the session of it is at most a quarter of the context
//! window anyway (`agent/bounds.rs` cuts the rest). An inline completion asks for 128 tokens by
//! default and keeps a few lines of them (`completion/edit.rs`).

use reqwest::Response;
use tokio_util::sync::CancellationToken;

use super::Provider;
use super::error::{ProviderError, TimeoutPhase};

/// Most bytes one chat answer may hold: its text, reasoning and tool calls (ids, names and
/// arguments, and `TOOL_CALL_OVERHEAD` each) together, streamed or not. As much as one
/// event of the stream may carry (`sse.rs`), so an endpoint that sends a whole answer as one
/// event is held to the same size. `serve` copies an answer a few times while it streams it
/// into a prompt document (the document, the editor's edits), which is what this bounds.
pub const MAX_ANSWER_BYTES: usize = 8 << 20;
/// What each tool call counts beside its strings, so an endless run of empty calls is bounded
/// too (a call costs about this much to keep).
pub(crate) const TOOL_CALL_OVERHEAD: usize = 64;
/// Most bytes of a one-piece JSON chat answer or of the model list: twice
/// [`MAX_ANSWER_BYTES`], room for JSON's escapes and framing around a whole answer.
pub const MAX_BODY_BYTES: usize = 2 * MAX_ANSWER_BYTES;
/// Most text one fill-in-the-middle completion may hold.
pub const MAX_FIM_TEXT_BYTES: usize = 1 << 20;
/// Most bytes of a one-piece JSON FIM answer.
pub const MAX_FIM_BODY_BYTES: usize = 2 * MAX_FIM_TEXT_BYTES;
/// Most bytes read of an error body: only its message is used, cut to 2,000 characters.
pub(crate) const MAX_ERROR_BODY_BYTES: usize = 64 << 10;

/// What to do with a body longer than its cap.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Cap {
    /// Fail with [`ProviderError::TooLarge`] naming `what` (the body is the answer).
    Refuse { limit: usize, what: &'static str },
    /// Keep the first `limit` bytes (the body only refines a message).
    Truncate { limit: usize },
}

impl Cap {
    fn limit(self) -> usize {
        match self {
            Cap::Refuse { limit, .. } | Cap::Truncate { limit } => limit,
        }
    }
}

impl Provider {
    /// Read a whole body, piece by piece within `cap`, each piece within the idle timeout, and
    /// watching `cancel`.
    pub(crate) async fn read_whole(
        &self,
        mut response: Response,
        cancel: &CancellationToken,
        cap: Cap,
    ) -> Result<Vec<u8>, ProviderError> {
        let limit = cap.limit();
        let announced = response.content_length().unwrap_or(0);
        if let Cap::Refuse { what, .. } = cap
            && announced > limit as u64
        {
            return Err(ProviderError::TooLarge { what, limit });
        }
        let idle = self.config.idle_timeout;
        let mut body = Vec::with_capacity((announced as usize).min(limit));
        loop {
            let piece = tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(ProviderError::Cancelled),
                piece = tokio::time::timeout(idle, response.chunk()) => piece,
            };
            let piece = match piece {
                Err(_elapsed) => {
                    return Err(ProviderError::Timeout {
                        phase: TimeoutPhase::Idle,
                        after: idle,
                    });
                }
                Ok(Err(error)) => {
                    return Err(ProviderError::from_transport(
                        &error,
                        self.config.connect_timeout,
                    ));
                }
                Ok(Ok(None)) => return Ok(body),
                Ok(Ok(Some(piece))) => piece,
            };
            if body.len() + piece.len() > limit {
                return match cap {
                    Cap::Refuse { what, .. } => Err(ProviderError::TooLarge { what, limit }),
                    Cap::Truncate { .. } => {
                        body.extend_from_slice(&piece[..limit - body.len()]);
                        Ok(body)
                    }
                };
            }
            body.extend_from_slice(&piece);
        }
    }
}
