//! The surface: which log events currently make up the model's history, in order.
//!
//! The log never changes; the surface is rewritten by ops carried on events:
//! `append` (the default), `replace {start,end}` (a compaction checkpoint or a fold takes the
//! place of a run of entries), `remove {start,end}`, `restore {generation}` (rollback) and
//! `snapshot` (end the generation, entries unchanged: the context editor's snapshot).
//! Every op other than `append` starts a new *generation*; the surface as it stood at the end of
//! each generation is kept, so a rollback is one more appended event, never a rewrite.
//!
//! The surface also guards the pairing of tool calls and results, because a provider answers
//! HTTP 400 to a history with an orphan on either side:
//! - a `tool/result` may only be appended for a call that is on the surface and unanswered;
//! - while a call waits for its result, nothing but tool results may be appended (providers
//!   want the results directly after the call; a cancelled call gets a result saying so);
//! - a structural op is refused while any call on the surface still waits for its result;
//! - a `replace`/`remove` range must hold every call together with its result;
//! - a replacement entry cannot itself carry tool calls or be a tool result, with two
//!   exceptions that keep the pair whole: a tool result may take the place of exactly one entry
//!   that answers the same call (the tool-result pruner shortens an old result this way), and an
//!   assistant message may take the place of exactly one entry carrying the same calls, in the
//!   same order (elision shortens an oversized answer this way, `compaction::elide`).

use std::collections::{HashMap, HashSet};

use thiserror::Error;

use super::event::{EventKind, SurfaceOp};

/// Why an op was refused. Nothing changes on the surface when one is returned.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum SurfaceError {
    #[error("`{kind}` events live only in the log and cannot carry a surface op")]
    NotSurfaceBearing { kind: EventKind },
    #[error("`{kind}` events cannot carry a `{op}` op")]
    OpNotAllowed { kind: EventKind, op: &'static str },
    #[error("event {seq} is not on the surface")]
    NotOnSurface { seq: u64 },
    #[error("range {start}..{end} runs backwards on the surface")]
    RangeReversed { start: u64, end: u64 },
    #[error("the range would separate tool call `{call_id}` from its result")]
    SplitsToolPair { call_id: String },
    #[error(
        "tool call `{call_id}` is still waiting for its result; edit the surface after it is answered"
    )]
    PendingToolCall { call_id: String },
    #[error("a replacement entry cannot carry tool calls or be a tool result")]
    ReplacementWithToolPairing,
    #[error("tool result for `{call_id}` has no unanswered call on the surface")]
    OrphanToolResult { call_id: String },
    #[error("tool call id `{call_id}` is already on the surface")]
    DuplicateCallId { call_id: String },
    #[error("generation {generation} cannot be restored: the current generation is {current}")]
    UnknownGeneration { generation: u64, current: u64 },
}

/// What an entry contributes to tool-call pairing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pairing {
    None,
    /// An assistant message with these tool call ids.
    Calls(Vec<String>),
    /// A tool result answering this call id.
    Result(String),
}

/// One surface entry: the seq of the event that supplies its content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub seq: u64,
    pub pairing: Pairing,
}

#[derive(Clone, Debug, Default)]
pub struct Surface {
    entries: Vec<Entry>,
    generation: u64,
    /// `ended[g]` is the surface as it stood when generation `g` ended.
    ended: Vec<Vec<Entry>>,
    /// Tool calls on the surface, and whether each has its result on the surface.
    calls: HashMap<String, bool>,
    /// Seqs on the surface, for O(1) membership tests.
    visible: HashSet<u64>,
}

impl Surface {
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn contains(&self, seq: u64) -> bool {
        self.visible.contains(&seq)
    }

    /// Ids of calls on the surface still waiting for their result, in no particular order.
    pub fn pending_calls(&self) -> impl Iterator<Item = &str> {
        self.calls
            .iter()
            .filter(|(_, answered)| !**answered)
            .map(|(id, _)| id.as_str())
    }

    /// Check that `op`, carried by an event of `kind` contributing `pairing`, may be applied.
    pub fn check(
        &self,
        kind: EventKind,
        pairing: &Pairing,
        op: &SurfaceOp,
    ) -> Result<(), SurfaceError> {
        if !kind.is_surface_bearing() {
            return Err(SurfaceError::NotSurfaceBearing { kind });
        }
        let content_op = matches!(op, SurfaceOp::Append | SurfaceOp::Replace { .. });
        if content_op != kind.carries_content() {
            return Err(SurfaceError::OpNotAllowed {
                kind,
                op: op.name(),
            });
        }
        match op {
            SurfaceOp::Append => self.check_append(pairing),
            SurfaceOp::Replace { start, end } => {
                self.check_structural()?;
                match pairing {
                    Pairing::None => self.check_range(*start, *end).map(|_| ()),
                    Pairing::Result(_) | Pairing::Calls(_) if start == end => {
                        let position = self
                            .position(*start)
                            .ok_or(SurfaceError::NotOnSurface { seq: *start })?;
                        if self.entries[position].pairing == *pairing {
                            Ok(())
                        } else {
                            Err(SurfaceError::ReplacementWithToolPairing)
                        }
                    }
                    _ => Err(SurfaceError::ReplacementWithToolPairing),
                }
            }
            SurfaceOp::Remove { start, end } => {
                self.check_structural()?;
                self.check_range(*start, *end).map(|_| ())
            }
            SurfaceOp::Snapshot => self.check_structural(),
            SurfaceOp::Restore { generation } => {
                self.check_structural()?;
                if *generation >= self.generation {
                    return Err(SurfaceError::UnknownGeneration {
                        generation: *generation,
                        current: self.generation,
                    });
                }
                Ok(())
            }
        }
    }

    /// Apply an op that [`Surface::check`] accepted.
    ///
    /// # Panics
    /// If the op was not checked first: applying a refused op would corrupt the surface.
    pub fn apply(&mut self, seq: u64, pairing: Pairing, op: &SurfaceOp) {
        match op {
            SurfaceOp::Append => {
                match &pairing {
                    Pairing::None => {}
                    Pairing::Calls(ids) => {
                        for id in ids {
                            self.calls.insert(id.clone(), false);
                        }
                    }
                    Pairing::Result(id) => {
                        *self
                            .calls
                            .get_mut(id)
                            .expect("checked: result has a pending call") = true;
                    }
                }
                self.visible.insert(seq);
                self.entries.push(Entry { seq, pairing });
            }
            SurfaceOp::Replace { start, end } | SurfaceOp::Remove { start, end } => {
                // A result replacing the result of the same call, or an answer replacing the
                // answer with the same calls, is one whole "pair" by itself.
                let (first, last) = if matches!(pairing, Pairing::Result(_) | Pairing::Calls(_)) {
                    let position = self.position(*start).expect("checked position");
                    (position, position)
                } else {
                    self.check_range(*start, *end).expect("checked range")
                };
                self.end_generation();
                let kept_calls = match &pairing {
                    Pairing::Calls(ids) => ids.clone(),
                    _ => Vec::new(),
                };
                let replacement =
                    matches!(op, SurfaceOp::Replace { .. }).then(|| Entry { seq, pairing });
                if replacement.is_some() {
                    self.visible.insert(seq);
                }
                let removed = self
                    .entries
                    .splice(first..=last, replacement)
                    .collect::<Vec<_>>();
                for entry in removed {
                    self.visible.remove(&entry.seq);
                    if let Pairing::Calls(ids) = entry.pairing {
                        for id in ids {
                            self.calls.remove(&id);
                        }
                    }
                }
                // The same calls are back with their replacement, answered as they were (a
                // structural op runs only when no call waits).
                for id in kept_calls {
                    self.calls.insert(id, true);
                }
            }
            SurfaceOp::Snapshot => self.end_generation(),
            SurfaceOp::Restore { generation } => {
                let restored = self.ended[*generation as usize].clone();
                self.end_generation();
                self.entries = restored;
                self.visible = self.entries.iter().map(|entry| entry.seq).collect();
                self.calls = self
                    .entries
                    .iter()
                    .filter_map(|entry| match &entry.pairing {
                        Pairing::Calls(ids) => Some(ids.iter().map(|id| (id.clone(), true))),
                        _ => None,
                    })
                    .flatten()
                    .collect();
            }
        }
    }

    fn end_generation(&mut self) {
        self.ended.push(self.entries.clone());
        self.generation += 1;
    }

    fn position(&self, seq: u64) -> Option<usize> {
        if !self.contains(seq) {
            return None;
        }
        // Recent entries are the usual targets, so search from the end.
        self.entries.iter().rposition(|entry| entry.seq == seq)
    }

    fn check_append(&self, pairing: &Pairing) -> Result<(), SurfaceError> {
        // Providers require a call's results right after it, so nothing else may come between.
        if !matches!(pairing, Pairing::Result(_)) {
            self.check_structural()?;
        }
        match pairing {
            Pairing::None => Ok(()),
            Pairing::Calls(ids) => {
                for (index, id) in ids.iter().enumerate() {
                    if self.calls.contains_key(id) || ids[..index].contains(id) {
                        return Err(SurfaceError::DuplicateCallId {
                            call_id: id.clone(),
                        });
                    }
                }
                Ok(())
            }
            Pairing::Result(id) => match self.calls.get(id) {
                Some(false) => Ok(()),
                _ => Err(SurfaceError::OrphanToolResult {
                    call_id: id.clone(),
                }),
            },
        }
    }

    fn check_structural(&self) -> Result<(), SurfaceError> {
        match self.pending_calls().min() {
            Some(call_id) => Err(SurfaceError::PendingToolCall {
                call_id: call_id.to_owned(),
            }),
            None => Ok(()),
        }
    }

    /// Positions of `start` and `end`, if they form a range that keeps every tool pair whole.
    fn check_range(&self, start: u64, end: u64) -> Result<(usize, usize), SurfaceError> {
        let first = self
            .position(start)
            .ok_or(SurfaceError::NotOnSurface { seq: start })?;
        let last = self
            .position(end)
            .ok_or(SurfaceError::NotOnSurface { seq: end })?;
        if first > last {
            return Err(SurfaceError::RangeReversed { start, end });
        }
        let mut calls = Vec::new();
        let mut results = Vec::new();
        for entry in &self.entries[first..=last] {
            match &entry.pairing {
                Pairing::None => {}
                Pairing::Calls(ids) => calls.extend(ids.iter().cloned()),
                Pairing::Result(id) => results.push(id.clone()),
            }
        }
        calls.sort_unstable();
        results.sort_unstable();
        if let Some(split) = symmetric_difference(&calls, &results) {
            return Err(SurfaceError::SplitsToolPair { call_id: split });
        }
        Ok((first, last))
    }
}

/// The smallest id present in one sorted list but not the other.
fn symmetric_difference(a: &[String], b: &[String]) -> Option<String> {
    let mut only = a
        .iter()
        .filter(|id| b.binary_search(id).is_err())
        .chain(b.iter().filter(|id| a.binary_search(id).is_err()));
    let first = only.next()?;
    Some(only.fold(first, |min, id| min.min(id)).clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(ids: &[&str]) -> Pairing {
        Pairing::Calls(ids.iter().map(|id| (*id).to_owned()).collect())
    }

    fn result(id: &str) -> Pairing {
        Pairing::Result(id.to_owned())
    }

    fn push(
        surface: &mut Surface,
        seq: u64,
        kind: EventKind,
        pairing: Pairing,
        op: SurfaceOp,
    ) -> Result<(), SurfaceError> {
        surface.check(kind, &pairing, &op)?;
        surface.apply(seq, pairing, &op);
        Ok(())
    }

    fn seqs(surface: &Surface) -> Vec<u64> {
        surface.entries().iter().map(|entry| entry.seq).collect()
    }

    /// user(1) assistant[a,b](2) result a(3) result b(4) user(5)
    fn sample() -> Surface {
        let mut surface = Surface::default();
        push(
            &mut surface,
            1,
            EventKind::UserMessage,
            Pairing::None,
            SurfaceOp::Append,
        )
        .unwrap();
        push(
            &mut surface,
            2,
            EventKind::AssistantMessage,
            calls(&["a", "b"]),
            SurfaceOp::Append,
        )
        .unwrap();
        push(
            &mut surface,
            3,
            EventKind::ToolResult,
            result("a"),
            SurfaceOp::Append,
        )
        .unwrap();
        push(
            &mut surface,
            4,
            EventKind::ToolResult,
            result("b"),
            SurfaceOp::Append,
        )
        .unwrap();
        push(
            &mut surface,
            5,
            EventKind::UserMessage,
            Pairing::None,
            SurfaceOp::Append,
        )
        .unwrap();
        surface
    }

    #[test]
    fn replace_takes_the_place_of_its_range_and_bumps_the_generation() {
        let mut surface = sample();
        push(
            &mut surface,
            9,
            EventKind::UserMessage,
            Pairing::None,
            SurfaceOp::Replace { start: 1, end: 4 },
        )
        .unwrap();
        assert_eq!(seqs(&surface), vec![9, 5]);
        assert_eq!(surface.generation(), 1);
    }

    #[test]
    fn ranges_that_split_a_tool_pair_are_refused() {
        let mut surface = sample();
        let err = push(
            &mut surface,
            9,
            EventKind::UserMessage,
            Pairing::None,
            SurfaceOp::Replace { start: 1, end: 3 },
        )
        .unwrap_err();
        assert_eq!(
            err,
            SurfaceError::SplitsToolPair {
                call_id: "b".into()
            }
        );
        let err = push(
            &mut surface,
            9,
            EventKind::SurfaceEdit,
            Pairing::None,
            SurfaceOp::Remove { start: 3, end: 5 },
        )
        .unwrap_err();
        assert_eq!(
            err,
            SurfaceError::SplitsToolPair {
                call_id: "a".into()
            }
        );
        assert_eq!(seqs(&surface), vec![1, 2, 3, 4, 5]);
        assert_eq!(surface.generation(), 0);
    }

    #[test]
    fn a_result_may_replace_only_the_result_of_the_same_call() {
        let mut surface = sample();
        let err = push(
            &mut surface,
            9,
            EventKind::ToolResult,
            result("b"),
            SurfaceOp::Replace { start: 3, end: 3 },
        )
        .unwrap_err();
        assert_eq!(err, SurfaceError::ReplacementWithToolPairing);
        let err = push(
            &mut surface,
            9,
            EventKind::ToolResult,
            result("a"),
            SurfaceOp::Replace { start: 3, end: 4 },
        )
        .unwrap_err();
        assert_eq!(err, SurfaceError::ReplacementWithToolPairing);
        push(
            &mut surface,
            9,
            EventKind::ToolResult,
            result("a"),
            SurfaceOp::Replace { start: 3, end: 3 },
        )
        .unwrap();
        assert_eq!(seqs(&surface), vec![1, 2, 9, 4, 5]);
        assert_eq!(surface.generation(), 1);
        assert_eq!(surface.pending_calls().count(), 0);
        // The pair is still whole: folding call and shortened result together is accepted.
        push(
            &mut surface,
            10,
            EventKind::UserMessage,
            Pairing::None,
            SurfaceOp::Replace { start: 2, end: 4 },
        )
        .unwrap();
        assert_eq!(seqs(&surface), vec![1, 10, 5]);
    }

    #[test]
    fn an_answer_may_replace_only_the_answer_with_the_same_calls() {
        let mut surface = sample();
        for (pairing, start, end) in [
            (calls(&["b", "a"]), 2, 2),
            (calls(&["a"]), 2, 2),
            (calls(&["a", "b"]), 1, 1),
            (calls(&["a", "b"]), 2, 4),
        ] {
            let err = push(
                &mut surface,
                9,
                EventKind::AssistantMessage,
                pairing,
                SurfaceOp::Replace { start, end },
            )
            .unwrap_err();
            assert_eq!(err, SurfaceError::ReplacementWithToolPairing);
        }
        push(
            &mut surface,
            9,
            EventKind::AssistantMessage,
            calls(&["a", "b"]),
            SurfaceOp::Replace { start: 2, end: 2 },
        )
        .unwrap();
        assert_eq!(seqs(&surface), vec![1, 9, 3, 4, 5]);
        assert_eq!(surface.pending_calls().count(), 0);
        // The calls are still on the surface and answered: no second result, and the pair folds.
        let err = push(
            &mut surface,
            10,
            EventKind::ToolResult,
            result("a"),
            SurfaceOp::Append,
        )
        .unwrap_err();
        assert_eq!(
            err,
            SurfaceError::OrphanToolResult {
                call_id: "a".into()
            }
        );
        push(
            &mut surface,
            10,
            EventKind::UserMessage,
            Pairing::None,
            SurfaceOp::Replace { start: 9, end: 4 },
        )
        .unwrap();
        assert_eq!(seqs(&surface), vec![1, 10, 5]);
    }

    #[test]
    fn results_need_an_unanswered_call() {
        let mut surface = sample();
        let err = push(
            &mut surface,
            6,
            EventKind::ToolResult,
            result("a"),
            SurfaceOp::Append,
        )
        .unwrap_err();
        assert_eq!(
            err,
            SurfaceError::OrphanToolResult {
                call_id: "a".into()
            }
        );
        let err = push(
            &mut surface,
            6,
            EventKind::ToolResult,
            result("zz"),
            SurfaceOp::Append,
        )
        .unwrap_err();
        assert_eq!(
            err,
            SurfaceError::OrphanToolResult {
                call_id: "zz".into()
            }
        );
        let err = push(
            &mut surface,
            6,
            EventKind::AssistantMessage,
            calls(&["a"]),
            SurfaceOp::Append,
        )
        .unwrap_err();
        assert_eq!(
            err,
            SurfaceError::DuplicateCallId {
                call_id: "a".into()
            }
        );
    }

    #[test]
    fn nothing_but_results_may_follow_pending_calls() {
        let mut surface = sample();
        push(
            &mut surface,
            6,
            EventKind::AssistantMessage,
            calls(&["c"]),
            SurfaceOp::Append,
        )
        .unwrap();
        let err = push(
            &mut surface,
            7,
            EventKind::SurfaceEdit,
            Pairing::None,
            SurfaceOp::Remove { start: 1, end: 1 },
        )
        .unwrap_err();
        assert_eq!(
            err,
            SurfaceError::PendingToolCall {
                call_id: "c".into()
            }
        );
        let err = push(
            &mut surface,
            7,
            EventKind::UserMessage,
            Pairing::None,
            SurfaceOp::Append,
        )
        .unwrap_err();
        assert_eq!(
            err,
            SurfaceError::PendingToolCall {
                call_id: "c".into()
            }
        );
        push(
            &mut surface,
            7,
            EventKind::ToolResult,
            result("c"),
            SurfaceOp::Append,
        )
        .unwrap();
        push(
            &mut surface,
            8,
            EventKind::UserMessage,
            Pairing::None,
            SurfaceOp::Append,
        )
        .unwrap();
    }

    #[test]
    fn only_surface_bearing_kinds_carry_ops_and_only_their_own() {
        let surface = sample();
        let err = surface
            .check(EventKind::RequestHeader, &Pairing::None, &SurfaceOp::Append)
            .unwrap_err();
        assert_eq!(
            err,
            SurfaceError::NotSurfaceBearing {
                kind: EventKind::RequestHeader
            }
        );
        let err = surface
            .check(
                EventKind::UserMessage,
                &Pairing::None,
                &SurfaceOp::Remove { start: 1, end: 1 },
            )
            .unwrap_err();
        assert_eq!(
            err,
            SurfaceError::OpNotAllowed {
                kind: EventKind::UserMessage,
                op: "remove"
            }
        );
        let err = surface
            .check(EventKind::SurfaceEdit, &Pairing::None, &SurfaceOp::Append)
            .unwrap_err();
        assert_eq!(
            err,
            SurfaceError::OpNotAllowed {
                kind: EventKind::SurfaceEdit,
                op: "append"
            }
        );
    }

    #[test]
    fn restore_brings_back_an_earlier_generation_and_is_itself_a_generation() {
        let mut surface = sample();
        push(
            &mut surface,
            6,
            EventKind::SurfaceEdit,
            Pairing::None,
            SurfaceOp::Remove { start: 2, end: 4 },
        )
        .unwrap();
        assert_eq!(seqs(&surface), vec![1, 5]);
        push(
            &mut surface,
            7,
            EventKind::UserMessage,
            Pairing::None,
            SurfaceOp::Append,
        )
        .unwrap();
        push(
            &mut surface,
            8,
            EventKind::SurfaceEdit,
            Pairing::None,
            SurfaceOp::Restore { generation: 0 },
        )
        .unwrap();
        assert_eq!(seqs(&surface), vec![1, 2, 3, 4, 5]);
        assert_eq!(surface.generation(), 2);
        // Redo: generation 1 ended with the appended user message.
        push(
            &mut surface,
            9,
            EventKind::SurfaceEdit,
            Pairing::None,
            SurfaceOp::Restore { generation: 1 },
        )
        .unwrap();
        assert_eq!(seqs(&surface), vec![1, 5, 7]);
        let err = push(
            &mut surface,
            10,
            EventKind::SurfaceEdit,
            Pairing::None,
            SurfaceOp::Restore { generation: 3 },
        )
        .unwrap_err();
        assert_eq!(
            err,
            SurfaceError::UnknownGeneration {
                generation: 3,
                current: 3
            }
        );
        // Calls restored from generation 0 count as answered: their results came back too.
        assert_eq!(surface.pending_calls().count(), 0);
    }

    #[test]
    fn snapshot_ends_the_generation_so_later_appends_can_be_rolled_back() {
        let mut surface = sample();
        push(
            &mut surface,
            6,
            EventKind::SurfaceEdit,
            Pairing::None,
            SurfaceOp::Snapshot,
        )
        .unwrap();
        assert_eq!(surface.generation(), 1);
        assert_eq!(seqs(&surface), vec![1, 2, 3, 4, 5]);
        push(
            &mut surface,
            7,
            EventKind::UserMessage,
            Pairing::None,
            SurfaceOp::Append,
        )
        .unwrap();
        push(
            &mut surface,
            8,
            EventKind::SurfaceEdit,
            Pairing::None,
            SurfaceOp::Restore { generation: 0 },
        )
        .unwrap();
        assert_eq!(seqs(&surface), vec![1, 2, 3, 4, 5]);
        let err = surface
            .check(EventKind::UserMessage, &Pairing::None, &SurfaceOp::Snapshot)
            .unwrap_err();
        assert_eq!(
            err,
            SurfaceError::OpNotAllowed {
                kind: EventKind::UserMessage,
                op: "snapshot"
            }
        );
    }
}
