//! The memory commands: `agent.memory.list`, `agent.memory.remember`, `agent.memory.forget`,
//! `agent.memory.edit`, the editor's view of the memories new sessions get. A memory made or
//! changed here records the editor's current session as its provenance (no event seq: no tool
//! call made it), or `editor` before the editor has one.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::json;

use super::{REQUEST_FAILED, internal};
use crate::memory::{EDITOR, Memories, Provenance, Scope};
use crate::server::{Reply, ResponseError, Shared};

/// `agent.memory.list`: one scope's memories, or both.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListArgument {
    scope: Option<Scope>,
}

/// `agent.memory.remember`: the text, in the workspace's scope unless `scope` says `user`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RememberArgument {
    text: String,
    #[serde(default)]
    scope: Scope,
}

/// `agent.memory.forget`: the memory's id.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ForgetArgument {
    id: String,
}

/// `agent.memory.edit`: the memory's id and its new text.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EditArgument {
    id: String,
    text: String,
}

/// What a memory command asks of the store.
pub(super) enum MemoryCommand {
    List(ListArgument),
    Remember(RememberArgument),
    Forget(ForgetArgument),
    Edit(EditArgument),
}

/// Run a memory command off the async threads (a change waits for the file's lock, which a
/// terminal `agent-lsp memory` may hold for a moment).
pub(super) async fn run(shared: &Arc<Shared>, command: MemoryCommand) -> Reply {
    let caps = shared.host.memory_caps(shared).map_err(internal)?;
    let memories = Memories::for_store(&shared.host.store()?).with_caps(caps);
    let provenance = Provenance::now(
        shared
            .host
            .session_id()
            .unwrap_or_else(|| EDITOR.to_owned()),
        None,
    );
    let failed = |error: anyhow::Error| ResponseError::new(REQUEST_FAILED, format!("{error:#}"));
    tokio::task::spawn_blocking(move || match command {
        MemoryCommand::List(ListArgument { scope }) => {
            let shown = memories
                .list()
                .map_err(failed)?
                .into_iter()
                .filter(|memory| scope.is_none_or(|scope| memory.scope == scope))
                .collect::<Vec<_>>();
            Ok(json!({"memories": shown, "caps": memories.caps()}))
        }
        MemoryCommand::Remember(RememberArgument { text, scope }) => {
            let memory = memories
                .remember(scope, &text, provenance)
                .map_err(failed)?;
            Ok(json!({"memory": memory}))
        }
        MemoryCommand::Forget(ForgetArgument { id }) => {
            let memory = memories.forget(&id, provenance).map_err(failed)?;
            Ok(json!({"forgotten": memory}))
        }
        MemoryCommand::Edit(EditArgument { id, text }) => {
            let memory = memories.edit(&id, &text, provenance).map_err(failed)?;
            Ok(json!({"memory": memory}))
        }
    })
    .await
    .map_err(|error| internal(anyhow::anyhow!("the memory command failed: {error}")))?
}
