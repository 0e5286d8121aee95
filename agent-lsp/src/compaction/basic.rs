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

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::range::{
    SurfaceRange, recent_steps_start, region_of, select_compactable_range, steps_in,
};
use super::summary::{Summarizer, Summary, build_summary_input, frame_checkpoint};
use super::{
    CompactionContext, CompactionEngine, CompactionOutcome, CompactionReport, CompactionSettings,
    CompactionStats, ElisionReport, Trigger,
};
use crate::context::system_prompt::catalog_json;
use crate::llm::Message;
use crate::session::event::{
    CompactionEnd, CompactionStart, CompactionSummary, EventBody, SurfaceOp, UserMessage,
};
use crate::session::{History, NewEvent, Session};
use crate::tokens::{TokenMeter, estimate_message, estimate_text};

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

/// A summary being prepared in the background.
struct Candidate {
    begun: Begun,
    handle: JoinHandle<anyhow::Result<Summary>>,
    cancel: CancellationToken,
    /// Lets the summary call go out; see [`CompactionEngine::loop_request_sent`].
    release: Option<oneshot::Sender<()>>,
}

impl Candidate {
    /// Stop its summary call: the candidate will not be committed.
    fn abandon(&self) {
        self.cancel.cancel();
        self.handle.abort();
    }

    fn release(&mut self) {
        if let Some(release) = self.release.take() {
            let _ = release.send(());
        }
    }
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
    pub fn new(
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

    /// The same engine with another summarizer: the hook a preset (or a test) uses to change
    /// only how the summary is written.
    pub fn with_summarizer(mut self, summarizer: Arc<dyn Summarizer>) -> BasicCompactionEngine {
        self.summarizer = summarizer;
        self
    }

    pub fn settings(&self) -> &CompactionSettings {
        &self.settings
    }

    /// Whether automatic compaction stopped for the current session.
    pub fn auto_disabled(&self) -> bool {
        self.state.as_ref().is_some_and(|state| state.auto_disabled)
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

    /// Append `compaction/start` for `range` and build the summary input.
    fn begin(
        &mut self,
        session: &mut Session,
        ctx: &CompactionContext,
        trigger: Trigger,
        range: SurfaceRange,
    ) -> anyhow::Result<(Begun, super::summary::SummaryInput)> {
        let tokens = self.measure(session, ctx);
        let start_seq = session.history().last_seq() + 1;
        let compaction_id = format!("cmp-{start_seq}");
        let entry_seqs = session.history().surface().entries()[range.first..=range.last]
            .iter()
            .map(|entry| entry.seq)
            .collect::<Vec<_>>();
        let generation = session.history().generation();
        let prefix = session.derive_messages()[..=range.last].to_vec();
        // The answer must fit the window next to the replayed prefix; a fixed `max_tokens`
        // would make the summary call itself overflow exactly when it is needed most.
        let prompt_tokens = self.prefix_tokens(ctx, &prefix);
        let room = (ctx.context_window as f64 * 0.95) as u64;
        let max_tokens =
            room.saturating_sub(prompt_tokens)
                .clamp(256, u64::from(self.settings.summary_max_tokens)) as u32;
        let input = build_summary_input(&compaction_id, ctx, max_tokens, prefix, range.first);
        let event = session.append(NewEvent::new(
            ctx.turn,
            ctx.step,
            EventBody::CompactionStart(CompactionStart {
                compaction_id: compaction_id.clone(),
                trigger: trigger.as_str().into(),
                start: range.start_seq,
                end: range.end_seq,
                entry_seqs: entry_seqs.clone(),
                generation,
                estimated_tokens: tokens,
            }),
        ))?;
        debug_assert_eq!(event.seq, start_seq);
        tracing::info!(
            %compaction_id,
            trigger = trigger.as_str(),
            start = range.start_seq,
            end = range.end_seq,
            entries = entry_seqs.len(),
            tokens,
            "compaction started"
        );
        Ok((
            Begun {
                compaction_id,
                start_seq,
                trigger,
                range,
                entry_seqs,
            },
            input,
        ))
    }

    /// Commit `summary` for `begun`, or record why not. The surface changes only on success.
    fn finish(
        &mut self,
        session: &mut Session,
        ctx: &CompactionContext,
        begun: Begun,
        summary: anyhow::Result<Summary>,
        background: bool,
    ) -> anyhow::Result<CompactionOutcome> {
        let tokens_before = self.measure(session, ctx);
        let summary = match summary {
            Ok(summary) => summary,
            Err(error) => {
                let outcome = if ctx.cancel.is_cancelled() {
                    "cancelled"
                } else {
                    "failed"
                };
                return self.fail(session, ctx, &begun, outcome, format!("{error:#}"));
            }
        };
        if !still_holds(session.history(), &begun.entry_seqs) {
            self.stats.discarded += 1;
            return self.fail(
                session,
                ctx,
                &begun,
                "discarded",
                "the surface changed inside the range since the candidate was built".into(),
            );
        }
        let pending = session
            .history()
            .surface()
            .pending_calls()
            .next()
            .map(str::to_owned);
        if let Some(call_id) = pending {
            let reason = format!("tool call `{call_id}` is still waiting for its result");
            return self.fail(session, ctx, &begun, "failed", reason);
        }

        let checkpoint = frame_checkpoint(
            session.history(),
            &begun.compaction_id,
            &begun.entry_seqs,
            &summary.text,
        );
        let meter = self.state().meter;
        let range_tokens = meter.calibrated(
            session.derive_messages()[begun.range.first..=begun.range.last]
                .iter()
                .map(estimate_message)
                .sum(),
        );
        let checkpoint_tokens = meter.calibrated(estimate_message(&Message::User {
            text: checkpoint.clone(),
        }));
        let saved = range_tokens.saturating_sub(checkpoint_tokens);
        let share = saved as f64 / tokens_before.max(1) as f64;
        if share < self.settings.min_shrink_ratio {
            let reason = format!(
                "the checkpoint would shrink the request by {:.0} % (~{saved} tokens), less than the required {:.0} %",
                share * 100.0,
                self.settings.min_shrink_ratio * 100.0
            );
            return self.fail(session, ctx, &begun, "failed", reason);
        }

        let summary_seq = session
            .append(NewEvent::new(
                ctx.turn,
                ctx.step,
                EventBody::CompactionSummary(CompactionSummary {
                    compaction_id: begun.compaction_id.clone(),
                    summarizer: self.summarizer.name().into(),
                    text: summary.text,
                    usage: summary.usage,
                }),
            ))?
            .seq;
        let mut sources = vec![begun.start_seq, summary_seq];
        sources.extend(&begun.entry_seqs);
        let checkpoint_seq = session
            .append(
                NewEvent::new(
                    ctx.turn,
                    ctx.step,
                    EventBody::UserMessage(UserMessage {
                        text: checkpoint,
                        origin: "compaction".into(),
                    }),
                )
                .with_op(SurfaceOp::Replace {
                    start: begun.range.start_seq,
                    end: begun.range.end_seq,
                })
                .with_sources(sources),
            )?
            .seq;
        let tokens_after = tokens_before - saved;
        session.append(NewEvent::new(
            ctx.turn,
            ctx.step,
            EventBody::CompactionEnd(CompactionEnd {
                compaction_id: begun.compaction_id.clone(),
                outcome: "committed".into(),
                reason: None,
                checkpoint_seq: Some(checkpoint_seq),
                tokens_before,
                tokens_after,
                auto_disabled: false,
            }),
        ))?;
        let state = self.state();
        state.consecutive_failures = 0;
        state.scanned_through = session.history().last_seq();
        self.stats.committed += 1;
        tracing::info!(
            compaction_id = %begun.compaction_id,
            checkpoint_seq,
            tokens_before,
            tokens_after,
            background,
            "compaction committed"
        );
        Ok(CompactionOutcome::Committed(CompactionReport {
            compaction_id: begun.compaction_id,
            checkpoint_seq,
            shadowed_entries: begun.entry_seqs.len(),
            tokens_before,
            tokens_after,
            background,
        }))
    }

    /// Record a compaction that did not commit, and count it.
    fn fail(
        &mut self,
        session: &mut Session,
        ctx: &CompactionContext,
        begun: &Begun,
        outcome: &str,
        reason: String,
    ) -> anyhow::Result<CompactionOutcome> {
        let tokens = self.measure(session, ctx);
        let auto_disabled = match outcome {
            "failed" => self.count_failure(begun.trigger),
            _ => false,
        };
        session.append(NewEvent::new(
            ctx.turn,
            ctx.step,
            EventBody::CompactionEnd(CompactionEnd {
                compaction_id: begun.compaction_id.clone(),
                outcome: outcome.into(),
                reason: Some(reason.clone()),
                checkpoint_seq: None,
                tokens_before: tokens,
                tokens_after: tokens,
                auto_disabled,
            }),
        ))?;
        self.state().scanned_through = session.history().last_seq();
        tracing::warn!(compaction_id = %begun.compaction_id, outcome, %reason, "compaction did not commit");
        Ok(CompactionOutcome::Failed {
            compaction_id: Some(begun.compaction_id.clone()),
            reason,
            auto_disabled,
        })
    }

    /// Count one failure; returns whether it stopped automatic compaction.
    fn count_failure(&mut self, trigger: Trigger) -> bool {
        self.stats.failed += 1;
        let max = self.settings.max_consecutive_failures;
        let state = self.state();
        if !trigger.is_automatic() {
            return false;
        }
        state.consecutive_failures += 1;
        if state.consecutive_failures >= max && !state.auto_disabled {
            state.auto_disabled = true;
            tracing::warn!(
                failures = state.consecutive_failures,
                "automatic compaction stopped for this session after repeated failures"
            );
            return true;
        }
        false
    }

    /// Start a background candidate for the compactable range; `tokens` is the pressure now.
    fn start_candidate(
        &mut self,
        session: &mut Session,
        ctx: &CompactionContext,
        tokens: u64,
    ) -> anyhow::Result<CompactionOutcome> {
        let keep = self.candidate_keep(session, ctx, tokens);
        let Some(range) = select_compactable_range(session.history(), keep) else {
            return Ok(CompactionOutcome::NotNeeded);
        };
        let (begun, input) = self.begin(session, ctx, Trigger::Background, range)?;
        let cancel = CancellationToken::new();
        let (release, released) = oneshot::channel();
        let summary = self.summarizer.summarize(input, cancel.clone());
        let handle = tokio::spawn(async move {
            // A dropped sender (the candidate went away) lets it go too; `cancel` stops it then.
            let _ = released.await;
            summary.await
        });
        let compaction_id = begun.compaction_id.clone();
        self.stats.candidates_started += 1;
        self.state().candidate = Some(Candidate {
            begun,
            handle,
            cancel,
            release: Some(release),
        });
        Ok(CompactionOutcome::CandidateStarted { compaction_id })
    }

    /// How many recent steps a candidate started now leaves out of its range.
    ///
    /// The candidate is committed at the hard mark, and every step made until then stays
    /// verbatim after its checkpoint. Reserving `keep_recent_steps` on top of those would keep
    /// more than the preset asks for, and each extra kept step is sent again uncached right
    /// after the commit: background checkpoints lost twice the cache share of synchronous ones
    /// to that. So the candidate reserves only the part of `keep_recent_steps` that the steps
    /// expected before the hard mark (the pressure left divided by the average recent step)
    /// will not provide; the commit checks the tail actually made
    /// ([`BasicCompactionEngine::tail_is_long_enough`]).
    fn candidate_keep(
        &mut self,
        session: &mut Session,
        ctx: &CompactionContext,
        tokens: u64,
    ) -> u32 {
        let keep = self.settings.keep_recent_steps;
        let (_, hard) = self.marks(ctx);
        let history = session.history();
        let from = recent_steps_start(history, keep.max(1));
        let steps = steps_in(history, from);
        if steps == 0 {
            return keep;
        }
        let recent: u64 = session.derive_messages()[from..]
            .iter()
            .map(estimate_message)
            .sum();
        let per_step = (self.state().meter.calibrated(recent) / u64::from(steps)).max(1);
        let expected = hard.saturating_sub(tokens) / per_step;
        keep.saturating_sub(u32::try_from(expected).unwrap_or(u32::MAX))
    }

    /// Whether committing `begun` now leaves at least `keep_recent_steps` steps verbatim after
    /// its checkpoint (a candidate reserved fewer, expecting the steps until the hard mark).
    fn tail_is_long_enough(&self, history: &History, begun: &Begun) -> bool {
        let entries = history.surface().entries();
        let Some(last) = entries
            .iter()
            .position(|entry| entry.seq == begun.range.end_seq)
        else {
            return false;
        };
        steps_in(history, last + 1) >= self.settings.keep_recent_steps
    }

    /// Commit the candidate if there is a valid one, else compact synchronously.
    async fn compact_blocking(
        &mut self,
        session: &mut Session,
        ctx: &CompactionContext,
        trigger: Trigger,
    ) -> anyhow::Result<CompactionOutcome> {
        if let Some(mut candidate) = self.state().candidate.take() {
            if !still_holds(session.history(), &candidate.begun.entry_seqs) {
                // Something took the place of an entry in its range (an elision, a context
                // edit): its summary could not be committed, so it is not waited for.
                candidate.abandon();
                self.stats.discarded += 1;
                let reason = "the surface changed inside the range since the candidate was built";
                self.fail(session, ctx, &candidate.begun, "discarded", reason.into())?;
            } else if !self.tail_is_long_enough(session.history(), &candidate.begun) {
                // The hard mark came sooner than the recent steps promised; folding now would
                // keep fewer steps than the preset asks for. A synchronous compaction picks a
                // range that keeps them. The range is known from the start, so the candidate's
                // summary is not waited for.
                candidate.abandon();
                self.stats.discarded += 1;
                let reason = format!(
                    "committing it now would keep fewer than the last {} steps",
                    self.settings.keep_recent_steps
                );
                self.fail(session, ctx, &candidate.begun, "discarded", reason)?;
            } else {
                candidate.release();
                let Candidate {
                    begun,
                    handle,
                    cancel,
                    ..
                } = candidate;
                let summary = tokio::select! {
                    joined = handle => joined.unwrap_or_else(|error| Err(anyhow::anyhow!("the summary task failed: {error}"))),
                    () = ctx.cancel.cancelled() => {
                        cancel.cancel();
                        Err(anyhow::anyhow!("the turn was cancelled while waiting for the summary"))
                    }
                };
                let outcome = self.finish(session, ctx, begun, summary, true)?;
                match &outcome {
                    CompactionOutcome::Committed(_) => return Ok(outcome),
                    _ if ctx.cancel.is_cancelled() => return Ok(outcome),
                    _ => {}
                }
            }
        }
        let Some(range) =
            select_compactable_range(session.history(), self.settings.keep_recent_steps)
        else {
            let auto_disabled = self.count_failure(trigger);
            return Ok(CompactionOutcome::Failed {
                compaction_id: None,
                reason: format!(
                    "nothing to fold: the surface holds little more than the last {} steps",
                    self.settings.keep_recent_steps
                ),
                auto_disabled,
            });
        };
        self.run(session, ctx, trigger, range).await
    }

    /// One synchronous compaction of `range`.
    async fn run(
        &mut self,
        session: &mut Session,
        ctx: &CompactionContext,
        trigger: Trigger,
        range: SurfaceRange,
    ) -> anyhow::Result<CompactionOutcome> {
        let (begun, input) = self.begin(session, ctx, trigger, range)?;
        let summary = self.summarizer.summarize(input, ctx.cancel.clone()).await;
        self.finish(session, ctx, begun, summary, false)
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

/// Whether the surface still holds `seqs` as one contiguous run, in order.
fn still_holds(history: &History, seqs: &[u64]) -> bool {
    let entries = history.surface().entries();
    let Some(first) = seqs.first() else {
        return false;
    };
    let Some(position) = entries.iter().position(|entry| entry.seq == *first) else {
        return false;
    };
    entries.len() >= position + seqs.len()
        && entries[position..position + seqs.len()]
            .iter()
            .zip(seqs)
            .all(|(entry, seq)| entry.seq == *seq)
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
