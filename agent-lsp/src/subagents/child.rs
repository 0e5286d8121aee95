//! What a sub-agent runs with beside its preset's plugins: the role section that tells it who
//! reads its answer, and the prompt-token budget.

use super::{Stop, StopReason};
use crate::context::system_prompt::SystemPrompt;
use crate::plugin::{AgentEvent, Plugin};
use crate::session::Session;
use crate::session::event::EventBody;

/// Where the role section goes: right after the base prompt.
const SECTION_ORDER: i32 = 5;

/// The role every sub-agent is given; the same text for every child of one type, so siblings
/// share their prompt prefix.
const ROLE: &str = "\
You are a sub-agent: another agent (your parent) handed you one task, the next user message, through its `task` tool.
Only your final answer reaches the parent; it never sees your tool calls or their results. Make the answer complete and self-contained, and brief: the facts found with their paths and line numbers, what you changed, and what stays uncertain. Nobody can answer questions while you work: if the task cannot be done, say why in your answer.";

/// The addition for the `explore` type.
const EXPLORE: &str =
    "You only look: find, read and explain; you cannot change files or run commands.";

/// The role section and the prompt-token budget of one child.
pub struct ChildPlugin {
    role: String,
    stop: Stop,
    max_prompt_tokens: u64,
}

impl ChildPlugin {
    /// The plugin of a child of `agent_type`, which `stop`s it once its requests pass
    /// `max_prompt_tokens`.
    pub fn new(agent_type: &str, stop: Stop, max_prompt_tokens: u64) -> ChildPlugin {
        let role = if agent_type == super::DEFAULT_TYPE {
            format!("{ROLE}\n{EXPLORE}")
        } else {
            ROLE.to_owned()
        };
        ChildPlugin {
            role,
            stop,
            max_prompt_tokens,
        }
    }
}

impl Plugin for ChildPlugin {
    fn name(&self) -> &'static str {
        "subagent"
    }

    fn contribute(
        &mut self,
        prompt: &mut SystemPrompt,
        _session: &mut Session,
        _turn: u32,
    ) -> anyhow::Result<()> {
        prompt.section("subagent", SECTION_ORDER, &self.role);
        Ok(())
    }

    /// After an answer: once the child's requests have used the budget, it stops (its calls of
    /// this step are answered as cancelled).
    fn on_event(&mut self, event: &AgentEvent<'_>, session: &mut Session) -> anyhow::Result<()> {
        if let AgentEvent::PostStep { completion, .. } = event
            && !completion.tool_calls.is_empty()
            && prompt_tokens(session) >= self.max_prompt_tokens
        {
            self.stop.stop(StopReason::TokenBudget);
        }
        Ok(())
    }
}

/// The prompt tokens of every request of `session`, as the provider reported them.
pub fn prompt_tokens(session: &Session) -> u64 {
    session
        .history()
        .events()
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::Usage(usage) => Some(usage.prompt_tokens),
            _ => None,
        })
        .sum()
}
