//! The loop's side of the user's hooks (`crate::hooks`; the tool runtime runs `PreToolUse` and
//! `PostToolUse` itself): `SessionStart` the first time this agent runs a turn of its session,
//! `UserPromptSubmit` before the prompt is taken, `Stop` (`SubagentStop` in a sub-agent's
//! session) when the model answered without calls, `PreCompact` before a compaction
//! (`compaction.rs`; `Hooks::pre_compact`, which a compaction the user asks for runs too).
//!
//! Each run is recorded as `hook/run`; what a hook gives the model enters the session as a
//! `context/runtime` message (source `hook/EVENT`), so the next request, and its replay, carry
//! it like any other context.

use std::collections::BTreeMap;

use tokio_util::sync::CancellationToken;

use super::Agent;
use crate::context::runtime::RuntimeContextProjection;
use crate::hooks::{Fired, HookEvent};
use crate::session::Session;

/// A prompt a `UserPromptSubmit` hook refused: the turn did not start, and the prompt was not
/// recorded. Its message is what the user reads.
#[derive(Debug, thiserror::Error)]
#[error("the prompt was blocked by the UserPromptSubmit hook `{command}`: {reason}")]
pub struct PromptBlocked {
    /// The hook's command.
    pub command: String,
    /// Why, as the hook said.
    pub reason: String,
}

impl Agent {
    /// Fire `event`'s hooks with its own `fields`, matched on `target`; record their runs.
    /// `None` when no hook runs on it.
    async fn fire_hooks(
        &mut self,
        session: &mut Session,
        at: (u32, u32),
        event: HookEvent,
        target: Option<&str>,
        fields: serde_json::Map<String, serde_json::Value>,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Option<Fired>> {
        let Some(hooks) = self.tools.hooks().filter(|hooks| hooks.has(event)).cloned() else {
            return Ok(None);
        };
        Ok(Some(
            hooks
                .fire_in(session, at, event, target, fields, cancel)
                .await?,
        ))
    }

    /// Put what `fired` gave the model into the session, as a runtime-context message of the
    /// source `hook/EVENT`; `facts` make it differ from the last one when it must be shown
    /// again.
    fn hook_context(
        session: &mut Session,
        (turn, step): (u32, u32),
        event: HookEvent,
        context: &[(String, String)],
        mut facts: BTreeMap<String, String>,
    ) -> anyhow::Result<()> {
        if context.is_empty() {
            return Ok(());
        }
        let mut text = String::from("<runtime-context>\n");
        for (command, said) in context {
            text.push_str(&format!(
                "The user's {} hook `{command}` adds:\n{said}\n",
                event.name()
            ));
        }
        text.push_str("</runtime-context>");
        facts.insert("context".into(), text.clone());
        let source = format!("hook/{}", event.name());
        RuntimeContextProjection::project_from(session, turn, step, Some(&source), &facts, text)?;
        Ok(())
    }

    /// `SessionStart`, the first time this agent runs a turn: `startup` for a new session,
    /// `resume` for one that already had turns.
    pub(super) async fn session_start_hooks(
        &mut self,
        session: &mut Session,
        turn: u32,
        cancel: &CancellationToken,
    ) -> anyhow::Result<()> {
        if std::mem::replace(&mut self.session_started, true) {
            return Ok(());
        }
        let source = if turn == 1 { "startup" } else { "resume" };
        let mut fields = serde_json::Map::new();
        fields.insert("source".into(), source.into());
        let Some(fired) = self
            .fire_hooks(
                session,
                (turn, 0),
                HookEvent::SessionStart,
                Some(source),
                fields,
                cancel,
            )
            .await?
        else {
            return Ok(());
        };
        Self::hook_context(
            session,
            (turn, 0),
            HookEvent::SessionStart,
            &fired.context,
            BTreeMap::new(),
        )
    }

    /// `UserPromptSubmit` for `prompt`: [`PromptBlocked`] when a hook refuses it (before the
    /// prompt is recorded); the context they add joins the session after the prompt, which
    /// `record_prompt` appends.
    pub(super) async fn prompt_hooks(
        &mut self,
        session: &mut Session,
        turn: u32,
        prompt: &str,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Vec<(String, String)>> {
        let mut fields = serde_json::Map::new();
        fields.insert("prompt".into(), prompt.into());
        let Some(fired) = self
            .fire_hooks(
                session,
                (turn, 0),
                HookEvent::UserPromptSubmit,
                None,
                fields,
                cancel,
            )
            .await?
        else {
            return Ok(Vec::new());
        };
        if let Some((command, reason)) = fired.blocked {
            session.flush()?;
            return Err(PromptBlocked { command, reason }.into());
        }
        Ok(fired.context)
    }

    /// The context `UserPromptSubmit` hooks added, after the prompt.
    pub(super) fn prompt_context(
        session: &mut Session,
        turn: u32,
        context: &[(String, String)],
    ) -> anyhow::Result<()> {
        let facts = BTreeMap::from([("turn".to_owned(), turn.to_string())]);
        Self::hook_context(
            session,
            (turn, 0),
            HookEvent::UserPromptSubmit,
            context,
            facts,
        )
    }

    /// `Stop` (or `SubagentStop` in a sub-agent's session) when the model answered without
    /// calls: the reason the turn must go on, when a hook says so, already in the session for
    /// the model to read. `active`: a Stop hook already kept this turn going.
    pub(super) async fn stop_hooks(
        &mut self,
        session: &mut Session,
        (turn, step): (u32, u32),
        active: bool,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Option<String>> {
        let subagent = session
            .history()
            .header()
            .is_some_and(|header| header.parent.is_some());
        let event = if subagent {
            HookEvent::SubagentStop
        } else {
            HookEvent::Stop
        };
        let mut fields = serde_json::Map::new();
        fields.insert("stop_hook_active".into(), active.into());
        let Some(fired) = self
            .fire_hooks(session, (turn, step), event, None, fields, cancel)
            .await?
        else {
            return Ok(None);
        };
        let Some((command, reason)) = fired.blocked else {
            return Ok(None);
        };
        let facts = BTreeMap::from([
            ("turn".to_owned(), turn.to_string()),
            ("step".to_owned(), step.to_string()),
        ]);
        let said = vec![(
            command,
            format!("{reason}\n(The turn is not over: go on with the work.)"),
        )];
        Self::hook_context(session, (turn, step), event, &said, facts)?;
        Ok(Some(reason))
    }
}
