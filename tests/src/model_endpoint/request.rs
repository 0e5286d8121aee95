//! Parsing a chat-completions body and checking it against the API's rules, the way DeepSeek
//! refuses a request before any model work (and so before any scripted reply is spent).
//!
//! The error texts are DeepSeek's, as its API returns them, wherever we know them; the
//! exceptions are marked where they are written.

use serde::Deserialize;
use serde_json::{Value, json};

use super::{ChatMessage, ChatRequest, Rule, ToolCall};

/// A request the API refuses: what to answer, and what to record as a violation.
pub(super) struct Rejection {
    pub status: u16,
    pub rule: Rule,
    pub error_type: &'static str,
    /// The message sent to the client, verbatim.
    pub message: String,
    /// What exactly was wrong, for the violation record (not sent).
    pub detail: String,
}

impl Rejection {
    fn invalid(rule: Rule, message: impl Into<String>, detail: impl Into<String>) -> Self {
        Rejection {
            status: 400,
            rule,
            error_type: "invalid_request_error",
            message: message.into(),
            detail: detail.into(),
        }
    }

    /// The DeepSeek-style error body.
    pub fn body(&self) -> Value {
        error_body(&self.message, self.error_type)
    }
}

/// DeepSeek's error body: it sets `code` to `invalid_request_error` on every error we have seen,
/// whatever the `type`.
pub(super) fn error_body(message: &str, error_type: &str) -> Value {
    json!({
        "error": {
            "message": message,
            "type": error_type,
            "param": null,
            "code": "invalid_request_error",
        }
    })
}

#[derive(Deserialize)]
struct WireRequest {
    model: String,
    messages: Vec<WireMessage>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<WireStreamOptions>,
    #[serde(default)]
    #[allow(dead_code)]
    tools: Option<Vec<WireTool>>,
    #[serde(default)]
    thinking: Option<WireThinking>,
    #[serde(default)]
    max_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct WireStreamOptions {
    #[serde(default)]
    include_usage: Option<bool>,
}

/// Only deserialized, so that a tool the API would refuse is refused here too.
#[derive(Deserialize)]
#[allow(dead_code)]
struct WireTool {
    #[serde(rename = "type")]
    kind: ToolKind,
    function: WireFunction,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum ToolKind {
    Function,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct WireFunction {
    name: String,
}

#[derive(Deserialize)]
struct WireThinking {
    #[serde(rename = "type")]
    kind: ThinkingKind,
}

#[derive(Deserialize, PartialEq)]
#[serde(rename_all = "lowercase")]
enum ThinkingKind {
    Enabled,
    Disabled,
}

/// One message as the API types it. DeepSeek takes `content` only as a string (an array of
/// parts is refused with "invalid type: sequence, expected a string"), so this does too.
#[derive(Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage {
    System {
        content: String,
    },
    User {
        content: String,
    },
    Assistant {
        #[serde(default)]
        content: Option<String>,
        #[serde(default)]
        reasoning_content: Option<String>,
        #[serde(default)]
        tool_calls: Option<Vec<WireToolCall>>,
    },
    Tool {
        content: String,
        tool_call_id: String,
    },
}

#[derive(Deserialize)]
struct WireToolCall {
    id: String,
    #[serde(rename = "type")]
    #[allow(dead_code)]
    kind: ToolKind,
    function: WireCallFunction,
}

#[derive(Deserialize)]
struct WireCallFunction {
    name: String,
    arguments: String,
}

/// Parse a body into a [`ChatRequest`], refusing what the API cannot deserialize.
pub(super) fn parse(
    raw: &[u8],
    index: usize,
    thinking_by_default: bool,
) -> Result<ChatRequest, Rejection> {
    let body: Value = serde_json::from_slice(raw).map_err(|error| {
        // The wording of axum's JSON extractor, which DeepSeek's gateway answers with.
        let message = format!("Failed to parse the request body as JSON: {error}");
        Rejection::invalid(Rule::MalformedJson, message.clone(), message)
    })?;
    let mut deserializer = serde_json::Deserializer::from_slice(raw);
    let wire: WireRequest =
        serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
            let path = error.path().to_string();
            let inner = error.into_inner();
            let message = if path == "." {
                format!("Failed to deserialize the JSON body into the target type: {inner}")
            } else {
                format!("Failed to deserialize the JSON body into the target type: {path}: {inner}")
            };
            Rejection::invalid(Rule::InvalidBody, message.clone(), message)
        })?;

    let messages = wire
        .messages
        .into_iter()
        .map(|message| match message {
            WireMessage::System { content } => plain("system", content),
            WireMessage::User { content } => plain("user", content),
            WireMessage::Tool {
                content,
                tool_call_id,
            } => ChatMessage {
                tool_call_id: Some(tool_call_id),
                ..plain("tool", content)
            },
            WireMessage::Assistant {
                content,
                reasoning_content,
                tool_calls,
            } => ChatMessage {
                role: "assistant".into(),
                content,
                reasoning_content,
                tool_calls: tool_calls
                    .unwrap_or_default()
                    .into_iter()
                    .map(|call| ToolCall {
                        id: call.id,
                        name: call.function.name,
                        arguments: call.function.arguments,
                    })
                    .collect(),
                tool_call_id: None,
            },
        })
        .collect();
    let thinking = match wire.thinking {
        Some(thinking) => thinking.kind == ThinkingKind::Enabled,
        None => thinking_by_default,
    };
    Ok(ChatRequest {
        index,
        body,
        model: wire.model,
        stream: wire.stream.unwrap_or(false),
        include_usage: wire
            .stream_options
            .and_then(|options| options.include_usage)
            .unwrap_or(false),
        thinking,
        max_tokens: wire.max_tokens,
        messages,
        prompt_tokens: 0,
    })
}

fn plain(role: &str, content: String) -> ChatMessage {
    ChatMessage {
        role: role.into(),
        content: Some(content),
        reasoning_content: None,
        tool_calls: vec![],
        tool_call_id: None,
    }
}

/// `Authorization: Bearer <key>`, with DeepSeek's two answers: one for a header it cannot read,
/// one for a key it does not know (showing the key's last four characters).
pub(super) fn check_auth(authorization: Option<&str>, key: &str) -> Result<(), Rejection> {
    let refuse = |message: String, detail: String| Rejection {
        status: 401,
        rule: Rule::Authentication,
        error_type: "authentication_error",
        message,
        detail,
    };
    let Some(given) = authorization.and_then(|value| value.strip_prefix("Bearer ")) else {
        return Err(refuse(
            "Authentication Fails (auth header format should be Bearer sk-...)".into(),
            format!("authorization header: {authorization:?}"),
        ));
    };
    if given == key {
        return Ok(());
    }
    let tail = given
        .char_indices()
        .rev()
        .nth(3)
        .map_or(given, |(start, _)| &given[start..]);
    Err(refuse(
        format!("Authentication Fails, Your api key: ****{tail} is invalid"),
        format!("expected key {key:?}, got {given:?}"),
    ))
}

/// Requests that the API refuses before looking at the history.
pub(super) fn check_request(request: &ChatRequest, models: &[String]) -> Result<(), Rejection> {
    if request.messages.is_empty() {
        // DeepSeek's wording for this is not known to us; this is OpenAI's.
        return Err(Rejection::invalid(
            Rule::EmptyMessages,
            "[] is too short - 'messages'",
            "the request has no messages",
        ));
    }
    if !models.is_empty() && !models.contains(&request.model) {
        return Err(Rejection::invalid(
            Rule::UnknownModel,
            "Model Not Exist",
            format!("model {:?} is not one of {models:?}", request.model),
        ));
    }
    Ok(())
}

/// The pairing of tool calls and results, then reasoning passback in thinking mode.
///
/// Pairing: an assistant message with `tool_calls` must be followed directly by one tool message
/// per call id, before any other message; a tool message must answer an open call of the
/// assistant message right before its run of tool messages.
///
/// Reasoning: in thinking mode an assistant message with tool calls must carry
/// `reasoning_content` (an empty string is accepted; a missing or null field is not). With
/// `whole_tool_stretch`, so must every assistant message of a user-to-user stretch that used
/// tools, which is what DeepSeek's thinking-mode guide asks of clients.
pub(super) fn check_history(
    request: &ChatRequest,
    whole_tool_stretch: bool,
) -> Result<(), Rejection> {
    let messages = &request.messages;
    let orphan = |index: usize| {
        Rejection::invalid(
            Rule::OrphanToolResult,
            "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'",
            format!(
                "message {index} answers tool call {:?}, which no open call of the assistant \
                 message before it has",
                messages[index].tool_call_id.as_deref().unwrap_or_default()
            ),
        )
    };
    let mut index = 0;
    while index < messages.len() {
        let message = &messages[index];
        if message.role == "tool" {
            return Err(orphan(index));
        }
        if message.role != "assistant" || message.tool_calls.is_empty() {
            index += 1;
            continue;
        }
        let mut open = message
            .tool_calls
            .iter()
            .map(|call| call.id.as_str())
            .collect::<Vec<_>>();
        let mut next = index + 1;
        while let Some(result) = messages.get(next).filter(|m| m.role == "tool") {
            let call_id = result.tool_call_id.as_deref().unwrap_or_default();
            match open.iter().position(|id| *id == call_id) {
                Some(position) => open.remove(position),
                None => return Err(orphan(next)),
            };
            next += 1;
        }
        if !open.is_empty() {
            return Err(Rejection::invalid(
                Rule::MissingToolResults,
                "An assistant message with 'tool_calls' must be followed by tool messages \
                 responding to each 'tool_call_id'. (insufficient tool messages following \
                 tool_calls message)",
                format!("message {index}: tool calls {open:?} have no result right after it"),
            ));
        }
        index = next;
    }

    if request.thinking {
        let in_tool_stretch = stretches_with_tools(messages);
        for (index, message) in messages.iter().enumerate() {
            let needs_reasoning = message.role == "assistant"
                && (!message.tool_calls.is_empty() || whole_tool_stretch && in_tool_stretch[index]);
            if needs_reasoning && message.reasoning_content.is_none() {
                return Err(Rejection::invalid(
                    Rule::MissingReasoningContent,
                    format!(
                        "Missing `reasoning_content` field in the assistant message at message \
                         index {index}. For more information, please refer to \
                         https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"
                    ),
                    format!(
                        "thinking mode: assistant message {index} ({} tool calls) has no \
                         reasoning_content",
                        message.tool_calls.len()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// For each message, whether its user-to-user stretch contains an assistant tool call.
fn stretches_with_tools(messages: &[ChatMessage]) -> Vec<bool> {
    let mut flags = vec![false; messages.len()];
    let mut start = 0;
    let mut used_tools = false;
    for (index, message) in messages.iter().enumerate() {
        if message.role == "user" {
            flags[start..index].fill(used_tools);
            start = index + 1;
            used_tools = false;
        } else if !message.tool_calls.is_empty() {
            used_tools = true;
        }
    }
    flags[start..].fill(used_tools);
    flags
}

/// The context window: the prompt plus the requested completion (`max_tokens`, or 0 when the
/// request sets none, as DeepSeek counts it) must fit.
pub(super) fn check_context(
    prompt_tokens: u64,
    max_tokens: Option<u64>,
    window: u64,
) -> Result<(), Rejection> {
    let completion = max_tokens.unwrap_or(0);
    let requested = prompt_tokens + completion;
    if requested <= window {
        return Ok(());
    }
    Err(Rejection::invalid(
        Rule::ContextLength,
        format!(
            "This model's maximum context length is {window} tokens. However, you requested \
             {requested} tokens ({prompt_tokens} in the messages, {completion} in the \
             completion). Please reduce the length of the messages or completion."
        ),
        format!("{requested} tokens requested, window is {window}"),
    ))
}
