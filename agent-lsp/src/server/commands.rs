//! `workspace/executeCommand`: the agent's commands, or the child that announced the command.
//!
//! - `agent.tool {name, arguments}`: run one agent tool (file or `lsp_*`) without a model, in
//!   the server's session, over the same bridge and document mirror as the editor; the answer
//!   is `{text, is_error, meta, session}`. Editor plugins use it, and it shows that the agent
//!   reads exactly the editor's buffers.
//! - `agent.session.list`: the workspace's sessions.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use super::{Reply, Shared, codes};
use crate::preset::{DEFAULT_PRESET, Preset};
use crate::session::Session;
use crate::session::log::Durability;
use crate::session::store::Store;
use crate::tools::ToolRuntime;

/// The commands this server owns, announced in `executeCommandProvider`.
pub const COMMANDS: [&str; 2] = ["agent.tool", "agent.session.list"];

/// The server's agent state, made on first use.
#[derive(Default)]
pub(crate) struct Commands {
    workspace: OnceLock<PathBuf>,
    agent: Mutex<Option<(ToolRuntime, Session)>>,
}

impl Commands {
    pub(super) fn set_workspace(&self, workspace: PathBuf) {
        let _ = self.workspace.set(workspace);
    }

    fn store(&self) -> Result<Store, (i64, String)> {
        let workspace = self
            .workspace
            .get()
            .ok_or((codes::SERVER_NOT_INITIALIZED, "no workspace yet".to_owned()))?;
        Store::for_workspace(workspace)
            .map_err(|error| (codes::INTERNAL_ERROR, format!("{error:#}")))
    }
}

pub(super) async fn execute(
    shared: &Arc<Shared>,
    params: Value,
    cancel: &CancellationToken,
) -> Reply {
    let command = params["command"].as_str().ok_or((
        codes::INVALID_PARAMS,
        "executeCommand without `command`".to_owned(),
    ))?;
    let argument = params["arguments"].get(0).cloned().unwrap_or(Value::Null);
    match command {
        "agent.tool" => run_tool(shared, argument, cancel).await,
        "agent.session.list" => {
            let store = shared.commands.store()?;
            let ids = store
                .ids()
                .map_err(|error| (codes::INTERNAL_ERROR, format!("{error:#}")))?;
            Ok(json!(ids))
        }
        other => {
            // A command one of the children announced.
            let bridge = shared.bridge()?;
            for child in bridge.running() {
                let announced = child.initialize_result()["capabilities"]["executeCommandProvider"]
                    ["commands"]
                    .as_array()
                    .is_some_and(|commands| commands.iter().any(|name| name == other));
                if announced {
                    return child
                        .request_with(
                            "workspace/executeCommand",
                            params.clone(),
                            super::CHILD_REQUEST_TIMEOUT,
                            cancel,
                        )
                        .await
                        .map_err(|error| (codes::INTERNAL_ERROR, error.to_string()));
                }
            }
            Err((
                codes::METHOD_NOT_FOUND,
                format!("unknown command `{other}`"),
            ))
        }
    }
}

async fn run_tool(shared: &Arc<Shared>, argument: Value, cancel: &CancellationToken) -> Reply {
    let name = argument["name"].as_str().ok_or((
        codes::INVALID_PARAMS,
        "agent.tool needs {\"name\": ..., \"arguments\": {...}}".to_owned(),
    ))?;
    let arguments = match &argument["arguments"] {
        Value::String(raw) => raw.clone(),
        Value::Null => "{}".to_owned(),
        other => other.to_string(),
    };
    let mut agent = shared.commands.agent.lock().await;
    if agent.is_none() {
        let workspace = shared
            .commands
            .workspace
            .get()
            .cloned()
            .ok_or((codes::SERVER_NOT_INITIALIZED, "no workspace yet".to_owned()))?;
        let preset_name = shared
            .config
            .preset
            .clone()
            .unwrap_or_else(|| DEFAULT_PRESET.to_owned());
        let internal = |error: anyhow::Error| (codes::INTERNAL_ERROR, format!("{error:#}"));
        let preset = Preset::load(&preset_name).map_err(internal)?;
        let runtime = crate::tools::runtime_with(
            &workspace,
            &preset,
            shared.bridge()?.clone(),
            shared.documents().clone(),
        )
        .map_err(internal)?;
        let session = shared
            .commands
            .store()?
            .create_session(&preset, Durability::Sync)
            .map_err(internal)?;
        *agent = Some((runtime, session));
    }
    let (runtime, session) = agent.as_mut().expect("just made");
    let outcome = runtime
        .run_one(session, name, &arguments, cancel)
        .await
        .map_err(|error| (codes::INTERNAL_ERROR, format!("{error:#}")))?;
    Ok(json!({
        "text": outcome.output.text,
        "is_error": outcome.output.is_error,
        "meta": outcome.output.meta,
        "session": session.id(),
    }))
}
