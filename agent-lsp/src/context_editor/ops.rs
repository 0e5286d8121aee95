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

mod audit;
mod fold_summary;
mod outcome;
mod plan;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::segments;
use crate::session::event::{
    ContextEditBegin, ContextEditOp, ContextEditResult, EventBody, SurfaceEdit, SurfaceOp,
};
use crate::session::{History, NewEvent, Session};
use crate::tokens::{TokenMeter, estimate_message};
use audit::{describe_after, describe_op};
use plan::plan_op;

pub(crate) use audit::edit_history;
pub use fold_summary::{FOLD_INSTRUCTION_MARKER, next_request, write_fold_summaries};
pub use outcome::{BatchReport, NeedsConfirmation, Refused};
pub use plan::mechanical_summary;

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
        /// The first segment folded.
        id: u64,
        /// The last segment folded, when the fold covers a range.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        end: Option<u64>,
        /// The summary to put in the range's place; `None` leaves it to the model or to the
        /// mechanical summary.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
    },
    /// Append a framed copy of one segment at the tail, where it stays in view after later
    /// compactions (see the module documentation for why it is a copy).
    Pin {
        /// The segment copied.
        id: u64,
    },
    /// Take segments off the surface; needs `force` when later messages refer to them.
    Delete {
        /// The first segment removed.
        id: u64,
        /// The last segment removed, when the delete covers a range.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        end: Option<u64>,
    },
    /// Put new text in the place of segments, keeping their role where it can.
    Replace {
        /// The first segment replaced.
        id: u64,
        /// The last segment replaced, when the replacement covers a range.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        end: Option<u64>,
        /// The text that takes the range's place.
        text: String,
    },
}

impl EditOp {
    /// The op's name as the audit trail and error messages write it (`fold`, `pin`, …).
    fn name(&self) -> &'static str {
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
    /// The turn the batch's events are recorded under: the last turn for an edit between
    /// turns, the running one for a rule.
    pub turn: u32,
    /// The step the batch's events are recorded under (0 between turns).
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
