//! The plugin layer: the loop's events, the [`Plugin`] trait that subscribes to them, and the
//! records the events carry. It sits below the loop and below everything that plugs into it
//! (compaction, the tool-result pruner, the context rules, the runtime context), so those
//! import it and never the loop (see docs/decisions/0004-plugin-layer.md).

pub mod outcomes;

use crate::llm::provider::Completion;
use crate::session::Session;
use crate::session::event::ToolCallRef;
use outcomes::{CompactionOutcome, ToolCallOutcome};

/// What wakes plugins. Names follow the event names of ARCHITECTURE.md.
#[derive(Debug)]
pub enum AgentEvent<'a> {
    /// `session/start`: a turn is about to begin in this session.
    SessionStart { turn: u32 },
    /// `agent/pre-step`: before the request of this step is built.
    PreStep { turn: u32, step: u32 },
    /// `agent/post-step`: the model answered this step (already appended).
    PostStep {
        turn: u32,
        step: u32,
        completion: &'a Completion,
    },
    /// `tools/before-call`: the calls of this step are about to run.
    ToolsBeforeCall {
        turn: u32,
        step: u32,
        calls: &'a [ToolCallRef],
    },
    /// `tools/after-result`: one call's result was appended.
    ToolsAfterResult {
        turn: u32,
        step: u32,
        outcome: &'a ToolCallOutcome,
    },
    /// `session/end`: the turn ended.
    SessionEnd { turn: u32, outcome: &'a TurnOutcome },
    /// `compaction/*`: the compaction engine started a candidate, committed a checkpoint or
    /// failed (the user is told when automatic compaction stops).
    Compaction {
        turn: u32,
        step: u32,
        outcome: &'a CompactionOutcome,
    },
}

impl AgentEvent<'_> {
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

/// A subscriber to the loop's events. Plugins may append to the session (that is how dynamic
/// content enters it); an error from a plugin ends the turn.
pub trait Plugin: Send {
    fn name(&self) -> &'static str;
    fn on_event(&mut self, event: &AgentEvent<'_>, session: &mut Session) -> anyhow::Result<()>;
}

/// How a turn ended.
#[derive(Clone, Debug, PartialEq)]
pub enum TurnOutcome {
    /// The model gave a final answer (a step without tool calls).
    Answered { text: String, steps: u32 },
    /// The preset's step limit was reached while the model still called tools.
    StepLimit { steps: u32 },
    /// The turn was cancelled; the log is consistent.
    Cancelled { steps: u32 },
}
