//! The session's commands: `agent.status`, `agent.goal.set`, `agent.tool` (one tool run
//! without a model) and `agent.activity.cancel` (stop a job or a sub-agent).
//! `agent.cancel`, `agent.compact` and the session list and switch are the host's own, called
//! from the table in `commands`.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::internal;
use crate::server::{Reply, ResponseError, Shared};

/// `agent.tool`: the tool, and its arguments as an object or as the JSON text of one.
#[derive(Deserialize)]
pub(super) struct ToolArgument {
    name: String,
    arguments: Option<ToolArguments>,
}

#[derive(Deserialize)]
#[serde(untagged, expecting = "an object, or the JSON text of one")]
enum ToolArguments {
    Text(String),
    Object(serde_json::Map<String, Value>),
}

/// `agent.goal.set`: the goal, in the programmer's words.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GoalArgument {
    goal: String,
}

/// `agent.activity.cancel`: the board entry to stop.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ActivityArgument {
    id: String,
}

/// `agent.status`: the figures of the session's last model request, its plan, and the jobs and
/// sub-agents on the activity board. A running turn holds the session, so the answer then says
/// only that it runs, and what runs beside it (editors ask again when it ends; the turn's
/// `$/progress` says when its plan changes).
pub(super) async fn status(shared: &Arc<Shared>) -> Reply {
    let activity = shared.host.activity.list();
    if shared.host.is_running() {
        return Ok(
            json!({"session": null, "running": true, "context_tokens": null, "cache_hit_share": null, "plan": null, "activity": activity}),
        );
    }
    let guard = shared.host.state(shared).await?;
    let state = guard.as_ref().expect("made by state()");
    let last = state
        .session
        .history()
        .events()
        .iter()
        .rev()
        .find_map(|event| match &event.body {
            crate::session::event::EventBody::Usage(usage) => Some(usage.clone()),
            _ => None,
        });
    let (context_tokens, cache_hit_share) = match last {
        Some(usage) => (
            json!(usage.prompt_tokens),
            json!(if usage.prompt_tokens == 0 {
                0.0
            } else {
                usage.cache_read as f64 / usage.prompt_tokens as f64
            }),
        ),
        None => (Value::Null, Value::Null),
    };
    Ok(json!({
        "session": state.session.id(),
        "running": false,
        "context_tokens": context_tokens,
        "cache_hit_share": cache_hit_share,
        "plan": crate::plans::view(state.session.history()),
        "activity": activity,
    }))
}

/// `agent.activity.cancel`: cancel a running entry of the board (a job is killed as `job_kill`
/// kills it); `cancelled` is false when no running, cancellable entry has that id.
pub(super) fn cancel_activity(shared: &Arc<Shared>, argument: ActivityArgument) -> Reply {
    Ok(json!({"cancelled": shared.host.activity.cancel(&argument.id)}))
}

/// `agent.goal.set`: record the session's goal (see `plans::set_goal`).
pub(super) async fn set_goal(shared: &Arc<Shared>, argument: GoalArgument) -> Reply {
    shared.host.ensure_idle()?;
    let goal = crate::plans::check_goal(&argument.goal)
        .map_err(|problem| {
            ResponseError::invalid_params(format!("`agent.goal.set`: `goal`: {problem}"))
        })?
        .to_owned();
    let mut guard = shared.host.state(shared).await?;
    let state = guard.as_mut().expect("made by state()");
    let enabled = state
        .preset()
        .plugin_settings::<crate::plans::PlansSettings>(crate::plans::PLUGIN)
        .map_err(internal)?
        .is_some_and(|settings| settings.enabled);
    if !enabled {
        return Err(ResponseError::new(
            crate::server::codes::REQUEST_FAILED,
            format!(
                "the session's preset `{}` has no plans plugin ([plugins.plans]), so the model would never see the goal; start a session with a preset that has it (standard, readonly)",
                state.preset().name
            ),
        ));
    }
    let goal = crate::plans::set_goal(&mut state.session, &goal, "editor").map_err(internal)?;
    Ok(json!({"goal": goal.text, "seq": goal.seq, "session": state.session.id()}))
}

/// `agent.tool`: one tool run, as the model would call it, in the server's session.
pub(super) async fn run_tool(
    shared: &Arc<Shared>,
    argument: ToolArgument,
    cancel: &CancellationToken,
) -> Reply {
    let name = argument.name.as_str();
    let arguments = match argument.arguments {
        // As the model writes them: JSON text, which must hold an object.
        Some(ToolArguments::Text(text)) => {
            match serde_json::from_str::<serde_json::Map<String, Value>>(&text) {
                Ok(_) => text,
                Err(error) => {
                    return Err(ResponseError::invalid_params(format!(
                        "`agent.tool`: `arguments`: not the JSON text of an object: {error}"
                    )));
                }
            }
        }
        Some(ToolArguments::Object(object)) => Value::Object(object).to_string(),
        None => "{}".to_owned(),
    };
    let mut guard = shared.host.state(shared).await?;
    let state = guard.as_mut().expect("made by state()");
    let outcome = state
        .tools
        .run_one(&mut state.session, name, &arguments, cancel)
        .await
        .map_err(internal)?;
    Ok(json!({
        "text": outcome.output.text,
        "is_error": outcome.output.is_error,
        "meta": outcome.output.meta,
        "session": state.session.id(),
    }))
}
