//! What a tool call and a compaction produced: plain records that the loop's events carry to
//! plugins and front ends, defined here so the plugin layer names no module above it.

use std::fmt::Display;

use serde_json::{Map, Value};

use crate::session::event::ToolCallRef;

/// What one tool call produced, before the runtime caps it and records it. (Serialized only
/// between processes: the shared bridge's owner answers a client's `lsp_*` call with it.)
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolOutput {
    /// The text the model reads.
    pub text: String,
    /// Facts about the text that are recorded but never sent (a JSON object).
    pub meta: Value,
    /// Whether the call failed (bad arguments, refused path, missing file, timeout, …).
    pub is_error: bool,
}

impl ToolOutput {
    /// A success whose text the model reads as is, with no facts yet.
    pub fn ok(text: impl Into<String>) -> ToolOutput {
        ToolOutput {
            text: text.into(),
            meta: Value::Object(Map::new()),
            is_error: false,
        }
    }

    /// A failure the model can act on; the text is prefixed with `error: `.
    pub fn error(message: impl Display) -> ToolOutput {
        ToolOutput {
            text: format!("error: {message}"),
            meta: Value::Object(Map::new()),
            is_error: true,
        }
    }

    /// Add one `meta` entry.
    pub fn with_meta(mut self, key: &str, value: impl Into<Value>) -> ToolOutput {
        if !self.meta.is_object() {
            self.meta = Value::Object(Map::new());
        }
        if let Value::Object(map) = &mut self.meta {
            map.insert(key.to_owned(), value.into());
        }
        self
    }
}

/// One executed call: the call, the output as recorded, and the seq of its `tool/result`.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCallOutcome {
    /// The call as the model made it.
    pub call: ToolCallRef,
    /// What the call produced, as recorded (capped).
    pub output: ToolOutput,
    /// The seq of the `tool/result` event that carries it.
    pub result_seq: u64,
}

/// A committed checkpoint.
#[derive(Clone, Debug, PartialEq)]
pub struct CompactionReport {
    /// `cmp-<seq>`, as in the `compaction/*` events and the checkpoint's tag.
    pub compaction_id: String,
    /// The seq of the checkpoint `user/message` that took the range's place.
    pub checkpoint_seq: u64,
    /// Surface entries the checkpoint replaced.
    pub shadowed_entries: usize,
    /// Estimated surface tokens before the checkpoint.
    pub tokens_before: u64,
    /// Estimated surface tokens after it.
    pub tokens_after: u64,
    /// Whether the summary was prepared in the background.
    pub background: bool,
}

/// Messages too large for any request, replaced by stubs (`compaction::elide`).
#[derive(Clone, Debug, PartialEq)]
pub struct ElisionReport {
    /// Surface entries replaced by stubs.
    pub elided: usize,
    /// Estimated surface tokens before the stubs.
    pub tokens_before: u64,
    /// Estimated surface tokens after them.
    pub tokens_after: u64,
}

/// What one call to the engine did.
#[derive(Clone, Debug, PartialEq)]
pub enum CompactionOutcome {
    /// Below the marks, nothing to fold, or a compaction is already open.
    NotNeeded,
    /// The soft mark was reached: a candidate summary is being prepared in the background.
    CandidateStarted {
        /// The candidate's id; a later commit or discard names it.
        compaction_id: String,
    },
    /// A checkpoint took the place of the compacted range.
    Committed(CompactionReport),
    /// Messages too large for any request were elided, and that was enough (or the fold that
    /// followed failed); nothing was folded.
    Elided(ElisionReport),
    /// Nothing changed on the surface.
    Failed {
        /// The compaction that failed, when one was started (a range refused up front has none).
        compaction_id: Option<String>,
        /// Why, for the user and the `compaction/end` event.
        reason: String,
        /// This failure stopped automatic compaction for the session.
        auto_disabled: bool,
    },
    /// Automatic compaction was stopped for this session after repeated failures.
    AutoDisabled,
}

impl CompactionOutcome {
    /// Whether the surface is smaller than before: a request that overflowed may fit now.
    pub fn shrank(&self) -> bool {
        matches!(
            self,
            CompactionOutcome::Committed(_) | CompactionOutcome::Elided(_)
        )
    }
}
