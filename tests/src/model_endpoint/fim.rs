//! The endpoint's fill-in-the-middle route: `POST /beta/completions` (DeepSeek's FIM API) and
//! `POST [/v1]/completions` (OpenAI-compatible servers that take a `suffix`).
//!
//! A request must be a JSON object with a non-empty `model` (one of the endpoint's models when
//! it has a list), a string `prompt` and a string `suffix`, an integer `max_tokens` when
//! present and a boolean `stream`; anything else is refused with a 400 and recorded as a
//! violation. A served request is answered from the FIM script ([`ModelEndpoint::push_fim`]),
//! else the standing responder ([`ModelEndpoint::fim_responder`]), streamed in DeepSeek's shape:
//! `data: {"choices":[{"text":…,"index":0,"finish_reason":null}]}` chunks, a last chunk with
//! `finish_reason`, then `data: [DONE]`.
//!
//! Every FIM call is recorded ([`ModelEndpoint::fim_calls`]) with what became of its
//! connection: answered to its end, or dropped by the client before that (a cancelled
//! request), which the endpoint notices because a dropped connection refuses the next write
//! (a stall writes a keep-alive comment every 20 ms for that reason).

use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::request::Rejection;
use super::{Failure, ModelEndpoint, Rule, Shared};

/// One scripted answer to a FIM request.
pub enum FimReply {
    /// The model fills in `text`, streamed in pieces of `delta_bytes`, `chunk_delay` apart.
    Text {
        text: String,
        delta_bytes: usize,
        chunk_delay: Duration,
    },
    /// An error status with DeepSeek's body.
    Failure(Failure),
    /// A 200 event stream whose data is not JSON.
    Garbage,
    /// Headers, then only keep-alive comments until the client gives up.
    Stall,
    /// A one-piece JSON answer whose text is `bytes` bytes of `x`, without a `Content-Length`.
    HugeJson { bytes: usize },
    /// A well-formed event stream of 16 KiB text chunks that never ends.
    Endless,
    /// Chosen when the request arrives, from the request.
    Compute(Box<dyn FnOnce(&FimCall) -> FimReply + Send>),
}

impl FimReply {
    pub fn text(text: impl Into<String>) -> FimReply {
        FimReply::Text {
            text: text.into(),
            delta_bytes: 4,
            chunk_delay: Duration::ZERO,
        }
    }

    /// `text`, one piece of `delta_bytes` every `delay`: a slow model.
    pub fn slow_text(text: impl Into<String>, delta_bytes: usize, delay: Duration) -> FimReply {
        FimReply::Text {
            text: text.into(),
            delta_bytes: delta_bytes.max(1),
            chunk_delay: delay,
        }
    }

    pub fn server_error() -> FimReply {
        FimReply::Failure(Failure::new(500, "Server Error", "server_error"))
    }

    pub fn garbage() -> FimReply {
        FimReply::Garbage
    }

    pub fn stall() -> FimReply {
        FimReply::Stall
    }

    pub fn huge_json(bytes: usize) -> FimReply {
        FimReply::HugeJson { bytes }
    }

    pub fn endless() -> FimReply {
        FimReply::Endless
    }

    pub fn from_fn(reply: impl FnOnce(&FimCall) -> FimReply + Send + 'static) -> FimReply {
        FimReply::Compute(Box::new(reply))
    }
}

/// The standing answer to FIM requests once the script is spent.
pub type FimResponder = Arc<dyn Fn(&FimCall) -> FimReply + Send + Sync>;

/// A FIM request that passed the rules, and what became of its connection.
#[derive(Clone, Debug)]
pub struct FimCall {
    /// Position in [`ModelEndpoint::requests`].
    pub index: usize,
    pub path: String,
    pub body: Value,
    pub model: String,
    pub prompt: String,
    pub suffix: String,
    pub max_tokens: Option<u64>,
    pub stream: bool,
    /// The whole answer was written.
    pub finished: bool,
    /// The client closed the connection before the answer's end.
    pub dropped: bool,
}

/// What the route answers, decided under the lock.
pub(super) enum FimPlan {
    Json {
        status: u16,
        body: Value,
    },
    Stream {
        call: usize,
        frames: Vec<String>,
        chunk_delay: Duration,
    },
    Stall {
        call: usize,
    },
    Repeated {
        call: usize,
        repeated: super::response::Repeated,
    },
}

/// Check a FIM request against the rules and spend a reply on it.
pub(super) fn plan(
    shared: &Shared,
    index: usize,
    path: &str,
    raw: &[u8],
) -> Result<FimPlan, Rejection> {
    let invalid = |rule: Rule, message: &str, detail: String| Rejection {
        status: 400,
        rule,
        error_type: "invalid_request_error",
        message: message.to_owned(),
        detail,
    };
    let body: Value = serde_json::from_slice(raw).map_err(|error| {
        invalid(
            Rule::MalformedJson,
            "Failed to parse the request body as JSON",
            error.to_string(),
        )
    })?;
    let model = body["model"].as_str().unwrap_or_default().to_owned();
    if model.is_empty() {
        return Err(invalid(
            Rule::InvalidBody,
            "Missing `model`",
            format!("body: {body}"),
        ));
    }
    let models = &shared.config.models;
    if !models.is_empty() && !models.contains(&model) {
        return Err(invalid(
            Rule::UnknownModel,
            "Model Not Exist",
            format!("model `{model}`"),
        ));
    }
    let (Some(prompt), Some(suffix)) = (body["prompt"].as_str(), body["suffix"].as_str()) else {
        return Err(invalid(
            Rule::InvalidBody,
            "`prompt` and `suffix` must be strings",
            format!("body: {body}"),
        ));
    };
    if !body["max_tokens"].is_null() && !body["max_tokens"].is_u64() {
        return Err(invalid(
            Rule::InvalidBody,
            "`max_tokens` must be an integer",
            format!("body: {body}"),
        ));
    }
    if !body["stream"].is_null() && !body["stream"].is_boolean() {
        return Err(invalid(
            Rule::InvalidBody,
            "`stream` must be a boolean",
            format!("body: {body}"),
        ));
    }
    let call = FimCall {
        index,
        path: path.to_owned(),
        model: model.clone(),
        prompt: prompt.to_owned(),
        suffix: suffix.to_owned(),
        max_tokens: body["max_tokens"].as_u64(),
        stream: body["stream"].as_bool().unwrap_or(false),
        body: body.clone(),
        finished: false,
        dropped: false,
    };
    let (mut reply, number) = {
        let mut state = shared.lock();
        let reply = state.fim_script.pop_front();
        let responder = state.fim_responder.clone();
        state.fim_calls.push(call.clone());
        let number = state.fim_calls.len() - 1;
        match (reply, responder) {
            (Some(reply), _) => (reply, number),
            (None, Some(responder)) => (FimReply::from_fn(move |call| responder(call)), number),
            (None, None) => {
                return Err(Rejection {
                    status: 500,
                    rule: Rule::ScriptExhausted,
                    error_type: "server_error",
                    message: format!(
                        "loopback model endpoint: no FIM reply left for request #{index}"
                    ),
                    detail: "FIM script exhausted".into(),
                });
            }
        }
    };
    while let FimReply::Compute(compute) = reply {
        reply = compute(&call);
    }
    Ok(match reply {
        FimReply::Failure(failure) => FimPlan::Json {
            status: failure.status,
            body: failure.body,
        },
        FimReply::Garbage => FimPlan::Stream {
            call: number,
            frames: vec!["data: <html>502 Bad Gateway</html>\n\n".into()],
            chunk_delay: Duration::ZERO,
        },
        FimReply::Stall => FimPlan::Stall { call: number },
        FimReply::HugeJson { bytes } => FimPlan::Repeated {
            call: number,
            repeated: super::response::Repeated::fim_json(bytes),
        },
        FimReply::Endless => FimPlan::Repeated {
            call: number,
            repeated: super::response::Repeated::fim_stream(),
        },
        FimReply::Text {
            text,
            delta_bytes,
            chunk_delay,
        } => FimPlan::Stream {
            call: number,
            frames: frames(index, &model, &text, delta_bytes),
            chunk_delay,
        },
        FimReply::Compute(_) => unreachable!("resolved above"),
    })
}

/// The `data:` frames of a streamed FIM answer.
fn frames(index: usize, model: &str, text: &str, delta_bytes: usize) -> Vec<String> {
    let chunk = |text: &str, finish: Option<&str>| {
        let chunk = json!({
            "id": format!("fim-{index}"),
            "object": "text_completion",
            "created": 0,
            "model": model,
            "choices": [{"text": text, "index": 0, "logprobs": null, "finish_reason": finish}],
        });
        format!("data: {chunk}\n\n")
    };
    let mut frames = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut cut = delta_bytes.min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        frames.push(chunk(&rest[..cut], None));
        rest = &rest[cut..];
    }
    frames.push(chunk("", Some("stop")));
    frames.push("data: [DONE]\n\n".into());
    frames
}

type Frame = Result<Bytes, io::Error>;

/// The route's answer, recording how its connection ended.
pub(super) fn answer(shared: Arc<Shared>, plan: FimPlan) -> axum::response::Response {
    use axum::http::header;
    let (status, content_type, body) = match plan {
        FimPlan::Json { status, body } => {
            (status, "application/json", Body::from(body.to_string()))
        }
        FimPlan::Stream {
            call,
            frames,
            chunk_delay,
        } => {
            let (sender, receiver) = mpsc::channel::<Frame>(1);
            tokio::spawn(async move {
                for (number, frame) in frames.into_iter().enumerate() {
                    if number > 0 && !chunk_delay.is_zero() {
                        tokio::time::sleep(chunk_delay).await;
                    }
                    if sender.send(Ok(Bytes::from(frame))).await.is_err() {
                        mark(&shared, call, |call| call.dropped = true);
                        return;
                    }
                }
                mark(&shared, call, |call| call.finished = true);
            });
            (200, "text/event-stream; charset=utf-8", body_from(receiver))
        }
        FimPlan::Stall { call } => {
            let (sender, receiver) = mpsc::channel::<Frame>(1);
            tokio::spawn(async move {
                while sender
                    .send(Ok(Bytes::from_static(b": keep-alive\n\n")))
                    .await
                    .is_ok()
                {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                mark(&shared, call, |call| call.dropped = true);
            });
            (200, "text/event-stream; charset=utf-8", body_from(receiver))
        }
        FimPlan::Repeated { call, repeated } => {
            let content_type = if repeated.stream {
                "text/event-stream; charset=utf-8"
            } else {
                "application/json"
            };
            let body = repeated.body(move |finished| {
                mark(&shared, call, |call| {
                    call.finished = finished;
                    call.dropped = !finished;
                });
            });
            (200, content_type, body)
        }
    };
    axum::response::Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, content_type)
        .body(body)
        .expect("a FIM response builds")
}

fn mark(shared: &Shared, call: usize, change: impl FnOnce(&mut FimCall)) {
    if let Some(call) = shared.lock().fim_calls.get_mut(call) {
        change(call);
    }
}

fn body_from(receiver: mpsc::Receiver<Frame>) -> Body {
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|frame| (frame, receiver))
    });
    Body::from_stream(stream)
}

impl ModelEndpoint {
    /// Queue a reply for the next FIM request that passes the rules.
    pub fn push_fim(&self, reply: FimReply) {
        self.shared.lock().fim_script.push_back(reply);
    }

    /// Answer every FIM request the script does not with `responder`.
    pub fn fim_responder(&self, responder: FimResponder) {
        self.shared.lock().fim_responder = Some(responder);
    }

    /// The FIM requests that passed the rules, in order, with how each connection ended.
    pub fn fim_calls(&self) -> Vec<FimCall> {
        self.shared.lock().fim_calls.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::frames;

    #[test]
    fn frames_carry_the_text_in_pieces_then_stop_and_done() {
        let frames = frames(3, "m", "aé€b", 2);
        let texts: Vec<String> = frames
            .iter()
            .filter_map(|frame| frame.strip_prefix("data: "))
            .filter_map(|data| serde_json::from_str::<serde_json::Value>(data.trim()).ok())
            .map(|chunk| chunk["choices"][0]["text"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(texts.concat(), "aé€b");
        assert!(frames[frames.len() - 2].contains("\"finish_reason\":\"stop\""));
        assert_eq!(frames.last().unwrap(), "data: [DONE]\n\n");
    }
}
