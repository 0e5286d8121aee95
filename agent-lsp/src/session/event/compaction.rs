//! The records of the two ways the surface is rewritten without losing the log: compaction
//! (a candidate started, its summary, the end that commits or drops it) and the context
//! editor (a batch of edit operations between a begin and an end). The original events stay in
//! the log; these say what replaced what, and why.

use super::Usage;
use serde::{Deserialize, Serialize};

/// A compaction began (log only). It holds the session's compaction lock until the matching
/// `compaction/end`: no second compaction starts, and the tool-result pruner leaves the range
/// alone, while one is open. A background candidate is started here and may be committed many
/// events later.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompactionStart {
    /// `cmp-<seq of this event>`; the checkpoint and `recall_history` name it.
    pub compaction_id: String,
    /// What asked for it: `pre_step`, `background`, `overflow`, `manual`.
    pub trigger: String,
    /// The surface range to fold, by event seq (inclusive), as in `surface_op: replace`.
    pub start: u64,
    /// Seq of the last surface entry to fold (inclusive).
    pub end: u64,
    /// Every surface entry of the range, in surface order, as it was when the summary input was
    /// built; a commit checks that the surface still holds exactly these.
    pub entry_seqs: Vec<u64>,
    /// Surface generation the summary input was built from.
    pub generation: u64,
    /// The token meter's estimate of the whole surface when the compaction began.
    pub estimated_tokens: u64,
}

/// The summary a compaction produced (log only), before it was framed as a checkpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompactionSummary {
    /// The id from the matching `compaction/start`.
    pub compaction_id: String,
    /// The summarizer that wrote it (`llm`, `template`, …).
    pub summarizer: String,
    /// The summary as written, before it was framed as a checkpoint.
    pub text: String,
    /// What the provider reported for the summary call, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// A compaction ended (log only), releasing the lock.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompactionEnd {
    /// The id from the matching `compaction/start`.
    pub compaction_id: String,
    /// `committed`, `failed`, `cancelled`, `discarded` (a stale background candidate) or
    /// `abandoned` (a process ended while it was open).
    pub outcome: String,
    /// Why it did not commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Seq of the checkpoint `user/message`, when committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_seq: Option<u64>,
    /// Estimated surface tokens before and after (after = before when nothing was committed).
    pub tokens_before: u64,
    /// Estimated surface tokens after the compaction.
    pub tokens_after: u64,
    /// Set when this failure made automatic compaction stop for the session.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub auto_disabled: bool,
}

/// One operation of a context-editor batch as it was asked for, with what it targeted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContextEditOp {
    /// `fold`, `pin`, `delete`, `replace` or `rollback`.
    pub op: String,
    /// The surface entries (event seqs) it targets, first to last; empty for a rollback.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub target: Vec<u64>,
    /// A one-line description of the targeted content before the edit.
    pub before: String,
    /// The summary of a fold, the text of a replace, or the snapshot of a rollback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A context-editor batch began (log only): who asked for which ops, and the snapshot taken
/// before the first of them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContextEditBegin {
    /// `edit-<seq of this event>`; named by the events the batch appends.
    pub edit_id: String,
    /// Who asked: `cli`, `editor` or `rule`.
    pub actor: String,
    /// The ops as asked for, in order.
    pub ops: Vec<ContextEditOp>,
    /// The surface generation that holds the surface as it was before the batch: rolling back
    /// to it undoes the batch. `None` when the batch was refused before anything changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<u64>,
}

/// What one op of a batch produced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContextEditResult {
    /// The op's name, as in [`ContextEditOp::op`].
    pub op: String,
    /// The event that carries the op's surface change.
    pub seq: u64,
    /// A one-line description of what took the target's place (or `removed`).
    pub after: String,
}

/// A context-editor batch ended (log only).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContextEditEnd {
    /// The id from the matching `context-edit/begin`.
    pub edit_id: String,
    /// `applied` or `refused`.
    pub outcome: String,
    /// Why the batch was refused, when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// One result per applied op, in order; empty when refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<ContextEditResult>,
    /// Surface generation after the batch.
    pub generation: u64,
    /// Estimated surface tokens before and after.
    pub tokens_before: u64,
    /// Estimated surface tokens after the batch.
    pub tokens_after: u64,
}
