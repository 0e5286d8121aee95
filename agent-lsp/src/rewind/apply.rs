//! Planning a rewind (or an undo) from the log and the checkpoints, and carrying it out.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Context;

use super::attribution::{Checkpoints, Point, Rewinds, owner, rewound_turns, uncaptured_changes};
use super::carry::carry_out;
use super::plan::{ContextPart, Held, Place, Plan, Write};
use super::{Report, Request};
use crate::context_editor::ops::EditOp;
use crate::session::Session;
use crate::session::event::{CheckpointReason, RewindBegin};
use crate::tools::checkpoints::{capture, record_checkpoint};

/// Take back turn `request.turn` (or the last one not taken back) and every later turn.
pub async fn rewind(
    session: &mut Session,
    place: Place<'_>,
    request: &Request,
) -> anyhow::Result<Report> {
    let history = session.history();
    let last_turn = history.next_turn().saturating_sub(1);
    anyhow::ensure!(last_turn >= 1, "the session has no turn to take back");
    let checkpoints = Checkpoints::of(history);
    let rewound = rewound_turns(history);
    let turn = match request.turn {
        Some(turn) => {
            anyhow::ensure!(
                (1..=last_turn).contains(&turn),
                "the session has turns 1 to {last_turn}; there is no turn {turn}"
            );
            turn
        }
        // The last turn not taken back yet; for the files, one whose start was captured (a
        // read-only call run by hand is a turn without checkpoints: it changed nothing).
        None => (1..=last_turn)
            .rev()
            .filter(|turn| !request.scope.files() || checkpoints.turn_start(*turn).is_some())
            .find(|turn| !rewound.contains(turn))
            .context("every turn of the session is taken back already (`--undo` gives the last rewind back)")?,
    };
    let start = if request.scope.files() {
        Some(checkpoints.turn_start(turn).with_context(|| {
            format!("turn {turn} has no checkpoint of its start (it ran before checkpoints were taken, or its capture failed); `--context` still takes back the conversation")
        })?)
    } else {
        None
    };
    let context_ops = if request.scope.context() {
        Some(context_ops(session, turn)?)
    } else {
        None
    };

    let mut report = Report {
        turn,
        last_turn,
        ..Report::default()
    };
    let mut begin = RewindBegin {
        rewind_id: String::new(),
        turn,
        last_turn,
        scope: request.scope,
        undo_of: None,
        from: None,
        pre: None,
        force: request.force,
        plan: Vec::new(),
        conflicts: Vec::new(),
    };
    let context = context_ops.map(ContextPart::Delete);
    let Some(start) = start else {
        return carry_out(
            session,
            &place,
            request.dry_run,
            request.force,
            begin,
            Plan::default(),
            context,
            report,
        )
        .await;
    };
    let Now {
        id: pre,
        recorded: recorded_pre,
        uncaptured,
    } = capture_now(session, &place, request.dry_run).await?;
    let plan = plan_rewind(session, &place, &checkpoints, start, (&pre, uncaptured))?;
    report.yours = plan.yours.clone();
    begin.from = Some(checkpoints.points[start].id.clone());
    begin.pre = recorded_pre.then_some(pre);
    carry_out(
        session,
        &place,
        request.dry_run,
        request.force,
        begin,
        plan,
        context,
        report,
    )
    .await
}

/// Give back what the last standing rewind took back: its files as they were before it (under
/// the same rule: a path must still hold what the rewind wrote) and its conversation.
pub async fn undo(
    session: &mut Session,
    place: Place<'_>,
    dry_run: bool,
) -> anyhow::Result<Report> {
    let history = session.history();
    let (begin, end) = Rewinds::of(history)
        .standing
        .pop()
        .context("no rewind of this session is left to undo")?;
    let (id, turn, last_turn) = (begin.rewind_id.clone(), begin.turn, begin.last_turn);
    let mut report = Report {
        turn,
        last_turn,
        ..Report::default()
    };
    let Now {
        id: now,
        recorded: recorded_now,
        ..
    } = capture_now(session, &place, dry_run).await?;
    let mut plan = Plan::default();
    if end.outcome == "interrupted"
        && let Some(before) = &begin.pre
    {
        // Which planned paths were written before the process ended is not known: each goes
        // back when it holds what the rewind was to write, and is left when it holds anything
        // else than that or what it held before.
        let (before, now_files) = (
            place.snapshots.files_of(before)?,
            place.snapshots.files_of(&now)?,
        );
        for planned in &begin.plan {
            let write = Write {
                path: planned.path.clone(),
                current: now_files.effective(&planned.path).cloned(),
                target: before.effective(&planned.path).cloned(),
            };
            if write.current == write.target {
                continue;
            }
            if write.current.as_ref().map(|entry| &entry.id) == planned.to.as_ref() {
                plan.writes.push(write);
            } else {
                plan.held.push(Held {
                    write,
                    why: "changed after the rewind".into(),
                    forceable: true,
                });
            }
        }
    } else if let (Some(before), Some(after)) = (&begin.pre, &end.post) {
        let (before, after, now_files) = (
            place.snapshots.files_of(before)?,
            place.snapshots.files_of(after)?,
            place.snapshots.files_of(&now)?,
        );
        for restored in &end.restored {
            let path = &restored.path;
            let write = Write {
                path: path.clone(),
                current: now_files.effective(path).cloned(),
                target: before.effective(path).cloned(),
            };
            if write.current == write.target {
                continue;
            }
            if write.current.as_ref() != after.effective(path) {
                plan.held.push(Held {
                    write,
                    why: "changed after the rewind".into(),
                    forceable: true,
                });
            } else {
                plan.writes.push(write);
            }
        }
    }
    let begin_record = RewindBegin {
        rewind_id: String::new(),
        turn,
        last_turn,
        scope: begin.scope,
        undo_of: Some(id),
        from: begin.pre.clone(),
        pre: recorded_now.then(|| now.clone()),
        force: false,
        plan: Vec::new(),
        conflicts: Vec::new(),
    };
    let context = end.context_snapshot.map(ContextPart::Rollback);
    report.turn = turn;
    carry_out(
        session,
        &place,
        dry_run,
        false,
        begin_record,
        plan,
        context,
        report,
    )
    .await
}

/// The delete that takes turn `turn` and everything after it off the surface, or why it
/// cannot: a compaction folded the turn's start into a summary.
fn context_ops(session: &Session, turn: u32) -> anyhow::Result<Vec<EditOp>> {
    let segments = crate::context_editor::segments(session.history(), 0);
    // A turn starts with its prompt, or (a tool the user ran) with the call's message; a
    // compaction's summary of it is recorded later and sits elsewhere, so it never counts.
    let starts = |segment: &crate::context_editor::Segment| {
        segment.source == "prompt" || segment.role == "assistant"
    };
    let Some(first) = segments
        .iter()
        .position(|segment| segment.turn == turn && starts(segment))
    else {
        let still = segments
            .iter()
            .filter(|segment| segment.turn > turn && starts(segment))
            .map(|segment| segment.turn)
            .min();
        anyhow::bail!(
            "turn {turn}'s start is no longer in the conversation (a compaction folded it into a summary){}; `--files` still takes back its files",
            still
                .map(|still| format!("; the first turn whose start is still there is {still}"))
                .unwrap_or_default()
        );
    };
    let last = segments.last().expect("one found above");
    Ok(vec![EditOp::Delete {
        id: segments[first].id,
        end: Some(last.id),
    }])
}

/// The files as a rewind finds them.
struct Now {
    /// The checkpoint's id.
    id: String,
    /// Whether it is in the log (`before_rewind`); a dry run records nothing.
    recorded: bool,
    /// Files over the size cap, with their sizes.
    uncaptured: BTreeMap<String, u64>,
}

/// The files now (disk, and the editor's buffers): recorded as `before_rewind` unless a dry
/// run, which writes nothing to the log.
async fn capture_now(
    session: &mut Session,
    place: &Place<'_>,
    dry_run: bool,
) -> anyhow::Result<Now> {
    let checkpoint = if dry_run {
        capture(place.snapshots, place.buffers, session).await?
    } else {
        let turn = session.history().next_turn().saturating_sub(1);
        record_checkpoint(
            place.snapshots,
            place.buffers,
            session,
            (turn, 0),
            CheckpointReason::BeforeRewind,
            Vec::new(),
        )
        .await?
        .context("the files could not be captured before the rewind (see the session log); nothing was changed")?
    };
    Ok(Now {
        uncaptured: checkpoint
            .uncaptured
            .iter()
            .map(|file| (file.path.clone(), file.bytes))
            .collect(),
        id: checkpoint.id,
        recorded: !dry_run,
    })
}

/// Which paths the agent changed from checkpoint `start` on, which of those the user changed
/// too, and what each goes back to.
fn plan_rewind(
    session: &Session,
    place: &Place<'_>,
    checkpoints: &Checkpoints,
    start: usize,
    (pre, pre_uncaptured): (&str, BTreeMap<String, u64>),
) -> anyhow::Result<Plan> {
    let history = session.history();
    let points = &checkpoints.points[start..];
    let now = Point {
        seq: u64::MAX,
        turn: u32::MAX,
        reason: CheckpointReason::BeforeRewind,
        id: pre.to_owned(),
        changed: Vec::new(),
        uncaptured: pre_uncaptured,
        after_failure: false,
    };
    let (mut agent, mut user) = (BTreeSet::new(), BTreeSet::new());
    for pair in points.iter().chain([&now]).collect::<Vec<_>>().windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let owner = owner(history, a, b);
        let mut changed = place.snapshots.changes(&a.id, &b.id)?;
        changed.extend(uncaptured_changes(a, b));
        for path in changed {
            if owner.is_agents(&path) {
                agent.insert(path);
            } else {
                user.insert(path);
            }
        }
    }
    let uncaptured: BTreeSet<&String> = points
        .iter()
        .chain([&now])
        .flat_map(|point| point.uncaptured.keys())
        .collect();
    let (from, now_files) = (
        place.snapshots.files_of(&points[0].id)?,
        place.snapshots.files_of(pre)?,
    );
    let mut plan = Plan {
        yours: user.difference(&agent).cloned().collect(),
        ..Plan::default()
    };
    for path in agent {
        let write = Write {
            current: now_files.effective(&path).cloned(),
            target: from.effective(&path).cloned(),
            path,
        };
        // A file over the cap holds no entry on either side: equal entries say nothing of it.
        if write.current == write.target && !uncaptured.contains(&write.path) {
            continue;
        }
        let held = |why: &str, forceable| Held {
            why: why.to_owned(),
            forceable,
            write: Write {
                path: write.path.clone(),
                current: write.current.clone(),
                target: write.target.clone(),
            },
        };
        if uncaptured.contains(&write.path) {
            plan.held.push(held(
                "over the size cap: it was not captured and cannot be restored",
                false,
            ));
        } else if user.contains(&write.path) {
            let why = if now_files.buffers.contains_key(&write.path) {
                "unsaved changes in the editor"
            } else {
                "you changed it too after the turn began"
            };
            plan.held.push(held(why, true));
        } else {
            plan.writes.push(write);
        }
    }
    Ok(plan)
}
