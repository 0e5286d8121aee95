//! The endpoint's own deterministic tokenizer, and its simulation of DeepSeek's prefix cache.
//!
//! The real tokenizer is not available offline, and tests need exact, predictable figures, so
//! the endpoint counts tokens with a rule simple enough to compute by hand:
//!
//! - The prompt is laid out in a canonical order: the leading system messages, then the tool
//!   catalog, then every other message in order. DeepSeek renders tool definitions into the
//!   system part of its prompt, so changing the tools costs the cache everything after the
//!   system prompt, and nothing before it.
//! - Each message costs [`MESSAGE_FRAME`] tokens (begin, role, end).
//! - Each field a message carries costs one marker token plus `ceil(bytes / 4)` tokens of its
//!   UTF-8 text: `content`, `reasoning_content`, `tool_call_id`, and for each tool call its name
//!   and its arguments. An absent (or null) field costs nothing; an empty string costs the marker.
//! - Each tool costs one marker token plus `ceil(bytes / 4)` tokens of its definition as compact
//!   JSON with sorted keys.
//!
//! Text is cut into 4-byte tokens field by field, so an edit inside one field moves no token of
//! any other field, and appending messages leaves every earlier token in place: a growing history
//! keeps its prefix, as it does under a real BPE tokenizer applied to a chat template.
//!
//! The cache keeps the prompt of every request that was served (a refused or failed request never
//! reached the model, so it built no cache). A new request's hit is the longest common prefix with
//! any kept prompt, rounded down to whole [`CACHE_BLOCK`]s, because DeepSeek stores and matches its
//! context cache in 64-token units.

use serde_json::Value;

use super::{ChatMessage, ChatRequest};

/// Framing tokens of every message: begin, role, end.
pub const MESSAGE_FRAME: u64 = 3;

/// DeepSeek caches prefixes in units of this many tokens.
pub const CACHE_BLOCK: u64 = 64;

/// One token: either up to four bytes of text (packed with their length) or a marker.
type Token = u64;

const MARKER: Token = 1 << 48;

#[derive(Clone, Copy)]
enum Marker {
    Begin = 1,
    End,
    RoleSystem,
    RoleUser,
    RoleAssistant,
    RoleTool,
    RoleOther,
    Content,
    Reasoning,
    ToolCallId,
    CallName,
    CallArguments,
    Tool,
}

/// Tokens of a piece of text under this tokenizer: `ceil(bytes / 4)`.
pub fn text_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// The canonical token sequence of a request's prompt; its length is the prompt's token count.
pub(super) fn prompt_tokens(request: &ChatRequest) -> Vec<Token> {
    let mut tokens = Vec::new();
    let leading_system = request
        .messages
        .iter()
        .take_while(|message| message.role == "system")
        .count();
    for message in &request.messages[..leading_system] {
        push_message(&mut tokens, message);
    }
    if let Some(tools) = request.body.get("tools").and_then(Value::as_array) {
        for tool in tools {
            tokens.push(MARKER | Marker::Tool as Token);
            push_text(&mut tokens, &canonical_json(tool));
        }
    }
    for message in &request.messages[leading_system..] {
        push_message(&mut tokens, message);
    }
    tokens
}

fn push_message(tokens: &mut Vec<Token>, message: &ChatMessage) {
    let role = match message.role.as_str() {
        "system" => Marker::RoleSystem,
        "user" => Marker::RoleUser,
        "assistant" => Marker::RoleAssistant,
        "tool" => Marker::RoleTool,
        _ => Marker::RoleOther,
    };
    tokens.push(MARKER | Marker::Begin as Token);
    tokens.push(MARKER | role as Token);
    let mut field = |marker: Marker, text: &str| {
        tokens.push(MARKER | marker as Token);
        push_text(tokens, text);
    };
    if let Some(content) = &message.content {
        field(Marker::Content, content);
    }
    if let Some(reasoning) = &message.reasoning_content {
        field(Marker::Reasoning, reasoning);
    }
    if let Some(call_id) = &message.tool_call_id {
        field(Marker::ToolCallId, call_id);
    }
    for call in &message.tool_calls {
        field(Marker::CallName, &call.name);
        field(Marker::CallArguments, &call.arguments);
    }
    tokens.push(MARKER | Marker::End as Token);
}

fn push_text(tokens: &mut Vec<Token>, text: &str) {
    for piece in text.as_bytes().chunks(4) {
        let packed = piece
            .iter()
            .fold(0u64, |packed, byte| packed << 8 | u64::from(*byte));
        tokens.push((piece.len() as u64) << 32 | packed);
    }
}

/// Compact JSON with object keys sorted at every level, whatever serde_json's map order is.
fn canonical_json(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut entries = map.iter().collect::<Vec<_>>();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                Value::Object(
                    entries
                        .into_iter()
                        .map(|(key, value)| (key.clone(), sorted(value)))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

/// The prompts served so far, to find how much of a new prompt the server has cached.
#[derive(Default)]
pub(super) struct PrefixCache {
    prompts: Vec<Vec<Token>>,
}

impl PrefixCache {
    /// Cached tokens for `prompt`: its longest common prefix with any kept prompt, rounded down
    /// to whole blocks.
    pub fn hit(&self, prompt: &[Token]) -> u64 {
        let longest = self
            .prompts
            .iter()
            .map(|kept| kept.iter().zip(prompt).take_while(|(a, b)| a == b).count() as u64)
            .max()
            .unwrap_or(0);
        longest / CACHE_BLOCK * CACHE_BLOCK
    }

    pub fn store(&mut self, prompt: Vec<Token>) {
        self.prompts.push(prompt);
    }

    pub fn clear(&mut self) {
        self.prompts.clear();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model_endpoint::ToolCall;

    fn message(role: &str, content: &str) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: Some(content.into()),
            reasoning_content: None,
            tool_calls: vec![],
            tool_call_id: None,
        }
    }

    fn request(messages: Vec<ChatMessage>, tools: Value) -> ChatRequest {
        ChatRequest {
            index: 0,
            body: json!({ "tools": tools }),
            model: "m".into(),
            stream: true,
            include_usage: true,
            thinking: false,
            max_tokens: None,
            messages,
            prompt_tokens: 0,
        }
    }

    #[test]
    fn counts_follow_the_documented_rule() {
        let mut assistant = message("assistant", "");
        assistant.reasoning_content = Some("why".into());
        assistant.tool_calls = vec![ToolCall {
            id: "c1".into(),
            name: "read".into(),
            arguments: r#"{"path":"a.rs"}"#.into(),
        }];
        let mut tool = message("tool", "hello world");
        tool.tool_call_id = Some("c1".into());
        let messages = vec![message("system", "12345"), assistant, tool];
        let tools = json!([{ "type": "function", "function": { "name": "read" } }]);
        let tool_json = r#"{"function":{"name":"read"},"type":"function"}"#;

        // Each field is its marker plus ceil(bytes / 4); an empty content is the marker alone.
        let system = MESSAGE_FRAME + (1 + 2);
        let tool_definition = 1 + text_tokens(tool_json);
        let assistant = MESSAGE_FRAME + 1 + (1 + 1) + (1 + 1) + (1 + 4);
        let tool_result = MESSAGE_FRAME + (1 + 3) + (1 + 1);
        let expected = system + tool_definition + assistant + tool_result;
        assert_eq!(
            prompt_tokens(&request(messages, tools)).len() as u64,
            expected
        );
    }

    #[test]
    fn tools_sit_between_the_system_prompt_and_the_history() {
        let messages = vec![message("system", &"s".repeat(400)), message("user", "hi")];
        let first = prompt_tokens(&request(messages.clone(), json!([{ "a": 1 }])));
        let second = prompt_tokens(&request(messages, json!([{ "a": 2 }])));
        let mut cache = PrefixCache::default();
        cache.store(first);
        // The system message is 3 + 1 + 100 tokens; the change in the tools stops the match
        // inside the tool catalog, so one whole block of 64 is cached.
        assert_eq!(cache.hit(&second), 64);
    }
}
