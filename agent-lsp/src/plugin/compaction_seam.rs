//! The compaction seam: what a compaction backend must do and what it is given. It sits in the
//! plugin layer so the compaction plugin is a registry entry like any other, and the loop reaches
//! its engine through [`super::Plugin::compaction`] without importing `crate::compaction`.
//! Compaction is the one participant that awaits (a summary is a model call), which is why it
//! is a seam of its own next to the synchronous events.

use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::outcomes::CompactionOutcome;
use crate::context::system_prompt::AssembledPrompt;
use crate::llm::ModelParams;
use crate::session::Session;

/// What asked for a compaction; recorded in `compaction/start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// The pre-step pressure check reached the hard mark.
    PreStep,
    /// The pre-step check reached the soft mark; the summary is prepared off the main path.
    Background,
    /// The provider refused a request as too long.
    Overflow,
    /// The user asked (`agent-lsp session compact`, the editor's `agent.compact`).
    Manual,
}

impl Trigger {
    /// The name recorded in `compaction/start`.
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::PreStep => "pre_step",
            Trigger::Background => "background",
            Trigger::Overflow => "overflow",
            Trigger::Manual => "manual",
        }
    }

    /// Automatic triggers stop after too many consecutive failures; a manual one always runs.
    pub fn is_automatic(self) -> bool {
        self != Trigger::Manual
    }
}

/// What a compaction needs besides the session: the prompt prefix it replays and the model
/// settings of the session. Owned, so a background candidate can take what it needs along.
#[derive(Clone, Debug)]
pub struct CompactionContext {
    /// The session's assembled system prompt and tools: the summary call replays this prefix so
    /// the provider's cache serves it.
    pub prompt: AssembledPrompt,
    /// The model the summary call asks.
    pub model: String,
    /// The session's model parameters, sent with the summary call as with any request.
    pub params: ModelParams,
    /// The model's context window in tokens (the preset's `model.context_window`).
    pub context_window: u64,
    /// The turn the compaction runs in; its events carry it.
    pub turn: u32,
    /// The step the compaction runs before (or after whose overflow it runs); its events carry
    /// it.
    pub step: u32,
    /// Cancelled when the turn is; a summary call in flight stops and the compaction fails
    /// without changing the surface.
    pub cancel: CancellationToken,
}

/// Running figures of an engine, for progress reports and the benchmark.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompactionStats {
    /// Checkpoints committed.
    pub committed: u32,
    /// Compactions that failed, each counted toward stopping automatic compaction.
    pub failed: u32,
    /// Summaries thrown away unused: the surface changed under a candidate, or another range
    /// had to be folded instead.
    pub discarded: u32,
    /// Background candidates started at the soft mark.
    pub candidates_started: u32,
    /// Total and longest time a pre-step (or overflow retry) waited for compaction.
    pub waited: Duration,
    /// See [`CompactionStats::waited`].
    pub longest_wait: Duration,
}

/// The compaction seam: what a compaction backend must do. `compaction::basic::BasicCompactionEngine`
/// is the implementation; a backend that only wants another way to summarize plugs a
/// `compaction::summary::Summarizer` into it instead of implementing this.
///
/// Errors are failures to write the session log; a summary call that fails, a stale candidate
/// or a compaction too small to help are [`CompactionOutcome::Failed`] and leave the surface as
/// it was.
pub trait CompactionEngine: Send {
    /// The pre-step pressure check: prepare a candidate at the soft mark, compact at the hard
    /// mark, do nothing below.
    fn compact_if_needed<'a>(
        &'a mut self,
        session: &'a mut Session,
        ctx: &'a CompactionContext,
    ) -> BoxFuture<'a, anyhow::Result<CompactionOutcome>>;

    /// Whether [`CompactionEngine::compact_if_needed`] would start a compaction now (not an
    /// elision): the loop's `PreCompact` hooks run first when it would.
    fn due<'a>(
        &'a mut self,
        _session: &'a mut Session,
        _ctx: &'a CompactionContext,
    ) -> anyhow::Result<bool> {
        Ok(false)
    }

    /// Compact the compactable range now, whatever the pressure (overflow, user command).
    fn compact_now<'a>(
        &'a mut self,
        session: &'a mut Session,
        ctx: &'a CompactionContext,
        trigger: Trigger,
    ) -> BoxFuture<'a, anyhow::Result<CompactionOutcome>>;

    /// Fold exactly the surface range `start..=end` (event seqs), if it keeps tool pairs whole.
    fn compact_region<'a>(
        &'a mut self,
        session: &'a mut Session,
        ctx: &'a CompactionContext,
        start: u64,
        end: u64,
    ) -> BoxFuture<'a, anyhow::Result<CompactionOutcome>>;

    /// The loop's request of this step has reached the provider (its first answer byte came,
    /// or it ended). An engine that prepares summaries in the background sends a candidate's
    /// summary call only after this: the call replays the prefix that request just put in the
    /// provider's cache, and the step the user waits for goes first.
    fn loop_request_sent(&mut self) {}

    /// The engine's running figures so far; an engine that keeps none reports zeros.
    fn stats(&self) -> CompactionStats {
        CompactionStats::default()
    }
}
