//! What the endpoint sends for a served turn: the SSE chunks of a stream or the single
//! `chat.completion` object, written by a task that keeps the scripted pace.
//!
//! The chunk shapes follow DeepSeek's stream: a first chunk with the role, reasoning pieces with
//! `content: null`, content pieces with `reasoning_content: null` (in a turn that reasoned),
//! tool-call fragments keyed by `index` whose first fragment alone has `id`, `type` and the
//! name, a last choice chunk with `finish_reason`, then the usage chunk with `choices: []`, then
//! `data: [DONE]`.

use std::io;
use std::time::Duration;

use axum::body::{Body, Bytes};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{ModelTurn, Usage};

/// Everything a served turn's answer is made of.
pub(super) struct Completion {
    pub id: String,
    pub created: u64,
    pub model: String,
    pub turn: ModelTurn,
    pub call_ids: Vec<String>,
    pub usage: Usage,
    pub finish_reason: &'static str,
}

/// How the chunks are shaped and paced, from the endpoint's configuration.
#[derive(Clone, Copy)]
pub(super) struct Shape {
    pub delta_bytes: usize,
    pub include_usage: bool,
    pub usage_in_finish_chunk: bool,
}

impl Completion {
    fn chunk(&self, choices: Value) -> serde_json::Map<String, Value> {
        let mut chunk = serde_json::Map::new();
        chunk.insert("id".into(), self.id.clone().into());
        chunk.insert("object".into(), "chat.completion.chunk".into());
        chunk.insert("created".into(), self.created.into());
        chunk.insert("model".into(), self.model.clone().into());
        chunk.insert("system_fingerprint".into(), "fp_loopback".into());
        chunk.insert("choices".into(), choices);
        chunk
    }

    fn delta(&self, delta: Value, finish_reason: Option<&str>) -> serde_json::Map<String, Value> {
        self.chunk(json!([{
            "index": 0,
            "delta": delta,
            "logprobs": null,
            "finish_reason": finish_reason,
        }]))
    }

    /// The `data:` payloads of the stream, `[DONE]` last.
    pub fn stream_events(&self, shape: Shape) -> Vec<String> {
        let turn = &self.turn;
        let reasoned = turn.reasoning.is_some();
        let mut events = Vec::new();
        let mut push = |chunk: serde_json::Map<String, Value>| {
            events.push(Value::Object(chunk).to_string());
        };

        let mut first = json!({ "role": "assistant", "content": "" });
        if reasoned {
            first = json!({ "role": "assistant", "content": null, "reasoning_content": "" });
        }
        push(self.delta(first, None));
        for piece in pieces(turn.reasoning.as_deref().unwrap_or(""), shape.delta_bytes) {
            push(self.delta(json!({ "content": null, "reasoning_content": piece }), None));
        }
        for piece in pieces(turn.content.as_deref().unwrap_or(""), shape.delta_bytes) {
            let delta = if reasoned {
                json!({ "content": piece, "reasoning_content": null })
            } else {
                json!({ "content": piece })
            };
            push(self.delta(delta, None));
        }
        for (index, (call, id)) in turn.tool_calls.iter().zip(&self.call_ids).enumerate() {
            let head = json!({ "tool_calls": [{
                "index": index,
                "id": id,
                "type": "function",
                "function": { "name": call.name, "arguments": "" },
            }]});
            push(self.delta(head, None));
            for piece in pieces(&call.arguments, shape.delta_bytes) {
                let fragment = json!({ "tool_calls": [{
                    "index": index,
                    "function": { "arguments": piece },
                }]});
                push(self.delta(fragment, None));
            }
        }
        let mut last = self.delta(json!({ "content": "" }), Some(self.finish_reason));
        if shape.usage_in_finish_chunk {
            last.insert("usage".into(), self.usage.to_json());
        }
        push(last);
        if shape.include_usage && !shape.usage_in_finish_chunk {
            let mut usage = self.chunk(json!([]));
            usage.insert("usage".into(), self.usage.to_json());
            push(usage);
        }
        events.push("[DONE]".into());
        events
    }

    /// The whole answer of a `stream: false` request.
    pub fn object(&self) -> Value {
        let turn = &self.turn;
        let mut message = serde_json::Map::new();
        message.insert("role".into(), "assistant".into());
        message.insert(
            "content".into(),
            turn.content.clone().unwrap_or_default().into(),
        );
        if let Some(reasoning) = &turn.reasoning {
            message.insert("reasoning_content".into(), reasoning.clone().into());
        }
        if !turn.tool_calls.is_empty() {
            let calls = turn
                .tool_calls
                .iter()
                .zip(&self.call_ids)
                .map(|(call, id)| {
                    json!({
                        "id": id,
                        "type": "function",
                        "function": { "name": call.name, "arguments": call.arguments },
                    })
                })
                .collect::<Vec<_>>();
            message.insert("tool_calls".into(), calls.into());
        }
        json!({
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_loopback",
            "choices": [{
                "index": 0,
                "message": message,
                "logprobs": null,
                "finish_reason": self.finish_reason,
            }],
            "usage": self.usage.to_json(),
        })
    }
}

/// `text` cut into pieces of about `size` bytes, never inside a character.
fn pieces(text: &str, size: usize) -> Vec<&str> {
    let size = size.max(1);
    let mut out = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + size).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push(&text[start..end]);
        start = end;
    }
    out
}

/// When and how the frames of a body go out.
pub(super) struct Pacing {
    /// Wait before the first frame. The headers are already out, so keep-alive lines fill it
    /// when `keep_alive_every` is set.
    pub wait: Duration,
    pub chunk_delay: Duration,
    /// `: keep-alive\n\n` for a stream, an empty line for a `stream: false` answer: what
    /// DeepSeek sends while a request waits for the model.
    pub keep_alive_line: &'static str,
    pub keep_alive_every: Option<Duration>,
    /// Send one keep-alive line between every two frames too.
    pub keep_alive_between_frames: bool,
    pub stall_after: Option<usize>,
    pub cut_after: Option<usize>,
}

type Frame = Result<Bytes, io::Error>;

/// A streaming body that a spawned task fills with `frames`, keeping `pacing`.
pub(super) fn paced_body(frames: Vec<String>, pacing: Pacing) -> Body {
    let (sender, receiver) = mpsc::channel::<Frame>(4);
    tokio::spawn(write_frames(sender, frames, pacing));
    body_from(receiver)
}

fn body_from(receiver: mpsc::Receiver<Frame>) -> Body {
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|frame| (frame, receiver))
    });
    Body::from_stream(stream)
}

async fn write_frames(sender: mpsc::Sender<Frame>, frames: Vec<String>, pacing: Pacing) {
    // A send fails once the client has gone; then there is nobody left to write for.
    let send = |text: &str| {
        let sender = sender.clone();
        let bytes = Bytes::copy_from_slice(text.as_bytes());
        async move { sender.send(Ok(bytes)).await.is_ok() }
    };
    match pacing.keep_alive_every {
        Some(every) if !pacing.wait.is_zero() => {
            let deadline = Instant::now() + pacing.wait;
            while Instant::now() < deadline {
                if !send(pacing.keep_alive_line).await {
                    return;
                }
                tokio::time::sleep_until(deadline.min(Instant::now() + every)).await;
            }
        }
        _ => tokio::time::sleep(pacing.wait).await,
    }
    for (number, frame) in frames.iter().enumerate() {
        if pacing.stall_after == Some(number) {
            tracing::debug!(after = number, "model endpoint stalls the body as scripted");
            sender.closed().await;
            return;
        }
        if pacing.cut_after == Some(number) {
            tracing::debug!(after = number, "model endpoint cuts the body as scripted");
            let error = io::Error::new(io::ErrorKind::ConnectionReset, "cut by the script");
            let _ = sender.send(Err(error)).await;
            return;
        }
        if number > 0 {
            if !pacing.chunk_delay.is_zero() {
                tokio::time::sleep(pacing.chunk_delay).await;
            }
            if pacing.keep_alive_between_frames && !send(pacing.keep_alive_line).await {
                return;
            }
        }
        if !send(frame).await {
            return;
        }
    }
}

/// A body for a request the server never starts on: keep-alive lines, forever, until the client
/// goes away.
pub(super) fn keep_alive_forever(line: &'static str, every: Duration) -> Body {
    let (sender, receiver) = mpsc::channel::<Frame>(1);
    tokio::spawn(async move {
        while sender
            .send(Ok(Bytes::from_static(line.as_bytes())))
            .await
            .is_ok()
        {
            tokio::time::sleep(every).await;
        }
    });
    body_from(receiver)
}

/// A body whose first line never ends: the start of a `data:` chunk, then `bytes` bytes of `x`
/// in 64 KiB pieces as fast as the client takes them, then silence until the client goes away.
pub(super) fn huge_line(bytes: usize) -> Body {
    let (sender, receiver) = mpsc::channel::<Frame>(4);
    tokio::spawn(async move {
        let head = r#"data: {"choices":[{"index":0,"delta":{"content":""#;
        if sender
            .send(Ok(Bytes::from_static(head.as_bytes())))
            .await
            .is_err()
        {
            return;
        }
        let block = Bytes::from(vec![b'x'; 64 * 1024]);
        let mut sent = 0;
        while sent < bytes {
            let piece = block.slice(..block.len().min(bytes - sent));
            sent += piece.len();
            if sender.send(Ok(piece)).await.is_err() {
                tracing::debug!(sent, "the client left during the huge line");
                return;
            }
        }
        sender.closed().await;
    });
    body_from(receiver)
}

/// A body made of a head, one piece repeated (`bytes` bytes of it in all, or forever), and a
/// tail: a well-formed answer that is only far too large, or that never ends. Sent as fast as
/// the client reads, without a `Content-Length`, so only reading it tells its size.
pub(crate) struct Repeated {
    /// Whether it is an event stream (else one JSON object).
    pub stream: bool,
    pub head: String,
    pub piece: Bytes,
    /// Bytes of `piece` to send in all (the last one cut), or `None` for ever.
    pub bytes: Option<usize>,
    pub tail: String,
}

impl Repeated {
    /// A one-piece chat answer whose content is `bytes` bytes of `x`.
    pub fn chat_json(bytes: usize) -> Repeated {
        Repeated {
            stream: false,
            head: r#"{"id":"huge","object":"chat.completion","created":0,"model":"deepseek-v4-flash","choices":[{"index":0,"message":{"role":"assistant","content":""#.into(),
            piece: Bytes::from(vec![b'x'; 64 * 1024]),
            bytes: Some(bytes),
            tail: r#""},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#.into(),
        }
    }

    /// A chat event stream of content chunks that never ends.
    pub fn chat_stream() -> Repeated {
        let content = "x".repeat(16 * 1024);
        Repeated {
            stream: true,
            head: String::new(),
            piece: Bytes::from(format!(
                "data: {{\"id\":\"endless\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{content}\"}},\"finish_reason\":null}}]}}\n\n"
            )),
            bytes: None,
            tail: String::new(),
        }
    }

    /// A one-piece FIM answer whose text is `bytes` bytes of `x`.
    pub fn fim_json(bytes: usize) -> Repeated {
        Repeated {
            stream: false,
            head: r#"{"id":"huge","object":"text_completion","created":0,"model":"deepseek-v4-flash","choices":[{"index":0,"text":""#.into(),
            piece: Bytes::from(vec![b'x'; 64 * 1024]),
            bytes: Some(bytes),
            tail: r#"","finish_reason":"stop"}]}"#.into(),
        }
    }

    /// A FIM event stream of text chunks that never ends.
    pub fn fim_stream() -> Repeated {
        let text = "x".repeat(16 * 1024);
        Repeated {
            stream: true,
            head: String::new(),
            piece: Bytes::from(format!(
                "data: {{\"id\":\"endless\",\"object\":\"text_completion\",\"choices\":[{{\"text\":\"{text}\",\"index\":0,\"finish_reason\":null}}]}}\n\n"
            )),
            bytes: None,
            tail: String::new(),
        }
    }

    /// The body, written by a task; `ended` learns whether it was written whole (else the
    /// client left first).
    pub fn body(self, ended: impl FnOnce(bool) + Send + 'static) -> Body {
        let (sender, receiver) = mpsc::channel::<Frame>(4);
        tokio::spawn(async move {
            let send = |bytes: Bytes| {
                let sender = sender.clone();
                async move { sender.send(Ok(bytes)).await.is_ok() }
            };
            if !self.head.is_empty() && !send(Bytes::from(self.head)).await {
                return ended(false);
            }
            let mut sent = 0;
            while self.bytes.is_none_or(|bytes| sent < bytes) {
                let left = self.bytes.map_or(usize::MAX, |bytes| bytes - sent);
                let piece = self.piece.slice(..self.piece.len().min(left));
                sent += piece.len();
                if !send(piece).await {
                    tracing::debug!(sent, "the client left during a repeated body");
                    return ended(false);
                }
            }
            ended(self.tail.is_empty() || send(Bytes::from(self.tail)).await);
        });
        body_from(receiver)
    }
}

#[cfg(test)]
mod tests {
    use super::pieces;

    #[test]
    fn pieces_never_split_a_character() {
        assert_eq!(pieces("abcdef", 4), vec!["abcd", "ef"]);
        assert_eq!(pieces("aé€b", 2), vec!["aé", "€", "b"]);
        assert!(pieces("", 4).is_empty());
    }
}
