//! The rewind's commands (see `crate::rewind`): `agent.rewind.turns` (the turns a rewind can
//! take back, with the files each changed), `agent.rewind` (take back a turn and every later
//! one, or plan it with `dryRun`) and `agent.rewind.undo`. Without `session` they work on the
//! server's current session, refused while a turn runs. Open documents change through
//! `workspace/applyEdit`, so a rewind lands in the editor's undo history and saving stays the
//! user's.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use super::{REQUEST_FAILED, internal};
use crate::rewind::{Place, Request};
use crate::server::agent::buffers::EditorBuffers;
use crate::server::{Reply, ResponseError, Shared, codes};
use crate::session::Session;
use crate::session::event::RewindScope;
use crate::snapshots::Snapshots;

/// `agent.rewind.turns`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TurnsArgument {
    session: Option<String>,
}

/// `agent.rewind`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RewindArgument {
    session: Option<String>,
    /// The first turn taken back; absent: the last one not taken back yet.
    turn: Option<u32>,
    /// `files`, `context` or `both` (the default).
    scope: Option<RewindScope>,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    force: bool,
}

/// `agent.rewind.undo`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct UndoArgument {
    session: Option<String>,
    #[serde(default)]
    dry_run: bool,
}

fn busy() -> ResponseError {
    ResponseError::new(
        REQUEST_FAILED,
        "a turn is running in this session; cancel it (agent.cancel) before rewinding",
    )
}

/// `agent.rewind.turns`.
pub(super) async fn turns(shared: &Arc<Shared>, argument: TurnsArgument) -> Reply {
    let (session, history) = match argument.session {
        Some(query) => {
            let store = shared.host.store()?;
            let id = store
                .resolve(&query)
                .map_err(|error| ResponseError::new(codes::INVALID_PARAMS, format!("{error:#}")))?;
            let history = store.load(&id).map_err(internal)?;
            (id, history)
        }
        None if shared.host.is_running() => return Err(busy()),
        None => {
            let guard = shared.host.state(shared).await?;
            let state = guard.as_ref().expect("made by state()");
            (
                state.session.id().to_owned(),
                state.session.history().clone(),
            )
        }
    };
    Ok(json!({"session": session, "turns": crate::rewind::turns(&history)}))
}

/// Run `work` on the session a rewind command names, with the workspace's checkpoints and the
/// editor's buffers.
async fn with_session<F>(shared: &Arc<Shared>, session: Option<String>, work: F) -> Reply
where
    F: AsyncFnOnce(&mut Session, Place<'_>) -> anyhow::Result<Value>,
{
    if shared.host.is_running() {
        return Err(busy());
    }
    let store = shared.host.store()?;
    let snapshots = Snapshots::for_state_dir(
        store.workspace(),
        store.workspace_dir(),
        shared.config.checkpoints.clone(),
    );
    let buffers = EditorBuffers::new(shared);
    let place = Place {
        snapshots: &snapshots,
        buffers: Some(&buffers),
    };
    let mut guard = shared.host.state(shared).await?;
    let state = guard.as_mut().expect("made by state()");
    let own = match &session {
        None => true,
        Some(query) => {
            let id = store
                .resolve(query)
                .map_err(|error| ResponseError::new(codes::INVALID_PARAMS, format!("{error:#}")))?;
            id == state.session.id()
        }
    };
    let answer = if own {
        work(&mut state.session, place).await
    } else {
        drop(guard);
        let id = store
            .resolve(session.as_deref().expect("not own"))
            .map_err(internal)?;
        let mut other = store
            .open(&id, crate::session::log::Durability::Sync)
            .map_err(internal)?;
        work(&mut other, place).await
    };
    answer.map_err(|error| ResponseError::new(REQUEST_FAILED, format!("{error:#}")))
}

/// `agent.rewind`.
pub(super) async fn rewind(shared: &Arc<Shared>, argument: RewindArgument) -> Reply {
    let request = Request {
        turn: argument.turn,
        scope: argument.scope.unwrap_or(RewindScope::Both),
        dry_run: argument.dry_run,
        force: argument.force,
    };
    with_session(shared, argument.session, async |session, place| {
        let report = crate::rewind::rewind(session, place, &request).await?;
        let mut answer = serde_json::to_value(&report)?;
        answer["session"] = json!(session.id());
        Ok(answer)
    })
    .await
}

/// `agent.rewind.undo`.
pub(super) async fn undo(shared: &Arc<Shared>, argument: UndoArgument) -> Reply {
    with_session(shared, argument.session, async |session, place| {
        let report = crate::rewind::undo(session, place, argument.dry_run).await?;
        let mut answer = serde_json::to_value(&report)?;
        answer["session"] = json!(session.id());
        Ok(answer)
    })
    .await
}
