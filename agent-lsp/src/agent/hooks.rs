//! The loop's side of the user's hooks (`crate::hooks`; the tool runtime runs `PreToolUse` and
//! `PostToolUse` itself): `UserPromptSubmit` before the prompt is taken, then `SessionStart` the
//! first time this agent takes a prompt of its session (neither for a sub-agent, whose prompt
//! is the model's, as in Claude Code), `Stop` (`SubagentStop` in a sub-agent's session) when
//! the model answered without calls, `PreCompact` before a compaction
//! (`compaction.rs`; `Hooks::pre_compact`, which a compaction the user asks for runs too).
//!
//! Each run is recorded as `hook/run`; what a hook gives the model enters the session as a
//! `context/runtime` message (source `hook/EVENT`), so the next request, and its replay, carry
//! it like any other context. A prompt a hook refused never becomes a turn: its runs are
//! recorded under the turn before, so the next prompt's turn number is not taken by it.

use std::collections::BTreeMap;

use tokio_util::sync::CancellationToken;

use super::Agent;
use crate::context::runtime::RuntimeContextProjection;
use crate::hooks::HookEvent;
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
    /// The hooks that run on `event` in this session, if any.
    fn hooks_on(&self, event: HookEvent) -> Option<std::sync::Arc<crate::hooks::Hooks>> {
        self.tools.hooks().filter(|hooks| hooks.has(event)).cloned()
    }

    /// Put what hooks gave the model into the session, as a runtime-context message of the
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

    /// The hooks before a prompt of turn `turn` is taken: `UserPromptSubmit`, then, the first
    /// time, `SessionStart` (`startup` for a session without a prompt yet, `resume`). Neither
    /// runs in a sub-agent's session. `Ok(None)`: the turn was cancelled meanwhile and the
    /// prompt must not be taken; [`PromptBlocked`] when a hook refused it. Otherwise the
    /// context `UserPromptSubmit` hooks add, which joins the session after the prompt
    /// ([`Agent::prompt_context`]).
    pub(super) async fn before_prompt(
        &mut self,
        session: &mut Session,
        turn: u32,
        prompt: &str,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Option<Vec<(String, String)>>> {
        let subagent = session
            .history()
            .header()
            .is_some_and(|header| header.parent.is_some());
        if subagent {
            return Ok(Some(Vec::new()));
        }
        let mut context = Vec::new();
        if let Some(hooks) = self.hooks_on(HookEvent::UserPromptSubmit) {
            let mut fields = serde_json::Map::new();
            fields.insert("prompt".into(), prompt.into());
            let fired = hooks
                .fire_in(
                    session,
                    None,
                    HookEvent::UserPromptSubmit,
                    None,
                    fields,
                    cancel,
                )
                .await?;
            // A prompt that is not taken is no turn: its runs go with the turn before.
            let taken = fired.blocked.is_none() && !cancel.is_cancelled();
            let at = if taken { turn } else { turn.saturating_sub(1) };
            crate::hooks::record(session, (at, 0), &fired)?;
            if let Some((command, reason)) = fired.blocked {
                session.flush()?;
                return Err(PromptBlocked { command, reason }.into());
            }
            if !taken {
                session.flush()?;
                return Ok(None);
            }
            context = fired.context;
        }
        if !std::mem::replace(&mut self.session_started, true)
            && let Some(hooks) = self.hooks_on(HookEvent::SessionStart)
        {
            let resumed = session.history().events().iter().any(|event| {
                matches!(event.body, crate::session::event::EventBody::UserMessage(_))
            });
            let source = if resumed { "resume" } else { "startup" };
            let mut fields = serde_json::Map::new();
            fields.insert("source".into(), source.into());
            let fired = hooks
                .fire_in(
                    session,
                    Some((turn, 0)),
                    HookEvent::SessionStart,
                    Some(source),
                    fields,
                    cancel,
                )
                .await?;
            Self::hook_context(
                session,
                (turn, 0),
                HookEvent::SessionStart,
                &fired.context,
                BTreeMap::new(),
            )?;
        }
        Ok(Some(context))
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
    /// calls: the reason the turn must go on, when a hook says so and `may_go_on` (the step
    /// limit is not reached), already in the session for the model to read. `active`: a Stop
    /// hook already kept this turn going.
    pub(super) async fn stop_hooks(
        &mut self,
        session: &mut Session,
        (turn, step): (u32, u32),
        active: bool,
        may_go_on: bool,
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
        let Some(hooks) = self.hooks_on(event) else {
            return Ok(None);
        };
        let mut fields = serde_json::Map::new();
        fields.insert("stop_hook_active".into(), active.into());
        let fired = hooks
            .fire_in(session, Some((turn, step)), event, None, fields, cancel)
            .await?;
        let Some((command, reason)) = fired.blocked.filter(|_| may_go_on) else {
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
