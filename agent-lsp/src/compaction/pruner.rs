//! The tool-result pruner: old oversized tool results are shortened on the surface to their head
//! and tail; the log keeps the whole text, and the shortened text says how to recall it.
//!
//! A pruned result is a new `tool/result` for the same call that takes the place of the old one
//! (`surface_op: replace {seq, seq}`, `source_event_seqs: [seq]`, `meta.pruned`), so the call and
//! its result stay paired. Each one changes the request from that point on, which costs the
//! provider's cache for the rest of the request once; that is why the pruner waits until the
//! request is at `trigger_ratio` of the window, never touches the most recent steps, and leaves
//! alone the range of an open compaction (whose candidate would otherwise go stale).

use std::collections::HashSet;

use serde_json::json;

use super::PrunerSettings;
use super::range::recent_steps_start;
use crate::agent::{AgentEvent, Plugin};
use crate::session::event::{EventBody, SurfaceOp, ToolResult};
use crate::session::surface::Pairing;
use crate::session::{NewEvent, Session};
use crate::tokens::estimate_message;

/// `text` shortened to its first `head` and last `tail` characters with a marker between them
/// naming the call to recall, or `None` when it is not longer than `threshold` characters.
pub fn prune_text(
    text: &str,
    threshold: usize,
    head: usize,
    tail: usize,
    call_id: &str,
) -> Option<String> {
    // Bytes bound characters from above: most results are skipped without counting.
    if text.len() <= threshold {
        return None;
    }
    let chars = text.chars().count();
    if chars <= threshold || chars <= head + tail {
        return None;
    }
    let head_end = text
        .char_indices()
        .nth(head)
        .map_or(text.len(), |(at, _)| at);
    let tail_start = text
        .char_indices()
        .nth(chars - tail)
        .map_or(text.len(), |(at, _)| at);
    let cut = chars - head - tail;
    Some(format!(
        "{}\n[… {cut} of {chars} characters pruned from this old tool result; the full text is kept: recall_history {{\"tool_call_id\": \"{call_id}\"}} …]\n{}",
        &text[..head_end],
        &text[tail_start..]
    ))
}

/// Shortens old tool results before a step when the request is getting large.
pub struct ToolResultPruner {
    settings: PrunerSettings,
    context_window: u64,
    /// Estimated tokens of the system prompt and tool catalog, which the surface does not hold.
    overhead_tokens: u64,
    /// Events up to this seq have been read for compaction locks.
    scanned_through: u64,
    /// Surface entries of an open compaction: its candidate summary was built from them.
    locked: HashSet<u64>,
}

impl ToolResultPruner {
    pub fn new(
        settings: PrunerSettings,
        context_window: u64,
        overhead_tokens: u64,
    ) -> ToolResultPruner {
        ToolResultPruner {
            settings,
            context_window,
            overhead_tokens,
            scanned_through: 0,
            locked: HashSet::new(),
        }
    }

    fn update_locks(&mut self, session: &Session) {
        let events = session.history().events();
        let from = events.partition_point(|event| event.seq <= self.scanned_through);
        for event in &events[from..] {
            match &event.body {
                EventBody::CompactionStart(start) => {
                    self.locked = start.entry_seqs.iter().copied().collect();
                }
                EventBody::CompactionEnd(_) => self.locked.clear(),
                _ => {}
            }
        }
        self.scanned_through = session.history().last_seq();
    }

    /// Shorten every eligible result now; returns how many were shortened.
    pub fn prune(&mut self, session: &mut Session, turn: u32, step: u32) -> anyhow::Result<usize> {
        self.update_locks(session);
        let messages: u64 = session.derive_messages().iter().map(estimate_message).sum();
        let pressure = (self.overhead_tokens + messages) as f64 / self.context_window.max(1) as f64;
        if pressure < self.settings.trigger_ratio {
            return Ok(0);
        }
        let history = session.history();
        let boundary = recent_steps_start(history, self.settings.keep_recent_steps);
        let mut replacements = Vec::new();
        for entry in &history.surface().entries()[..boundary] {
            if !matches!(entry.pairing, Pairing::Result(_)) || self.locked.contains(&entry.seq) {
                continue;
            }
            let Some(EventBody::ToolResult(result)) = history.event(entry.seq).map(|e| &e.body)
            else {
                continue;
            };
            if result.meta.get("pruned").is_some() {
                continue;
            }
            let Some(text) = prune_text(
                &result.text,
                self.settings.threshold_chars,
                self.settings.head_chars,
                self.settings.tail_chars,
                &result.call_id,
            ) else {
                continue;
            };
            let meta = json!({
                "pruned": true,
                "original_seq": entry.seq,
                "original_chars": result.text.chars().count(),
            });
            replacements.push((
                entry.seq,
                ToolResult {
                    call_id: result.call_id.clone(),
                    name: result.name.clone(),
                    text,
                    meta,
                },
            ));
        }
        let pruned = replacements.len();
        for (seq, result) in replacements {
            session.append(
                NewEvent::new(turn, step, EventBody::ToolResult(result))
                    .with_op(SurfaceOp::Replace {
                        start: seq,
                        end: seq,
                    })
                    .with_sources(vec![seq]),
            )?;
        }
        if pruned > 0 {
            tracing::info!(pruned, "old tool results shortened on the surface");
        }
        self.scanned_through = session.history().last_seq();
        Ok(pruned)
    }
}

impl Plugin for ToolResultPruner {
    fn name(&self) -> &'static str {
        "tool_result_pruner"
    }

    fn on_event(&mut self, event: &AgentEvent<'_>, session: &mut Session) -> anyhow::Result<()> {
        if let AgentEvent::PreStep { turn, step } = event {
            self.prune(session, *turn, *step)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Message;
    use crate::session::event::{
        AssistantMessage, SCHEMA_VERSION, SessionHeader, ToolCallRef, UserMessage,
    };
    use crate::session::log::Durability;

    #[test]
    fn prune_text_keeps_head_and_tail_by_characters() {
        assert_eq!(prune_text("short", 10, 2, 2, "c"), None);
        let text = format!("{}{}{}", "é".repeat(6), "x".repeat(10), "ü".repeat(4));
        let pruned = prune_text(&text, 8, 6, 4, "c1").unwrap();
        assert!(
            pruned.starts_with("éééééé\n[… 10 of 20 characters pruned"),
            "{pruned}"
        );
        assert!(pruned.ends_with("…]\nüüüü"), "{pruned}");
        assert!(pruned.contains(r#"recall_history {"tool_call_id": "c1"}"#));
        // Longer in bytes than the threshold, not in characters.
        assert_eq!(prune_text(&"é".repeat(6), 8, 2, 2, "c"), None);
    }

    fn session(dir: &std::path::Path) -> Session {
        let header = SessionHeader {
            schema: SCHEMA_VERSION,
            session_id: "s".into(),
            workspace: "/w".into(),
            preset: "standard".into(),
            preset_text: None,
            agent_version: "test".into(),
        };
        Session::create(&dir.join("s.jsonl"), header, Durability::Batched).unwrap()
    }

    fn step(session: &mut Session, step: u32, id: &str, text: &str) {
        session
            .append(NewEvent::new(
                1,
                step,
                EventBody::AssistantMessage(AssistantMessage {
                    text: String::new(),
                    reasoning: None,
                    tool_calls: vec![ToolCallRef {
                        id: id.into(),
                        name: "read".into(),
                        arguments: "{}".into(),
                    }],
                }),
            ))
            .unwrap();
        session
            .append(NewEvent::new(
                1,
                step,
                EventBody::ToolResult(ToolResult {
                    call_id: id.into(),
                    name: "read".into(),
                    text: text.into(),
                    meta: serde_json::Value::Null,
                }),
            ))
            .unwrap();
    }

    #[test]
    fn old_large_results_are_shortened_on_the_surface_and_kept_in_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut session = session(dir.path());
        session
            .append(NewEvent::new(
                1,
                0,
                EventBody::UserMessage(UserMessage {
                    text: "go".into(),
                    origin: "prompt".into(),
                }),
            ))
            .unwrap();
        let big = "a".repeat(100) + &"b".repeat(100) + &"c".repeat(100);
        step(&mut session, 1, "old_big", &big);
        step(&mut session, 2, "old_small", "small");
        step(&mut session, 3, "new_big", &big);
        let settings = PrunerSettings {
            enabled: true,
            threshold_chars: 200,
            head_chars: 100,
            tail_chars: 50,
            trigger_ratio: 0.0,
            keep_recent_steps: 1,
        };
        let mut pruner = ToolResultPruner::new(settings, 1000, 0);
        assert_eq!(pruner.prune(&mut session, 1, 4).unwrap(), 1);
        assert_eq!(
            pruner.prune(&mut session, 1, 4).unwrap(),
            0,
            "pruned once only"
        );

        let messages = session.derive_messages().to_vec();
        let Message::Tool { call_id, text } = &messages[2] else {
            panic!("{messages:?}")
        };
        assert_eq!(call_id, "old_big");
        assert!(text.starts_with(&"a".repeat(100)) && text.ends_with(&"c".repeat(50)));
        assert!(!text.contains("bb"), "{text}");
        assert_eq!(
            messages[6],
            Message::Tool {
                call_id: "new_big".into(),
                text: big.clone()
            }
        );
        // The original is still in the log, byte for byte.
        assert!(session.history().events().iter().any(
            |event| matches!(&event.body, EventBody::ToolResult(result) if result.text == big && result.call_id == "old_big")
        ));
        crate::session::History::from_events(session.history().events().to_vec()).unwrap();
    }
}
