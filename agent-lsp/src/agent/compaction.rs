//! The loop's side of compaction: finding the compaction plugin's engine, the context window
//! pressure is measured against, and running the engine before a step or after an overflow.
//!
//! Apart from the step loop in `agent.rs` because compaction is the one participant the loop
//! awaits itself (a summary is a model call), so its context and its event are built here.

use tokio_util::sync::CancellationToken;

use super::{Agent, AgentEvent, TurnUi};
use crate::context::system_prompt::AssembledPrompt;
use crate::plugin::compaction_seam::{
    CompactionContext, CompactionEngine, CompactionStats, Trigger,
};
use crate::plugin::outcomes::CompactionOutcome;
use crate::session::Session;

impl Agent {
    /// The compaction engine, if a plugin is one.
    pub(super) fn compaction(&mut self) -> Option<&mut dyn CompactionEngine> {
        self.plugins
            .iter_mut()
            .find_map(|plugin| plugin.compaction())
    }

    /// What the compaction engine did so far (zeros without one).
    pub fn compaction_stats(&mut self) -> CompactionStats {
        self.compaction()
            .map(|engine| engine.stats())
            .unwrap_or_default()
    }

    /// The context window pressure is measured against: the preset's, or the smaller one the
    /// provider stated in a context-overflow error.
    pub(super) fn context_window(&self) -> u64 {
        let preset = self.preset.file.model.context_window;
        self.stated_window
            .map_or(preset, |stated| stated.min(preset))
    }

    /// Run the compaction engine, if the preset has one: the pressure check (`trigger: None`)
    /// or a compaction now. Tells plugins and the UI what it did.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn compact(
        &mut self,
        session: &mut Session,
        prompt: &AssembledPrompt,
        turn: u32,
        step: u32,
        cancel: &CancellationToken,
        trigger: Option<Trigger>,
        ui: &mut dyn TurnUi,
    ) -> anyhow::Result<Option<CompactionOutcome>> {
        let context_window = self.context_window();
        let ctx = CompactionContext {
            prompt: prompt.clone(),
            model: self.provider.config().model.clone(),
            params: self.params.clone(),
            context_window,
            turn,
            step,
            cancel: cancel.clone(),
        };
        if self.compaction().is_none() {
            return Ok(None);
        }
        if let Some(hooks) = self
            .tools
            .hooks()
            .filter(|hooks| hooks.has(crate::hooks::HookEvent::PreCompact))
            .cloned()
        {
            let due = match trigger {
                Some(_) => true,
                None => self
                    .compaction()
                    .map_or(Ok(false), |engine| engine.due(session, &ctx))?,
            };
            if due {
                let manual = trigger == Some(Trigger::Manual);
                hooks
                    .pre_compact(session, (turn, step), manual, cancel)
                    .await?;
            }
        }
        let Some(engine) = self.compaction() else {
            return Ok(None);
        };
        let outcome = match trigger {
            None => engine.compact_if_needed(session, &ctx).await?,
            Some(trigger) => engine.compact_now(session, &ctx, trigger).await?,
        };
        if !matches!(
            outcome,
            CompactionOutcome::NotNeeded | CompactionOutcome::AutoDisabled
        ) {
            self.emit(
                &AgentEvent::Compaction {
                    turn,
                    step,
                    outcome: &outcome,
                },
                session,
                ui,
            )?;
        }
        Ok(Some(outcome))
    }
}
