//! Rewind: take back what turns did — the files they changed, whatever changed them, and the
//! conversation — from the session log and the workspace's checkpoints
//! (docs/decisions/0009-rewind.md).
//!
//! A rewind of turn N takes back turn N and every later turn, to the checkpoint of turn N's
//! start. It touches only the paths the agent changed, and never a change of the user's:
//!
//! - **Attribution** ([`attribution`]). Between two consecutive checkpoints of the session a
//!   path's change is the agent's when the interval is a command's window (`before_call` to
//!   `after_call`) or a rewind's, or when a file tool of the agent named that path in it
//!   (`meta.source`). Every other change is the user's: between turns, after the last turn,
//!   during a model step.
//! - **Conflicts.** A path the agent changed and the user changed too after turn N began is a
//!   conflict, and so is a file over the size cap: left alone unless forced, listed with a diff
//!   by a dry run. Right before each write the path is read again, so a keystroke during the
//!   rewind makes a conflict, not a loss.
//! - **Undo.** The rewind first captures the files as they are (`before_rewind`), so an undo
//!   (itself a rewind, `undo_of`) puts back exactly that, forced paths included.
//!
//! An open editor buffer is changed through the editor (`Buffers::replace`, so the change lands
//! in its undo history); other files on disk. Every step is in the log: `rewind/begin` with the
//! plan before anything changes, `rewind/end` with what was done.

mod apply;
pub mod attribution;
mod carry;
mod plan;
#[cfg(test)]
mod tests;

use serde::Serialize;

use crate::session::History;
use crate::session::event::{EventBody, RewindScope};
pub use apply::{rewind, undo};
use attribution::Checkpoints;
pub use plan::Place;

/// What the user asked for.
#[derive(Clone, Debug)]
pub struct Request {
    /// The first turn to take back; `None`: the last turn not taken back yet.
    pub turn: Option<u32>,
    /// Files, conversation or both.
    pub scope: RewindScope,
    /// Plan and report only; nothing is written, not even to the log.
    pub dry_run: bool,
    /// Overwrite conflicts (their current text is in the `before_rewind` checkpoint).
    pub force: bool,
}

/// A path the rewind would not touch without force, and why, with the change it would make.
#[derive(Clone, Debug, Serialize)]
pub struct ConflictReport {
    /// From the workspace root.
    pub path: String,
    /// In words.
    pub why: String,
    /// A unified diff from what is there now to what the rewind would put back (what forcing
    /// it loses); empty for binary files.
    pub diff: String,
}

/// What a rewind (or its dry run) planned and did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// `rewind-<seq>`; `None` for a dry run.
    pub rewind_id: Option<String>,
    /// The first turn taken back.
    pub turn: u32,
    /// The last turn taken back.
    pub last_turn: u32,
    /// `applied`, `partial`, `refused`, or `planned` for a dry run.
    pub outcome: String,
    /// The paths put back (or to be put back), with `restore`, `create` or `delete`.
    pub plan: Vec<(String, String)>,
    /// The paths left alone.
    pub conflicts: Vec<ConflictReport>,
    /// The paths the user changed and the agent did not: never touched.
    pub yours: Vec<String>,
    /// The paths written, and how (`disk` or `editor`).
    pub restored: Vec<(String, String)>,
    /// The context edit that took the turns off the conversation.
    pub context_edit: Option<String>,
}

impl Report {
    /// Whether conflicts were kept that force would have overwritten.
    pub fn kept_conflicts(&self) -> bool {
        !self.conflicts.is_empty() && self.outcome != "planned"
    }
}

/// One turn as a rewind menu lists it.
#[derive(Clone, Debug, Serialize)]
pub struct TurnSummary {
    /// The turn's number.
    pub turn: u32,
    /// The start of its prompt.
    pub prompt: String,
    /// What the agent changed in it: path and how (`edit`, `write` or `command`).
    pub files: Vec<(String, String)>,
    /// Whether a rewind has taken it back (and no undo gave it back).
    pub rewound: bool,
    /// Whether its start was captured, so its files can be taken back.
    pub rewindable: bool,
}

/// The turns of `history` a rewind can name, with what each changed (the paths from the
/// checkpoints' change lists, attributed as a rewind would).
pub fn turns(history: &History) -> Vec<TurnSummary> {
    let checkpoints = Checkpoints::of(history);
    let rewound = attribution::rewound_turns(history);
    let mut turns: Vec<TurnSummary> = Vec::new();
    for event in history.events() {
        if let EventBody::UserMessage(message) = &event.body
            && message.origin == "prompt"
            && !turns.iter().any(|t| t.turn == event.turn)
        {
            turns.push(TurnSummary {
                turn: event.turn,
                prompt: crate::context_editor::preview(&message.text, 80),
                files: checkpoints.listed_changes_of_turn(history, event.turn),
                rewound: rewound.contains(&event.turn),
                rewindable: checkpoints.turn_start(event.turn).is_some(),
            });
        }
    }
    turns
}

/// What the model must know after its files were taken back but not the conversation: the
/// turns it remembers no longer hold for these paths. `None` when no such rewind stands (an
/// undo gives the files back, and the note goes with it). Derived from the log, so it is the
/// same in every process and enters the context once, as runtime context.
pub fn files_note(history: &History) -> Option<String> {
    let (begin, end) = attribution::Rewinds::of(history).standing.pop()?;
    let restored: Vec<&str> = end.restored.iter().map(|r| r.path.as_str()).collect();
    if begin.scope != RewindScope::Files || restored.is_empty() {
        return None;
    }
    let (first, last) = (begin.turn, begin.last_turn);
    let turns = if first == last {
        format!("turn {first}")
    } else {
        format!("turns {first}–{last}")
    };
    Some(format!(
        "the user took back what {turns} did to these files, which are as they were before turn {first}: {}",
        restored.join(", ")
    ))
}
