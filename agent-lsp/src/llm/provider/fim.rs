//! Fill-in-the-middle completions: `POST {base}/completions` with `prompt` and `suffix`, as
//! DeepSeek's FIM API (`{base}` = `https://api.deepseek.com/beta`) and OpenAI-compatible
//! `/completions` endpoints that take a `suffix` speak it, streamed as SSE chunks whose
//! `choices[0].text` carries the next piece.
//!
//! It shares the chat client's HTTP client, key, status classification, idle timeout and
//! bounded SSE decoder, and differs where inline completion differs from an agent turn: one
//! attempt and no retries (by the time a retry answered, the person has typed on), and a short
//! total deadline. Dropping the future, or `cancel` firing, drops the connection, which is how
//! a superseded keystroke cancels the HTTP request.

use std::collections::VecDeque;
use std::pin::pin;

use futures_util::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::Provider;
use super::body::{Cap, MAX_FIM_BODY_BYTES, MAX_FIM_TEXT_BYTES};
use super::error::{ProviderError, TimeoutPhase, classify_inline_error};
use super::sse::SseDecoder;
use super::sse::SseEvent;
use super::stream::{BodyError, with_idle_timeout};

/// One FIM request, serialized as the body (keys in this order, always the same bytes for the
/// same request).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FimRequest {
    /// The FIM model.
    pub model: String,
    /// The text before the cursor, grounding comments first.
    pub prompt: String,
    /// The text after the cursor, which the answer must lead into.
    pub suffix: String,
    /// The most tokens the answer may take.
    pub max_tokens: u32,
    /// Always `true`: the text is streamed so a whole suggestion can stop the answer early.
    pub stream: bool,
}

/// The text the model filled in, and why it stopped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FimAnswer {
    /// The text to insert at the cursor, as streamed (before trimming to the syntactic end).
    pub text: String,
    /// The provider's `finish_reason` (`stop`, `length`); `None` when `on_text` stopped the
    /// stream early.
    pub finish_reason: Option<String>,
}

impl Provider {
    /// Send `request` once to `{base_url}/completions` and read the streamed text to its end.
    /// `on_text` sees each piece as it arrives and may stop the stream early by answering
    /// `false` (the rest is not worth waiting for: the suggestion is already whole), which
    /// drops the connection like a cancellation does.
    pub async fn fim(
        &self,
        request: &FimRequest,
        cancel: &CancellationToken,
        mut on_text: impl FnMut(&str) -> bool + Send,
    ) -> Result<FimAnswer, ProviderError> {
        let body = serde_json::to_string(request).expect("a FIM request serializes");
        let url = self.config.endpoint("completions");
        let attempt = async {
            let http = self
                .client
                .post(&url)
                .header(CONTENT_TYPE, "application/json")
                .header(ACCEPT, "text/event-stream")
                .body(body);
            let response = self.send(http, cancel).await?;
            if super::answered_in_one_piece(&response) {
                // The server ignored `stream: true` and answered in one piece.
                let cap = Cap::Refuse {
                    limit: MAX_FIM_BODY_BYTES,
                    what: "in its one-piece JSON completion",
                };
                let bytes = self.read_whole(response, cancel, cap).await?;
                let mut answer = FimAnswer::default();
                take_chunk(
                    &String::from_utf8_lossy(&bytes),
                    &mut answer,
                    MAX_FIM_TEXT_BYTES,
                )?;
                on_text(&answer.text);
                return Ok(answer);
            }
            let connect_timeout = self.config.connect_timeout;
            let bytes = response.bytes_stream().map(move |piece| {
                piece.map_err(|error| {
                    BodyError::Transport(ProviderError::from_transport(&error, connect_timeout))
                })
            });
            let bytes = with_idle_timeout(Box::pin(bytes), self.config.idle_timeout);
            read_fim(bytes, cancel, MAX_FIM_TEXT_BYTES, &mut on_text).await
        };
        match tokio::time::timeout(self.config.total_timeout, attempt).await {
            Ok(answer) => answer,
            Err(_elapsed) => Err(ProviderError::Timeout {
                phase: TimeoutPhase::Total,
                after: self.config.total_timeout,
            }),
        }
    }
}

/// Read the event stream into the answer until `[DONE]`, its end, or `on_text` saying enough;
/// an answer whose text passes `limit` bytes is refused.
async fn read_fim<S, B>(
    body: S,
    cancel: &CancellationToken,
    limit: usize,
    on_text: &mut impl FnMut(&str) -> bool,
) -> Result<FimAnswer, ProviderError>
where
    S: futures_util::Stream<Item = Result<B, BodyError>>,
    B: AsRef<[u8]>,
{
    let mut body = pin!(body);
    let mut decoder = SseDecoder::default();
    let mut events: VecDeque<SseEvent> = VecDeque::new();
    let mut answer = FimAnswer::default();
    let mut done = false;
    loop {
        while let Some(event) = events.pop_front() {
            let data = event.data.trim();
            if data == "[DONE]" {
                done = true;
                break;
            }
            if data.is_empty() {
                continue;
            }
            let before = answer.text.len();
            take_chunk(data, &mut answer, limit)?;
            if answer.text.len() > before && !on_text(&answer.text[before..]) {
                return Ok(answer);
            }
        }
        if done {
            return Ok(answer);
        }
        let next = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(ProviderError::Cancelled),
            next = body.next() => next,
        };
        match next {
            None if answer.finish_reason.is_some() => return Ok(answer),
            None => {
                return Err(ProviderError::Protocol {
                    message: "the stream ended before the completion was finished (no finish_reason and no [DONE])".into(),
                });
            }
            Some(Ok(bytes)) => decoder.push(bytes.as_ref(), &mut events).map_err(|error| {
                ProviderError::Protocol {
                    message: format!("the event stream does not parse: {error}"),
                }
            })?,
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

/// Add one chunk (or a whole answer) to `answer`: `choices[0].text`, and its `finish_reason`;
/// text that would take the answer past `limit` bytes is refused.
fn take_chunk(data: &str, answer: &mut FimAnswer, limit: usize) -> Result<(), ProviderError> {
    let value: Value = serde_json::from_str(data).map_err(|error| ProviderError::Protocol {
        message: format!("a completion chunk is not JSON ({error})"),
    })?;
    if let Some(error) = value.get("error").filter(|error| !error.is_null()) {
        return Err(classify_inline_error(error));
    }
    let Some(choices) = value.get("choices").and_then(Value::as_array) else {
        return Err(ProviderError::Protocol {
            message: "a completion chunk has no `choices`".into(),
        });
    };
    let Some(choice) = choices.first() else {
        // Usage-only chunks carry no choice.
        return Ok(());
    };
    match &choice["text"] {
        Value::String(text) if answer.text.len() + text.len() > limit => {
            return Err(ProviderError::TooLarge {
                what: "of completion text",
                limit,
            });
        }
        Value::String(text) => answer.text.push_str(text),
        Value::Null => {}
        _ => {
            return Err(ProviderError::Protocol {
                message: "`choices[0].text` of a completion chunk is not a string".into(),
            });
        }
    }
    if let Some(reason) = choice["finish_reason"].as_str() {
        answer.finish_reason = Some(reason.to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(stream: &str) -> Result<FimAnswer, ProviderError> {
        read_limited(stream, MAX_FIM_TEXT_BYTES)
    }

    fn read_limited(stream: &str, limit: usize) -> Result<FimAnswer, ProviderError> {
        let pieces: Vec<Result<Vec<u8>, BodyError>> = stream
            .as_bytes()
            .chunks(7)
            .map(|piece| Ok(piece.to_vec()))
            .collect();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(read_fim(
            futures_util::stream::iter(pieces),
            &CancellationToken::new(),
            limit,
            &mut |_| true,
        ))
    }

    #[test]
    fn streamed_text_is_joined_until_done() {
        let stream = "data: {\"choices\":[{\"text\":\"width, \",\"finish_reason\":null}]}\n\n\
                      data: {\"choices\":[{\"text\":\"height)\",\"finish_reason\":\"stop\"}]}\n\n\
                      data: [DONE]\n\n";
        let answer = read(stream).unwrap();
        assert_eq!(answer.text, "width, height)");
        assert_eq!(answer.finish_reason.as_deref(), Some("stop"));
    }

    #[test]
    fn text_past_the_limit_is_refused() {
        let stream = "data: {\"choices\":[{\"text\":\"0123456789\"}]}\n\n".repeat(10);
        assert_eq!(
            read_limited(&stream, 95),
            Err(ProviderError::TooLarge {
                what: "of completion text",
                limit: 95
            })
        );
        assert!(matches!(
            read_limited(&stream, 100),
            Err(ProviderError::Protocol { .. })
        ));
    }

    #[test]
    fn garbage_and_a_cut_stream_are_protocol_errors() {
        assert!(matches!(
            read("data: not json\n\n"),
            Err(ProviderError::Protocol { .. })
        ));
        assert!(matches!(
            read("data: {\"choices\":[{\"text\":\"a\"}]}\n\n"),
            Err(ProviderError::Protocol { .. })
        ));
        assert!(matches!(
            read("data: {\"nothing\":1}\n\n"),
            Err(ProviderError::Protocol { .. })
        ));
    }

    #[test]
    fn the_body_keeps_its_key_order() {
        let request = FimRequest {
            model: "m".into(),
            prompt: "p".into(),
            suffix: "s".into(),
            max_tokens: 64,
            stream: true,
        };
        assert_eq!(
            serde_json::to_string(&request).unwrap(),
            r#"{"model":"m","prompt":"p","suffix":"s","max_tokens":64,"stream":true}"#
        );
    }
}
