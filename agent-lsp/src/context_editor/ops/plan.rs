//! Planning one op: the event that carries a fold, pin, delete or replace on the surface, and
//! the mechanical summary a fold gets when nobody wrote one.
//!
//! Apart from the batch machinery in `ops.rs` because this is where each op's wording and its
//! place on the surface are decided; the batch only simulates and records what this plans.

use anyhow::Context;
use serde_json::json;

use super::super::preview;
use super::{EditOp, FOLD_TAG, ORIGIN, PIN_TAG, REPLACE_TAG};
use crate::compaction::range::region_of;
use crate::llm::Message;
use crate::session::event::{
    AssistantMessage, EventBody, SurfaceEdit, SurfaceOp, ToolResult, UserMessage,
};
use crate::session::{History, NewEvent, message_of};
use crate::tokens::estimate_message;

/// The event that carries `op` on the surface as it is in `sim`.
pub(super) fn plan_op(
    sim: &History,
    op: &EditOp,
    edit_id: &str,
    turn: u32,
    step: u32,
) -> anyhow::Result<NewEvent> {
    let (start, end) = op.range();
    let target = |seq: u64| -> anyhow::Result<&crate::session::event::Event> {
        anyhow::ensure!(
            sim.surface().contains(seq),
            "segment #{seq} is not on the surface (see `agent-lsp context show`)"
        );
        sim.event(seq)
            .with_context(|| format!("event {seq} is not in the log"))
    };
    let single = start == end;
    // A pin appends a copy, so it may bring back what is no longer on the surface (a goal a
    // compaction folded); everything else works on surface entries.
    let first = match op {
        EditOp::Pin { .. } => sim
            .event(start)
            .filter(|event| message_of(event).is_some())
            .with_context(|| format!("event {start} is not a message in the log"))?,
        _ => {
            target(end)?;
            target(start)?
        }
    };
    // A single tool result keeps its place in the pair: it becomes a result of the same call.
    let replace_result = |text: String, meta_key: &str| -> Option<NewEvent> {
        let EventBody::ToolResult(result) = &first.body else {
            return None;
        };
        Some(
            NewEvent::new(
                turn,
                step,
                EventBody::ToolResult(ToolResult {
                    call_id: result.call_id.clone(),
                    name: result.name.clone(),
                    text,
                    meta: json!({
                        meta_key: true,
                        "edit_id": edit_id,
                        "original_seq": start,
                        "original_chars": result.text.chars().count(),
                    }),
                }),
            )
            .with_op(SurfaceOp::Replace { start, end })
            .with_sources(vec![start]),
        )
    };
    let range_seqs = |sim: &History| -> anyhow::Result<Vec<u64>> {
        let region = region_of(sim, start, end)?;
        Ok(sim.surface().entries()[region.first..=region.last]
            .iter()
            .map(|entry| entry.seq)
            .collect())
    };
    let user = |text: String| {
        EventBody::UserMessage(UserMessage {
            text,
            origin: ORIGIN.into(),
        })
    };
    Ok(match op {
        EditOp::Fold { summary, .. } => {
            let call_id = match &first.body {
                EventBody::ToolResult(result) if single => Some(result.call_id.clone()),
                _ => None,
            };
            let seqs = if single && call_id.is_some() {
                vec![start]
            } else {
                range_seqs(sim)?
            };
            let summary = match summary {
                Some(summary) if !summary.trim().is_empty() => summary.trim().to_owned(),
                _ => mechanical_summary(sim, &seqs),
            };
            let recall = match &call_id {
                Some(call_id) => format!("{{\"tool_call_id\": \"{call_id}\"}}"),
                None => format!("{{\"event_seq\": {start}}}"),
            };
            let text = format!(
                "<{FOLD_TAG} edit=\"{edit_id}\" events=\"{start}-{end}\">\n{summary}\n\
                 (Folded by the context editor; the original is kept in the session log: \
                 recall_history {recall} reads it.)\n</{FOLD_TAG}>"
            );
            match call_id {
                Some(_) => replace_result(text, "folded").expect("a tool result"),
                None => NewEvent::new(turn, step, user(text))
                    .with_op(SurfaceOp::Replace { start, end })
                    .with_sources(seqs),
            }
        }
        EditOp::Pin { id } => {
            let already = sim.surface().entries().iter().any(|entry| {
                sim.event(entry.seq).is_some_and(|event| {
                    event.source_event_seqs == [*id]
                        && matches!(&event.body, EventBody::UserMessage(m)
                            if m.origin == ORIGIN && m.text.starts_with(&format!("<{PIN_TAG}")))
                })
            });
            anyhow::ensure!(!already, "segment #{id} is already pinned");
            let (what, body) = match &first.body {
                EventBody::UserMessage(message) if message.origin == "prompt" => (
                    format!("the programmer's prompt of turn {}", first.turn),
                    message.text.clone(),
                ),
                EventBody::ToolResult(result) => (
                    format!("the result of {} ({})", result.name, result.call_id),
                    result.text.clone(),
                ),
                EventBody::AssistantMessage(message) => (
                    "an earlier answer of yours".to_owned(),
                    message.text.clone(),
                ),
                _ => (
                    "an earlier message".to_owned(),
                    message_text(first).unwrap_or_default(),
                ),
            };
            let text = format!(
                "<{PIN_TAG} edit=\"{edit_id}\" from=\"{id}\">\nPinned by the programmer as key context: {what}, repeated here verbatim.\n{body}\n</{PIN_TAG}>"
            );
            NewEvent::new(turn, step, user(text)).with_sources(vec![*id])
        }
        EditOp::Delete { .. } => {
            let seqs = range_seqs(sim)?;
            NewEvent::new(
                turn,
                step,
                EventBody::SurfaceEdit(SurfaceEdit {
                    reason: format!("{edit_id}: delete {start}-{end}"),
                }),
            )
            .with_op(SurfaceOp::Remove { start, end })
            .with_sources(seqs)
        }
        EditOp::Replace { text, .. } => {
            if single && let Some(event) = replace_result(text.clone(), "replaced") {
                return Ok(event);
            }
            if single && let EventBody::AssistantMessage(message) = &first.body {
                anyhow::ensure!(
                    message.tool_calls.is_empty(),
                    "segment #{start} carries tool calls; replace it together with its results as a range"
                );
                return Ok(NewEvent::new(
                    turn,
                    step,
                    EventBody::AssistantMessage(AssistantMessage {
                        text: text.clone(),
                        reasoning: message.reasoning.clone(),
                        tool_calls: Vec::new(),
                    }),
                )
                .with_op(SurfaceOp::Replace { start, end })
                .with_sources(vec![start]));
            }
            let seqs = range_seqs(sim)?;
            NewEvent::new(
                turn,
                step,
                user(format!(
                    "<{REPLACE_TAG} edit=\"{edit_id}\" events=\"{start}-{end}\">\n{text}\n</{REPLACE_TAG}>"
                )),
            )
            .with_op(SurfaceOp::Replace { start, end })
            .with_sources(seqs)
        }
    })
}

pub(super) fn message_text(event: &crate::session::event::Event) -> Option<String> {
    Some(match message_of(event)? {
        Message::User { text } | Message::Tool { text, .. } => text,
        Message::Assistant { text, .. } => text,
    })
}

/// A summary written without a model: what was called, and how the text began.
pub fn mechanical_summary(history: &History, seqs: &[u64]) -> String {
    let mut calls = Vec::new();
    let mut first_text = None;
    let mut tokens = 0;
    for seq in seqs {
        let Some(event) = history.event(*seq) else {
            continue;
        };
        if let Some(message) = message_of(event) {
            tokens += estimate_message(&message);
        }
        match &event.body {
            EventBody::AssistantMessage(message) => {
                for call in &message.tool_calls {
                    calls.push(format!("{} {}", call.name, preview(&call.arguments, 60)));
                }
            }
            EventBody::ToolResult(result) => {
                calls.push(format!("{} result ({})", result.name, result.call_id));
            }
            _ => {}
        }
        if first_text.is_none()
            && let Some(text) = message_text(event).filter(|text| !text.trim().is_empty())
        {
            first_text = Some(preview(&text, 300));
        }
    }
    let mut summary = format!("{} message(s), about {tokens} tokens.", seqs.len());
    if !calls.is_empty() {
        summary.push_str(&format!(" Tool activity: {}.", calls.join("; ")));
    }
    if let Some(text) = first_text {
        summary.push_str(&format!(" It began: {text}"));
    }
    summary
}
