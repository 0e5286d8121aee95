//! Which part of the surface a compaction folds.
//!
//! [`select_compactable_range`] takes everything before the most recent steps (the model is
//! working on those, and they are what the next request appends to), then moves the end back to
//! the nearest clean cut; [`validate_surface_region`] is the check any requested region must pass:
//! it never separates a tool call from its result, because a provider answers HTTP 400 to a
//! history with an orphan on either side (the surface refuses such a `replace` anyway; checking
//! first turns the refusal into a choice of a smaller range).

use std::collections::HashSet;

use anyhow::bail;

use crate::session::History;
use crate::session::surface::{Entry, Pairing};

/// An inclusive run of surface positions, with the seqs of its first and last entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SurfaceRange {
    pub first: usize,
    pub last: usize,
    pub start_seq: u64,
    pub end_seq: u64,
}

/// Position of the first surface entry that belongs to one of the last `keep` model steps,
/// counted as distinct `(turn, step)` pairs from the end. `entries.len()` when `keep` is 0.
pub fn recent_steps_start(history: &History, keep: u32) -> usize {
    let entries = history.surface().entries();
    let mut seen: Vec<(u32, u32)> = Vec::new();
    for (index, entry) in entries.iter().enumerate().rev() {
        let Some(event) = history.event(entry.seq) else {
            continue;
        };
        let key = (event.turn, event.step);
        if !seen.contains(&key) {
            if seen.len() as u32 == keep {
                return index + 1;
            }
            seen.push(key);
        }
    }
    0
}

/// How many distinct model steps (`(turn, step)` pairs) the surface entries from position
/// `from` on belong to.
pub fn steps_in(history: &History, from: usize) -> u32 {
    let entries = history.surface().entries();
    let mut seen: Vec<(u32, u32)> = Vec::new();
    for entry in entries.iter().skip(from) {
        if let Some(event) = history.event(entry.seq) {
            let key = (event.turn, event.step);
            if !seen.contains(&key) {
                seen.push(key);
            }
        }
    }
    seen.len() as u32
}

/// The range a compaction should fold: from the start of the surface up to the recent steps,
/// ending at a clean cut. `None` when that leaves fewer than two entries, or only a checkpoint
/// (folding a lone summary again cannot shrink anything).
pub fn select_compactable_range(history: &History, keep_recent_steps: u32) -> Option<SurfaceRange> {
    let entries = history.surface().entries();
    let boundary = recent_steps_start(history, keep_recent_steps);
    if boundary < 2 {
        return None;
    }
    let last = last_clean_cut(entries, 0, boundary - 1)?;
    if last < 1 {
        return None;
    }
    Some(SurfaceRange {
        first: 0,
        last,
        start_seq: entries[0].seq,
        end_seq: entries[last].seq,
    })
}

/// The largest `last' <= last` such that `first..=last'` holds every tool call together with
/// its results, or `None` when there is none.
pub fn last_clean_cut(entries: &[Entry], first: usize, last: usize) -> Option<usize> {
    let mut open: HashSet<&str> = HashSet::new();
    let mut orphans = 0usize;
    let mut clean = None;
    for (index, entry) in entries.iter().enumerate().take(last + 1).skip(first) {
        match &entry.pairing {
            Pairing::None => {}
            Pairing::Calls(ids) => open.extend(ids.iter().map(String::as_str)),
            Pairing::Result(id) => {
                if !open.remove(id.as_str()) {
                    orphans += 1;
                }
            }
        }
        if open.is_empty() && orphans == 0 {
            clean = Some(index);
        }
    }
    clean
}

/// Check that the surface positions `first..=last` can be folded: in bounds, and every tool
/// call in the region has its results in it and every result its call.
pub fn validate_surface_region(entries: &[Entry], first: usize, last: usize) -> anyhow::Result<()> {
    if first > last || last >= entries.len() {
        bail!(
            "surface region {first}..={last} is not within the surface of {} entries",
            entries.len()
        );
    }
    let mut calls: HashSet<&str> = HashSet::new();
    let mut results: HashSet<&str> = HashSet::new();
    for entry in &entries[first..=last] {
        match &entry.pairing {
            Pairing::None => {}
            Pairing::Calls(ids) => calls.extend(ids.iter().map(String::as_str)),
            Pairing::Result(id) => {
                results.insert(id.as_str());
            }
        }
    }
    let mut split = calls
        .symmetric_difference(&results)
        .copied()
        .collect::<Vec<_>>();
    split.sort_unstable();
    if let Some(call_id) = split.first() {
        bail!("the region would separate tool call `{call_id}` from its result");
    }
    Ok(())
}

/// The surface range `start..=end` given by event seqs, validated.
pub fn region_of(history: &History, start: u64, end: u64) -> anyhow::Result<SurfaceRange> {
    let entries = history.surface().entries();
    let position = |seq: u64| {
        entries
            .iter()
            .position(|entry| entry.seq == seq)
            .ok_or_else(|| anyhow::anyhow!("event {seq} is not on the surface"))
    };
    let (first, last) = (position(start)?, position(end)?);
    validate_surface_region(entries, first, last)?;
    Ok(SurfaceRange {
        first,
        last,
        start_seq: start,
        end_seq: end,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::event::{
        AssistantMessage, EventBody, SessionHeader, ToolCallRef, ToolResult, UserMessage,
    };
    use crate::session::log::Durability;
    use crate::session::{NewEvent, Session};

    /// A session built from a compact script: `u` user prompt (new turn), `c:a,b` assistant
    /// with calls a and b (new step), `r:a` result for a, `t` assistant text (new step).
    fn session(script: &str) -> (tempfile::TempDir, Session) {
        let dir = tempfile::tempdir().unwrap();
        let header = SessionHeader::for_test("s", "standard");
        let mut session =
            Session::create(&dir.path().join("s.jsonl"), header, Durability::Batched).unwrap();
        let (mut turn, mut step) = (0, 0);
        for word in script.split_whitespace() {
            let body = match word.split_once(':') {
                None if word == "u" => {
                    turn += 1;
                    step = 0;
                    EventBody::UserMessage(UserMessage {
                        text: "prompt".into(),
                        origin: "prompt".into(),
                    })
                }
                None => {
                    step += 1;
                    EventBody::AssistantMessage(AssistantMessage {
                        text: "done".into(),
                        reasoning: None,
                        tool_calls: vec![],
                    })
                }
                Some(("c", ids)) => {
                    step += 1;
                    EventBody::AssistantMessage(AssistantMessage {
                        text: String::new(),
                        reasoning: None,
                        tool_calls: ids
                            .split(',')
                            .map(|id| ToolCallRef {
                                id: id.into(),
                                name: "read".into(),
                                arguments: "{}".into(),
                            })
                            .collect(),
                    })
                }
                Some((_, id)) => EventBody::ToolResult(ToolResult {
                    call_id: id.into(),
                    name: "read".into(),
                    text: "x".into(),
                    meta: serde_json::Value::Null,
                }),
            };
            session.append(NewEvent::new(turn, step, body)).unwrap();
        }
        (dir, session)
    }

    fn check_selection(script: &str, keep: u32, expected: Option<(u64, u64)>) {
        let (_dir, session) = session(script);
        let range = select_compactable_range(session.history(), keep);
        assert_eq!(
            range.map(|range| (range.start_seq, range.end_seq)),
            expected,
            "{script} keeping {keep}"
        );
        if let Some(range) = range {
            validate_surface_region(
                session.history().surface().entries(),
                range.first,
                range.last,
            )
            .unwrap();
        }
    }

    #[test]
    fn selection_keeps_the_recent_steps_and_whole_pairs() {
        // seqs: u=2 c:a=3 r:a=4 c:b=5 r:b=6 c:c=7 r:c=8 t=9
        let script = "u c:a r:a c:b r:b c:c r:c t";
        check_selection(script, 1, Some((2, 8)));
        check_selection(script, 2, Some((2, 6)));
        check_selection(script, 3, Some((2, 4)));
        check_selection(script, 4, None);
        check_selection(script, 0, Some((2, 9)));
    }

    #[test]
    fn selection_never_ends_between_parallel_results() {
        // seqs: u=2 c:a,b=3 r:a=4 r:b=5 u=6 t=7 ; step keys (1,1) hold both results.
        check_selection("u c:a,b r:a r:b u t", 2, Some((2, 5)));
        check_selection("u c:a,b r:a r:b u t", 3, None);
    }

    #[test]
    fn a_region_that_splits_a_pair_is_refused_naming_the_call() {
        let (_dir, session) = session("u c:a,b r:a r:b t");
        let entries = session.history().surface().entries();
        let err = validate_surface_region(entries, 0, 2)
            .unwrap_err()
            .to_string();
        assert!(err.contains("tool call `b`"), "{err}");
        let err = validate_surface_region(entries, 3, 4)
            .unwrap_err()
            .to_string();
        assert!(err.contains("tool call `b`"), "{err}");
        validate_surface_region(entries, 0, 3).unwrap();
        validate_surface_region(entries, 1, 4).unwrap();
        assert!(validate_surface_region(entries, 2, 9).is_err());
        assert_eq!(last_clean_cut(entries, 0, 2), Some(0));
        assert_eq!(last_clean_cut(entries, 1, 2), None);
        assert!(region_of(session.history(), 2, 4).is_err());
        let region = region_of(session.history(), 3, 5).unwrap();
        assert_eq!(region.last - region.first + 1, 3);
    }
}
