//! Carrying out a planned rewind: the `rewind/begin` with the plan before anything changes,
//! each path written back (through the editor for an open buffer, checked right before so a
//! keystroke meanwhile makes a conflict, not a loss), the conversation, the `after_rewind`
//! checkpoint, and the `rewind/end`.

use super::plan::{ContextPart, Held, Place, Plan, Write};
use super::{ConflictReport, Report};
use crate::context_editor::ops::{BatchOptions, apply_batch, rollback};
use crate::session::event::{
    CheckpointReason, Conflict, EventBody, PlannedPath, Restored, RewindBegin, RewindEnd,
};
use crate::session::{NewEvent, Session};
use crate::snapshots::{Entry, Snapshots};
use crate::tools::checkpoints::record_checkpoint;

fn action(write: &Write) -> &'static str {
    match (&write.current, &write.target) {
        (None, Some(_)) => "create",
        (Some(_), None) => "delete",
        _ => "restore",
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn carry_out(
    session: &mut Session,
    place: &Place<'_>,
    dry_run: bool,
    force: bool,
    mut begin: RewindBegin,
    plan: Plan,
    context: Option<ContextPart>,
    mut report: Report,
) -> anyhow::Result<Report> {
    // What is written: the plan's paths, and the conflicts `force` overwrites (a file over
    // the cap cannot be forced back); the rest is kept.
    let conflicts: Vec<Conflict> = plan
        .held
        .iter()
        .map(|held| Conflict {
            path: held.write.path.clone(),
            why: held.why.clone(),
        })
        .collect();
    let (forced, held): (Vec<Held>, Vec<Held>) = plan
        .held
        .into_iter()
        .partition(|held| force && held.forceable);
    let writes: Vec<Write> = plan
        .writes
        .into_iter()
        .chain(forced.into_iter().map(|held| held.write))
        .collect();
    report.plan = writes
        .iter()
        .map(|write| (write.path.clone(), action(write).to_owned()))
        .collect();
    report.conflicts = held
        .iter()
        .map(|held| ConflictReport {
            path: held.write.path.clone(),
            why: held.why.clone(),
            diff: diff(place.snapshots, &held.write),
        })
        .collect();
    if dry_run {
        report.outcome = "planned".into();
        return Ok(report);
    }
    let rewind_id = format!("rewind-{}", session.history().last_seq() + 1);
    begin.rewind_id = rewind_id.clone();
    begin.plan = writes
        .iter()
        .map(|write| PlannedPath {
            path: write.path.clone(),
            action: action(write).to_owned(),
            current: write.current.as_ref().map(|entry| entry.id.clone()),
            to: write.target.as_ref().map(|entry| entry.id.clone()),
        })
        .collect();
    begin.conflicts = conflicts;
    let turn = session.history().next_turn().saturating_sub(1);
    session.append(NewEvent::new(
        turn,
        0,
        EventBody::RewindBegin(begin.clone()),
    ))?;
    session.flush()?;
    report.rewind_id = Some(rewind_id.clone());

    let mut kept: Vec<Conflict> = held
        .iter()
        .map(|held| Conflict {
            path: held.write.path.clone(),
            why: held.why.clone(),
        })
        .collect();
    let mut restored = Vec::new();
    for write in writes {
        let result = put_back(place, &write).await;
        crate::snapshots::crash_point("rewind-write");
        match result {
            Ok(via) => restored.push(Restored {
                path: write.path.clone(),
                via: via.to_owned(),
            }),
            Err(why) => kept.push(Conflict {
                path: write.path.clone(),
                why,
            }),
        }
    }
    report.restored = restored
        .iter()
        .map(|r| (r.path.clone(), r.via.clone()))
        .collect();

    let mut end = RewindEnd {
        rewind_id,
        outcome: String::new(),
        restored,
        kept: Vec::new(),
        context_edit: None,
        context_snapshot: None,
        post: None,
        reason: None,
    };
    let options = BatchOptions {
        actor: "rewind".into(),
        force: true,
        turn,
        step: 0,
    };
    match context {
        Some(ContextPart::Delete(ops)) => match apply_batch(session, &ops, &options) {
            Ok(batch) => {
                end.context_edit = Some(batch.edit_id.clone());
                end.context_snapshot = Some(batch.snapshot);
            }
            Err(error) => kept.push(Conflict {
                path: String::new(),
                why: format!("the conversation was not taken back: {error:#}"),
            }),
        },
        Some(ContextPart::Rollback(snapshot)) => match rollback(session, snapshot, &options) {
            Ok(batch) => end.context_edit = Some(batch.edit_id.clone()),
            Err(error) => kept.push(Conflict {
                path: String::new(),
                why: format!("the conversation was not given back: {error:#}"),
            }),
        },
        None => {}
    }
    report.context_edit = end.context_edit.clone();
    if begin.pre.is_some() {
        end.post = record_checkpoint(
            place.snapshots,
            place.buffers,
            session,
            (turn, 0),
            CheckpointReason::AfterRewind,
            Vec::new(),
        )
        .await?
        .map(|checkpoint| checkpoint.id);
    }
    end.outcome = if kept.is_empty() {
        "applied"
    } else {
        "partial"
    }
    .into();
    end.kept = kept;
    report.outcome = end.outcome.clone();
    session.append(NewEvent::new(turn, 0, EventBody::RewindEnd(end)))?;
    session.flush()?;
    Ok(report)
}

/// Write one path back, checking right before that it still holds what the plan saw.
async fn put_back(place: &Place<'_>, write: &Write) -> Result<&'static str, String> {
    let full = place.snapshots.workspace().join(&write.path);
    let buffer = match place.buffers {
        Some(buffers) => buffers.text(&full).await,
        None => None,
    };
    let now = match &buffer {
        Some(text) => Some(Entry {
            id: Snapshots::hash(text.as_bytes()),
            kind: write
                .current
                .as_ref()
                .map_or(crate::snapshots::FileKind::File, |entry| entry.kind),
        }),
        None => place
            .snapshots
            .current(&write.path)
            .map_err(|error| format!("{error:#}"))?,
    };
    if now.as_ref().map(|entry| &entry.id) != write.current.as_ref().map(|entry| &entry.id) {
        return Err("changed during the rewind".into());
    }
    if let (Some(before), Some(buffers), Some(target)) = (&buffer, place.buffers, &write.target) {
        let bytes = place
            .snapshots
            .blob(&target.id)
            .map_err(|error| format!("{error:#}"))?;
        let after = String::from_utf8(bytes).map_err(|_| {
            "the editor has it open, and what it goes back to is not text".to_owned()
        })?;
        buffers.replace(&full, before, &after).await?;
        return Ok("editor");
    }
    place
        .snapshots
        .restore(&write.path, write.target.as_ref())
        .map_err(|error| error.to_string())?;
    Ok("disk")
}

/// What forcing `write` changes, as a unified diff from now to the target.
fn diff(snapshots: &Snapshots, write: &Write) -> String {
    let text = |entry: &Option<Entry>| match entry {
        Some(entry) => snapshots
            .blob(&entry.id)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()),
        None => Some(String::new()),
    };
    match (text(&write.current), text(&write.target)) {
        (Some(now), Some(then)) => similar::TextDiff::from_lines(&now, &then)
            .unified_diff()
            .header(
                &format!("{} (now)", write.path),
                &format!("{} (after the rewind)", write.path),
            )
            .to_string(),
        _ => String::new(),
    }
}
