//! The tool-result pruner: old oversized tool results are shortened on the surface to their head
//! and tail; the log keeps the whole text, and the shortened text says how to recall it.
//!
//! A pruned result is a new `tool/result` for the same call that takes the place of the old one
//! (`surface_op: replace {seq, seq}`, `source_event_seqs: [seq]`, `meta.pruned`), so the call and
//! its result stay paired. Each one changes the request from that point on, which costs the
//! provider's cache for the rest of the request once. So the pruner is cache-aware:
//!
//! - a result is *due* once it is older than the most recent steps, over the threshold, and not
//!   in the range of an open compaction (whose candidate would otherwise go stale);
//! - due results are shortened for free when the prefix breaks anyway before them: right after a
//!   compaction commit (whatever the pressure), or, from `trigger_ratio` of the window on, after
//!   any other change of the surface since the last request (a context edit, a rollback);
//! - otherwise only real pressure (`pressure_ratio`) makes the pruner break the cache itself, and
//!   then it shortens every due result in the same request: one break, not one per result.
//!
//! The last request's surface is taken at `agent/post-step` (the surface then is exactly what
//! was sent, plus the answer), so the pruner knows where the next request departs from it.

use std::collections::HashSet;

use serde_json::json;

use super::PrunerSettings;
use super::range::recent_steps_start;
use crate::context::system_prompt::{AssembledPrompt, catalog_json};
use crate::plugin::registry::{Parts, PluginHost};
use crate::plugin::{AgentEvent, Plugin};
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

/// Shortens old tool results before a step, when it costs the cache nothing or the window is
/// running out.
pub struct ToolResultPruner {
    settings: PrunerSettings,
    context_window: u64,
    /// Estimated tokens of the system prompt and tool catalog, which the surface does not hold.
    overhead_tokens: u64,
    /// Events up to this seq have been read for compaction locks and commits.
    scanned_through: u64,
    /// Surface entries of an open compaction: its candidate summary was built from them.
    locked: HashSet<u64>,
    /// A compaction committed since the last check: the whole history after the system prompt
    /// and tools is sent uncached once anyway.
    committed: bool,
    /// The surface's entry seqs as the last request saw them (taken at `agent/post-step`);
    /// `None` before the first request of this process.
    last_request: Option<Vec<u64>>,
}

/// Why the pruner shortened results in a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PruneReason {
    /// The request's cached prefix broke before them anyway (a compaction commit, a context
    /// edit, a rollback).
    PrefixBroken,
    /// The request reached `pressure_ratio` of the window.
    Pressure,
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
            committed: false,
            last_request: None,
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
                EventBody::CompactionEnd(end) => {
                    self.locked.clear();
                    self.committed |= end.outcome == "committed";
                }
                _ => {}
            }
        }
        self.scanned_through = session.history().last_seq();
    }

    /// Remember the surface as the request just served saw it.
    pub fn request_served(&mut self, session: &Session) {
        self.last_request = Some(
            session
                .history()
                .surface()
                .entries()
                .iter()
                .map(|entry| entry.seq)
                .collect(),
        );
    }

    /// The first surface position at which the next request differs from the last one sent, if
    /// it differs before its end (an append does not break the prefix).
    fn prefix_break(&self, session: &Session) -> Option<usize> {
        let last = self.last_request.as_ref()?;
        let entries = session.history().surface().entries();
        let common = entries
            .iter()
            .zip(last)
            .take_while(|(entry, seq)| entry.seq == **seq)
            .count();
        (common < last.len()).then_some(common)
    }

    /// Shorten what is due now; returns how many results were shortened.
    pub fn prune(&mut self, session: &mut Session, turn: u32, step: u32) -> anyhow::Result<usize> {
        Ok(self
            .prune_with_reason(session, turn, step)?
            .map_or(0, |(pruned, _)| pruned))
    }

    /// [`Self::prune`], also saying why, or `None` when nothing was shortened.
    pub fn prune_with_reason(
        &mut self,
        session: &mut Session,
        turn: u32,
        step: u32,
    ) -> anyhow::Result<Option<(usize, PruneReason)>> {
        self.update_locks(session);
        let committed = std::mem::take(&mut self.committed);
        let messages: u64 = session.derive_messages().iter().map(estimate_message).sum();
        let pressure = (self.overhead_tokens + messages) as f64 / self.context_window.max(1) as f64;
        let (from, reason) = if pressure >= self.settings.pressure_ratio {
            (0, PruneReason::Pressure)
        } else {
            match self.prefix_break(session) {
                Some(at) if committed || pressure >= self.settings.trigger_ratio => {
                    (at, PruneReason::PrefixBroken)
                }
                _ => return Ok(None),
            }
        };
        let history = session.history();
        let boundary = recent_steps_start(history, self.settings.keep_recent_steps);
        let mut replacements = Vec::new();
        for entry in history.surface().entries()[..boundary].iter().skip(from) {
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
        self.scanned_through = session.history().last_seq();
        if pruned == 0 {
            return Ok(None);
        }
        tracing::info!(pruned, ?reason, "old tool results shortened on the surface");
        Ok(Some((pruned, reason)))
    }
}

impl ToolResultPruner {
    /// The registry entry of `[plugins.tool_result_pruner]`.
    pub fn parts(settings: PrunerSettings, host: &PluginHost) -> anyhow::Result<Parts> {
        Ok(Parts {
            plugin: Some(Box::new(ToolResultPruner::new(
                settings,
                host.context_window,
                0,
            ))),
            tools: Vec::new(),
            shell: None,
        })
    }
}

impl Plugin for ToolResultPruner {
    fn name(&self) -> &'static str {
        "tool_result_pruner"
    }

    /// The system prompt and catalog count against the window but are not on the surface.
    fn prompt_assembled(&mut self, prompt: &AssembledPrompt) {
        self.overhead_tokens = crate::tokens::estimate_text(&prompt.system)
            + crate::tokens::estimate_text(&catalog_json(&prompt.tools));
    }

    fn on_event(&mut self, event: &AgentEvent<'_>, session: &mut Session) -> anyhow::Result<()> {
        match event {
            AgentEvent::PreStep { turn, step } => {
                self.prune(session, *turn, *step)?;
            }
            AgentEvent::PostStep { .. } => self.request_served(session),
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Message;
    use crate::session::event::{AssistantMessage, SessionHeader, ToolCallRef, UserMessage};
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
        let header = SessionHeader::for_test("s", "standard");
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
            pressure_ratio: 0.0,
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

    fn settings(trigger_ratio: f64, pressure_ratio: f64) -> PrunerSettings {
        PrunerSettings {
            enabled: true,
            threshold_chars: 200,
            head_chars: 100,
            tail_chars: 50,
            trigger_ratio,
            pressure_ratio,
            keep_recent_steps: 1,
        }
    }

    /// A session with a prompt (seq 2) and steps 1..=n, the results of `big` steps over the
    /// threshold; the pruner has seen it served up to its last step.
    fn served(n: u32, big: &[u32], pruner: &mut ToolResultPruner) -> (tempfile::TempDir, Session) {
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
        for n in 1..=n {
            let text = if big.contains(&n) {
                "x".repeat(300)
            } else {
                "small".into()
            };
            step(&mut session, n, &format!("call{n}"), &text);
            pruner.request_served(&session);
        }
        (dir, session)
    }

    fn pruned_calls(session: &Session) -> Vec<String> {
        session
            .history()
            .events()
            .iter()
            .filter_map(|event| match &event.body {
                EventBody::ToolResult(result) if result.meta.get("pruned").is_some() => {
                    Some(result.call_id.clone())
                }
                _ => None,
            })
            .collect()
    }

    /// Replace the surface entries `start..=end` with a user message, as a context edit does.
    fn edit(session: &mut Session, start: u64, end: u64, step: u32) {
        session
            .append(
                NewEvent::new(
                    1,
                    step,
                    EventBody::UserMessage(UserMessage {
                        text: "edited".into(),
                        origin: "context-edit".into(),
                    }),
                )
                .with_op(SurfaceOp::Replace { start, end })
                .with_sources((start..=end).collect()),
            )
            .unwrap();
    }

    #[test]
    fn due_results_wait_while_the_cached_prefix_is_intact() {
        let mut pruner = ToolResultPruner::new(settings(0.0, 10.0), 1000, 0);
        let (_dir, mut session) = served(4, &[1, 2], &mut pruner);
        // Only appends since the last request: shortening would cost the cache, and there is
        // no pressure.
        assert_eq!(pruner.prune_with_reason(&mut session, 1, 5).unwrap(), None);
        assert!(pruned_calls(&session).is_empty());
        // Without a request seen by this process, nothing is known to be broken either.
        let mut fresh = ToolResultPruner::new(settings(0.0, 10.0), 1000, 0);
        assert_eq!(fresh.prune(&mut session, 1, 5).unwrap(), 0);
    }

    #[test]
    fn a_prefix_break_shortens_the_due_results_after_it_for_free() {
        let mut pruner = ToolResultPruner::new(settings(0.0, 10.0), 1000, 0);
        // seqs: prompt 2, step n = assistant 2n+1, result 2n+2.
        let (_dir, mut session) = served(5, &[1, 3], &mut pruner);
        // An edit of step 2 breaks the prefix at seq 5: the result of step 3 (after the break)
        // is shortened in the same request, the one of step 1 (before it, still cached) waits.
        edit(&mut session, 5, 6, 6);
        assert_eq!(
            pruner.prune_with_reason(&mut session, 1, 6).unwrap(),
            Some((1, PruneReason::PrefixBroken))
        );
        assert_eq!(pruned_calls(&session), ["call3"]);
        // Below `trigger_ratio` a break alone shortens nothing: the window is roomy.
        let mut roomy = ToolResultPruner::new(settings(0.9, 10.0), 1000, 0);
        let (_dir, mut session) = served(5, &[1, 3], &mut roomy);
        edit(&mut session, 5, 6, 6);
        assert_eq!(roomy.prune(&mut session, 1, 6).unwrap(), 0);
    }

    #[test]
    fn a_compaction_commit_shortens_the_kept_tail_whatever_the_pressure() {
        let mut pruner = ToolResultPruner::new(settings(0.9, 10.0), 1000, 0);
        let (_dir, mut session) = served(6, &[1, 4], &mut pruner);
        // A checkpoint folds the prompt and steps 1..=2 (seqs 2..=6).
        session
            .append(NewEvent::new(
                1,
                7,
                EventBody::CompactionEnd(crate::session::event::CompactionEnd {
                    compaction_id: "cmp-1".into(),
                    outcome: "committed".into(),
                    reason: None,
                    checkpoint_seq: None,
                    tokens_before: 900,
                    tokens_after: 300,
                    auto_disabled: false,
                }),
            ))
            .unwrap();
        session
            .append(
                NewEvent::new(
                    1,
                    7,
                    EventBody::UserMessage(UserMessage {
                        text: "<compacted-summary>".into(),
                        origin: "compaction".into(),
                    }),
                )
                .with_op(SurfaceOp::Replace { start: 2, end: 6 })
                .with_sources(vec![2, 3, 4, 5, 6]),
            )
            .unwrap();
        assert_eq!(
            pruner.prune_with_reason(&mut session, 1, 7).unwrap(),
            Some((1, PruneReason::PrefixBroken))
        );
        assert_eq!(pruned_calls(&session), ["call4"]);
        crate::session::History::from_events(session.history().events().to_vec()).unwrap();
    }

    #[test]
    fn pressure_shortens_every_due_result_in_one_request() {
        let mut pruner = ToolResultPruner::new(settings(0.0, 0.05), 1000, 0);
        let (_dir, mut session) = served(5, &[1, 2, 3, 5], &mut pruner);
        // Three results are old enough (step 5 is recent): all go in the same request, so the
        // cache breaks once, at the first of them.
        assert_eq!(
            pruner.prune_with_reason(&mut session, 1, 6).unwrap(),
            Some((3, PruneReason::Pressure))
        );
        assert_eq!(pruned_calls(&session), ["call1", "call2", "call3"]);
        pruner.request_served(&session);
        step(&mut session, 6, "call6", "small");
        assert_eq!(
            pruner.prune(&mut session, 1, 7).unwrap(),
            1,
            "step 5's result"
        );
    }
}
