//! The transactional commit and the loop guard: `compaction/start`, then either the summary,
//! its checkpoint and `compaction/end`, or `compaction/end` alone with the reason.
//!
//! Apart from the engine's pressure and scheduling in `basic.rs` because this is the only place
//! that changes the surface, and the shrink check and failure count that keep a compaction from
//! firing again and again without effect belong with the commit they judge.

use super::super::range::SurfaceRange;
use super::super::summary::{Summary, SummaryInput, build_summary_input, frame_checkpoint};
use super::super::{CompactionContext, CompactionOutcome, CompactionReport, Trigger};
use super::{BasicCompactionEngine, Begun};
use crate::llm::Message;
use crate::session::event::{
    CompactionEnd, CompactionStart, CompactionSummary, EventBody, SurfaceOp, UserMessage,
};
use crate::session::{History, NewEvent, Session};
use crate::tokens::estimate_message;

impl BasicCompactionEngine {
    /// Append `compaction/start` for `range` and build the summary input.
    pub(super) fn begin(
        &mut self,
        session: &mut Session,
        ctx: &CompactionContext,
        trigger: Trigger,
        range: SurfaceRange,
    ) -> anyhow::Result<(Begun, SummaryInput)> {
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
    pub(super) fn finish(
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
    pub(super) fn fail(
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
    pub(super) fn count_failure(&mut self, trigger: Trigger) -> bool {
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
}

/// Whether the surface still holds `seqs` as one contiguous run, in order.
pub(super) fn still_holds(history: &History, seqs: &[u64]) -> bool {
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
