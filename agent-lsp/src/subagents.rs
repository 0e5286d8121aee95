//! Sub-agents: the `task` tool hands a self-contained piece of work to another agent, which
//! works in a session of its own and answers with one final message, the call's result.
//!
//! Why it is built this way:
//! - **The parent's context stays small.** The parent's model sees the child's final answer
//!   only; its reads, searches and dead ends stay in the child's session, one `recall_history`
//!   (`session`: the child's id) away.
//! - **Every step is in a log.** The child's session file is an ordinary session whose header
//!   names the parent session and the `task` call
//!   ([`ParentLink`](crate::session::event::ParentLink)); the parent's log gets
//!   `subagent/start` and `subagent/end` (outcome, steps, token and cache totals) around the
//!   call, recorded as they happen through the call's
//!   [`EventSink`](crate::plugin::tool::EventSink). So every request a child made replays from
//!   its own log, and the trajectory nests the child's calls under the parent's `task` cell.
//! - **Budgets end a child, never hang the parent.** A child has at most `max_steps` steps,
//!   `max_prompt_tokens` prompt tokens over its requests and `wall_secs` of wall time; the one
//!   it reaches ends its turn as a cancellation would (every call answered), and the result
//!   says which. Cancelling the parent's turn cancels every child through the call's token.
//! - **Siblings share a cached prefix.** Children of one type get the same system prompt and
//!   catalog (the type's preset and the same role section), so the provider serves the second
//!   sibling's prefix from its cache. Consecutive `task` calls of one step run at once
//!   ([`crate::plugin::tool::Tool::runs_beside_itself`]), at most `max_concurrent` at a time.
//!
//! This module is the plugin layer's half: the preset table, the tool and what a child runs
//! with beside its preset's plugins ([`child::ChildPlugin`]). Starting a child needs the loop
//! and the assembly, which sit above the plugins, so the tool asks a [`Spawner`] the host
//! offers ([`PluginHost::subagents`]); `crate::host` is the one that makes agents.

pub mod child;
mod tool;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::plugin::registry::{InvalidSetting, Parts, PluginHost, PluginSettings};
pub use crate::plugin::spawn::{Budgets, Order, Report, Spawner, Started};
pub use tool::Task;

/// The plugin's name in presets.
pub const PLUGIN: &str = "subagents";
/// The tool's name.
pub const TOOL: &str = "task";
/// The agent type a `task` call gets when it names none.
pub const DEFAULT_TYPE: &str = "explore";
/// The agent type that runs with the parent's own preset.
pub const GENERAL: &str = "general";

/// `[plugins.subagents]` of a preset.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubagentsSettings {
    /// Whether the preset offers the `task` tool.
    pub enabled: bool,
    /// How deep sub-agents may nest: 1 lets this agent start sub-agents that start none.
    #[serde(default = "default_max_depth")]
    pub max_depth: u32,
    /// Sub-agents of one agent that run at once; further `task` calls wait for a slot.
    #[serde(default = "default_max_concurrent")]
    pub max_concurrent: usize,
    /// A child's step budget (its preset's `max_steps` when that is lower).
    #[serde(default = "default_max_steps")]
    pub max_steps: u32,
    /// A child's prompt-token budget, summed over its requests as the provider counts them.
    #[serde(default = "default_max_prompt_tokens")]
    pub max_prompt_tokens: u64,
    /// A child's wall-time budget, in seconds.
    #[serde(default = "default_wall_secs")]
    pub wall_secs: u64,
}

fn default_max_depth() -> u32 {
    1
}

fn default_max_concurrent() -> usize {
    4
}

fn default_max_steps() -> u32 {
    30
}

fn default_max_prompt_tokens() -> u64 {
    2_000_000
}

fn default_wall_secs() -> u64 {
    900
}

impl PluginSettings for SubagentsSettings {
    fn enabled(&self) -> bool {
        self.enabled
    }

    fn validate(&self) -> Result<(), InvalidSetting> {
        InvalidSetting::within("max_depth", self.max_depth, 1..=4)?;
        InvalidSetting::within("max_concurrent", self.max_concurrent, 1..=16)?;
        InvalidSetting::at_least("max_steps", self.max_steps, 1)?;
        InvalidSetting::at_least("max_prompt_tokens", self.max_prompt_tokens, 1000)?;
        InvalidSetting::at_least("wall_secs", self.wall_secs, 1)?;
        Ok(())
    }
}

impl SubagentsSettings {
    /// What each child may use before it is stopped, from the preset's keys.
    pub fn budgets(&self) -> Budgets {
        Budgets {
            max_steps: self.max_steps,
            max_prompt_tokens: self.max_prompt_tokens,
            wall: Duration::from_secs(self.wall_secs),
        }
    }

    /// The registry entry: the `task` tool, over the spawner the host offers (none in a
    /// preset check, where a call says sub-agents cannot start there).
    pub fn parts(settings: SubagentsSettings, host: &PluginHost) -> anyhow::Result<Parts> {
        Ok(Parts {
            plugin: None,
            tools: vec![Arc::new(Task::new(settings, host.subagents.clone()))],
            shell: None,
        })
    }
}

/// Why a child was stopped before it answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The child took its last allowed step while still calling tools.
    StepBudget,
    /// The child's requests passed their prompt-token budget.
    TokenBudget,
    /// The child ran past its wall-clock budget.
    TimeBudget,
}

impl StopReason {
    /// The outcome recorded in `subagent/end`.
    pub fn outcome(self) -> &'static str {
        match self {
            StopReason::StepBudget => "step_budget",
            StopReason::TokenBudget => "token_budget",
            StopReason::TimeBudget => "time_budget",
        }
    }
}

/// Stops a child's turn and remembers why, so a budget's end is not taken for the user's
/// cancellation.
#[derive(Clone, Debug)]
pub struct Stop {
    token: CancellationToken,
    reason: Arc<Mutex<Option<StopReason>>>,
}

impl Stop {
    /// A stop that cancels `token`: the child's turn watches it.
    pub fn new(token: CancellationToken) -> Stop {
        Stop {
            token,
            reason: Arc::default(),
        }
    }

    /// The token the child's turn is run with; cancelled by [`Stop::stop`] or by the parent.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Stop the child for `reason`, unless it was stopped already.
    pub fn stop(&self, reason: StopReason) {
        let mut held = self.reason.lock().expect("stop reason");
        if held.is_none() && !self.token.is_cancelled() {
            *held = Some(reason);
            self.token.cancel();
        }
    }

    /// Why the child was stopped; `None` when it was not, or was cancelled from outside (the
    /// user, or the parent's own stop).
    pub fn reason(&self) -> Option<StopReason> {
        *self.reason.lock().expect("stop reason")
    }
}
