//! Provider-neutral model requests and messages.
//!
//! The session derives [`Message`]s, `context::build_request` turns them into a
//! [`ModelRequest`], and a wire module ([`wire`]) serializes that into the exact bytes a
//! provider receives. Keeping the serialization a pure function of the request is what makes
//! `agent-lsp session replay` able to reprint a past request byte for byte.

pub mod provider;
pub mod wire;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::canonical_json;

/// One message of the model's history, derived from one surface entry.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    /// The programmer's prompt, a checkpoint, a fold, or runtime context: everything the model
    /// reads as the user's.
    User {
        /// What the model reads.
        text: String,
    },
    /// One step of the model's own, as it answered.
    Assistant {
        /// The answer's text; may be empty when the step only calls tools.
        text: String,
        /// The model's reasoning, passed back to the provider in a tool-using stretch when thinking
        /// is on (DeepSeek refuses a history without it there).
        reasoning: Option<String>,
        /// The tools the step called, each answered by a later [`Message::Tool`].
        tool_calls: Vec<ToolCallRef>,
    },
    /// A tool's answer to one call of the previous assistant message.
    Tool {
        /// The id of the call this answers; providers refuse a result that answers no call.
        call_id: String,
        /// The tool result's text, as recorded.
        text: String,
    },
}

impl Message {
    /// The role the wire format names the message by (`user`, `assistant`, `tool`).
    pub fn role(&self) -> &'static str {
        match self {
            Message::User { .. } => "user",
            Message::Assistant { .. } => "assistant",
            Message::Tool { .. } => "tool",
        }
    }
}

/// A tool as the model sees it: name, description and JSON schema of its arguments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    /// The name the model calls the tool by; unique in a catalog.
    pub name: String,
    /// What the tool does and when to use it, written for the model.
    pub description: String,
    /// The JSON schema of the arguments.
    pub parameters: Value,
}

/// The canonical JSON of a tool catalog, as digested.
pub fn catalog_json(tools: &[ToolDef]) -> String {
    canonical_json(&serde_json::to_value(tools).unwrap_or(Value::Null))
}

/// A tool call as the model emitted it inside an assistant message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallRef {
    /// The id the model gave the call; the tool's result names it.
    pub id: String,
    /// The tool's name as the model wrote it (it may name no tool; the runtime answers that with an
    /// error result).
    pub name: String,
    /// The raw argument string exactly as the model sent it (possibly invalid JSON).
    pub arguments: String,
}

impl ToolCallRef {
    /// The names of `calls` in order, joined for a line of progress (`read, grep`).
    pub fn names(calls: &[ToolCallRef]) -> String {
        calls
            .iter()
            .map(|call| call.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A complete model answer for one step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AssistantMessage {
    /// The answer's text; may be empty when the step only calls tools.
    pub text: String,
    /// `reasoning_content` in thinking mode; kept verbatim because it must be passed back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// The tools the step called, in the order the model emitted them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallRef>,
}

/// Token accounting reported by the provider for one request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// The request this accounts for, matching its `request/header`.
    pub index: u64,
    /// Prompt tokens the provider counted, cached or not: what the token meter calibrates against.
    pub prompt_tokens: u64,
    /// Tokens the model generated, reasoning included.
    pub completion_tokens: u64,
    /// Prompt tokens served from the provider's prefix cache.
    pub cache_read: u64,
    /// Billable (uncached) prompt tokens: `prompt_tokens - cache_read`.
    pub input: u64,
}

/// Thinking (reasoning) mode of DeepSeek-style models.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Thinking {
    /// Sent as `thinking: {"type": "enabled"}`; reasoning is passed back in tool-using stretches.
    Enabled,
    /// Sent as `thinking: {"type": "disabled"}`; reasoning is passed back only where a message
    /// has some.
    Disabled,
}

/// Model parameters that travel with every request. Recorded in `request/header` so a replay
/// rebuilds the same body.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelParams {
    /// Sampling temperature; `None` leaves it to the provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// The most tokens the answer may take; `None` leaves it to the provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Thinking mode; `None` sends nothing, so the model's default applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Thinking>,
    /// The provider's `reasoning_effort` (`low`, `high`, …), sent as given; `None` sends nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
}

impl ModelParams {
    /// Whether reasoning must be passed back (see [`Thinking::Enabled`]).
    pub fn thinking_enabled(&self) -> bool {
        self.thinking == Some(Thinking::Enabled)
    }
}

/// Everything one model call sends, before it is put on a particular wire.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelRequest {
    /// 1-based number of this request within its session.
    pub index: u64,
    /// The model name as the provider knows it.
    pub model: String,
    /// Sampling and thinking settings, sent with every request.
    pub params: ModelParams,
    /// The system prompt, assembled from the preset's sections.
    pub system: String,
    /// The tool catalog the model may call.
    pub tools: Vec<ToolDef>,
    /// The history, derived from the session's surface.
    pub messages: Vec<Message>,
}
