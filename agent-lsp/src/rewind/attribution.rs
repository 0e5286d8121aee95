//! Who changed what between two checkpoints: the rule that keeps the user's work out of a
//! rewind (see the module documentation of `rewind`).

use std::collections::{BTreeMap, BTreeSet};

use crate::session::History;
use crate::session::event::{CheckpointReason, EventBody, RewindBegin, RewindEnd};

/// The file tools, whose results name the one file they changed in `meta.source`: a change
/// to that path between two checkpoints around them is the agent's. (`read` names its file
/// too, so the names are listed rather than taken from the meta.)
const FILE_TOOLS: [&str; 2] = ["edit", "write"];

/// One whole capture of the session, as its `files/checkpoint` recorded it.
#[derive(Clone, Debug)]
pub struct Point {
    /// The event's seq.
    pub seq: u64,
    /// The turn it was taken in.
    pub turn: u32,
    /// Where in the turn.
    pub reason: CheckpointReason,
    /// The checkpoint's id in the store.
    pub id: String,
    /// The changed paths the event lists (at most 100).
    pub changed: Vec<String>,
    /// Files over the size cap at that moment, with their sizes.
    pub uncaptured: BTreeMap<String, u64>,
    /// A capture failed between the previous point and this one: nothing is known of who
    /// changed what in between.
    pub after_failure: bool,
}

/// Whose changes an interval between two consecutive points holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// Every change: a command's window, or a rewind's.
    Agent,
    /// Every change: between turns, after the last turn, across a failed capture.
    User,
    /// The changes to these paths (the file tools named them, with the tool's name); every
    /// other change is the user's.
    FileTools(BTreeMap<String, String>),
}

impl Owner {
    /// Whether the change to `path` in this interval is the agent's.
    pub fn is_agents(&self, path: &str) -> bool {
        match self {
            Owner::Agent => true,
            Owner::User => false,
            Owner::FileTools(paths) => paths.contains_key(path),
        }
    }
}

/// The session's whole captures, in log order.
#[derive(Clone, Debug, Default)]
pub struct Checkpoints {
    /// In log order.
    pub points: Vec<Point>,
}

impl Checkpoints {
    /// The checkpoints `history` recorded.
    pub fn of(history: &History) -> Checkpoints {
        let mut points = Vec::new();
        let mut failed = false;
        for event in history.events() {
            let EventBody::FileCheckpoint(checkpoint) = &event.body else {
                continue;
            };
            let Some(id) = &checkpoint.id else {
                failed = true;
                continue;
            };
            points.push(Point {
                seq: event.seq,
                turn: event.turn,
                reason: checkpoint.reason,
                id: id.clone(),
                changed: checkpoint.changed.clone(),
                uncaptured: checkpoint
                    .uncaptured
                    .iter()
                    .map(|uncaptured| (uncaptured.path.clone(), uncaptured.bytes))
                    .collect(),
                after_failure: std::mem::take(&mut failed),
            });
        }
        Checkpoints { points }
    }

    /// The index of the checkpoint of turn `turn`'s start.
    pub fn turn_start(&self, turn: u32) -> Option<usize> {
        self.points
            .iter()
            .position(|point| point.turn == turn && point.reason == CheckpointReason::TurnStart)
    }

    /// What the agent changed in turn `turn`, by the events' change lists: each path with
    /// `edit`, `write` or `command`.
    pub fn listed_changes_of_turn(&self, history: &History, turn: u32) -> Vec<(String, String)> {
        let mut files: BTreeMap<String, String> = BTreeMap::new();
        for pair in self.points.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            if b.turn != turn {
                continue;
            }
            match owner(history, a, b) {
                Owner::Agent => {
                    for path in &b.changed {
                        files
                            .entry(path.clone())
                            .or_insert_with(|| "command".into());
                    }
                }
                Owner::FileTools(named) => {
                    for path in &b.changed {
                        if let Some(tool) = named.get(path) {
                            files.insert(path.clone(), tool.clone());
                        }
                    }
                }
                Owner::User => {}
            }
        }
        files.into_iter().collect()
    }
}

/// The files over the size cap at both `a` and `b` whose size changed between them: changes
/// the trees cannot show (a change that keeps the size goes unseen).
pub fn uncaptured_changes(a: &Point, b: &Point) -> Vec<String> {
    a.uncaptured
        .iter()
        .filter(|(path, bytes)| b.uncaptured.get(*path).is_some_and(|after| after != *bytes))
        .map(|(path, _)| path.clone())
        .collect()
}

/// Whose changes the interval from `a` to `b` (consecutive points) holds.
pub fn owner(history: &History, a: &Point, b: &Point) -> Owner {
    use CheckpointReason::*;
    if b.after_failure {
        return Owner::User;
    }
    match (a.reason, b.reason) {
        (BeforeCall, AfterCall) | (BeforeRewind, AfterRewind) => Owner::Agent,
        (TurnStart | AfterCall, BeforeCall | TurnEnd) if a.turn == b.turn => {
            Owner::FileTools(named_by_file_tools(history, a.seq, b.seq))
        }
        _ => Owner::User,
    }
}

/// The paths the file tools' successful results name between seqs `after` and `before`.
fn named_by_file_tools(history: &History, after: u64, before: u64) -> BTreeMap<String, String> {
    history
        .events()
        .iter()
        .filter(|event| event.seq > after && event.seq < before)
        .filter_map(|event| match &event.body {
            EventBody::ToolResult(result)
                if FILE_TOOLS.contains(&result.name.as_str())
                    && result.meta["is_error"] != true =>
            {
                let path = result.meta["source"].as_str()?;
                Some((path.to_owned(), result.name.clone()))
            }
            _ => None,
        })
        .collect()
}

/// The rewinds of `history` that took effect and no undo gave back.
pub(crate) struct Rewinds {
    /// Applied rewinds not undone, oldest first, each with its `rewind/begin` and `rewind/end`.
    pub(crate) standing: Vec<(RewindBegin, RewindEnd)>,
}

impl Rewinds {
    pub(crate) fn of(history: &History) -> Rewinds {
        let mut begins: BTreeMap<&str, &RewindBegin> = BTreeMap::new();
        let mut standing: Vec<(RewindBegin, RewindEnd)> = Vec::new();
        for event in history.events() {
            match &event.body {
                EventBody::RewindBegin(begin) => {
                    begins.insert(&begin.rewind_id, begin);
                }
                // An interrupted rewind may have changed some of its paths: it stands until an
                // undo gives them back.
                EventBody::RewindEnd(end)
                    if matches!(end.outcome.as_str(), "applied" | "partial" | "interrupted") =>
                {
                    let Some(begin) = begins.get(end.rewind_id.as_str()) else {
                        continue;
                    };
                    match &begin.undo_of {
                        Some(undone) => standing.retain(|(done, _)| &done.rewind_id != undone),
                        None => standing.push(((*begin).clone(), end.clone())),
                    }
                }
                _ => {}
            }
        }
        Rewinds { standing }
    }
}

/// The turns a standing rewind took back.
pub fn rewound_turns(history: &History) -> BTreeSet<u32> {
    rewound_by(history).into_keys().collect()
}

/// Each turn a standing rewind took back, with that rewind's id (the latest, when several
/// did): what `session show` and the trajectory mark, and an undo clears.
pub fn rewound_by(history: &History) -> BTreeMap<u32, String> {
    let mut turns = BTreeMap::new();
    for (begin, _) in Rewinds::of(history).standing {
        for turn in begin.turn..=begin.last_turn {
            turns.insert(turn, begin.rewind_id.clone());
        }
    }
    turns
}
