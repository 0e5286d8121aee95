//! Context-editor rules from the preset, applied before each step as recorded edit batches.
//!
//! `[plugins.context_rules]` automates the two edits that help long runs most and risk least:
//! - fold tool results over `fold_tool_results_over_tokens` once they are older than
//!   `fold_older_than_steps` steps (a mechanical summary, the original one `recall_history`
//!   away). All eligible results are folded in one batch, so the provider's cache is broken at
//!   most once per firing, and the thresholds are high so it rarely fires;
//! - `pin_first_goal`: when the session's first prompt is no longer on the surface (a compaction
//!   or an edit folded it) and no pinned copy of it is, pin it. That happens right after the
//!   fold that shadowed it, when the cache is already broken there, so the pin (an append) costs
//!   nothing more.
//!
//! Rules never delete. A batch the surface refuses is logged and skipped; the turn goes on.

use serde::Deserialize;

use super::ops::{BatchOptions, EditOp, ORIGIN, PIN_TAG, apply_batch};
use crate::compaction::basic::open_compaction;
use crate::compaction::range::recent_steps_start;
use crate::plugin::registry::{Parts, PluginHost, PluginSettings};
use crate::plugin::{AgentEvent, Plugin};
use crate::session::event::EventBody;
use crate::session::surface::Pairing;
use crate::session::{History, Session};
use crate::tokens::{TokenMeter, estimate_message};

/// `[plugins.context_rules]` of a preset; absent (as in `minimal`) means no rules.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextRulesSettings {
    pub enabled: bool,
    /// Fold tool results estimated above this many tokens; 0 turns the rule off.
    #[serde(default)]
    pub fold_tool_results_over_tokens: u64,
    /// ... once they are older than this many model steps.
    #[serde(default = "default_fold_older_than_steps")]
    pub fold_older_than_steps: u32,
    /// Pin the session's first prompt when it has left the surface.
    #[serde(default)]
    pub pin_first_goal: bool,
}

impl PluginSettings for ContextRulesSettings {
    fn enabled(&self) -> bool {
        self.enabled
    }
}

fn default_fold_older_than_steps() -> u32 {
    12
}

/// The ops the rules ask for on `history` now (empty when nothing is due).
pub fn due_ops(history: &History, settings: &ContextRulesSettings) -> Vec<EditOp> {
    let mut ops = Vec::new();
    if !settings.enabled || history.surface().pending_calls().next().is_some() {
        return ops;
    }
    // Leave an open compaction's range alone: folding inside it would make its candidate stale.
    let locked: Vec<u64> = open_compaction(history)
        .and_then(|(_, seq)| match &history.event(seq)?.body {
            EventBody::CompactionStart(start) => Some(start.entry_seqs.clone()),
            _ => None,
        })
        .unwrap_or_default();
    if settings.fold_tool_results_over_tokens > 0 {
        let meter = TokenMeter::recover(history);
        let boundary = recent_steps_start(history, settings.fold_older_than_steps);
        for entry in &history.surface().entries()[..boundary] {
            if !matches!(entry.pairing, Pairing::Result(_)) || locked.contains(&entry.seq) {
                continue;
            }
            let Some(event) = history.event(entry.seq) else {
                continue;
            };
            let EventBody::ToolResult(result) = &event.body else {
                continue;
            };
            if result.meta.get("edit_id").is_some() {
                continue;
            }
            let tokens = crate::session::message_of(event)
                .map_or(0, |message| meter.calibrated(estimate_message(&message)));
            if tokens > settings.fold_tool_results_over_tokens {
                ops.push(EditOp::Fold {
                    id: entry.seq,
                    end: None,
                    summary: None,
                });
            }
        }
    }
    if settings.pin_first_goal
        && let Some(goal) = first_goal(history)
        && !history.surface().contains(goal)
        && !pinned(history, goal)
    {
        ops.push(EditOp::Pin { id: goal });
    }
    ops
}

/// The seq of the session's first prompt.
fn first_goal(history: &History) -> Option<u64> {
    history.events().iter().find_map(|event| match &event.body {
        EventBody::UserMessage(message) if message.origin == "prompt" => Some(event.seq),
        _ => None,
    })
}

/// Whether a pinned copy of `seq` is on the surface.
fn pinned(history: &History, seq: u64) -> bool {
    history.surface().entries().iter().any(|entry| {
        history.event(entry.seq).is_some_and(|event| {
            event.source_event_seqs == [seq]
                && matches!(&event.body, EventBody::UserMessage(message)
                    if message.origin == ORIGIN && message.text.starts_with(&format!("<{PIN_TAG}")))
        })
    })
}

/// The rules as a pre-step plugin.
pub struct ContextRulesPlugin {
    settings: ContextRulesSettings,
}

impl ContextRulesPlugin {
    pub fn new(settings: ContextRulesSettings) -> ContextRulesPlugin {
        ContextRulesPlugin { settings }
    }

    /// The registry entry of `[plugins.context_rules]`.
    pub fn parts(settings: ContextRulesSettings, _host: &PluginHost) -> anyhow::Result<Parts> {
        Ok(Parts {
            plugin: Some(Box::new(ContextRulesPlugin::new(settings))),
            tools: Vec::new(),
            shell: None,
        })
    }

    /// Apply what is due now; returns the number of ops applied.
    pub fn apply(&self, session: &mut Session, turn: u32, step: u32) -> anyhow::Result<usize> {
        let ops = due_ops(session.history(), &self.settings);
        if ops.is_empty() {
            return Ok(0);
        }
        let options = BatchOptions {
            actor: "rule".into(),
            force: false,
            turn,
            step,
        };
        match apply_batch(session, &ops, &options) {
            Ok(report) => Ok(report.results.len()),
            Err(error) if error.is::<super::ops::Refused>() => {
                // A refused rule is not worth ending the turn for; the refusal is in the log.
                tracing::warn!("context rule batch not applied: {error:#}");
                Ok(0)
            }
            Err(error) => Err(error),
        }
    }
}

impl Plugin for ContextRulesPlugin {
    fn name(&self) -> &'static str {
        "context_rules"
    }

    fn on_event(&mut self, event: &AgentEvent<'_>, session: &mut Session) -> anyhow::Result<()> {
        if let AgentEvent::PreStep { turn, step } = event {
            self.apply(session, *turn, *step)?;
        }
        Ok(())
    }
}
