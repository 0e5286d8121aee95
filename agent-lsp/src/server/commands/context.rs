//! The context editor's commands: `agent.context.show` (the segments view), `agent.context.edit`
//! (a batch of fold, pin, delete, replace), `agent.context.rollback`. Without `session` they
//! work on the server's current session, refused while a turn runs.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{REQUEST_FAILED, internal};
use crate::context_editor::ops::EditOp;
use crate::server::{Reply, ResponseError, Shared, codes};

/// `agent.context.show`'s filters.
#[derive(Deserialize)]
pub(super) struct ShowArgument {
    session: Option<String>,
    query: Option<String>,
    role: Option<String>,
    sort: Option<Sort>,
    preview: Option<usize>,
}

/// The order of the segments: the session's, or the largest first.
#[derive(Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Sort {
    Order,
    Tokens,
}

/// `agent.context.edit`: the batch, and whether a delete of referenced segments is confirmed.
#[derive(Deserialize)]
pub(super) struct EditArgument {
    session: Option<String>,
    ops: Vec<EditOp>,
    #[serde(default)]
    force: bool,
}

/// `agent.context.rollback`: the generation to go back to, as edits report it.
#[derive(Deserialize)]
pub(super) struct RollbackArgument {
    session: Option<String>,
    snapshot: u64,
}

/// The session a context command names: `None` for the server's own (also when `session` names
/// it), or the id of another session of the workspace.
async fn context_target(
    shared: &Arc<Shared>,
    session: Option<&str>,
) -> Result<Option<String>, ResponseError> {
    let Some(query) = session else {
        return Ok(None);
    };
    let id = shared
        .host
        .store()?
        .resolve(query)
        .map_err(|error| ResponseError::new(codes::INVALID_PARAMS, format!("{error:#}")))?;
    if shared.host.is_running() {
        return Ok(Some(id));
    }
    let guard = shared.host.state(shared).await?;
    let own = guard.as_ref().is_some_and(|state| state.session.id() == id);
    Ok((!own).then_some(id))
}

fn context_busy() -> ResponseError {
    ResponseError::new(
        REQUEST_FAILED,
        "a turn is running in this session; edit its context after the turn ends (pass `session` to read it now)",
    )
}

/// `agent.context.show`.
pub(super) async fn show(shared: &Arc<Shared>, argument: ShowArgument) -> Reply {
    use crate::context_editor::{DEFAULT_PREVIEW_CHARS, Query, view};
    let query = Query {
        keyword: argument.query,
        role: argument.role,
        sort_by_tokens: argument.sort == Some(Sort::Tokens),
        preview_chars: argument.preview.unwrap_or(DEFAULT_PREVIEW_CHARS),
    };
    let invalid =
        |error: anyhow::Error| ResponseError::new(codes::INVALID_PARAMS, format!("{error:#}"));
    let (session, shown) = match context_target(shared, argument.session.as_deref()).await? {
        Some(id) => {
            let history = shared.host.store()?.load(&id).map_err(internal)?;
            (id, view(&history, &query).map_err(invalid)?)
        }
        None if shared.host.is_running() => return Err(context_busy()),
        None => {
            let guard = shared.host.state(shared).await?;
            let state = guard.as_ref().expect("made by state()");
            let shown = view(state.session.history(), &query).map_err(invalid)?;
            (state.session.id().to_owned(), shown)
        }
    };
    Ok(json!({"session": session, "segments": shown.segments, "totals": shown.totals}))
}

/// Run `edit` on the session a context command names, holding the server's session when it
/// is the server's own.
async fn with_context_session<F>(shared: &Arc<Shared>, session: Option<&str>, edit: F) -> Reply
where
    F: AsyncFnOnce(&mut crate::session::Session) -> anyhow::Result<Value>,
{
    let answer = match context_target(shared, session).await? {
        Some(id) => {
            let mut session = shared
                .host
                .store()?
                .open(&id, crate::session::log::Durability::Sync)
                .map_err(internal)?;
            edit(&mut session).await
        }
        None if shared.host.is_running() => return Err(context_busy()),
        None => {
            let mut guard = shared.host.state(shared).await?;
            let state = guard.as_mut().expect("made by state()");
            edit(&mut state.session).await
        }
    };
    answer.or_else(|error| {
        match error.downcast_ref::<crate::context_editor::ops::NeedsConfirmation>() {
            Some(question) => Ok(json!({
                "applied": false,
                "needs_confirmation": true,
                "message": question.to_string(),
                "referenced": question.referenced,
            })),
            None => Err(ResponseError::new(REQUEST_FAILED, format!("{error:#}"))),
        }
    })
}

/// `agent.context.edit`. Folds without a summary are written by the server's model (see
/// [`crate::server::agent::Host::provider`]) when there is one, else summarized mechanically.
pub(super) async fn edit(
    shared: &Arc<Shared>,
    argument: EditArgument,
    cancel: &CancellationToken,
) -> Reply {
    use crate::context_editor::ops::{BatchOptions, EditOp, apply_batch, write_fold_summaries};
    let EditArgument {
        session,
        mut ops,
        force,
    } = argument;
    let provider = shared.host.provider(shared).await;
    with_context_session(shared, session.as_deref(), async |session| {
        let wants_summary = ops
            .iter()
            .any(|op| matches!(op, EditOp::Fold { summary: None, .. }));
        if wants_summary && let Some(provider) = &provider {
            write_fold_summaries(session.history(), &mut ops, provider, cancel).await?;
        }
        let options = BatchOptions::between_turns(session.history(), "editor", force);
        let report = apply_batch(session, &ops, &options)?;
        let mut answer = serde_json::to_value(&report)?;
        answer["applied"] = json!(true);
        answer["session"] = json!(session.id());
        Ok(answer)
    })
    .await
}

/// `agent.context.rollback`.
pub(super) async fn rollback(shared: &Arc<Shared>, argument: RollbackArgument) -> Reply {
    use crate::context_editor::ops::{BatchOptions, rollback};
    let snapshot = argument.snapshot;
    with_context_session(shared, argument.session.as_deref(), async |session| {
        let options = BatchOptions::between_turns(session.history(), "editor", false);
        let report = rollback(session, snapshot, &options)?;
        let mut answer = serde_json::to_value(&report)?;
        answer["applied"] = json!(true);
        answer["session"] = json!(session.id());
        Ok(answer)
    })
    .await
}
