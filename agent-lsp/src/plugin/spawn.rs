//! The sub-agent seam: what the `task` tool (`crate::subagents`) asks of whoever can make and
//! run agents. Making an agent needs the loop and the assembly, which sit above the plugins, so
//! the host offers a [`Spawner`] ([`super::registry::PluginHost::subagents`]) and
//! `crate::host` implements it.

use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::session::event::SubagentEnd;

/// What a child may use before it is stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budgets {
    /// Model steps the child's one turn may take; its preset's own limit holds when lower.
    pub max_steps: u32,
    /// Prompt tokens over all the child's requests, as the provider reported them; once past,
    /// the child stops after its current answer. Prompt tokens, because every request resends
    /// the history: they are what a long sub-agent costs.
    pub max_prompt_tokens: u64,
    /// Wall-clock time from start to the child's end.
    pub wall: Duration,
}

/// What a `task` call asks of the spawner.
#[derive(Clone, Debug)]
pub struct Order {
    /// `explore`, `general` or a preset's name: decides the child's preset.
    pub agent_type: String,
    /// The task, in the parent model's words: the child's first prompt.
    pub prompt: String,
    /// A few words for the views; the prompt's start when the model gave none.
    pub title: Option<String>,
    /// The calling session and call, for the child's header ([`crate::session::event::ParentLink`]).
    pub parent_session: String,
    /// The `task` call's id, which the child's header and the parent's `subagent/*` events
    /// name.
    pub call_id: String,
    /// What the child may use before it is stopped.
    pub budgets: Budgets,
    /// The parent preset's `max_depth`: a child at that depth gets no `task` tool.
    pub max_depth: u32,
}

/// A child made and ready to run: its session exists.
pub struct Started {
    /// The child session's id.
    pub child: String,
    /// The name of the preset the child runs with.
    pub preset: String,
    /// The child's depth: 1 under a top-level session.
    pub depth: u32,
    /// Runs the child's one turn to its end; never fails (a failure is the report's outcome).
    pub run: BoxFuture<'static, Report>,
}

/// How a child's turn ended, for the parent's log and the call's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The `subagent/end` event the parent's log gets: outcome, reason and usage.
    pub end: SubagentEnd,
    /// The child's final answer (`answered`), or its last words when it was stopped.
    pub text: String,
}

/// Makes and runs children. Implemented above the loop (`crate::host::Host`).
pub trait Spawner: Send + Sync {
    /// Make the child of `order`: its preset, plugins, tools and session. `cancel` stops it.
    /// An error is for the model to read (an unknown agent type, a preset that fails to load).
    fn start(&self, order: Order, cancel: CancellationToken) -> anyhow::Result<Started>;
}

impl std::fmt::Debug for dyn Spawner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Spawner")
    }
}
