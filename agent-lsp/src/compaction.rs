//! Memory: compaction, tool-result pruning and recall of shadowed history.
//!
//! Long sessions must neither overflow the model's window nor lose the thread, and must keep the
//! provider's prefix cache hot (docs/architecture.md, "Memory: compaction"). Four mechanisms,
//! all of which only change the *surface*; the log keeps every original event:
//!
//! - a [`CompactionEngine`] (the seam) folds older history into a `<compacted-summary>`
//!   checkpoint: a `user/message` with `surface_op: replace` and `source_event_seqs`, written
//!   between `compaction/start` (the lock) and `compaction/end`. [`basic::BasicCompactionEngine`]
//!   is the implementation; a preset picks it, its thresholds, and its [`summary::Summarizer`]
//!   (the one part a preset can swap alone);
//! - the `pruner::ToolResultPruner` shortens old oversized tool results to head + tail;
//! - [`elide`] replaces any message too large for a request by a stub, the way back for a
//!   session that is over its window (the engine runs it when a fold cannot make the room);
//! - the [`recall::RecallHistory`] tool reads shadowed events back, verbatim, as a tool result.
//!
//! The engine is called by the agent loop at `agent/pre-step` (before the plugins, so the
//! runtime-context projection re-injects a snapshot the fold shadowed) and when the provider
//! answers with a context overflow (compact, then retry the request once). It is not a
//! [`crate::plugin::Plugin`] because plugins are synchronous and a compaction awaits a model call.

pub mod basic;
pub mod elide;
pub(crate) mod pruner;
pub(crate) mod range;
pub mod recall;
pub mod summary;

use std::sync::Arc;

use anyhow::Context;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::context::request::replay_request;
use crate::context::system_prompt::AssembledPrompt;
use crate::llm::provider::Provider;
use crate::plugin::Plugin;
pub use crate::plugin::compaction_seam::{
    CompactionContext, CompactionEngine, CompactionStats, Trigger,
};
pub use crate::plugin::outcomes::{CompactionOutcome, CompactionReport, ElisionReport};
use crate::plugin::registry::{InvalidSetting, Parts, PluginHost, PluginSettings};
use crate::session::Session;

/// `[plugins.compaction]` of a preset. Absent (as in `minimal`) means no compaction at all.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompactionSettings {
    /// Whether the session compacts at all (automatically at the marks, and on request).
    pub enabled: bool,
    /// The engine; `basic` is the only one so far.
    #[serde(default = "default_engine")]
    pub engine: String,
    /// `llm` (a model call that replays the cached prefix) or `template` (offline, mechanical).
    #[serde(default = "default_summarizer")]
    pub summarizer: String,
    /// Share of `model.context_window` at which a background candidate summary is prepared.
    #[serde(default = "default_soft_ratio")]
    pub soft_ratio: f64,
    /// Share of `model.context_window` at which the pre-step check compacts (commits the
    /// candidate, or compacts synchronously without one).
    #[serde(default = "default_hard_ratio")]
    pub hard_ratio: f64,
    /// Prepare candidates in the background between the two marks; without it the hard mark
    /// compacts synchronously and the step waits for the summary call.
    #[serde(default = "default_true")]
    pub background: bool,
    /// The most recent model steps are never folded: the model is working on them.
    #[serde(default = "default_keep_recent_steps")]
    pub keep_recent_steps: u32,
    /// A compaction must shrink the estimated surface by at least this share, or it counts as
    /// failed (the checkpoint is not committed); this is what stops endless compaction loops.
    #[serde(default = "default_min_shrink_ratio")]
    pub min_shrink_ratio: f64,
    /// After this many consecutive failures automatic compaction stops for the session and the
    /// user is told; `agent-lsp session compact` still works.
    #[serde(default = "default_max_failures")]
    pub max_consecutive_failures: u32,
    /// `max_tokens` of the summary call.
    #[serde(default = "default_summary_max_tokens")]
    pub summary_max_tokens: u32,
}

fn default_engine() -> String {
    "basic".to_owned()
}
fn default_summarizer() -> String {
    "llm".to_owned()
}
fn default_soft_ratio() -> f64 {
    0.6
}
fn default_hard_ratio() -> f64 {
    0.8
}
fn default_true() -> bool {
    true
}
fn default_keep_recent_steps() -> u32 {
    4
}
fn default_min_shrink_ratio() -> f64 {
    0.2
}
fn default_max_failures() -> u32 {
    3
}
fn default_summary_max_tokens() -> u32 {
    4096
}

impl Default for CompactionSettings {
    fn default() -> Self {
        toml::from_str("enabled = true").expect("defaults parse")
    }
}

impl CompactionSettings {
    /// Check the values a typo could make meaningless; `origin` names the preset in errors.
    pub fn check(&self, origin: &str) -> anyhow::Result<()> {
        match self.validate() {
            Ok(()) => Ok(()),
            Err(invalid) => anyhow::bail!(
                "preset {origin}: plugins.compaction.{} {}",
                invalid.key,
                invalid.message
            ),
        }
    }
}

impl PluginSettings for CompactionSettings {
    fn enabled(&self) -> bool {
        self.enabled
    }

    fn validate(&self) -> Result<(), InvalidSetting> {
        let invalid = |key, message: String| Err(InvalidSetting { key, message });
        let ok = |ratio: f64| ratio > 0.0 && ratio <= 1.0;
        if !(ok(self.soft_ratio) && ok(self.hard_ratio) && self.soft_ratio <= self.hard_ratio) {
            return invalid(
                "soft_ratio",
                "and hard_ratio need 0 < soft_ratio <= hard_ratio <= 1".into(),
            );
        }
        if !(0.0..1.0).contains(&self.min_shrink_ratio) {
            return invalid("min_shrink_ratio", "must be in [0, 1)".into());
        }
        if self.engine != "basic" {
            return invalid(
                "engine",
                format!("`{}` is unknown (the engines are: basic)", self.engine),
            );
        }
        if !matches!(self.summarizer.as_str(), "llm" | "template") {
            return invalid(
                "summarizer",
                format!("`{}` is unknown (llm or template)", self.summarizer),
            );
        }
        Ok(())
    }
}

/// `[plugins.tool_result_pruner]` of a preset.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrunerSettings {
    /// Whether old oversized tool results are shortened.
    pub enabled: bool,
    /// Results longer than this many characters are shortened once they are old.
    #[serde(default = "default_threshold_chars")]
    pub threshold_chars: usize,
    /// Characters kept from the start of a shortened result.
    #[serde(default = "default_head_chars")]
    pub head_chars: usize,
    /// Characters kept from the end of a shortened result.
    #[serde(default = "default_tail_chars")]
    pub tail_chars: usize,
    /// From this share of the window on, old results are shortened whenever the request's
    /// cached prefix breaks anyway before them (a context edit, a rollback); right after a
    /// compaction commit they are shortened whatever the share. Below it the window is roomy and
    /// nothing is shortened.
    #[serde(default = "default_prune_ratio")]
    pub trigger_ratio: f64,
    /// From this share of the window on, the pruner breaks the cache itself: every due result is
    /// shortened at once, in one request, so the provider's cache is lost once from the earliest
    /// of them on instead of once per result. It sits above the compaction's hard mark by
    /// default: with compaction on, a commit breaks the prefix first and the pruning is free.
    #[serde(default = "default_pressure_ratio")]
    pub pressure_ratio: f64,
    /// Results of the most recent model steps are never shortened.
    #[serde(default = "default_prune_keep_recent")]
    pub keep_recent_steps: u32,
}

fn default_threshold_chars() -> usize {
    8192
}
fn default_head_chars() -> usize {
    4096
}
fn default_tail_chars() -> usize {
    1024
}
fn default_prune_ratio() -> f64 {
    0.5
}
fn default_pressure_ratio() -> f64 {
    0.85
}
fn default_prune_keep_recent() -> u32 {
    2
}

impl PluginSettings for PrunerSettings {
    fn enabled(&self) -> bool {
        self.enabled
    }
}

impl Default for PrunerSettings {
    fn default() -> Self {
        toml::from_str("enabled = true").expect("defaults parse")
    }
}

/// The compaction plugin: the loop reaches the engine through [`Plugin::compaction`].
pub struct CompactionPlugin {
    engine: Box<dyn CompactionEngine>,
}

impl CompactionPlugin {
    /// The plugin that hands `engine` to the loop.
    pub fn new(engine: Box<dyn CompactionEngine>) -> CompactionPlugin {
        CompactionPlugin { engine }
    }

    /// The registry entry of `[plugins.compaction]`: the engine (when a model is configured, as
    /// its summaries are model calls) and the `recall_history` tool, which reads back what the
    /// checkpoints shadowed.
    pub fn parts(settings: CompactionSettings, host: &PluginHost) -> anyhow::Result<Parts> {
        let plugin = match &host.provider {
            Some(provider) => engine_for(Some(&settings), &host.preset, provider)?
                .map(|engine| Box::new(CompactionPlugin::new(engine)) as Box<dyn Plugin>),
            None => None,
        };
        Ok(Parts {
            plugin,
            tools: vec![Arc::new(recall::RecallHistory)],
            shell: None,
        })
    }
}

impl Plugin for CompactionPlugin {
    fn name(&self) -> &'static str {
        "compaction"
    }

    fn compaction(&mut self) -> Option<&mut dyn CompactionEngine> {
        Some(self.engine.as_mut())
    }
}

/// The engine `settings` (a preset's `[plugins.compaction]`, of the preset named `origin`) ask
/// for, or `None` when there are none or they are disabled.
pub fn engine_for(
    settings: Option<&CompactionSettings>,
    origin: &str,
    provider: &Provider,
) -> anyhow::Result<Option<Box<dyn CompactionEngine>>> {
    let Some(settings) = settings.filter(|settings| settings.enabled) else {
        return Ok(None);
    };
    settings.check(origin)?;
    let summarizer = summary::summarizer_for(settings, provider);
    Ok(Some(Box::new(basic::BasicCompactionEngine::new(
        settings.clone(),
        summarizer,
    ))))
}

/// Compact a session now, outside a turn: `agent-lsp session compact` and the editor server's
/// `agent.compact` command.
///
/// The summary call replays the prefix of the session's last model request (its system prompt
/// and tool catalog come from the log), so it works without building a tool runtime and still
/// hits the provider's cache. `settings` are the session's preset's (the defaults for a preset
/// without compaction, since the user asked explicitly), `context_window` its model's window.
/// `summarizer` overrides the settings' (e.g. `template` when no model is configured).
pub async fn compact_session(
    session: &mut Session,
    settings: CompactionSettings,
    context_window: u64,
    provider: &Provider,
    summarizer: Option<Arc<dyn summary::Summarizer>>,
    cancel: &CancellationToken,
) -> anyhow::Result<CompactionOutcome> {
    let history = session.history();
    let n_requests = history.n_requests();
    anyhow::ensure!(
        n_requests > 0,
        "session {} has made no model request yet: there is nothing to compact",
        session.id()
    );
    let last = replay_request(history, n_requests)
        .context("failed to recover the prompt prefix of the session's last request")?;
    let prompt = AssembledPrompt::from_parts(last.system, last.tools)?;
    let summarizer = summarizer.unwrap_or_else(|| summary::summarizer_for(&settings, provider));
    let mut engine = basic::BasicCompactionEngine::new(settings, summarizer);
    let turn = history.next_turn().saturating_sub(1);
    let ctx = CompactionContext {
        prompt,
        model: last.model,
        params: last.params,
        context_window,
        turn,
        step: 0,
        cancel: cancel.clone(),
    };
    let outcome = engine.compact_now(session, &ctx, Trigger::Manual).await?;
    session.flush()?;
    Ok(outcome)
}

/// The line a person sees about a compaction, or `None` for the quiet ones (a background
/// candidate started, nothing needed).
pub fn describe_outcome(outcome: &CompactionOutcome) -> Option<String> {
    match outcome {
        CompactionOutcome::Committed(report) => Some(format!(
            "compacted older history into checkpoint {} ({} messages, ~{} → ~{} tokens{})",
            report.compaction_id,
            report.shadowed_entries,
            report.tokens_before,
            report.tokens_after,
            if report.background {
                ", prepared in the background"
            } else {
                ""
            }
        )),
        CompactionOutcome::Elided(report) => Some(format!(
            "elided {} message{} too large for any request from the history (~{} → ~{} tokens); \
             the session log keeps them whole",
            report.elided,
            if report.elided == 1 { "" } else { "s" },
            report.tokens_before,
            report.tokens_after
        )),
        CompactionOutcome::Failed {
            reason,
            auto_disabled: true,
            ..
        } => Some(format!(
            "automatic compaction is stopped for this session after repeated failures (last: {reason}); \
             compact by hand with `agent-lsp session compact`, or start a new session"
        )),
        CompactionOutcome::Failed { reason, .. } => Some(format!(
            "compaction failed, the history is unchanged: {reason}"
        )),
        CompactionOutcome::NotNeeded
        | CompactionOutcome::CandidateStarted { .. }
        | CompactionOutcome::AutoDisabled => None,
    }
}
