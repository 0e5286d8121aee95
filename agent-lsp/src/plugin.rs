//! The plugin layer: the loop's events, the [`Plugin`] trait that subscribes to them and
//! contributes to the system prompt and the runtime context, the seams for tools, compaction and sub-agents,
//! and the [`registry`] that turns a preset's `[plugins.NAME]` tables into plugins. It sits below
//! the loop and below everything that plugs into it (compaction, the tool-result pruner, the
//! context rules, the runtime context, project instructions, memory, plans), so those import it
//! and never the loop (see docs/decisions/0004-plugin-layer.md). Below it are only the session
//! log, the model types, the workspace and the prompt primitives of `context`.

pub mod compaction_seam;
pub mod outcomes;
pub mod registry;
pub mod spawn;
pub mod state;
pub mod tool;
pub mod typed;

use std::collections::BTreeMap;

use crate::context::system_prompt::{AssembledPrompt, SystemPrompt};
use crate::llm::provider::Completion;
use crate::session::event::ToolCallRef;
use crate::session::{History, Session};
use compaction_seam::CompactionEngine;
use outcomes::{CompactionOutcome, ToolCallOutcome};

/// What wakes plugins (docs/architecture.md, "Plugin events" lists them with their names).
#[derive(Debug)]
pub enum AgentEvent<'a> {
    /// `session/start`: a turn is about to begin in this session.
    SessionStart {
        /// The turn about to begin.
        turn: u32,
    },
    /// `agent/pre-step`: before the request of this step is built.
    PreStep {
        /// The turn the step belongs to.
        turn: u32,
        /// The step about to be requested, from 1.
        step: u32,
    },
    /// `agent/post-step`: the model answered this step (already appended).
    PostStep {
        /// The turn the step belongs to.
        turn: u32,
        /// The step that was answered.
        step: u32,
        /// The answer with its usage, as the provider streamed it.
        completion: &'a Completion,
    },
    /// `tools/before-call`: the calls of this step are about to run.
    ToolsBeforeCall {
        /// The turn the step belongs to.
        turn: u32,
        /// The step whose calls these are.
        step: u32,
        /// The calls, in the order the model emitted them.
        calls: &'a [ToolCallRef],
    },
    /// `tools/after-result`: one call's result was appended.
    ToolsAfterResult {
        /// The turn the step belongs to.
        turn: u32,
        /// The step whose call this was.
        step: u32,
        /// The call, its result and how it ended.
        outcome: &'a ToolCallOutcome,
    },
    /// `session/end`: the turn ended.
    SessionEnd {
        /// The turn that ended.
        turn: u32,
        /// How it ended.
        outcome: &'a TurnOutcome,
    },
    /// `compaction/*`: the compaction engine started a candidate, committed a checkpoint or
    /// failed (the user is told when automatic compaction stops).
    Compaction {
        /// The turn during which the engine ran.
        turn: u32,
        /// The step the engine ran for (before its request, or after it overflowed).
        step: u32,
        /// What the engine did.
        outcome: &'a CompactionOutcome,
    },
}

impl AgentEvent<'_> {
    /// The event's name as docs/architecture.md lists it, for error contexts and logs.
    pub fn name(&self) -> &'static str {
        match self {
            AgentEvent::SessionStart { .. } => "session/start",
            AgentEvent::PreStep { .. } => "agent/pre-step",
            AgentEvent::PostStep { .. } => "agent/post-step",
            AgentEvent::ToolsBeforeCall { .. } => "tools/before-call",
            AgentEvent::ToolsAfterResult { .. } => "tools/after-result",
            AgentEvent::SessionEnd { .. } => "session/end",
            AgentEvent::Compaction { .. } => "compaction",
        }
    }
}

/// A part of the agent the loop runs with: it may add sections and variables to the system
/// prompt, facts to the runtime context, and handle the loop's events (appending to the session
/// is how dynamic content enters it). Tools come with a plugin through its registry entry. An
/// error from a plugin ends the turn.
///
/// Every method has a default that does nothing, so a plugin implements only what it uses.
pub trait Plugin: Send {
    /// The plugin's name, as in presets (`[plugins.NAME]`), in its `plugin/state` records and in
    /// error messages.
    fn name(&self) -> &'static str;

    /// Add this plugin's sections and variables for `session`; asked at the start of every turn,
    /// before `session/start`. The text must stay the same for the session's whole life (the
    /// provider's cached prefix depends on it): a plugin that reads something that may change
    /// records what it read in the session (`plugin/state`) the first time and rebuilds the
    /// section from that record afterwards, and announces later changes through
    /// [`Plugin::runtime_context`].
    fn contribute(
        &mut self,
        _prompt: &mut SystemPrompt,
        _session: &mut Session,
        _turn: u32,
    ) -> anyhow::Result<()> {
        Ok(())
    }

    /// The prompt as assembled for this turn (a plugin that budgets against the window, like
    /// the pruner, measures it here).
    fn prompt_assembled(&mut self, _prompt: &AssembledPrompt) {}

    /// This plugin's runtime context now, asked before each step's request (after the
    /// `agent/pre-step` event). The loop appends it as a `context/runtime` message only when
    /// its facts differ from the last ones of the same source the model can still see.
    fn runtime_context(
        &mut self,
        _history: &History,
    ) -> anyhow::Result<Option<RuntimeContribution>> {
        Ok(None)
    }

    /// [`Plugin::runtime_context`] for a plugin with several sources (one per project
    /// instructions file), each compared with its own last visible facts.
    fn runtime_contexts(&mut self, history: &History) -> anyhow::Result<Vec<RuntimeContribution>> {
        Ok(self.runtime_context(history)?.into_iter().collect())
    }

    /// Handle one of the loop's events; appending to `session` is how a plugin's dynamic content
    /// enters the history. An error ends the turn.
    fn on_event(&mut self, _event: &AgentEvent<'_>, _session: &mut Session) -> anyhow::Result<()> {
        Ok(())
    }

    /// The compaction engine, for the one plugin that is one. The loop awaits it first thing in
    /// each step and on a context overflow, which a synchronous event cannot do.
    fn compaction(&mut self) -> Option<&mut dyn CompactionEngine> {
        None
    }
}

/// Facts a plugin puts into the runtime context, compared as a whole against its last ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeContribution {
    /// The plugin's name, or `None` for the environment (cwd, date, branch), whose events are
    /// written without a source as they always were.
    pub source: Option<String>,
    /// The facts by name, compared with the source's last visible ones to decide whether the model
    /// needs a new message.
    pub facts: BTreeMap<String, String>,
    /// The message text the model reads.
    pub text: String,
}

/// How a turn ended.
#[derive(Clone, Debug, PartialEq)]
pub enum TurnOutcome {
    /// The model gave a final answer (a step without tool calls).
    Answered {
        /// The final answer's text.
        text: String,
        /// Model steps the turn took, the answering one included.
        steps: u32,
    },
    /// The preset's step limit was reached while the model still called tools.
    StepLimit {
        /// Model steps the turn took: the limit.
        steps: u32,
    },
    /// The turn was cancelled; the log is consistent.
    Cancelled {
        /// Model steps the turn took before the cancel.
        steps: u32,
    },
}
