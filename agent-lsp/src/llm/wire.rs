//! The OpenAI-compatible chat-completions body, as DeepSeek and its peers accept it.
//!
//! [`chat_completions_body`] is a pure function: the same [`ModelRequest`] always gives the same
//! bytes (keys sorted, compact). The provider sends these bytes and `session replay` rebuilds
//! them from the log, so both must go through this one function.
//!
//! Reasoning passback follows the DeepSeek thinking-mode rules (see docs/architecture.md,
//! "Reasoning passback"): an assistant message that made tool calls always carries its
//! `reasoning_content` (verbatim, `""` if it had none); an assistant message without tool calls
//! carries it only when its user-to-user stretch used tools; elsewhere it is dropped. The
//! passback applies when thinking is enabled or the message actually has reasoning, so plain
//! OpenAI-compatible endpoints never see a field they did not produce.

use serde_json::{Value, json};

use crate::canonical::canonical_json;
use crate::llm::{Message, ModelRequest};

/// Name and version of this wire format, recorded in `request/header`.
pub const WIRE_FORMAT: &str = "openai-chat/1";

/// The exact request body for `POST {base}/chat/completions`.
pub fn chat_completions_body(request: &ModelRequest) -> String {
    canonical_json(&chat_completions_value(request))
}

fn chat_completions_value(request: &ModelRequest) -> Value {
    let thinking = request.params.thinking_enabled();
    let stretch_used_tools = stretches_with_tools(&request.messages);

    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    messages.push(json!({ "role": "system", "content": request.system }));
    for (message, in_tool_stretch) in request.messages.iter().zip(stretch_used_tools) {
        messages.push(match message {
            Message::User { text } => json!({ "role": "user", "content": text }),
            Message::Tool { call_id, text } => {
                json!({ "role": "tool", "tool_call_id": call_id, "content": text })
            }
            Message::Assistant {
                text,
                reasoning,
                tool_calls,
            } => {
                let mut object = serde_json::Map::new();
                object.insert("role".into(), "assistant".into());
                object.insert("content".into(), text.clone().into());
                let pass_back = !tool_calls.is_empty() || in_tool_stretch;
                if pass_back && (thinking || reasoning.is_some()) {
                    let reasoning = reasoning.clone().unwrap_or_default();
                    object.insert("reasoning_content".into(), reasoning.into());
                }
                if !tool_calls.is_empty() {
                    let calls = tool_calls
                        .iter()
                        .map(|call| {
                            json!({
                                "id": call.id,
                                "type": "function",
                                "function": { "name": call.name, "arguments": call.arguments },
                            })
                        })
                        .collect::<Vec<_>>();
                    object.insert("tool_calls".into(), calls.into());
                }
                Value::Object(object)
            }
        });
    }

    let mut body = serde_json::Map::new();
    body.insert("model".into(), request.model.clone().into());
    body.insert("messages".into(), messages.into());
    body.insert("stream".into(), true.into());
    body.insert("stream_options".into(), json!({ "include_usage": true }));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                })
            })
            .collect::<Vec<_>>();
        body.insert("tools".into(), tools.into());
    }
    let params = &request.params;
    if let Some(thinking) = params.thinking {
        body.insert("thinking".into(), json!({ "type": thinking }));
    }
    if let Some(effort) = &params.reasoning_effort {
        body.insert("reasoning_effort".into(), effort.clone().into());
    }
    if let Some(temperature) = params.temperature {
        body.insert("temperature".into(), temperature.into());
    }
    if let Some(max_tokens) = params.max_tokens {
        body.insert("max_tokens".into(), max_tokens.into());
    }
    Value::Object(body)
}

/// For each message, whether the user-to-user stretch it belongs to contains a tool call.
fn stretches_with_tools(messages: &[Message]) -> Vec<bool> {
    let mut flags = vec![false; messages.len()];
    let mut stretch_start = 0;
    let mut used_tools = false;
    for (index, message) in messages.iter().enumerate() {
        match message {
            Message::User { .. } => {
                flags[stretch_start..index].fill(used_tools);
                stretch_start = index + 1;
                used_tools = false;
            }
            Message::Assistant { tool_calls, .. } if !tool_calls.is_empty() => used_tools = true,
            _ => {}
        }
    }
    flags[stretch_start..].fill(used_tools);
    flags
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{ModelParams, Thinking, ToolCallRef};

    fn assistant(text: &str, reasoning: Option<&str>, calls: &[&str]) -> Message {
        Message::Assistant {
            text: text.into(),
            reasoning: reasoning.map(Into::into),
            tool_calls: calls
                .iter()
                .map(|id| ToolCallRef {
                    id: (*id).into(),
                    name: "read".into(),
                    arguments: "{}".into(),
                })
                .collect(),
        }
    }

    fn request(messages: Vec<Message>, thinking: bool) -> ModelRequest {
        ModelRequest {
            index: 1,
            model: "deepseek-v4-flash".into(),
            params: ModelParams {
                thinking: thinking.then_some(Thinking::Enabled),
                ..ModelParams::default()
            },
            system: "sys".into(),
            tools: vec![],
            messages,
        }
    }

    fn reasoning_fields(body: &str) -> Vec<Option<String>> {
        let value: Value = serde_json::from_str(body).unwrap();
        value["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "assistant")
            .map(|m| {
                m.get("reasoning_content")
                    .map(|r| r.as_str().unwrap().to_owned())
            })
            .collect()
    }

    #[test]
    fn reasoning_is_passed_back_only_in_stretches_that_used_tools() {
        let messages = vec![
            Message::User { text: "q1".into() },
            assistant("", Some("r1"), &["c1"]),
            Message::Tool {
                call_id: "c1".into(),
                text: "out".into(),
            },
            assistant("answer 1", None, &[]),
            Message::User { text: "q2".into() },
            assistant("answer 2", Some("r3"), &[]),
        ];
        let body = chat_completions_body(&request(messages, true));
        assert_eq!(
            reasoning_fields(&body),
            vec![Some("r1".into()), Some(String::new()), None]
        );
    }

    #[test]
    fn plain_endpoints_never_see_reasoning_they_did_not_produce() {
        let messages = vec![
            Message::User { text: "q".into() },
            assistant("", None, &["c1"]),
            Message::Tool {
                call_id: "c1".into(),
                text: "out".into(),
            },
        ];
        let body = chat_completions_body(&request(messages, false));
        assert_eq!(reasoning_fields(&body), vec![None]);
        assert!(!body.contains("thinking"));
    }

    #[test]
    fn body_is_deterministic_and_sorted() {
        let messages = vec![Message::User {
            text: "héllo".into(),
        }];
        let a = chat_completions_body(&request(messages.clone(), true));
        let b = chat_completions_body(&request(messages, true));
        assert_eq!(a, b);
        assert!(a.starts_with(r#"{"messages":"#), "{a}");
    }
}
