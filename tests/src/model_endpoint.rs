//! A loopback DeepSeek-compatible chat-completions endpoint for tests: scripted replies, the API's
//! request rules enforced, every request and violation recorded.
//!
//! The agent talks to this exactly as it talks to DeepSeek: real HTTP on `127.0.0.1`, the
//! OpenAI/DeepSeek wire format, SSE streaming. The endpoint refuses what the real API refuses
//! (HTTP 400 with DeepSeek's error body and, where we know it, DeepSeek's wording), so an e2e test
//! that passes here does not meet a 400 in production:
//!
//! - every assistant `tool_calls` answered by tool messages directly after it;
//! - no tool message without the call it answers;
//! - in thinking mode, `reasoning_content` on every assistant message with tool calls;
//! - prompt plus `max_tokens` within the context window (tokens counted by the endpoint's own
//!   rule, below);
//! - a well-formed body with a known model and at least one message;
//! - `Authorization: Bearer <key>` when a key is configured.
//!
//! These checks run before a scripted reply is spent, and each refusal is recorded as a
//! [`Violation`], so a test ends with [`ModelEndpoint::assert_no_violations`] (dropping an endpoint
//! with violations nobody looked at panics). Every request is recorded raw and parsed
//! ([`ModelEndpoint::requests`]), and served requests carry the [`Usage`] the endpoint reported,
//! including the simulated prefix-cache hit.
//!
//! The fill-in-the-middle route (`POST /beta/completions`, `POST [/v1]/completions`) that inline
//! completion uses has rules, a script and records of its own (`model_endpoint/fim.rs`).
//!
//! ```ignore
//! let endpoint = ModelEndpoint::start(EndpointConfig::default())?;
//! endpoint.push(ModelTurn::new().reasoning("look first").tool_call("read", r#"{"path":"a"}"#));
//! endpoint.push(Reply::from_fn(|request| {
//!     let text = request.tool_result_text();
//!     Reply::text(format!("the file says {text}"))
//! }));
//! // ... point the agent at endpoint.base_url() and run a turn ...
//! endpoint.assert_no_violations();
//! assert_eq!(endpoint.chat_requests()[1].usage.as_ref().unwrap().prompt_cache_hit_tokens, 64);
//! ```
//!
//! Tokens: each message costs [`MESSAGE_FRAME`] tokens, and each field it carries (`content`,
//! `reasoning_content`, `tool_call_id`, each call's name and arguments) one marker token plus
//! [`text_tokens`] (`ceil(bytes / 4)`) of its text; each tool definition one marker plus
//! `text_tokens` of its compact sorted-key JSON. The prompt is laid out as leading system
//! messages, tools, then the other messages, so a growing history keeps its token prefix, and the
//! cache hit is the longest common prefix with an earlier served prompt in whole
//! [`CACHE_BLOCK`]s of 64 (`tests/src/model_endpoint/prompt.rs` has the details).
//!
//! The server runs on its own thread with its own runtime, so it serves sync tests and tests on any
//! runtime alike, and a test that blocks its own runtime does not block the endpoint.

mod fim;
mod prompt;
mod request;
mod response;

use std::collections::VecDeque;
use std::fmt;
use std::future::IntoFuture;
use std::net::{Ipv4Addr, SocketAddr};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::oneshot;

pub use fim::{FimCall, FimReply, FimResponder};
pub use prompt::{CACHE_BLOCK, MESSAGE_FRAME, text_tokens};

use request::{Rejection, error_body};
use response::{Completion, Pacing, Shape};

/// How the endpoint behaves; every field has a builder method of the same name.
#[derive(Clone, Debug)]
pub struct EndpointConfig {
    /// Model ids that `/models` lists and chat requests may name; another model gets DeepSeek's
    /// 400 `Model Not Exist`. Empty accepts any model (and lists none).
    pub models: Vec<String>,
    /// Context window in tokens of this endpoint's tokenizer (see the module documentation).
    pub context_window: u64,
    /// When set, every request must carry `Authorization: Bearer <api_key>`, or gets a 401.
    pub api_key: Option<String>,
    /// Whether a request without a `thinking` field is in thinking mode. DeepSeek's V4 models
    /// think by default; the default here is `false`, so that only a request that asks for
    /// thinking is held to the reasoning-passback rule.
    pub thinking_by_default: bool,
    /// In thinking mode, also require `reasoning_content` on the assistant messages without tool
    /// calls in a user-to-user stretch that used tools. DeepSeek's guide asks clients to pass
    /// those back; whether the API refuses a request that does not is unknown, so it is off by
    /// default.
    pub reasoning_in_tool_stretches: bool,
    /// While a reply waits (`ModelTurn::first_byte_delay`, `Reply::hang`), send the headers at
    /// once and then a keep-alive line at this interval, as DeepSeek does while a request is
    /// queued: `: keep-alive` comments in a stream, empty lines in a `stream: false` answer.
    /// Without it the wait happens before the headers.
    pub keep_alive: Option<Duration>,
    /// Put a keep-alive line between every two frames of every answer, to check that the client
    /// skips them.
    pub keep_alive_between_chunks: bool,
    /// Streamed text (reasoning, content, tool-call arguments) is cut into pieces of about this
    /// many bytes, one chunk each.
    pub delta_bytes: usize,
    /// Put `usage` on the chunk with `finish_reason` instead of a separate chunk with empty
    /// `choices` after it (both shapes occur in OpenAI-compatible servers).
    pub usage_in_finish_chunk: bool,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        EndpointConfig {
            models: vec!["deepseek-v4-flash".into(), "deepseek-v4-pro".into()],
            context_window: 1_048_576,
            api_key: None,
            thinking_by_default: false,
            reasoning_in_tool_stretches: false,
            keep_alive: None,
            keep_alive_between_chunks: false,
            delta_bytes: 16,
            usage_in_finish_chunk: false,
        }
    }
}

impl EndpointConfig {
    pub fn models<S: Into<String>>(mut self, models: impl IntoIterator<Item = S>) -> Self {
        self.models = models.into_iter().map(Into::into).collect();
        self
    }

    pub fn context_window(mut self, tokens: u64) -> Self {
        self.context_window = tokens;
        self
    }

    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    pub fn thinking_by_default(mut self, on: bool) -> Self {
        self.thinking_by_default = on;
        self
    }

    pub fn reasoning_in_tool_stretches(mut self, on: bool) -> Self {
        self.reasoning_in_tool_stretches = on;
        self
    }

    pub fn keep_alive(mut self, every: Duration) -> Self {
        self.keep_alive = Some(every);
        self
    }

    pub fn keep_alive_between_chunks(mut self, on: bool) -> Self {
        self.keep_alive_between_chunks = on;
        self
    }

    pub fn delta_bytes(mut self, bytes: usize) -> Self {
        self.delta_bytes = bytes.max(1);
        self
    }

    pub fn usage_in_finish_chunk(mut self, on: bool) -> Self {
        self.usage_in_finish_chunk = on;
        self
    }
}

/// Picks the reply to a request from the request ([`ModelEndpoint::route`]).
pub type Route = std::sync::Arc<dyn Fn(&ChatRequest) -> Reply + Send + Sync>;

/// One scripted answer to the next chat request that passes the rules.
pub enum Reply {
    /// The model answers.
    Turn(ModelTurn),
    /// The API answers with an error status.
    Failure(Failure),
    /// The request is never answered: no byte at all, or only keep-alive lines when
    /// [`EndpointConfig::keep_alive`] is set, until the client gives up.
    Hang,
    /// A stream whose first line never ends: `data: {"choices":[{"delta":{"content":"` and
    /// then `bytes` bytes of `x` as fast as the client reads them, without a line break, and
    /// then silence until the client gives up (a broken or hostile server).
    HugeLine { bytes: usize },
    /// A one-piece JSON answer (`application/json`, as a server that ignores `stream: true`
    /// sends) whose `content` is `bytes` bytes of `x`, sent as fast as the client reads it,
    /// without a `Content-Length`: well-formed, only far too large.
    HugeJson { bytes: usize },
    /// A well-formed event stream that never ends: content chunks of 16 KiB of `x`, as fast as
    /// the client reads them, until the client gives up.
    Endless,
    /// The reply is chosen when the request arrives, from the parsed request (for instance from
    /// the tool results it carries). It runs on the endpoint's thread; a panic in it becomes a
    /// 500 and a [`Rule::ReplyPanicked`] violation.
    Compute(Box<dyn FnOnce(&ChatRequest) -> Reply + Send>),
}

impl Reply {
    /// A turn that only answers `text`.
    pub fn text(text: impl Into<String>) -> Reply {
        ModelTurn::new().content(text).into()
    }

    /// A turn that makes one tool call.
    pub fn tool_call(name: impl Into<String>, arguments: impl Into<String>) -> Reply {
        ModelTurn::new().tool_call(name, arguments).into()
    }

    pub fn from_fn(reply: impl FnOnce(&ChatRequest) -> Reply + Send + 'static) -> Reply {
        Reply::Compute(Box::new(reply))
    }

    pub fn hang() -> Reply {
        Reply::Hang
    }

    pub fn huge_line(bytes: usize) -> Reply {
        Reply::HugeLine { bytes }
    }

    pub fn huge_json(bytes: usize) -> Reply {
        Reply::HugeJson { bytes }
    }

    pub fn endless() -> Reply {
        Reply::Endless
    }

    /// 429, with `Retry-After: seconds` when given.
    pub fn rate_limited(retry_after_seconds: Option<u64>) -> Reply {
        let failure = Failure::new(429, "Rate Limit Reached", "rate_limit_error");
        match retry_after_seconds {
            Some(seconds) => failure.header("retry-after", seconds.to_string()).into(),
            None => failure.into(),
        }
    }

    /// 503, DeepSeek's "Server Overloaded".
    pub fn overloaded() -> Reply {
        Failure::new(503, "Server Overloaded", "server_error").into()
    }

    /// 500, DeepSeek's "Server Error".
    pub fn server_error() -> Reply {
        Failure::new(500, "Server Error", "server_error").into()
    }

    /// 401 as DeepSeek words it for an unknown key, showing the key's last four characters.
    pub fn auth_failed(key_tail: &str) -> Reply {
        let message = format!("Authentication Fails, Your api key: ****{key_tail} is invalid");
        Failure::new(401, &message, "authentication_error").into()
    }

    /// 402, DeepSeek's `Insufficient Balance` (it types this error `unknown_error`).
    pub fn insufficient_balance() -> Reply {
        Failure::new(402, "Insufficient Balance", "unknown_error").into()
    }
}

impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Turn(turn) => f.debug_tuple("Turn").field(turn).finish(),
            Reply::Failure(failure) => f.debug_tuple("Failure").field(failure).finish(),
            Reply::Hang => f.write_str("Hang"),
            Reply::HugeLine { bytes } => write!(f, "HugeLine({bytes})"),
            Reply::HugeJson { bytes } => write!(f, "HugeJson({bytes})"),
            Reply::Endless => f.write_str("Endless"),
            Reply::Compute(_) => f.write_str("Compute(..)"),
        }
    }
}

/// A model turn: what it says and how it is paced on the wire. Build it with the methods.
#[derive(Clone, Debug, Default)]
pub struct ModelTurn {
    pub reasoning: Option<String>,
    pub content: Option<String>,
    pub tool_calls: Vec<ScriptedCall>,
    /// `stop`, `tool_calls` or `length`; by default `tool_calls` when the turn makes calls,
    /// `stop` otherwise.
    pub finish_reason: Option<String>,
    /// Reported `completion_tokens`; by default counted with [`text_tokens`] over the reasoning,
    /// the content and each call's name and arguments.
    pub completion_tokens: Option<u64>,
    /// Wait before the first byte of the answer (see [`EndpointConfig::keep_alive`]).
    pub first_byte_delay: Duration,
    /// Wait between two chunks of the answer.
    pub chunk_delay: Duration,
    /// Send this many frames (`data:` lines, `[DONE]` included), then stall silently until the
    /// client gives up.
    pub stall_after: Option<usize>,
    /// Send this many frames, then break the connection.
    pub cut_after: Option<usize>,
}

/// A tool call the scripted model makes. Without an id the endpoint makes one up:
/// `call_{index:02}_r{request}` (for instance `call_00_r3`), stable from run to run.
#[derive(Clone, Debug)]
pub struct ScriptedCall {
    pub id: Option<String>,
    pub name: String,
    pub arguments: String,
}

impl ModelTurn {
    pub fn new() -> Self {
        ModelTurn::default()
    }

    pub fn reasoning(mut self, text: impl Into<String>) -> Self {
        self.reasoning = Some(text.into());
        self
    }

    pub fn content(mut self, text: impl Into<String>) -> Self {
        self.content = Some(text.into());
        self
    }

    /// A step of a thinking-mode model (the built-in presets' models think) that calls one
    /// tool: `Next.` as its reasoning, then the call.
    pub fn thinking_call(name: &str, arguments: serde_json::Value) -> Self {
        ModelTurn::new()
            .reasoning("Next.")
            .tool_call(name, arguments.to_string())
    }

    pub fn tool_call(mut self, name: impl Into<String>, arguments: impl Into<String>) -> Self {
        self.tool_calls.push(ScriptedCall {
            id: None,
            name: name.into(),
            arguments: arguments.into(),
        });
        self
    }

    pub fn tool_call_with_id(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        self.tool_calls.push(ScriptedCall {
            id: Some(id.into()),
            name: name.into(),
            arguments: arguments.into(),
        });
        self
    }

    pub fn finish_reason(mut self, reason: impl Into<String>) -> Self {
        self.finish_reason = Some(reason.into());
        self
    }

    pub fn completion_tokens(mut self, tokens: u64) -> Self {
        self.completion_tokens = Some(tokens);
        self
    }

    pub fn first_byte_delay(mut self, delay: Duration) -> Self {
        self.first_byte_delay = delay;
        self
    }

    pub fn chunk_delay(mut self, delay: Duration) -> Self {
        self.chunk_delay = delay;
        self
    }

    pub fn stall_after(mut self, frames: usize) -> Self {
        self.stall_after = Some(frames);
        self
    }

    pub fn cut_after(mut self, frames: usize) -> Self {
        self.cut_after = Some(frames);
        self
    }
}

impl From<ModelTurn> for Reply {
    fn from(turn: ModelTurn) -> Reply {
        Reply::Turn(turn)
    }
}

/// An error answer: status, JSON body, extra headers, and a delay before it goes out.
#[derive(Clone, Debug)]
pub struct Failure {
    pub status: u16,
    pub body: Value,
    pub headers: Vec<(String, String)>,
    pub delay: Duration,
}

impl Failure {
    /// An error with DeepSeek's body shape.
    pub fn new(status: u16, message: &str, error_type: &str) -> Self {
        Failure::with_body(status, error_body(message, error_type))
    }

    /// An error with any body.
    pub fn with_body(status: u16, body: Value) -> Self {
        Failure {
            status,
            body,
            headers: vec![],
            delay: Duration::ZERO,
        }
    }

    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

impl From<Failure> for Reply {
    fn from(failure: Failure) -> Reply {
        Reply::Failure(failure)
    }
}

/// A chat request that passed the rules, as a [`Reply::from_fn`] closure sees it.
#[derive(Clone, Debug)]
pub struct ChatRequest {
    /// Position in [`ModelEndpoint::requests`].
    pub index: usize,
    /// The whole body as received.
    pub body: Value,
    pub model: String,
    pub stream: bool,
    /// `stream_options.include_usage`.
    pub include_usage: bool,
    /// Thinking mode: `thinking.type == "enabled"`, or [`EndpointConfig::thinking_by_default`]
    /// when the field is absent.
    pub thinking: bool,
    pub max_tokens: Option<u64>,
    pub messages: Vec<ChatMessage>,
    /// The prompt's tokens by this endpoint's tokenizer.
    pub prompt_tokens: u64,
}

/// One message of a request; absent and null fields are `None`.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatMessage {
    pub role: String,
    pub content: Option<String>,
    pub reasoning_content: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub tool_call_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

impl ChatRequest {
    /// The names of the tools in the request's catalog, in catalog order.
    pub fn tool_names(&self) -> Vec<String> {
        self.body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|tool| tool["function"]["name"].as_str().map(str::to_owned))
            .collect()
    }

    /// The request's system message.
    pub fn system_text(&self) -> Option<&str> {
        self.messages
            .iter()
            .find(|message| message.role == "system")
            .and_then(|message| message.content.as_deref())
    }

    /// The content of the tool message answering `call_id`.
    pub fn tool_result(&self, call_id: &str) -> Option<&str> {
        self.messages
            .iter()
            .find(|message| {
                message.role == "tool" && message.tool_call_id.as_deref() == Some(call_id)
            })
            .and_then(|message| message.content.as_deref())
    }

    /// The run of tool messages at the end of the history: the results the model is to read now.
    pub fn trailing_tool_results(&self) -> Vec<&ChatMessage> {
        let tail = self
            .messages
            .iter()
            .rev()
            .take_while(|message| message.role == "tool")
            .count();
        self.messages[self.messages.len() - tail..].iter().collect()
    }

    /// The text of the first tool result the request ends with (empty when it has none).
    pub fn tool_result_text(&self) -> String {
        self.trailing_tool_results()
            .first()
            .and_then(|message| message.content.clone())
            .unwrap_or_default()
    }

    /// The text of the first user message: the prompt a session started with.
    pub fn first_user_text(&self) -> Option<&str> {
        self.messages
            .iter()
            .find(|message| message.role == "user")
            .and_then(|message| message.content.as_deref())
    }

    /// The answers the history holds: the step (from 0) the request is for in a one-turn
    /// session.
    pub fn answers(&self) -> usize {
        self.messages
            .iter()
            .filter(|message| message.role == "assistant")
            .count()
    }

    /// The text of the last user message.
    pub fn last_user_text(&self) -> Option<&str> {
        self.messages
            .iter()
            .rev()
            .find(|message| message.role == "user")
            .and_then(|message| message.content.as_deref())
    }
}

/// Token figures of a served request, as reported in its `usage`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    /// Prompt tokens served from the simulated prefix cache (whole 64-token blocks).
    pub prompt_cache_hit_tokens: u64,
    pub prompt_cache_miss_tokens: u64,
    /// The part of `completion_tokens` spent on reasoning.
    pub reasoning_tokens: u64,
}

impl Usage {
    /// The `usage` object as DeepSeek sends it, with OpenAI's detail objects alongside.
    pub fn to_json(&self) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "prompt_cache_hit_tokens": self.prompt_cache_hit_tokens,
            "prompt_cache_miss_tokens": self.prompt_cache_miss_tokens,
            "prompt_tokens_details": { "cached_tokens": self.prompt_cache_hit_tokens },
            "completion_tokens_details": { "reasoning_tokens": self.reasoning_tokens },
        })
    }
}

/// One HTTP request the endpoint received, whatever became of it.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    pub index: usize,
    pub method: String,
    /// The path as requested (`/v1/chat/completions` or `/chat/completions`, ...).
    pub path: String,
    pub headers: Vec<(String, String)>,
    /// The body, byte for byte.
    pub raw: Vec<u8>,
    /// The body parsed as JSON, when it is JSON.
    pub body: Option<Value>,
    /// The status answered.
    pub status: u16,
    /// What the endpoint reported for a served chat turn.
    pub usage: Option<Usage>,
}

impl RecordedRequest {
    pub fn is_chat(&self) -> bool {
        self.path.trim_start_matches("/v1").trim_end_matches('/') == "/chat/completions"
    }
}

/// The rule a request broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// 401: missing or wrong `Authorization` while an API key is configured.
    Authentication,
    /// 400: the body is not JSON.
    MalformedJson,
    /// 400: the JSON does not have the request's shape (missing `model`, wrong types, ...).
    InvalidBody,
    /// 400: `messages` is empty.
    EmptyMessages,
    /// 400: the model is not one of [`EndpointConfig::models`].
    UnknownModel,
    /// 400: an assistant message's tool calls are not all answered right after it.
    MissingToolResults,
    /// 400: a tool message answers no open call.
    OrphanToolResult,
    /// 400: thinking mode, and an assistant message that needs `reasoning_content` lacks it.
    MissingReasoningContent,
    /// 400: the prompt plus `max_tokens` exceeds the context window.
    ContextLength,
    /// 404: no such route.
    UnknownRoute,
    /// 500: a chat request arrived after the last scripted reply was spent.
    ScriptExhausted,
    /// 500: a [`Reply::from_fn`] closure panicked.
    ReplyPanicked,
}

/// A refused request: which rule, and what was answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Position in [`ModelEndpoint::requests`].
    pub request: usize,
    pub rule: Rule,
    pub status: u16,
    /// The error message sent to the client, verbatim.
    pub message: String,
    /// What exactly was wrong (not sent).
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "request #{} broke {:?} (HTTP {}): {} [{}]",
            self.request, self.rule, self.status, self.message, self.detail
        )
    }
}

/// The running endpoint. Dropping it stops the server, and panics if violations were recorded
/// that no test looked at (through [`violations`](Self::violations),
/// [`take_violations`](Self::take_violations) or
/// [`assert_no_violations`](Self::assert_no_violations)).
pub struct ModelEndpoint {
    address: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    config: EndpointConfig,
    state: Mutex<EndpointState>,
}

#[derive(Default)]
struct EndpointState {
    script: VecDeque<Reply>,
    requests: Vec<RecordedRequest>,
    violations: Vec<Violation>,
    /// How many of `violations` a test has seen.
    acknowledged: usize,
    cache: prompt::PrefixCache,
    /// The FIM route's script, its standing responder, and its calls (`fim.rs`).
    fim_script: VecDeque<FimReply>,
    fim_responder: Option<FimResponder>,
    fim_calls: Vec<FimCall>,
}

impl Shared {
    /// The state, even after a panic elsewhere: the records are what a failing test needs most.
    fn lock(&self) -> MutexGuard<'_, EndpointState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ModelEndpoint {
    /// Bind `127.0.0.1` on a free port and serve on a new thread.
    pub fn start(config: EndpointConfig) -> anyhow::Result<ModelEndpoint> {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .context("bind the loopback model endpoint")?;
        listener.set_nonblocking(true)?;
        let address = listener.local_addr()?;
        let shared = Arc::new(Shared {
            config,
            state: Mutex::default(),
        });
        let (shutdown, shutdown_received) = oneshot::channel::<()>();
        let (ready, started) = std::sync::mpsc::channel::<anyhow::Result<()>>();
        let router = Router::new()
            .fallback(handle)
            .layer(DefaultBodyLimit::disable())
            .with_state(shared.clone());
        let thread = std::thread::Builder::new()
            .name(format!("model-endpoint-{}", address.port()))
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(error) => {
                        let _ = ready.send(Err(error).context("build the model endpoint runtime"));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(listener) => listener,
                        Err(error) => {
                            let _ = ready.send(Err(error).context("register the listener"));
                            return;
                        }
                    };
                    let _ = ready.send(Ok(()));
                    // Each SSE frame goes out as it is written, as a real endpoint's does:
                    // without it Nagle holds a frame for the client's delayed ACK (40 ms on
                    // Linux) on a reused connection, which latency figures would measure.
                    use axum::serve::ListenerExt;
                    let listener = listener.tap_io(|tcp| {
                        let _ = tcp.set_nodelay(true);
                    });
                    // No graceful shutdown: a hanging reply must not hold the test up. Dropping
                    // the runtime afterwards drops every connection.
                    tokio::select! {
                        result = axum::serve(listener, router).into_future() => {
                            if let Err(error) = result {
                                tracing::error!(%error, "model endpoint server stopped");
                            }
                        }
                        _ = shutdown_received => {}
                    }
                });
            })
            .context("spawn the model endpoint thread")?;
        started
            .recv()
            .context("the model endpoint thread ended before it started")??;
        tracing::debug!(%address, "model endpoint listening");
        Ok(ModelEndpoint {
            address,
            shared,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:PORT/v1`; the routes answer with and without the `/v1` prefix.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.address)
    }

    /// `http://127.0.0.1:PORT`, without the `/v1` prefix.
    pub fn root_url(&self) -> String {
        format!("http://{}", self.address)
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Queue a reply for the next chat request that passes the rules.
    pub fn push(&self, reply: impl Into<Reply>) {
        self.shared.lock().script.push_back(reply.into());
    }

    pub fn push_all<R: Into<Reply>>(&self, replies: impl IntoIterator<Item = R>) {
        self.shared
            .lock()
            .script
            .extend(replies.into_iter().map(Into::into));
    }

    /// Answer the next `count` requests with `route`, which picks each reply from the request
    /// it answers: for sessions whose requests arrive in any order (sub-agents running at once).
    pub fn route(&self, count: usize, route: Route) {
        for _ in 0..count {
            let route = route.clone();
            self.push(Reply::from_fn(move |request| route(request)));
        }
    }

    /// Replies not spent yet.
    pub fn remaining_replies(&self) -> usize {
        self.shared.lock().script.len()
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// The chat-completions requests received, in order.
    pub fn chat_requests(&self) -> Vec<RecordedRequest> {
        self.shared
            .lock()
            .requests
            .iter()
            .filter(|request| request.is_chat())
            .cloned()
            .collect()
    }

    /// Every violation so far; they count as seen.
    pub fn violations(&self) -> Vec<Violation> {
        let mut state = self.shared.lock();
        state.acknowledged = state.violations.len();
        state.violations.clone()
    }

    /// Every violation so far, clearing the list.
    pub fn take_violations(&self) -> Vec<Violation> {
        let mut state = self.shared.lock();
        state.acknowledged = 0;
        std::mem::take(&mut state.violations)
    }

    /// Panic with the list of violations, if there are any.
    #[track_caller]
    pub fn assert_no_violations(&self) {
        let violations = self.violations();
        assert!(
            violations.is_empty(),
            "the model endpoint refused requests:\n{}",
            list(&violations)
        );
    }

    /// Forget every cached prefix, as when the server evicts its cache.
    pub fn clear_cache(&self) {
        self.shared.lock().cache.clear();
    }
}

impl Drop for ModelEndpoint {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let state = self.shared.lock();
        let unseen = &state.violations[state.acknowledged.min(state.violations.len())..];
        if !unseen.is_empty() && !std::thread::panicking() {
            panic!(
                "the model endpoint refused requests and no test looked at it:\n{}",
                list(unseen)
            );
        }
    }
}

fn list(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|violation| format!("  {violation}\n"))
        .collect()
}

/// What to answer, decided under the lock; answering (with its waits) happens outside it.
enum Plan {
    Json {
        status: u16,
        headers: Vec<(String, String)>,
        body: Value,
        delay: Duration,
    },
    Turn(Box<TurnPlan>),
    Hang {
        stream: bool,
    },
    HugeLine {
        bytes: usize,
    },
    Repeated(response::Repeated),
    Fim(fim::FimPlan),
}

struct TurnPlan {
    completion: Completion,
    stream: bool,
    include_usage: bool,
}

impl Plan {
    fn status(&self) -> u16 {
        match self {
            Plan::Json { status, .. } => *status,
            Plan::Fim(fim::FimPlan::Json { status, .. }) => *status,
            Plan::Turn(_)
            | Plan::Hang { .. }
            | Plan::HugeLine { .. }
            | Plan::Repeated(_)
            | Plan::Fim(_) => 200,
        }
    }
}

/// The one handler: every route goes through it, so that every request is recorded.
async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let plan = plan(&shared, &method, uri.path(), &headers, &body);
    if let Plan::Fim(fim) = plan {
        return fim::answer(shared, fim);
    }
    answer(&shared.config, plan).await
}

fn plan(shared: &Shared, method: &Method, path: &str, headers: &HeaderMap, raw: &[u8]) -> Plan {
    let index = {
        let mut state = shared.lock();
        let index = state.requests.len();
        state.requests.push(RecordedRequest {
            index,
            method: method.to_string(),
            path: path.to_owned(),
            headers: headers
                .iter()
                .map(|(name, value)| {
                    (
                        name.to_string(),
                        String::from_utf8_lossy(value.as_bytes()).into_owned(),
                    )
                })
                .collect(),
            raw: raw.to_vec(),
            body: serde_json::from_slice(raw).ok(),
            status: 0,
            usage: None,
        });
        index
    };
    tracing::debug!(index, %method, path, "model endpoint request");

    let config = &shared.config;
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok());
    let route = path
        .strip_prefix("/v1")
        .unwrap_or(path)
        .trim_end_matches('/');
    let outcome = match config.api_key.as_deref() {
        Some(key) => request::check_auth(authorization, key),
        None => Ok(()),
    }
    .and_then(|()| match (method, route) {
        (&Method::GET, "/models") => Ok(models(config)),
        (&Method::POST, "/chat/completions") => chat(shared, index, raw),
        (&Method::POST, "/beta/completions" | "/completions") => {
            fim::plan(shared, index, path, raw).map(Plan::Fim)
        }
        _ => Err(Rejection {
            status: 404,
            rule: Rule::UnknownRoute,
            error_type: "invalid_request_error",
            message: format!("Not Found: {method} {path}"),
            detail: format!("{method} {path} is not a route of the chat-completions API"),
        }),
    });
    let plan = outcome.unwrap_or_else(|rejection| refuse(shared, index, rejection));
    shared.lock().requests[index].status = plan.status();
    plan
}

fn refuse(shared: &Shared, index: usize, rejection: Rejection) -> Plan {
    tracing::warn!(
        index,
        rule = ?rejection.rule,
        status = rejection.status,
        detail = %rejection.detail,
        "model endpoint refused a request"
    );
    let plan = Plan::Json {
        status: rejection.status,
        headers: vec![],
        body: rejection.body(),
        delay: Duration::ZERO,
    };
    shared.lock().violations.push(Violation {
        request: index,
        rule: rejection.rule,
        status: rejection.status,
        message: rejection.message,
        detail: rejection.detail,
    });
    plan
}

fn models(config: &EndpointConfig) -> Plan {
    let data = config
        .models
        .iter()
        .map(|id| json!({ "id": id, "object": "model", "owned_by": "deepseek" }))
        .collect::<Vec<_>>();
    Plan::Json {
        status: 200,
        headers: vec![],
        body: json!({ "object": "list", "data": data }),
        delay: Duration::ZERO,
    }
}

/// Check a chat request against the rules, then spend the next scripted reply on it.
fn chat(shared: &Shared, index: usize, raw: &[u8]) -> Result<Plan, Rejection> {
    let config = &shared.config;
    let mut chat = request::parse(raw, index, config.thinking_by_default)?;
    request::check_request(&chat, &config.models)?;
    request::check_history(&chat, config.reasoning_in_tool_stretches)?;
    let prompt = prompt::prompt_tokens(&chat);
    chat.prompt_tokens = prompt.len() as u64;
    request::check_context(chat.prompt_tokens, chat.max_tokens, config.context_window)?;

    let mut reply = shared.lock().script.pop_front().ok_or_else(|| Rejection {
        status: 500,
        rule: Rule::ScriptExhausted,
        error_type: "server_error",
        message: format!(
            "loopback model endpoint: script exhausted, no reply left for request #{index}"
        ),
        detail: "script exhausted".into(),
    })?;
    // The closure runs without the lock, so that it may take its time.
    while let Reply::Compute(compute) = reply {
        reply = std::panic::catch_unwind(AssertUnwindSafe(|| compute(&chat))).map_err(|panic| {
            let text = panic
                .downcast_ref::<&str>()
                .map(|text| (*text).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Rejection {
                status: 500,
                rule: Rule::ReplyPanicked,
                error_type: "server_error",
                message: format!("loopback model endpoint: the reply closure panicked: {text}"),
                detail: text,
            }
        })?;
    }

    match reply {
        Reply::Failure(failure) => Ok(Plan::Json {
            status: failure.status,
            headers: failure.headers,
            body: failure.body,
            delay: failure.delay,
        }),
        Reply::Hang => Ok(Plan::Hang {
            stream: chat.stream,
        }),
        Reply::HugeLine { bytes } => Ok(Plan::HugeLine { bytes }),
        Reply::HugeJson { bytes } => Ok(Plan::Repeated(response::Repeated::chat_json(bytes))),
        Reply::Endless => Ok(Plan::Repeated(response::Repeated::chat_stream())),
        Reply::Turn(turn) => {
            let usage = {
                let mut state = shared.lock();
                let hit = state.cache.hit(&prompt);
                state.cache.store(prompt);
                let usage = usage(chat.prompt_tokens, hit, &turn);
                state.requests[index].usage = Some(usage.clone());
                usage
            };
            let call_ids = turn
                .tool_calls
                .iter()
                .enumerate()
                .map(|(number, call)| {
                    call.id
                        .clone()
                        .unwrap_or_else(|| format!("call_{number:02}_r{index}"))
                })
                .collect();
            let finish_reason = match turn.finish_reason.as_deref() {
                Some("length") => "length",
                Some("tool_calls") => "tool_calls",
                Some(_) => "stop",
                None if turn.tool_calls.is_empty() => "stop",
                None => "tool_calls",
            };
            let created = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |since| since.as_secs());
            Ok(Plan::Turn(Box::new(TurnPlan {
                completion: Completion {
                    id: format!("00000000-0000-4000-8000-{index:012}"),
                    created,
                    model: chat.model.clone(),
                    turn,
                    call_ids,
                    usage,
                    finish_reason,
                },
                stream: chat.stream,
                include_usage: chat.include_usage,
            })))
        }
        Reply::Compute(_) => unreachable!("closures are resolved above"),
    }
}

fn usage(prompt_tokens: u64, hit: u64, turn: &ModelTurn) -> Usage {
    let reasoning_tokens = text_tokens(turn.reasoning.as_deref().unwrap_or(""));
    let counted = reasoning_tokens
        + text_tokens(turn.content.as_deref().unwrap_or(""))
        + turn
            .tool_calls
            .iter()
            .map(|call| text_tokens(&call.name) + text_tokens(&call.arguments))
            .sum::<u64>();
    let completion_tokens = turn.completion_tokens.unwrap_or(counted);
    Usage {
        prompt_tokens,
        completion_tokens,
        total_tokens: prompt_tokens + completion_tokens,
        prompt_cache_hit_tokens: hit,
        prompt_cache_miss_tokens: prompt_tokens - hit,
        reasoning_tokens,
    }
}

async fn answer(config: &EndpointConfig, plan: Plan) -> Response {
    match plan {
        Plan::Json {
            status,
            headers,
            body,
            delay,
        } => {
            tokio::time::sleep(delay).await;
            let mut builder = Response::builder()
                .status(status)
                .header(header::CONTENT_TYPE, "application/json");
            for (name, value) in headers {
                builder = builder.header(name, value);
            }
            builder
                .body(Body::from(body.to_string()))
                .unwrap_or_else(|error| internal_error(&error))
        }
        Plan::Hang { stream } => match config.keep_alive {
            Some(every) => ok_response(
                stream,
                response::keep_alive_forever(keep_alive_line(stream), every),
            ),
            None => std::future::pending().await,
        },
        Plan::HugeLine { bytes } => ok_response(true, response::huge_line(bytes)),
        Plan::Repeated(repeated) => ok_response(
            repeated.stream,
            repeated.body(|finished| {
                tracing::debug!(finished, "model endpoint's repeated body ended");
            }),
        ),
        Plan::Fim(_) => unreachable!("FIM plans are answered by `fim::answer`"),
        Plan::Turn(plan) => {
            let turn = &plan.completion.turn;
            // Without keep-alive lines the wait comes before the headers: nothing at all arrives.
            if config.keep_alive.is_none() {
                tokio::time::sleep(turn.first_byte_delay).await;
            }
            let pacing = Pacing {
                wait: if config.keep_alive.is_some() {
                    turn.first_byte_delay
                } else {
                    Duration::ZERO
                },
                chunk_delay: turn.chunk_delay,
                keep_alive_line: keep_alive_line(plan.stream),
                keep_alive_every: config.keep_alive,
                keep_alive_between_frames: config.keep_alive_between_chunks,
                stall_after: turn.stall_after,
                cut_after: turn.cut_after,
            };
            let frames = if plan.stream {
                let shape = Shape {
                    delta_bytes: config.delta_bytes,
                    include_usage: plan.include_usage,
                    usage_in_finish_chunk: config.usage_in_finish_chunk,
                };
                plan.completion
                    .stream_events(shape)
                    .into_iter()
                    .map(|event| format!("data: {event}\n\n"))
                    .collect()
            } else {
                vec![plan.completion.object().to_string()]
            };
            ok_response(plan.stream, response::paced_body(frames, pacing))
        }
    }
}

fn keep_alive_line(stream: bool) -> &'static str {
    if stream { ": keep-alive\n\n" } else { "\n" }
}

fn ok_response(stream: bool, body: Body) -> Response {
    let content_type = if stream {
        "text/event-stream; charset=utf-8"
    } else {
        "application/json"
    };
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, content_type)
        .header(header::CACHE_CONTROL, "no-cache")
        .body(body)
        .unwrap_or_else(|error| internal_error(&error))
}

fn internal_error(error: &dyn fmt::Display) -> Response {
    tracing::error!(%error, "model endpoint could not build a response");
    let mut response = Response::new(Body::from(error.to_string()));
    *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    response
}
