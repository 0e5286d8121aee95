//! Reading a streamed body: the idle timeout on its bytes, and the SSE events it carries handed
//! to the [`Assembler`] one by one, with the turn's cancellation watched between pieces.
//!
//! Apart from the assembler, which is pure, because this is the part that waits: on the network,
//! on the idle timer and on the cancellation token.

use std::collections::VecDeque;
use std::pin::pin;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::super::error::{ProviderError, TimeoutPhase, classify_inline_error};
use super::super::sse::{SseDecoder, SseEvent};
use super::{Assembler, Flow, StreamDelta};

/// What can interrupt the body's bytes before SSE parsing sees them.
#[derive(Debug)]
pub(crate) enum BodyError {
    Idle(Duration),
    Transport(ProviderError),
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::Idle(after) => write!(f, "no data for {after:?}"),
            BodyError::Transport(error) => error.fmt(f),
        }
    }
}

/// Wrap a body so that a gap of more than `idle` between two pieces of bytes ends it with
/// [`BodyError::Idle`]. The timeout is on bytes, not on parsed events, so the keep-alive
/// comments a queued request receives count as life.
pub(crate) fn with_idle_timeout<S, B>(
    body: S,
    idle: Duration,
) -> impl Stream<Item = Result<B, BodyError>>
where
    S: Stream<Item = Result<B, BodyError>> + Unpin,
{
    futures_util::stream::unfold(Some(body), move |body| async move {
        let mut body = body?;
        match tokio::time::timeout(idle, body.next()).await {
            Ok(Some(item)) => Some((item, Some(body))),
            Ok(None) => None,
            // Yield the error, then end the stream.
            Err(_) => Some((Err(BodyError::Idle(idle)), None)),
        }
    })
}

/// Read an SSE body to its end into `assembler`, honouring `cancel` between every piece.
pub(crate) async fn read_sse<S, B>(
    body: S,
    assembler: &mut Assembler,
    cancel: &CancellationToken,
    on_delta: &mut impl FnMut(StreamDelta),
) -> Result<(), ProviderError>
where
    S: Stream<Item = Result<B, BodyError>>,
    B: AsRef<[u8]>,
{
    let mut body = pin!(body);
    let mut decoder = SseDecoder::default();
    let mut events = VecDeque::new();
    loop {
        while let Some(event) = events.pop_front() {
            if take_event(event, assembler, on_delta)? == Flow::Done {
                tracing::trace!("stream finished with [DONE]");
                return Ok(());
            }
        }
        let next = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(ProviderError::Cancelled),
            next = body.next() => next,
        };
        match next {
            None => return Ok(()),
            Some(Ok(bytes)) => {
                decoder.push(bytes.as_ref(), &mut events).map_err(|error| {
                    ProviderError::Protocol {
                        message: format!("the event stream does not parse: {error}"),
                    }
                })?;
            }
            Some(Err(BodyError::Idle(after))) => {
                return Err(ProviderError::Timeout {
                    phase: TimeoutPhase::Idle,
                    after,
                });
            }
            Some(Err(BodyError::Transport(error))) => return Err(error),
        }
    }
}

/// Hand one decoded event to the assembler; an `error` event is the endpoint's error.
fn take_event(
    event: SseEvent,
    assembler: &mut Assembler,
    on_delta: &mut impl FnMut(StreamDelta),
) -> Result<Flow, ProviderError> {
    if event.event == "error" {
        let value = serde_json::from_str::<Value>(&event.data)
            .unwrap_or_else(|_| Value::String(event.data.clone()));
        let error = value.get("error").cloned().unwrap_or(value);
        return Err(classify_inline_error(&error));
    }
    assembler.push_data(&event.data, on_delta)
}
