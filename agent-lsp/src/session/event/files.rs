//! The records of the workspace's files: each checkpoint a capture took, and each rewind that
//! put files back (docs/decisions/0009-rewind.md). All three kinds live in the log alone: a
//! request built from the log, or replayed, is the same with or without them.

use serde::{Deserialize, Serialize};

/// Where in a turn a checkpoint was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointReason {
    /// Before the turn's prompt is recorded.
    TurnStart,
    /// Right before a call that may write what it does not name (a command, a sub-agent, a
    /// program) runs, after every question was answered.
    BeforeCall,
    /// Right after that call ended.
    AfterCall,
    /// When the turn ended, whatever its outcome.
    TurnEnd,
    /// What the files held when a rewind began: what an undo puts back.
    BeforeRewind,
    /// What the files held when a rewind ended: the baseline of the user's next changes.
    AfterRewind,
}

impl CheckpointReason {
    /// The name the log writes.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckpointReason::TurnStart => "turn_start",
            CheckpointReason::BeforeCall => "before_call",
            CheckpointReason::AfterCall => "after_call",
            CheckpointReason::TurnEnd => "turn_end",
            CheckpointReason::BeforeRewind => "before_rewind",
            CheckpointReason::AfterRewind => "after_rewind",
        }
    }
}

/// `files/checkpoint`: what the workspace's files held at one moment, or why that is unknown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileCheckpoint {
    /// Where in the turn it was taken.
    pub reason: CheckpointReason,
    /// The checkpoint in the workspace's store (a commit id); absent when the capture failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The calls whose window this opens or closes (`before_call`, `after_call`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<String>,
    /// The paths that differ from the session's previous checkpoint, at most
    /// [`MAX_CHANGED_LISTED`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<String>,
    /// How many paths differ in all.
    #[serde(default)]
    pub changed_total: usize,
    /// Files over the size cap, which a rewind cannot restore.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uncaptured: Vec<crate::snapshots::Uncaptured>,
    /// How many files the capture read: those the stat cache could not vouch for.
    #[serde(default)]
    pub read: usize,
    /// How the changes were found (`walk`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scan: String,
    /// How long the capture took.
    #[serde(default)]
    pub duration_ms: u64,
    /// Why the capture failed; a rewind across it counts the unknown changes as the user's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The most changed paths one `files/checkpoint` lists; `changed_total` counts them all.
pub const MAX_CHANGED_LISTED: usize = 100;

/// What a rewind puts back: the files, the conversation, or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RewindScope {
    /// The files the turns changed.
    Files,
    /// What the model sees: the turns come off the surface.
    Context,
    /// Both.
    Both,
}

impl RewindScope {
    /// Whether the files are put back.
    pub fn files(self) -> bool {
        matches!(self, RewindScope::Files | RewindScope::Both)
    }

    /// Whether the conversation is taken back.
    pub fn context(self) -> bool {
        matches!(self, RewindScope::Context | RewindScope::Both)
    }
}

/// One path of a rewind's plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedPath {
    /// From the workspace root.
    pub path: String,
    /// `restore`, `delete` or `create`.
    pub action: String,
    /// The blob the path holds now (`None`: absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
    /// The blob it is put back to (`None`: removed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

/// A path a rewind would not touch without `--force`, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conflict {
    /// From the workspace root.
    pub path: String,
    /// In words: "changed after the turn", "unsaved changes in the editor", …
    pub why: String,
}

/// `rewind/begin`: a rewind's plan, written before any file changes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RewindBegin {
    /// `rewind-<seq>`, named by its `rewind/end`.
    pub rewind_id: String,
    /// The first turn taken back; every later one goes too.
    pub turn: u32,
    /// The last turn taken back.
    pub last_turn: u32,
    /// What is put back.
    pub scope: RewindScope,
    /// The rewind this one undoes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undo_of: Option<String>,
    /// The checkpoint the files go back to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The `before_rewind` checkpoint: the files as they were, for an undo.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre: Option<String>,
    /// Conflicts are overwritten.
    #[serde(default)]
    pub force: bool,
    /// What each path will become.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plan: Vec<PlannedPath>,
    /// The paths left alone unless forced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<Conflict>,
}

/// One path a rewind changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Restored {
    /// From the workspace root.
    pub path: String,
    /// `disk` or `editor` (an open buffer, changed through `workspace/applyEdit`).
    pub via: String,
}

/// `rewind/end`: what a rewind did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RewindEnd {
    /// As in its `rewind/begin`.
    pub rewind_id: String,
    /// `applied`, `partial` (some paths kept), `refused` or `interrupted`.
    pub outcome: String,
    /// The paths put back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restored: Vec<Restored>,
    /// The paths left as they were, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<Conflict>,
    /// The context edit that took the turns off the surface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_edit: Option<String>,
    /// The surface generation before that edit: what an undo rolls back to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_snapshot: Option<u64>,
    /// The `after_rewind` checkpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post: Option<String>,
    /// Why it was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The id of the last checkpoint `events` hold a whole capture of: the previous one of the
/// next capture, and the state a rewind compares with.
pub fn last_checkpoint(events: &[super::Event]) -> Option<&str> {
    events.iter().rev().find_map(|event| match &event.body {
        super::EventBody::FileCheckpoint(checkpoint) => checkpoint.id.as_deref(),
        _ => None,
    })
}
