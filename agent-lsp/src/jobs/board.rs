//! A job as the editor sees it: its entry on the host's activity board
//! ([`crate::activity::Activity`]), from its start to its end.
//!
//! One task per job keeps the entry true: it posts the job's last output line as the entry's
//! detail (at most every [`DETAIL_EVERY`], however fast the job prints: a build printing a
//! megabyte a second must not become a megabyte of `$/progress`), kills the job when the
//! entry's token is cancelled (the editor's cancel, the same kill as `job_kill`), and posts the
//! end in the words of [`super::End::outcome`]. It is a runtime task rather than one of the
//! job's threads because it waits on a cancellation token and a timer; a job started where no
//! runtime runs has no editor to show it to, and is not posted.
//!
//! Entry ids are `job-1@<pid>`: the model's name for the job and its process group, since a
//! board is shared by every session of a host (a new session, a sub-agent's own table) and
//! each table counts its jobs from 1.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{Job, StoppedBy};
use crate::activity::{Activity, Kind};

/// How often at most a job's detail changes on the board.
const DETAIL_EVERY: Duration = Duration::from_millis(250);

/// The longest title (the command) and detail (an output line) an entry gets, in characters.
const TITLE_CHARS: usize = 80;
const DETAIL_CHARS: usize = 160;

/// The board's id of a job.
pub(super) fn entry_id(job: &Job) -> String {
    format!("{}@{}", job.id, job.pid)
}

/// Post `job`, started in session `session`, on `activity`, and keep its entry up to date
/// until it ends. A session that is itself on the board (a sub-agent's) is the entry's parent.
pub(super) fn post(activity: &Arc<Activity>, job: &Arc<Job>, session: Option<&str>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::debug!(job = %job.id, "no runtime: the job is not shown on the activity board");
        return;
    };
    let id = entry_id(job);
    let parent =
        session.filter(|session| activity.running().iter().any(|entry| entry.id == *session));
    let cancel = CancellationToken::new();
    activity.start(
        Kind::Job,
        &id,
        &job.command_cut_at(TITLE_CHARS),
        parent,
        Some(cancel.clone()),
    );
    runtime.spawn(follow(activity.clone(), job.clone(), id, cancel));
}

/// The entry's life: details while the job runs, the kill when the entry is cancelled, the end.
async fn follow(activity: Arc<Activity>, job: Arc<Job>, id: String, cancel: CancellationToken) {
    let mut changed = job.subscribe();
    // Output before the subscription is seen by the first round.
    changed.mark_changed();
    while job.end().is_none() {
        tokio::select! {
            biased;
            () = cancel.cancelled() => break,
            result = changed.changed() => if result.is_err() { break },
        }
        if job.end().is_some() {
            break;
        }
        activity.detail(&id, &last_line(&job));
        // What the job prints meanwhile marks `changed`, so the next round shows it.
        tokio::select! {
            biased;
            () = cancel.cancelled() => break,
            () = tokio::time::sleep(DETAIL_EVERY) => {}
        }
    }
    let end = match job.end() {
        Some(end) => Some(end),
        None if cancel.is_cancelled() => {
            let killed = job.clone();
            tokio::task::spawn_blocking(move || super::kill(&killed, StoppedBy::Editor))
                .await
                .ok()
                .flatten()
                // It ended by itself while the kill began.
                .or_else(|| job.end())
        }
        None => None,
    };
    let outcome = end.map_or_else(|| "ended".to_owned(), |end| end.outcome());
    activity.end(&id, &outcome);
}

/// The job's last line of output, as a progress line: what follows the last carriage return
/// (a progress bar redraws with them), trimmed, cut at [`DETAIL_CHARS`].
fn last_line(job: &Job) -> String {
    let text = job.spool.last_lines(1, 4096);
    let line = text.rsplit('\r').find(|part| !part.trim().is_empty());
    let line = line.unwrap_or_default().trim();
    if line.chars().count() <= DETAIL_CHARS {
        return line.to_owned();
    }
    let mut cut = line.chars().take(DETAIL_CHARS).collect::<String>();
    cut.push('…');
    cut
}
