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
    pub max_steps: u32,
    pub max_prompt_tokens: u64,
    pub wall: Duration,
}

/// What a `task` call asks of the spawner.
#[derive(Clone, Debug)]
pub struct Order {
    pub agent_type: String,
    pub prompt: String,
    /// A few words for the views; the prompt's start when the model gave none.
    pub title: Option<String>,
    /// The calling session and call, for the child's header ([`crate::session::event::ParentLink`]).
    pub parent_session: String,
    pub call_id: String,
    pub budgets: Budgets,
    /// The parent preset's `max_depth`: a child at that depth gets no `task` tool.
    pub max_depth: u32,
}

/// A child made and ready to run: its session exists.
pub struct Started {
    pub child: String,
    pub preset: String,
    pub depth: u32,
    /// Runs the child's one turn to its end; never fails (a failure is the report's outcome).
    pub run: BoxFuture<'static, Report>,
}

/// How a child's turn ended, for the parent's log and the call's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
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
