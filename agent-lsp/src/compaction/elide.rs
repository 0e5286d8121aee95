//! Elision: the way back for a session whose surface holds a message no request can carry.
//!
//! New messages are held to a share of the window where they enter the session
//! (`agent::bounds`), but a session can still hold a larger one: written before that bound
//! existed, a tool result (capped in bytes, not by the window), or a window that shrank since
//! (a provider stated a smaller one). A summary cannot fold such a message, since the summary
//! request replays it, nor can it fold one among the recent steps it keeps verbatim; so every
//! request failed, an empty prompt too. Elision replaces each surface entry over the
//! `message_budget` with a stub of the same shape that keeps its head and tail and says what
//! was removed and how to recall it: a user message by a user message, an answer by an answer
//! with the same calls, a result by a result for the same call, so tool pairs stay whole. The
//! log keeps the original, and the stub is far under the budget, so an entry is elided once.

use serde_json::json;

use crate::session::event::{
    AssistantMessage, Event, EventBody, SurfaceOp, ToolResult, UserMessage,
};
use crate::session::{NewEvent, Session, message_of};
use crate::tokens::message_budget;
use crate::tokens::{cut_middle, estimate_message};

/// Tokens a stub keeps of an elided text: its head and its tail.
const STUB_HEAD_TOKENS: u64 = 512;
const STUB_TAIL_TOKENS: u64 = 256;

/// Replace every surface entry larger than one message may be in a `context_window`-token
/// window by a stub (`surface_op: replace {seq, seq}`, `source_event_seqs: [seq]`). Returns how
/// many were elided. Call it only while no tool call waits for its result.
pub fn elide_oversized(
    session: &mut Session,
    context_window: u64,
    turn: u32,
    step: u32,
) -> anyhow::Result<usize> {
    let budget = message_budget(context_window);
    // Stubs stay well under the budget, also in a tiny window.
    let (head, tail) = (
        STUB_HEAD_TOKENS.min(budget / 4),
        STUB_TAIL_TOKENS.min(budget / 8),
    );
    let history = session.history();
    let mut stubs = Vec::new();
    for entry in history.surface().entries() {
        let event = history
            .event(entry.seq)
            .expect("surface entries point at logged events");
        let tokens = message_of(event).map_or(0, |message| estimate_message(&message));
        if tokens <= budget {
            continue;
        }
        let body = stub(event, tokens, budget, head, tail);
        // In a tiny window a stub, marker and all, can outweigh what it replaces.
        let stub_tokens = message_of(&Event {
            seq: event.seq,
            turn: event.turn,
            step: event.step,
            ts: String::new(),
            body: body.clone(),
            surface_op: None,
            source_event_seqs: Vec::new(),
        })
        .map_or(0, |message| estimate_message(&message));
        if stub_tokens < tokens {
            stubs.push((entry.seq, body));
        }
    }
    let elided = stubs.len();
    for (seq, body) in stubs {
        session.append(
            NewEvent::new(turn, step, body)
                .with_op(SurfaceOp::Replace {
                    start: seq,
                    end: seq,
                })
                .with_sources(vec![seq]),
        )?;
    }
    if elided > 0 {
        tracing::warn!(
            elided,
            budget,
            "messages larger than one request may hold were elided from the surface"
        );
    }
    Ok(elided)
}

/// The stub that takes the place of `event`, an entry of about `tokens` tokens.
fn stub(event: &Event, tokens: u64, budget: u64, head: u64, tail: u64) -> EventBody {
    let seq = event.seq;
    let cut = |text: &str, what: &str| -> String {
        let Some((kept_head, kept_tail)) = cut_middle(text, head, tail) else {
            return text.to_owned();
        };
        let removed = text.len() - kept_head.len() - kept_tail.len();
        format!(
            "{kept_head}\n[… agent-lsp elided {removed} of {} bytes from the middle of this {what}: \
             the message was about {tokens} tokens, more than one request may hold (about \
             {budget} tokens per message, a quarter of the context window); the session log keeps \
             it whole: recall_history {{\"event_seq\": {seq}}} …]\n{kept_tail}",
            text.len()
        )
    };
    match &event.body {
        EventBody::UserMessage(message) => EventBody::UserMessage(UserMessage {
            text: cut(&message.text, "message"),
            origin: "elision".into(),
        }),
        EventBody::RuntimeContext(context) => EventBody::UserMessage(UserMessage {
            text: cut(&context.text, "message"),
            origin: "elision".into(),
        }),
        EventBody::AssistantMessage(message) => {
            let mut tool_calls = message.tool_calls.clone();
            for call in &mut tool_calls {
                // Arguments that are not JSON any more are harmless: the call ran long ago.
                call.arguments = cut(&call.arguments, "call's arguments");
            }
            EventBody::AssistantMessage(AssistantMessage {
                text: cut(&message.text, "answer"),
                reasoning: message
                    .reasoning
                    .as_deref()
                    .map(|text| cut(text, "reasoning")),
                tool_calls,
            })
        }
        EventBody::ToolResult(result) => EventBody::ToolResult(ToolResult {
            call_id: result.call_id.clone(),
            name: result.name.clone(),
            text: cut(&result.text, "tool result"),
            meta: json!({
                "elided": true,
                "original_seq": seq,
                "original_tokens": tokens,
                "original_len": result.text.len(),
            }),
        }),
        _ => unreachable!("only content events are on the surface"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Message;
    use crate::session::event::{SessionHeader, ToolCallRef};
    use crate::session::log::Durability;

    fn session(dir: &std::path::Path) -> Session {
        let header = SessionHeader::for_test("s", "standard");
        Session::create(&dir.join("s.jsonl"), header, Durability::Batched).unwrap()
    }

    fn append(session: &mut Session, step: u32, body: EventBody) -> u64 {
        session.append(NewEvent::new(1, step, body)).unwrap().seq
    }

    #[test]
    fn every_oversized_entry_becomes_a_stub_of_its_shape_and_small_ones_stay() {
        let dir = tempfile::tempdir().unwrap();
        let mut session = session(dir.path());
        let huge = "x".repeat(400_000);
        let prompt = append(
            &mut session,
            0,
            EventBody::UserMessage(UserMessage {
                text: huge.clone(),
                origin: "prompt".into(),
            }),
        );
        let answer = append(
            &mut session,
            1,
            EventBody::AssistantMessage(AssistantMessage {
                text: "writing".into(),
                reasoning: Some(huge.clone()),
                tool_calls: vec![ToolCallRef {
                    id: "c1".into(),
                    name: "write".into(),
                    arguments: format!("{{\"content\":\"{huge}\"}}"),
                }],
            }),
        );
        let result = append(
            &mut session,
            1,
            EventBody::ToolResult(ToolResult {
                call_id: "c1".into(),
                name: "write".into(),
                text: "ok".into(),
                meta: serde_json::Value::Null,
            }),
        );
        let small = append(
            &mut session,
            2,
            EventBody::UserMessage(UserMessage {
                text: "small".into(),
                origin: "prompt".into(),
            }),
        );

        assert_eq!(elide_oversized(&mut session, 128_000, 1, 3).unwrap(), 2);
        let entries = session
            .history()
            .surface()
            .entries()
            .iter()
            .map(|entry| entry.seq)
            .collect::<Vec<_>>();
        assert_eq!(entries[2..], [result, small]);
        for (entry, original) in entries[..2].iter().zip([prompt, answer]) {
            let event = session.history().event(*entry).unwrap();
            assert_eq!(event.source_event_seqs, [original]);
            let tokens = estimate_message(&message_of(event).unwrap());
            // Two cut fields at most, each its head, tail and marker.
            let bound = 2 * (STUB_HEAD_TOKENS + STUB_TAIL_TOKENS + 100);
            assert!(tokens < bound, "{tokens}");
        }
        let messages = session.derive_messages().to_vec();
        let Message::User { text } = &messages[0] else {
            panic!("{messages:?}")
        };
        assert!(text.starts_with("xxxx") && text.ends_with("xxxx"));
        assert!(
            text.contains(&format!("recall_history {{\"event_seq\": {prompt}}}")),
            "{text}"
        );
        let Message::Assistant {
            text,
            reasoning,
            tool_calls,
        } = &messages[1]
        else {
            panic!("{messages:?}")
        };
        assert_eq!(text, "writing");
        assert!(reasoning.as_deref().unwrap().contains("of this reasoning"));
        assert_eq!(tool_calls[0].id, "c1");
        assert!(tool_calls[0].arguments.starts_with("{\"content\":\"xxx"));
        assert!(tool_calls[0].arguments.contains("of this call's arguments"));
        assert_eq!(
            messages[3],
            Message::User {
                text: "small".into()
            }
        );
        // Once is enough: the stubs are far under the budget.
        assert_eq!(elide_oversized(&mut session, 128_000, 1, 4).unwrap(), 0);
    }

    #[test]
    fn an_oversized_tool_result_is_replaced_for_the_same_call() {
        let dir = tempfile::tempdir().unwrap();
        let mut session = session(dir.path());
        append(
            &mut session,
            1,
            EventBody::AssistantMessage(AssistantMessage {
                text: String::new(),
                reasoning: None,
                tool_calls: vec![ToolCallRef {
                    id: "c1".into(),
                    name: "read".into(),
                    arguments: "{}".into(),
                }],
            }),
        );
        let result = append(
            &mut session,
            1,
            EventBody::ToolResult(ToolResult {
                call_id: "c1".into(),
                name: "read".into(),
                text: "y".repeat(200_000),
                meta: serde_json::Value::Null,
            }),
        );
        assert_eq!(elide_oversized(&mut session, 32_000, 1, 2).unwrap(), 1);
        let last = session.history().events().last().unwrap().clone();
        let EventBody::ToolResult(stub) = &last.body else {
            panic!("{last:?}")
        };
        assert_eq!(stub.call_id, "c1");
        assert_eq!(stub.meta["elided"], true);
        assert_eq!(stub.meta["original_seq"], result);
        assert!(stub.text.contains("of this tool result"), "{}", stub.text);
        assert_eq!(session.history().surface().pending_calls().count(), 0);
    }
}
