//! Background candidates: a summary prepared at the soft mark while the loop goes on, and the
//! blocking path at the hard mark that commits it or compacts synchronously.
//!
//! Apart from the commit in `commit.rs` because this is about *when* a summary is written and
//! how many recent steps its range leaves out, not about how it is recorded.

use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::super::range::{SurfaceRange, recent_steps_start, select_compactable_range, steps_in};
use super::super::summary::Summary;
use super::super::{CompactionContext, CompactionOutcome, Trigger};
use super::commit::still_holds;
use super::{BasicCompactionEngine, Begun};
use crate::session::{History, Session};
use crate::tokens::estimate_message;

/// A summary being prepared in the background.
pub(super) struct Candidate {
    pub(super) begun: Begun,
    pub(super) handle: JoinHandle<anyhow::Result<Summary>>,
    pub(super) cancel: CancellationToken,
    /// Lets the summary call go out; see [`crate::compaction::CompactionEngine::loop_request_sent`].
    pub(super) release: Option<oneshot::Sender<()>>,
}

impl Candidate {
    /// Stop its summary call: the candidate will not be committed.
    pub(super) fn abandon(&self) {
        self.cancel.cancel();
        self.handle.abort();
    }

    pub(super) fn release(&mut self) {
        if let Some(release) = self.release.take() {
            let _ = release.send(());
        }
    }
}

impl BasicCompactionEngine {
    /// Start a background candidate for the compactable range; `tokens` is the pressure now.
    pub(super) fn start_candidate(
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
    pub(super) async fn compact_blocking(
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
    pub(super) async fn run(
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
}
