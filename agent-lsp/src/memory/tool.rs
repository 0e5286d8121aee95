//! The `memory` tool: the model keeps, drops and lists notes for later sessions
//! (`{"action": "remember" | "forget" | "list", "text"?, "id"?, "scope"?}`). A memory records
//! the session and the seq of the call's `tool/call` event it came from, so any memory can be
//! traced back to the step that wrote it.

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Caps, Memories, Provenance, Scope};
use crate::plugin::outcomes::ToolOutput;
use crate::plugin::tool::ToolContext;
use crate::plugin::typed::TypedTool;
use crate::tools::blocking;

/// The tool over one workspace's and user's memory files; `None` where the host has no state
/// directory (a tool runtime built without a session store), where every call says so.
pub struct MemoryTool {
    memories: Option<Memories>,
    caps: Caps,
}

impl MemoryTool {
    /// The tool over `memories` (`None` when the workspace has no state folder: every call
    /// then says memory is unavailable), holding what it saves to `caps`.
    pub fn new(memories: Option<Memories>, caps: Caps) -> MemoryTool {
        MemoryTool {
            memories: memories.map(|memories| memories.with_caps(caps)),
            caps,
        }
    }
}

/// What a `memory` call does.
#[derive(Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Store `text` as a new memory.
    Remember,
    /// Drop the memory `id`.
    Forget,
    /// Show the memories in force.
    List,
}

/// The arguments of `memory`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryArgs {
    /// What to do.
    action: Action,
    /// With `remember`: the note, plain and self-contained.
    #[serde(default)]
    text: Option<String>,
    /// With `forget`: the memory's id (`w3`, `u1`), as `list` shows it.
    #[serde(default)]
    id: Option<String>,
    /// With `remember` and `list`: whose memory. Default `workspace` for `remember`; `list`
    /// shows both without it.
    #[serde(default)]
    scope: Option<Scope>,
}

impl TypedTool for MemoryTool {
    type Args = MemoryArgs;

    fn name(&self) -> &str {
        "memory"
    }

    fn description(&self) -> String {
        format!(
            "Keep notes for later sessions. `remember` stores `text` (at most {} characters; one fact per memory: how to build and test, \
                 conventions, the programmer's preferences, pitfalls found), `forget` drops the memory `id`, `list` shows the memories in force \
                 with their ids and where each came from. Memories of `scope` `workspace` (the default) are for this workspace; `user` ones for \
                 every workspace of the programmer. New sessions get them in their system prompt; this session's does not change. \
                 Never store secrets (keys, tokens, passwords): they are refused.",
            self.caps.max_chars
        )
    }

    fn read_only(&self) -> bool {
        // It writes no workspace file, but `remember` and `forget` change what later sessions
        // see, so a read-only preset can deny it and calls of one step keep their order.
        false
    }

    fn writes_unnamed(&self) -> bool {
        // Memories live in the state directory, not in the workspace.
        false
    }

    fn run(&self, ctx: ToolContext, args: MemoryArgs) -> BoxFuture<'static, ToolOutput> {
        let memories = self.memories.clone();
        Box::pin(blocking(move || {
            let Some(memories) = memories else {
                return ToolOutput::error(
                    "memories are kept in the workspace's state directory, and this agent runs without one; they cannot be used here",
                );
            };
            run(&memories, &ctx, args).unwrap_or_else(|output| output)
        }))
    }
}

fn run(memories: &Memories, ctx: &ToolContext, args: MemoryArgs) -> Result<ToolOutput, ToolOutput> {
    let failed = |error: anyhow::Error| ToolOutput::error(format!("{error:#}"));
    let provenance = || {
        Provenance::now(
            ctx.session_id
                .clone()
                .unwrap_or_else(|| super::CLI.to_owned()),
            ctx.call_seq,
        )
    };
    let unused = |name: &str, given: bool| {
        if given {
            Err(ToolOutput::error(format!(
                "`{name}` is not used by this action; leave it out"
            )))
        } else {
            Ok(())
        }
    };
    match args.action {
        Action::Remember => {
            unused("id", args.id.is_some())?;
            let Some(text) = args.text else {
                return Err(ToolOutput::error(
                    "`remember` needs `text`, the note to keep",
                ));
            };
            let scope = args.scope.unwrap_or_default();
            let memory = memories
                .remember(scope, &text, provenance())
                .map_err(failed)?;
            Ok(ToolOutput::ok(format!(
                "remembered as {} ({} memory): new sessions will see it; this session's system prompt does not change",
                memory.id,
                scope.as_str()
            ))
            .with_meta("memory_id", memory.id.as_str())
            .with_meta("action", "remember"))
        }
        Action::Forget => {
            unused("text", args.text.is_some())?;
            unused("scope", args.scope.is_some())?;
            let Some(id) = args.id else {
                return Err(ToolOutput::error(
                    "`forget` needs `id`, the memory's id as `list` shows it",
                ));
            };
            let memory = memories.forget(id.trim(), provenance()).map_err(failed)?;
            Ok(ToolOutput::ok(format!(
                "forgot {}: {}; new sessions will not see it",
                memory.id, memory.text
            ))
            .with_meta("memory_id", memory.id.as_str())
            .with_meta("action", "forget"))
        }
        Action::List => {
            unused("text", args.text.is_some())?;
            unused("id", args.id.is_some())?;
            let all = memories.list().map_err(failed)?;
            let shown = all
                .iter()
                .filter(|memory| args.scope.is_none_or(|scope| memory.scope == scope))
                .collect::<Vec<_>>();
            let caps = memories.caps();
            let count = |scope: Scope| all.iter().filter(|memory| memory.scope == scope).count();
            let mut text = format!(
                "{} memories ({} of {} workspace, {} of {} user):",
                shown.len(),
                count(Scope::Workspace),
                caps.max_per_scope,
                count(Scope::User),
                caps.max_per_scope
            );
            if shown.is_empty() {
                text = format!("no memories yet ({})", text.trim_end_matches(':'));
            }
            for memory in &shown {
                text.push_str("\n- ");
                text.push_str(&memory.render());
            }
            Ok(ToolOutput::ok(text)
                .with_meta("action", "list")
                .with_meta("count", shown.len()))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::{Value, json};
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::workspace::Workspace;

    fn context(dir: &std::path::Path) -> ToolContext {
        ToolContext {
            session_id: Some("20261129-100000-abcd".into()),
            call_seq: Some(7),
            ..ToolContext::outside_session(
                Arc::new(Workspace::new(dir).unwrap()),
                CancellationToken::new(),
                "c1",
            )
        }
    }

    async fn call(tool: &MemoryTool, dir: &std::path::Path, args: Value) -> ToolOutput {
        crate::plugin::tool::Tool::run(tool, context(dir), args.into()).await
    }

    #[tokio::test]
    async fn remember_list_and_forget_with_the_calls_provenance() {
        let dir = tempfile::tempdir().unwrap();
        let memories = Memories::new(dir.path().join("w.jsonl"), dir.path().join("u.jsonl"));
        let tool = MemoryTool::new(Some(memories.clone()), Caps::default());
        let remembered = call(
            &tool,
            dir.path(),
            json!({"action": "remember", "text": "Tests run with `cargo nextest run`."}),
        )
        .await;
        assert!(!remembered.is_error, "{}", remembered.text);
        assert!(
            remembered.text.starts_with("remembered as w1"),
            "{}",
            remembered.text
        );
        let user = call(
            &tool,
            dir.path(),
            json!({"action": "remember", "text": "Prefers short answers.", "scope": "user"}),
        )
        .await;
        assert!(user.text.starts_with("remembered as u1"), "{}", user.text);

        let listed = call(&tool, dir.path(), json!({"action": "list"})).await;
        assert!(
            listed
                .text
                .contains("w1 (workspace; session 20261129-100000-abcd event 7, ")
                && listed
                    .text
                    .contains("): Tests run with `cargo nextest run`."),
            "{}",
            listed.text
        );
        assert!(
            listed.text.contains("1 of 100 workspace, 1 of 100 user"),
            "{}",
            listed.text
        );
        let only_user = call(
            &tool,
            dir.path(),
            json!({"action": "list", "scope": "user"}),
        )
        .await;
        assert!(!only_user.text.contains("w1"), "{}", only_user.text);

        let forgot = call(&tool, dir.path(), json!({"action": "forget", "id": "w1"})).await;
        assert!(forgot.text.starts_with("forgot w1"), "{}", forgot.text);
        let again = call(&tool, dir.path(), json!({"action": "forget", "id": "w1"})).await;
        assert!(
            again.is_error && again.text.contains("no memory `w1`"),
            "{}",
            again.text
        );
        assert_eq!(memories.list().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn secrets_and_bad_arguments_are_errors_the_model_can_act_on() {
        let dir = tempfile::tempdir().unwrap();
        let tool = MemoryTool::new(
            Some(Memories::new(
                dir.path().join("w.jsonl"),
                dir.path().join("u.jsonl"),
            )),
            Caps::default(),
        );
        let secret = call(
            &tool,
            dir.path(),
            json!({"action": "remember", "text": "deploy key AKIAIOSFODNN7EXAMPLE"}),
        )
        .await;
        assert!(secret.is_error);
        assert!(
            secret
                .text
                .contains("refused: it looks like it contains an AWS access key id"),
            "{}",
            secret.text
        );
        assert!(!dir.path().join("w.jsonl").exists(), "nothing is written");
        for (args, expected) in [
            (json!({"action": "remember"}), "needs `text`"),
            (json!({"action": "forget"}), "needs `id`"),
            (json!({"action": "forget", "id": "x1"}), "not a memory id"),
            (json!({"action": "list", "id": "w1"}), "`id` is not used"),
            (
                json!({"action": "recall"}),
                "invalid arguments for `memory`",
            ),
        ] {
            let output = call(&tool, dir.path(), args.clone()).await;
            assert!(
                output.is_error && output.text.contains(expected),
                "{args}: {}",
                output.text
            );
        }
    }

    #[tokio::test]
    async fn without_a_state_directory_every_call_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let tool = MemoryTool::new(None, Caps::default());
        let output = call(&tool, dir.path(), json!({"action": "list"})).await;
        assert!(output.is_error);
        assert!(output.text.contains("runs without one"), "{}", output.text);
    }
}
