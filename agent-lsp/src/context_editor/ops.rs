//! Context edits as recorded batches: fold, pin, delete, replace, and rollback to a snapshot.
//!
//! A batch is written as `context-edit/begin` (who, which ops, what they targeted, the snapshot),
//! a `surface/edit` carrying `snapshot` (it ends the surface generation, so the surface before
//! the batch is kept as that generation), one event per op, and `context-edit/end` (what took
//! each target's place, tokens before and after). The whole batch is first tried on a copy of
//! the history ([`History::simulate`]): an op that would split a tool call from its result, or
//! target what is not on the surface, refuses the batch and nothing but the refusal is written.
//! Rolling back is one more batch whose op is `restore {generation: snapshot}`.
//!
//! How each op changes the surface:
//! - **fold**: a single tool result becomes a `tool/result` for the same call holding the
//!   summary (the pair stays whole, like the pruner's shortened results); anything else
//!   becomes a `user/message` framed `<folded-context>` in place of the range (`replace`).
//!   Either way the text says how to `recall_history` the originals.
//! - **pin**: a copy framed `<pinned-context>` is *appended* at the tail. An append leaves the
//!   provider's cached prefix intact, so a pin costs no cache at all; the original stays where
//!   it was (removing it would break the cache from there on). The `pin_first_goal` rule
//!   re-pins only after a compaction folded the goal, when the cache was just broken anyway, so
//!   pins never cost more than the compaction already did.
//! - **delete**: `surface/edit` with `remove`; when later messages refer to a deleted segment
//!   the batch needs `force` ([`NeedsConfirmation`]).
//! - **replace**: the new text takes the target's place, keeping the role where it can (a tool
//!   result stays a result of the same call, an assistant text stays an assistant message).

use std::fmt;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{Reference, preview, segments};
use crate::compaction::range::region_of;
use crate::context::request::replay_request;
use crate::llm::provider::Provider;
use crate::llm::{Message, ModelRequest};
use crate::session::event::{
    AssistantMessage, ContextEditBegin, ContextEditEnd, ContextEditOp, ContextEditResult,
    EventBody, SurfaceEdit, SurfaceOp, ToolResult, UserMessage,
};
use crate::session::{History, NewEvent, Session, message_of};
use crate::tokens::{TokenMeter, estimate_message};

/// Framing of a folded range.
pub const FOLD_TAG: &str = "folded-context";
/// Framing of a pinned copy.
pub const PIN_TAG: &str = "pinned-context";
/// Framing of replaced user-role text.
pub const REPLACE_TAG: &str = "replaced-context";

/// The origin of every `user/message` the context editor writes.
pub const ORIGIN: &str = "context-edit";

/// One requested edit. Targets are segment ids (event seqs) as on the surface when the op runs;
/// `end` (inclusive, default `id`) makes it a range.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum EditOp {
    /// Replace with a summary: given, model-written ([`write_fold_summaries`]), or else a
    /// mechanical one.
    Fold {
        id: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        end: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
    },
    Pin {
        id: u64,
    },
    Delete {
        id: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        end: Option<u64>,
    },
    Replace {
        id: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        end: Option<u64>,
        text: String,
    },
}

impl EditOp {
    pub fn name(&self) -> &'static str {
        match self {
            EditOp::Fold { .. } => "fold",
            EditOp::Pin { .. } => "pin",
            EditOp::Delete { .. } => "delete",
            EditOp::Replace { .. } => "replace",
        }
    }

    /// First and last targeted segment ids.
    pub fn range(&self) -> (u64, u64) {
        match self {
            EditOp::Pin { id } => (*id, *id),
            EditOp::Fold { id, end, .. }
            | EditOp::Delete { id, end }
            | EditOp::Replace { id, end, .. } => (*id, end.unwrap_or(*id)),
        }
    }
}

/// Who asks and how.
#[derive(Clone, Debug)]
pub struct BatchOptions {
    /// `cli`, `editor` or `rule`, recorded in the audit trail.
    pub actor: String,
    /// Delete segments that later messages refer to without asking.
    pub force: bool,
    pub turn: u32,
    pub step: u32,
}

impl BatchOptions {
    /// Options for an edit made between turns of `history` by `actor`.
    pub fn between_turns(history: &History, actor: &str, force: bool) -> BatchOptions {
        BatchOptions {
            actor: actor.to_owned(),
            force,
            turn: history.next_turn().saturating_sub(1),
            step: 0,
        }
    }
}

/// What an applied batch did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BatchReport {
    pub edit_id: String,
    /// Roll back to this generation to undo the batch.
    pub snapshot: u64,
    /// The surface generation after the batch.
    pub generation: u64,
    pub results: Vec<ContextEditResult>,
    pub tokens_before: u64,
    pub tokens_after: u64,
}

impl BatchReport {
    /// Close the batch (or rollback) in the log as applied, after its surface events.
    fn record(
        self,
        session: &mut Session,
        (turn, step): (u32, u32),
    ) -> anyhow::Result<BatchReport> {
        session.append(NewEvent::new(
            turn,
            step,
            EventBody::ContextEditEnd(ContextEditEnd {
                edit_id: self.edit_id.clone(),
                outcome: "applied".into(),
                reason: None,
                results: self.results.clone(),
                generation: self.generation,
                tokens_before: self.tokens_before,
                tokens_after: self.tokens_after,
            }),
        ))?;
        session.flush()?;
        Ok(self)
    }
}

/// A delete of segments that later messages refer to, asked without `force`. Nothing was
/// written.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NeedsConfirmation {
    /// Each referenced segment and what refers to it.
    pub referenced: Vec<(u64, Vec<Reference>)>,
}

impl fmt::Display for NeedsConfirmation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = self
            .referenced
            .iter()
            .map(|(id, references)| {
                let by = references
                    .iter()
                    .map(|r| format!("#{} ({})", r.id, r.reason))
                    .collect::<Vec<_>>()
                    .join(", ");
                format!("#{id} is referred to by {by}")
            })
            .collect::<Vec<_>>()
            .join("; ");
        write!(
            f,
            "later messages refer to what the delete would remove ({list}); fold it instead, or confirm the delete (--force)"
        )
    }
}

impl std::error::Error for NeedsConfirmation {}

/// A batch the surface refused; the refusal is recorded in the log.
#[derive(Clone, Debug, PartialEq)]
pub struct Refused {
    pub edit_id: String,
    pub reason: String,
}

impl Refused {
    /// Close the batch in the log as refused (the surface stays at `generation`) and turn the
    /// refusal into the caller's error.
    fn record(
        self,
        session: &mut Session,
        (turn, step): (u32, u32),
        generation: u64,
        tokens: u64,
    ) -> anyhow::Result<anyhow::Error> {
        session.append(NewEvent::new(
            turn,
            step,
            EventBody::ContextEditEnd(ContextEditEnd {
                edit_id: self.edit_id.clone(),
                outcome: "refused".into(),
                reason: Some(self.reason.clone()),
                results: Vec::new(),
                generation,
                tokens_before: tokens,
                tokens_after: tokens,
            }),
        ))?;
        session.flush()?;
        tracing::warn!(edit_id = %self.edit_id, reason = %self.reason, "context edit refused");
        Ok(self.into())
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} was refused, nothing changed: {}",
            self.edit_id, self.reason
        )
    }
}

impl std::error::Error for Refused {}

/// Estimated tokens of the surface, calibrated.
pub fn surface_tokens(history: &History) -> u64 {
    let meter = TokenMeter::recover(history);
    let mut history = history.clone();
    meter.calibrated(history.derive_messages().iter().map(estimate_message).sum())
}

/// Apply `ops` as one batch. Errors are [`NeedsConfirmation`] (nothing written), [`Refused`]
/// (the refusal written), or a failure to write the log.
pub fn apply_batch(
    session: &mut Session,
    ops: &[EditOp],
    options: &BatchOptions,
) -> anyhow::Result<BatchReport> {
    anyhow::ensure!(!ops.is_empty(), "an edit batch needs at least one op");
    let history = session.history();
    check_references(history, ops, options.force)?;
    let begin_seq = history.last_seq() + 1;
    let edit_id = format!("edit-{begin_seq}");
    let snapshot = history.generation();
    let tokens_before = surface_tokens(history);
    let (turn, step) = (options.turn, options.step);
    let requested = ops
        .iter()
        .map(|op| describe_op(history, op))
        .collect::<Vec<_>>();
    let begin = |snapshot: Option<u64>| {
        NewEvent::new(
            turn,
            step,
            EventBody::ContextEditBegin(ContextEditBegin {
                edit_id: edit_id.clone(),
                actor: options.actor.clone(),
                ops: requested.clone(),
                snapshot,
            }),
        )
    };

    let mut sim = history.clone();
    let mut planned = vec![begin(Some(snapshot))];
    let mut results = Vec::new();
    let plan = (|| -> anyhow::Result<()> {
        sim.simulate(planned[0].clone())?;
        let marker = NewEvent::new(
            turn,
            step,
            EventBody::SurfaceEdit(SurfaceEdit {
                reason: format!("{edit_id}: snapshot {snapshot} before the batch"),
            }),
        )
        .with_op(SurfaceOp::Snapshot);
        sim.simulate(marker.clone())?;
        planned.push(marker);
        for (index, op) in ops.iter().enumerate() {
            let event = plan_op(&sim, op, &edit_id, turn, step)
                .with_context(|| format!("op {} ({})", index + 1, op.name()))?;
            let after = describe_after(&event);
            let seq = sim
                .simulate(event.clone())
                .with_context(|| format!("op {} ({})", index + 1, op.name()))?;
            results.push(ContextEditResult {
                op: op.name().to_owned(),
                seq,
                after,
            });
            planned.push(event);
        }
        Ok(())
    })();
    if let Err(error) = plan {
        session.append(begin(None))?;
        let refused = Refused {
            edit_id,
            reason: format!("{error:#}"),
        };
        return Err(refused.record(session, (turn, step), snapshot, tokens_before)?);
    }
    let tokens_after = surface_tokens(&sim);
    let generation = sim.generation();
    for event in planned {
        session.append(event)?;
    }
    let report = BatchReport {
        edit_id,
        snapshot,
        generation,
        results,
        tokens_before,
        tokens_after,
    }
    .record(session, (turn, step))?;
    tracing::info!(edit_id = %report.edit_id, actor = %options.actor, ops = ops.len(), snapshot, generation, "context edit applied");
    Ok(report)
}

/// Restore the surface to `snapshot` (a generation) as an appended `restore`. The surface before
/// the rollback is kept as a generation too, so a rollback can itself be rolled back.
pub fn rollback(
    session: &mut Session,
    snapshot: u64,
    options: &BatchOptions,
) -> anyhow::Result<BatchReport> {
    let history = session.history();
    let begin_seq = history.last_seq() + 1;
    let edit_id = format!("edit-{begin_seq}");
    let current = history.generation();
    let tokens_before = surface_tokens(history);
    let appended_since = appended_since(history, snapshot);
    let op = ContextEditOp {
        op: "rollback".into(),
        target: Vec::new(),
        before: format!(
            "generation {current}, {} segments",
            history.surface().entries().len()
        ),
        detail: Some(format!("to snapshot {snapshot}")),
    };
    let begin = |snapshot: Option<u64>| {
        NewEvent::new(
            options.turn,
            options.step,
            EventBody::ContextEditBegin(ContextEditBegin {
                edit_id: edit_id.clone(),
                actor: options.actor.clone(),
                ops: vec![op.clone()],
                snapshot,
            }),
        )
    };
    let restore = NewEvent::new(
        options.turn,
        options.step,
        EventBody::SurfaceEdit(SurfaceEdit {
            reason: format!("{edit_id}: rollback to snapshot {snapshot}"),
        }),
    )
    .with_op(SurfaceOp::Restore {
        generation: snapshot,
    });
    let mut sim = history.clone();
    let tried = sim
        .simulate(begin(Some(current)))
        .and_then(|_| sim.simulate(restore.clone()));
    let seq = match tried {
        Ok(seq) => seq,
        Err(error) => {
            session.append(begin(None))?;
            let refused = Refused {
                edit_id,
                reason: format!("{error:#}"),
            };
            return Err(refused.record(
                session,
                (options.turn, options.step),
                current,
                tokens_before,
            )?);
        }
    };
    let generation = sim.generation();
    let tokens_after = surface_tokens(&sim);
    let mut after = format!(
        "generation {snapshot} restored, {} segments",
        sim.surface().entries().len()
    );
    if appended_since > 0 {
        after.push_str(&format!(
            "; {appended_since} entries appended after the snapshot left the surface"
        ));
    }
    let results = vec![ContextEditResult {
        op: "rollback".into(),
        seq,
        after,
    }];
    session.append(begin(Some(current)))?;
    session.append(restore)?;
    let report = BatchReport {
        edit_id,
        snapshot: current,
        generation,
        results,
        tokens_before,
        tokens_after,
    }
    .record(session, (options.turn, options.step))?;
    tracing::info!(edit_id = %report.edit_id, snapshot, generation, "context rolled back");
    Ok(report)
}

/// Content events appended (not by an edit) after generation `snapshot` ended: a rollback to it
/// takes them off the surface.
fn appended_since(history: &History, snapshot: u64) -> usize {
    let mut generation = 0;
    let mut count = 0;
    for event in history.events() {
        match event.effective_surface_op() {
            Some(SurfaceOp::Append) if generation > snapshot => count += 1,
            Some(SurfaceOp::Append) | None => {}
            Some(_) => generation += 1,
        }
    }
    count
}

/// Refuse deletes of referenced segments unless forced.
fn check_references(history: &History, ops: &[EditOp], force: bool) -> anyhow::Result<()> {
    if force || !ops.iter().any(|op| matches!(op, EditOp::Delete { .. })) {
        return Ok(());
    }
    let all = segments(history, 0);
    let mut referenced = Vec::new();
    for op in ops {
        let EditOp::Delete { .. } = op else { continue };
        let (start, end) = op.range();
        let (Some(first), Some(last)) = (
            all.iter().position(|s| s.id == start),
            all.iter().position(|s| s.id == end),
        ) else {
            // Not on the surface: the plan refuses it with the reason.
            continue;
        };
        let inside = all[first..=last.max(first)]
            .iter()
            .map(|s| s.id)
            .collect::<Vec<_>>();
        for segment in &all[first..=last.max(first)] {
            let outside = segment
                .referenced_by
                .iter()
                .filter(|r| !inside.contains(&r.id))
                .cloned()
                .collect::<Vec<_>>();
            if !outside.is_empty() {
                referenced.push((segment.id, outside));
            }
        }
    }
    if referenced.is_empty() {
        Ok(())
    } else {
        Err(NeedsConfirmation { referenced }.into())
    }
}

/// The event that carries `op` on the surface as it is in `sim`.
fn plan_op(
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

fn message_text(event: &crate::session::event::Event) -> Option<String> {
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

/// The audit line for a requested op.
fn describe_op(history: &History, op: &EditOp) -> ContextEditOp {
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

fn describe_after(event: &NewEvent) -> String {
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
pub struct EditRecord {
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
pub fn edit_history(history: &History) -> Vec<EditRecord> {
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

/// The request the session's next step would send before its new messages: the last recorded
/// request's system prompt, tool catalog and parameters with the current surface. What an edit
/// changes for the model, and what a rollback must give back byte for byte.
pub fn next_request(history: &History) -> anyhow::Result<ModelRequest> {
    let n = history.n_requests();
    anyhow::ensure!(
        n > 0,
        "the session has made no model request yet: there is no prompt prefix to show"
    );
    let last = replay_request(history, n)?;
    let mut history = history.clone();
    Ok(ModelRequest {
        index: n + 1,
        messages: history.derive_messages().to_vec(),
        ..last
    })
}

/// First line of the fold instruction; a test endpoint recognises fold summary calls by it.
pub const FOLD_INSTRUCTION_MARKER: &str = "<fold-request>";

/// Ask the session's model for the summaries of the folds that have none. The request replays
/// the last request's prefix up to the end of the folded range (served from the provider's
/// cache) and asks for a short summary of the range.
pub async fn write_fold_summaries(
    history: &History,
    ops: &mut [EditOp],
    provider: &Provider,
    cancel: &CancellationToken,
) -> anyhow::Result<()> {
    for op in ops.iter_mut() {
        let (start, end) = op.range();
        let EditOp::Fold { summary, .. } = op else {
            continue;
        };
        if summary.is_some() {
            continue;
        }
        let base = next_request(history)?;
        let entries = history.surface().entries();
        let first = entries
            .iter()
            .position(|entry| entry.seq == start)
            .with_context(|| format!("segment #{start} is not on the surface"))?;
        let last = entries
            .iter()
            .position(|entry| entry.seq == end)
            .with_context(|| format!("segment #{end} is not on the surface"))?;
        anyhow::ensure!(first <= last, "range #{start}-#{end} runs backwards");
        let mut messages = base.messages[..=last].to_vec();
        messages.push(Message::User {
            text: format!(
                "{FOLD_INSTRUCTION_MARKER}\nThe last {} message(s) before this one are about to be folded out of the conversation. \
                 Write the summary that will take their place: at most 150 words, keeping file paths, symbol names, \
                 exact errors, decisions and results you still need. Answer with the summary only; do not call tools.\n</fold-request>",
                last - first + 1
            ),
        });
        let mut params = base.params.clone();
        params.max_tokens = Some(1024);
        let request = ModelRequest {
            index: 0,
            messages,
            params,
            ..base
        };
        let completion = provider
            .stream(&request, cancel, |_| {})
            .await
            .with_context(|| format!("the fold summary call for #{start}-#{end} failed"))?;
        anyhow::ensure!(
            completion.tool_calls.is_empty(),
            "the fold summary call answered with tool calls instead of a summary"
        );
        let text = completion.text.trim();
        anyhow::ensure!(!text.is_empty(), "the fold summary call returned no text");
        *summary = Some(text.to_owned());
    }
    Ok(())
}
