//! The audit trail of context edits: how a requested op and its result are described in the
//! log, and the batches read back from it for `context history`.
//!
//! Apart from the ops because it only describes: nothing here changes the surface.

use serde::Serialize;

use super::super::preview;
use super::EditOp;
use super::plan::message_text;
use crate::session::event::{ContextEditOp, ContextEditResult, EventBody};
use crate::session::{History, NewEvent, message_of};
use crate::tokens::estimate_message;

/// The audit line for a requested op.
pub(super) fn describe_op(history: &History, op: &EditOp) -> ContextEditOp {
    let (start, end) = op.range();
    let entries = history.surface().entries();
    let position = |seq: u64| entries.iter().position(|entry| entry.seq == seq);
    let target = match (position(start), position(end)) {
        (Some(first), Some(last)) if first <= last => entries[first..=last]
            .iter()
            .map(|entry| entry.seq)
            .collect(),
        _ if start == end => vec![start],
        _ => vec![start, end],
    };
    let before = history
        .event(start)
        .map(|event| {
            let text = message_text(event).unwrap_or_default();
            let tokens = target
                .iter()
                .filter_map(|seq| history.event(*seq).and_then(message_of))
                .map(|message| estimate_message(&message))
                .sum::<u64>();
            format!(
                "#{start} {}{}: {} (~{tokens} tokens)",
                event.kind(),
                if target.len() > 1 {
                    format!(" +{} more", target.len() - 1)
                } else {
                    String::new()
                },
                preview(&text, 80)
            )
        })
        .unwrap_or_else(|| format!("#{start}: not in the log"));
    let detail = match op {
        EditOp::Fold { summary, .. } => summary.clone(),
        EditOp::Replace { text, .. } => Some(text.clone()),
        EditOp::Pin { .. } | EditOp::Delete { .. } => None,
    };
    ContextEditOp {
        op: op.name().to_owned(),
        target,
        before,
        detail,
    }
}

pub(super) fn describe_after(event: &NewEvent) -> String {
    match (&event.body, &event.surface_op) {
        (EventBody::SurfaceEdit(_), _) => "removed".to_owned(),
        (body, _) => {
            let text = match body {
                EventBody::UserMessage(message) => message.text.as_str(),
                EventBody::ToolResult(result) => result.text.as_str(),
                EventBody::AssistantMessage(message) => message.text.as_str(),
                _ => "",
            };
            format!("{}: {}", body.kind(), preview(text, 80))
        }
    }
}

/// One batch of the audit trail.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct EditRecord {
    pub edit_id: String,
    pub ts: String,
    pub actor: String,
    pub ops: Vec<ContextEditOp>,
    pub snapshot: Option<u64>,
    /// `applied`, `refused`, or `unfinished` (the process ended mid-batch).
    pub outcome: String,
    pub reason: Option<String>,
    pub results: Vec<ContextEditResult>,
    pub generation: Option<u64>,
    pub tokens_before: Option<u64>,
    pub tokens_after: Option<u64>,
}

/// Every context-edit batch of the session, oldest first.
pub(crate) fn edit_history(history: &History) -> Vec<EditRecord> {
    let mut records: Vec<EditRecord> = Vec::new();
    for event in history.events() {
        match &event.body {
            EventBody::ContextEditBegin(begin) => records.push(EditRecord {
                edit_id: begin.edit_id.clone(),
                ts: event.ts.clone(),
                actor: begin.actor.clone(),
                ops: begin.ops.clone(),
                snapshot: begin.snapshot,
                outcome: "unfinished".into(),
                reason: None,
                results: Vec::new(),
                generation: None,
                tokens_before: None,
                tokens_after: None,
            }),
            EventBody::ContextEditEnd(end) => {
                if let Some(record) = records.iter_mut().rev().find(|r| r.edit_id == end.edit_id) {
                    record.outcome = end.outcome.clone();
                    record.reason = end.reason.clone();
                    record.results = end.results.clone();
                    record.generation = Some(end.generation);
                    record.tokens_before = Some(end.tokens_before);
                    record.tokens_after = Some(end.tokens_after);
                }
            }
            _ => {}
        }
    }
    records
}
