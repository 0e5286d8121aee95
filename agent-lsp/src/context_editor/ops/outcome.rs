//! The outcomes of a batch: the report of an applied one, and the two ways one is turned down.
//!
//! Apart from the ops themselves because callers match on them (the editor asks for `force` on
//! [`NeedsConfirmation`], rules skip a [`Refused`] batch) and because closing a batch in the log
//! as applied or refused is the same few lines for an edit and a rollback.

use std::fmt;

use serde::Serialize;

use super::super::Reference;
use crate::session::event::{ContextEditEnd, ContextEditResult, EventBody};
use crate::session::{NewEvent, Session};

/// What an applied batch did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BatchReport {
    /// The batch's id in the log (`edit-<seq of its begin>`), which its audit record carries.
    pub edit_id: String,
    /// Roll back to this generation to undo the batch.
    pub snapshot: u64,
    /// The surface generation after the batch.
    pub generation: u64,
    /// One per op, in order: the event that took the target's place and what it now shows.
    pub results: Vec<ContextEditResult>,
    /// Estimated (calibrated) tokens of the surface before the batch.
    pub tokens_before: u64,
    /// Estimated (calibrated) tokens of the surface after it: with `tokens_before`, what the
    /// edit saved.
    pub tokens_after: u64,
}

impl BatchReport {
    /// Close the batch (or rollback) in the log as applied, after its surface events.
    pub(super) fn record(
        self,
        session: &mut Session,
        (turn, step): (u32, u32),
    ) -> anyhow::Result<BatchReport> {
        session.append(NewEvent::new(
            turn,
            step,
            EventBody::ContextEditEnd(ContextEditEnd {
                edit_id: self.edit_id.clone(),
                outcome: "applied".into(),
                reason: None,
                results: self.results.clone(),
                generation: self.generation,
                tokens_before: self.tokens_before,
                tokens_after: self.tokens_after,
            }),
        ))?;
        session.flush()?;
        Ok(self)
    }
}

/// A delete of segments that later messages refer to, asked without `force`. Nothing was
/// written.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NeedsConfirmation {
    /// Each referenced segment and what refers to it.
    pub referenced: Vec<(u64, Vec<Reference>)>,
}

impl fmt::Display for NeedsConfirmation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = self
            .referenced
            .iter()
            .map(|(id, references)| {
                let by = references
                    .iter()
                    .map(|r| format!("#{} ({})", r.id, r.reason))
                    .collect::<Vec<_>>()
                    .join(", ");
                format!("#{id} is referred to by {by}")
            })
            .collect::<Vec<_>>()
            .join("; ");
        write!(
            f,
            "later messages refer to what the delete would remove ({list}); fold it instead, or confirm the delete (--force)"
        )
    }
}

impl std::error::Error for NeedsConfirmation {}

/// A batch the surface refused; the refusal is recorded in the log.
#[derive(Clone, Debug, PartialEq)]
pub struct Refused {
    /// The refused batch's id, under which the log records the refusal.
    pub edit_id: String,
    /// Why the surface refused it (which op, and what it would have broken).
    pub reason: String,
}

impl Refused {
    /// Close the batch in the log as refused (the surface stays at `generation`) and turn the
    /// refusal into the caller's error.
    pub(super) fn record(
        self,
        session: &mut Session,
        (turn, step): (u32, u32),
        generation: u64,
        tokens: u64,
    ) -> anyhow::Result<anyhow::Error> {
        session.append(NewEvent::new(
            turn,
            step,
            EventBody::ContextEditEnd(ContextEditEnd {
                edit_id: self.edit_id.clone(),
                outcome: "refused".into(),
                reason: Some(self.reason.clone()),
                results: Vec::new(),
                generation,
                tokens_before: tokens,
                tokens_after: tokens,
            }),
        ))?;
        session.flush()?;
        tracing::warn!(edit_id = %self.edit_id, reason = %self.reason, "context edit refused");
        Ok(self.into())
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} was refused, nothing changed: {}",
            self.edit_id, self.reason
        )
    }
}

impl std::error::Error for Refused {}
