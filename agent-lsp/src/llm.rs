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
    User {
        text: String,
    },
    Assistant {
        text: String,
        reasoning: Option<String>,
        tool_calls: Vec<ToolCallRef>,
    },
    Tool {
        call_id: String,
        text: String,
    },
}

impl Message {
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
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// The canonical JSON of a tool catalog, as digested.
pub fn catalog_json(tools: &[ToolDef]) -> String {
    canonical_json(&serde_json::to_value(tools).unwrap_or(Value::Null))
}

/// A tool call as the model emitted it inside an assistant message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallRef {
    pub id: String,
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
    pub text: String,
    /// `reasoning_content` in thinking mode; kept verbatim because it must be passed back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallRef>,
}

/// Token accounting reported by the provider for one request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub index: u64,
    pub prompt_tokens: u64,
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
    Enabled,
    Disabled,
}

/// Model parameters that travel with every request. Recorded in `request/header` so a replay
/// rebuilds the same body.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Thinking>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
}

impl ModelParams {
    pub fn thinking_enabled(&self) -> bool {
        self.thinking == Some(Thinking::Enabled)
    }
}

/// Everything one model call sends, before it is put on a particular wire.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelRequest {
    /// 1-based number of this request within its session.
    pub index: u64,
    pub model: String,
    pub params: ModelParams,
    pub system: String,
    pub tools: Vec<ToolDef>,
    pub messages: Vec<Message>,
}
