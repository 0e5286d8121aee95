//! The basic compaction engine: pressure measurement, two watermarks, range choice, the shrink
//! check, the transactional commit, and the loop guard.
//!
//! - Pressure is the token meter's estimate of the next request (system prompt, tool catalog,
//!   surface messages, plus the answer's `max_tokens`), calibrated by the provider's reported
//!   prompt sizes, against the preset's `model.context_window`.
//! - At the soft mark a candidate summary is prepared off the main path: `compaction/start` is
//!   appended (the lock), and the summary call runs on a spawned task while the loop goes on.
//!   Its range reserves only the recent steps that the steps expected before the hard mark will
//!   not provide, so a commit re-sends no more than a synchronous compaction would.
//! - At the hard mark the candidate is committed if the surface still holds exactly the entries
//!   it was built from (a context edit or a rollback in between makes it stale: it is discarded)
//!   and at least `keep_recent_steps` steps followed its range (else it is discarded too);
//!   with no valid candidate the compaction runs synchronously and the step waits for it.
//! - A commit appends `compaction/summary`, the checkpoint `user/message` (`surface_op: replace`,
//!   `source_event_seqs = [start, summary, shadowed…]`) and `compaction/end`. Any failure appends
//!   only `compaction/end` with the reason: the old surface stays as it was.
//! - Messages too large for any request are elided to stubs ([`super::elide`]) when a fold
//!   cannot make the room: first thing when the next request is over the whole window (the
//!   summary request replays the prefix, so it would overflow too), and after an overflow or a
//!   manual compaction whose fold did not commit or left the request at the hard mark (the
//!   recent steps are never folded). It runs also when automatic compaction stopped, so a
//!   session over its window always has a way back.
//! - A summary that would not shrink the request by `min_shrink_ratio` is a failure, so a
//!   compaction cannot fire again and again without effect; after `max_consecutive_failures`
//!   automatic failures, automatic compaction stops for the session (recorded in the failing
//!   `compaction/end`, so a resumed session stays stopped) and the caller tells the user.

mod candidate;
mod commit;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;

use super::range::{SurfaceRange, region_of};
use super::summary::Summarizer;
use super::{
    CompactionContext, CompactionEngine, CompactionOutcome, CompactionSettings, CompactionStats,
    ElisionReport, Trigger,
};
use crate::context::system_prompt::catalog_json;
use crate::llm::Message;
use crate::session::event::{CompactionEnd, EventBody};
use crate::session::{History, NewEvent, Session};
use crate::tokens::{TokenMeter, estimate_message, estimate_text};
use candidate::Candidate;

/// The basic engine; generic over nothing, the summarizer is the swappable part.
pub struct BasicCompactionEngine {
    settings: CompactionSettings,
    summarizer: Arc<dyn Summarizer>,
    state: Option<SessionState>,
    stats: CompactionStats,
    /// Token estimate of the last tool catalog seen, by digest.
    tools_tokens: Option<(String, u64)>,
}

/// What the engine knows about the session it works on, recovered from the log when it first
/// sees that session.
struct SessionState {
    session_id: String,
    meter: TokenMeter,
    /// Events up to this seq have been read into `meter`, `estimates` and the failure count.
    scanned_through: u64,
    /// `request/context` estimates waiting for their `usage`.
    estimates: HashMap<u64, u64>,
    consecutive_failures: u32,
    auto_disabled: bool,
    candidate: Option<Candidate>,
}

/// A compaction whose `compaction/start` is in the log.
#[derive(Clone, Debug)]
struct Begun {
    compaction_id: String,
    start_seq: u64,
    trigger: Trigger,
    range: SurfaceRange,
    entry_seqs: Vec<u64>,
}

impl BasicCompactionEngine {
    /// An engine with `settings` that writes its summaries with `summarizer`. It holds no
    /// session yet: it recovers what it needs from a session's log the first time it sees it.
    pub(crate) fn new(
        settings: CompactionSettings,
        summarizer: Arc<dyn Summarizer>,
    ) -> BasicCompactionEngine {
        BasicCompactionEngine {
            settings,
            summarizer,
            state: None,
            stats: CompactionStats::default(),
            tools_tokens: None,
        }
    }

    /// The state for `session`, recovered from its log on first sight; closes a compaction a
    /// previous process left open.
    fn sync_state(&mut self, session: &mut Session, ctx: &CompactionContext) -> anyhow::Result<()> {
        if self
            .state
            .as_ref()
            .is_none_or(|state| state.session_id != session.id())
        {
            if let Some(candidate) = self.state.take().and_then(|state| state.candidate) {
                // A candidate of another session: that session's next writer closes it.
                candidate.cancel.cancel();
            }
            self.state = Some(SessionState {
                session_id: session.id().to_owned(),
                meter: TokenMeter::default(),
                scanned_through: 0,
                estimates: HashMap::new(),
                consecutive_failures: 0,
                auto_disabled: false,
                candidate: None,
            });
            let open = open_compaction(session.history());
            if let Some((compaction_id, _)) = open {
                tracing::info!(%compaction_id, "closing a compaction a previous process left open");
                let tokens = self.measure(session, ctx);
                session.append(NewEvent::new(
                    ctx.turn,
                    ctx.step,
                    EventBody::CompactionEnd(CompactionEnd {
                        compaction_id,
                        outcome: "abandoned".into(),
                        reason: Some("the process ended while the compaction was open".into()),
                        checkpoint_seq: None,
                        tokens_before: tokens,
                        tokens_after: tokens,
                        auto_disabled: false,
                    }),
                ))?;
            }
        }
        let state = self.state.as_mut().expect("set above");
        let history = session.history();
        let from = history
            .events()
            .partition_point(|event| event.seq <= state.scanned_through);
        for event in &history.events()[from..] {
            match &event.body {
                EventBody::RequestContext(context) => {
                    state
                        .estimates
                        .insert(context.index, context.estimated_tokens);
                }
                EventBody::Usage(usage) => {
                    if let Some(estimate) = state.estimates.remove(&usage.index) {
                        state.meter.calibrate(estimate, usage.prompt_tokens);
                    }
                }
                EventBody::CompactionEnd(end) => match end.outcome.as_str() {
                    "committed" => {
                        state.consecutive_failures = 0;
                        state.auto_disabled = false;
                    }
                    "failed" if event.seq > state.scanned_through && state.scanned_through == 0 => {
                        // Only while recovering: failures of this process are counted as
                        // they happen.
                        state.consecutive_failures += 1;
                        state.auto_disabled |= end.auto_disabled;
                    }
                    _ => {}
                },
                _ => {}
            }
        }
        state.scanned_through = history.last_seq();
        Ok(())
    }

    fn state(&mut self) -> &mut SessionState {
        self.state.as_mut().expect("sync_state ran first")
    }

    /// The calibrated estimate of the next request, plus room for its answer.
    fn measure(&mut self, session: &mut Session, ctx: &CompactionContext) -> u64 {
        let tools = match &self.tools_tokens {
            Some((digest, tokens)) if *digest == ctx.prompt.tools_digest => *tokens,
            _ => {
                let tokens = estimate_text(&catalog_json(&ctx.prompt.tools));
                self.tools_tokens = Some((ctx.prompt.tools_digest.clone(), tokens));
                tokens
            }
        };
        let messages: u64 = session.derive_messages().iter().map(estimate_message).sum();
        let raw = 4 + estimate_text(&ctx.prompt.system) + tools + messages;
        let meter = self
            .state
            .as_ref()
            .map_or(TokenMeter::default(), |state| state.meter);
        meter.calibrated(raw) + u64::from(ctx.params.max_tokens.unwrap_or(0))
    }

    /// The calibrated estimate of a summary request over `prefix`, instruction included.
    fn prefix_tokens(&self, ctx: &CompactionContext, prefix: &[Message]) -> u64 {
        let tools = self.tools_tokens.as_ref().map_or(0, |(_, tokens)| *tokens);
        let raw = 4
            + estimate_text(&ctx.prompt.system)
            + tools
            + prefix.iter().map(estimate_message).sum::<u64>()
            + estimate_text(&super::summary::instruction());
        let meter = self
            .state
            .as_ref()
            .map_or(TokenMeter::default(), |state| state.meter);
        meter.calibrated(raw)
    }

    fn marks(&self, ctx: &CompactionContext) -> (u64, u64) {
        let window = ctx.context_window as f64;
        (
            (window * self.settings.soft_ratio) as u64,
            (window * self.settings.hard_ratio) as u64,
        )
    }

    /// Elide the messages too large for any request; `None` when there were none.
    fn elide(
        &mut self,
        session: &mut Session,
        ctx: &CompactionContext,
    ) -> anyhow::Result<Option<ElisionReport>> {
        if session.history().surface().pending_calls().next().is_some() {
            return Ok(None);
        }
        let tokens_before = self.measure(session, ctx);
        let elided =
            super::elide::elide_oversized(session, ctx.context_window, ctx.turn, ctx.step)?;
        if elided == 0 {
            return Ok(None);
        }
        Ok(Some(ElisionReport {
            elided,
            tokens_before,
            tokens_after: self.measure(session, ctx),
        }))
    }

    fn record_wait(&mut self, waited: Duration) {
        self.stats.waited += waited;
        self.stats.longest_wait = self.stats.longest_wait.max(waited);
    }
}

impl Drop for BasicCompactionEngine {
    fn drop(&mut self) {
        if let Some(candidate) = self.state.as_mut().and_then(|state| state.candidate.take()) {
            candidate.abandon();
        }
    }
}

impl CompactionEngine for BasicCompactionEngine {
    fn compact_if_needed<'a>(
        &'a mut self,
        session: &'a mut Session,
        ctx: &'a CompactionContext,
    ) -> BoxFuture<'a, anyhow::Result<CompactionOutcome>> {
        Box::pin(async move {
            self.sync_state(session, ctx)?;
            let mut tokens = self.measure(session, ctx);
            let (soft, hard) = self.marks(ctx);
            // A request over the whole window cannot be sent, and neither can the summary
            // request that replays it: elide first. Below the window a fold makes the room.
            if tokens >= ctx.context_window
                && let Some(report) = self.elide(session, ctx)?
            {
                tokens = report.tokens_after;
                if tokens < hard {
                    return Ok(CompactionOutcome::Elided(report));
                }
            }
            if self.state().auto_disabled {
                return Ok(CompactionOutcome::AutoDisabled);
            }
            if tokens >= hard {
                let started = Instant::now();
                let outcome = self.compact_blocking(session, ctx, Trigger::PreStep).await;
                self.record_wait(started.elapsed());
                return outcome;
            }
            if tokens >= soft && self.settings.background && self.state().candidate.is_none() {
                return self.start_candidate(session, ctx, tokens);
            }
            Ok(CompactionOutcome::NotNeeded)
        })
    }

    fn due<'a>(
        &'a mut self,
        session: &'a mut Session,
        ctx: &'a CompactionContext,
    ) -> anyhow::Result<bool> {
        self.sync_state(session, ctx)?;
        let tokens = self.measure(session, ctx);
        let (soft, hard) = self.marks(ctx);
        if self.state().auto_disabled {
            return Ok(false);
        }
        let candidate =
            tokens >= soft && self.settings.background && self.state().candidate.is_none();
        Ok(tokens >= hard || candidate)
    }

    fn loop_request_sent(&mut self) {
        if let Some(candidate) = self
            .state
            .as_mut()
            .and_then(|state| state.candidate.as_mut())
        {
            candidate.release();
        }
    }

    fn compact_now<'a>(
        &'a mut self,
        session: &'a mut Session,
        ctx: &'a CompactionContext,
        trigger: Trigger,
    ) -> BoxFuture<'a, anyhow::Result<CompactionOutcome>> {
        Box::pin(async move {
            self.sync_state(session, ctx)?;
            let outcome = if trigger.is_automatic() && self.state().auto_disabled {
                CompactionOutcome::AutoDisabled
            } else {
                let started = Instant::now();
                let outcome = self.compact_blocking(session, ctx, trigger).await?;
                self.record_wait(started.elapsed());
                outcome
            };
            if ctx.cancel.is_cancelled() {
                return Ok(outcome);
            }
            // Elision is the last resort: when the fold did not commit (nothing to fold, or its
            // summary request overflowed too), or left the request at the hard mark still.
            let (_, hard) = self.marks(ctx);
            let committed = matches!(outcome, CompactionOutcome::Committed(_));
            if committed && self.measure(session, ctx) < hard {
                return Ok(outcome);
            }
            Ok(match self.elide(session, ctx)? {
                Some(report) if !committed => CompactionOutcome::Elided(report),
                _ => outcome,
            })
        })
    }

    fn compact_region<'a>(
        &'a mut self,
        session: &'a mut Session,
        ctx: &'a CompactionContext,
        start: u64,
        end: u64,
    ) -> BoxFuture<'a, anyhow::Result<CompactionOutcome>> {
        Box::pin(async move {
            self.sync_state(session, ctx)?;
            let range = region_of(session.history(), start, end)?;
            if let Some(candidate) = self.state().candidate.take() {
                candidate.abandon();
                self.stats.discarded += 1;
                self.fail(
                    session,
                    ctx,
                    &candidate.begun,
                    "discarded",
                    "a compaction of another region took the lock".into(),
                )?;
            }
            self.run(session, ctx, Trigger::Manual, range).await
        })
    }

    fn stats(&self) -> CompactionStats {
        self.stats.clone()
    }
}

/// The last compaction started and not ended: its id and its `compaction/start` seq.
pub fn open_compaction(history: &History) -> Option<(String, u64)> {
    for event in history.events().iter().rev() {
        match &event.body {
            EventBody::CompactionEnd(_) => return None,
            EventBody::CompactionStart(start) => {
                return Some((start.compaction_id.clone(), event.seq));
            }
            _ => {}
        }
    }
    None
}
