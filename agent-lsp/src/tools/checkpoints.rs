//! The file checkpoints a runtime takes: at the turn's start and end (asked by the loop), and
//! around each call that may write what it does not name ([`Tool::writes_unnamed`](crate::plugin::tool::Tool::writes_unnamed)), so a
//! rewind can tell what the agent's commands changed from what the user changed meanwhile.
//!
//! A capture runs off the async threads and is recorded as `files/checkpoint` once its objects
//! are written: the event is the commit point, so a process killed during a capture leaves at
//! most objects nothing names, and the last recorded checkpoint stays whole. A failed capture
//! never ends a turn: its event records the error.

use std::sync::Arc;
use std::time::Instant;

use super::{Prepared, ToolRuntime};
use crate::plugin::tool::Buffers;
use crate::session::event::{
    CheckpointReason, EventBody, FileCheckpoint, MAX_CHANGED_LISTED, ToolCallRef, last_checkpoint,
};
use crate::session::{NewEvent, Session};
use crate::snapshots::{Checkpoint, Snapshots};

impl ToolRuntime {
    /// Take file checkpoints in `snapshots` (the workspace's store) at the turn's edges and
    /// around every call that may write what it does not name.
    pub fn with_checkpoints(mut self, snapshots: Arc<Snapshots>) -> ToolRuntime {
        self.checkpoints = Some(snapshots);
        self
    }

    /// The store the runtime's checkpoints go to, when it takes them.
    pub fn checkpoints(&self) -> Option<&Arc<Snapshots>> {
        self.checkpoints.as_ref()
    }

    /// Capture the workspace (and the editor's open buffers) and record it in `session`; a
    /// runtime without checkpoints records nothing.
    pub async fn checkpoint(
        &self,
        session: &mut Session,
        turn: u32,
        step: u32,
        reason: CheckpointReason,
        calls: Vec<String>,
    ) -> anyhow::Result<()> {
        let Some(snapshots) = &self.checkpoints else {
            return Ok(());
        };
        record_checkpoint(
            snapshots,
            self.buffers.as_deref(),
            session,
            (turn, step),
            reason,
            calls,
        )
        .await
        .map(|_| ())
    }

    /// Before a batch runs: a `before_call` checkpoint when a call of it may write what it does
    /// not name and no read-only sandbox holds it; the ids of those calls (the window), empty
    /// when none needs one.
    pub(super) async fn open_window(
        &self,
        session: &mut Session,
        (turn, step): (u32, u32),
        batch: &[Prepared],
        calls: &[ToolCallRef],
    ) -> anyhow::Result<Vec<String>> {
        if self.checkpoints.is_none() {
            return Ok(Vec::new());
        }
        let window: Vec<String> = batch
            .iter()
            .zip(calls)
            .filter(|(prepared, _)| match prepared {
                Prepared::Run { tool, grant, .. } => {
                    tool.writes_unnamed()
                        && !grant
                            .sandbox
                            .as_ref()
                            .is_some_and(|sandbox| sandbox.keeps_workspace_read_only())
                }
                Prepared::Done(_) => false,
            })
            .map(|(_, call)| call.id.clone())
            .collect();
        if !window.is_empty() {
            self.checkpoint(
                session,
                turn,
                step,
                CheckpointReason::BeforeCall,
                window.clone(),
            )
            .await?;
        }
        Ok(window)
    }

    /// After the batch: the `after_call` checkpoint that closes its window, if it has one.
    pub(super) async fn close_window(
        &self,
        session: &mut Session,
        (turn, step): (u32, u32),
        window: Vec<String>,
    ) -> anyhow::Result<()> {
        if window.is_empty() {
            return Ok(());
        }
        self.checkpoint(session, turn, step, CheckpointReason::AfterCall, window)
            .await
    }
}

/// Capture the workspace now as `session`'s next checkpoint, with the editor's open buffers
/// (paths from the root), off the async threads; nothing is recorded (a dry run's capture).
pub async fn capture(
    snapshots: &Arc<Snapshots>,
    buffers: Option<&dyn Buffers>,
    session: &Session,
) -> anyhow::Result<Checkpoint> {
    let previous = last_checkpoint(session.history().events()).map(str::to_owned);
    let root = snapshots.workspace().to_owned();
    let open: Vec<(String, String)> = buffers
        .map(|buffers| buffers.open())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(path, text)| {
            Some((path.strip_prefix(&root).ok()?.to_str()?.to_owned(), text))
        })
        .collect();
    let store = snapshots.clone();
    let session_id = session.id().to_owned();
    tokio::task::spawn_blocking(move || store.capture(&session_id, previous.as_deref(), &open))
        .await
        .map_err(|error| anyhow::anyhow!("the capture failed unexpectedly: {error}"))?
}

/// Capture now and append the `files/checkpoint` event; returns the checkpoint (`None` when
/// the capture failed, which the event records).
pub async fn record_checkpoint(
    snapshots: &Arc<Snapshots>,
    buffers: Option<&dyn Buffers>,
    session: &mut Session,
    (turn, step): (u32, u32),
    reason: CheckpointReason,
    calls: Vec<String>,
) -> anyhow::Result<Option<Checkpoint>> {
    let started = Instant::now();
    let captured = capture(snapshots, buffers, session).await;
    if captured.is_ok() {
        // Its objects and ref are written; the event, the commit point, is not.
        crate::snapshots::crash_point(reason.as_str());
    }
    let duration_ms = started.elapsed().as_millis() as u64;
    let record = match &captured {
        Ok(checkpoint) => FileCheckpoint {
            reason,
            id: Some(checkpoint.id.clone()),
            calls,
            changed: checkpoint
                .changed
                .iter()
                .take(MAX_CHANGED_LISTED)
                .cloned()
                .collect(),
            changed_total: checkpoint.changed.len(),
            uncaptured: checkpoint.uncaptured.clone(),
            read: checkpoint.read,
            scan: checkpoint.scan.to_owned(),
            duration_ms,
            error: None,
        },
        Err(error) => {
            tracing::warn!("file checkpoint ({}) failed: {error:#}", reason.as_str());
            FileCheckpoint {
                reason,
                id: None,
                calls,
                changed: Vec::new(),
                changed_total: 0,
                uncaptured: Vec::new(),
                read: 0,
                scan: String::new(),
                duration_ms,
                error: Some(format!("{error:#}")),
            }
        }
    };
    session.append(NewEvent::new(turn, step, EventBody::FileCheckpoint(record)))?;
    // At a turn's end the stat cache is saved (off the capture's clock), so the next process
    // starts warm; a crash before only costs that process a reread.
    if matches!(
        reason,
        CheckpointReason::TurnEnd | CheckpointReason::AfterRewind
    ) {
        let store = snapshots.clone();
        match tokio::task::spawn_blocking(move || store.save()).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                tracing::warn!("the checkpoints' stat cache was not saved: {error:#}")
            }
            Err(error) => tracing::warn!("the checkpoints' stat cache was not saved: {error}"),
        }
    }
    Ok(captured.ok())
}
