//! What a rewind plans: where the files are, what each path goes back to, what is kept and
//! why, and what happens to the conversation. `apply.rs` makes the plan, `carry.rs` carries it
//! out.

use crate::context_editor::ops::EditOp;
use crate::plugin::tool::Buffers;
use crate::snapshots::{Entry, Snapshots};
use std::sync::Arc;

/// Where the files are, and the editor's buffers over them under `serve`.
pub struct Place<'a> {
    /// The workspace's checkpoints.
    pub snapshots: &'a Arc<Snapshots>,
    /// The editor's open buffers, changed through the editor; `None` on the terminal.
    pub buffers: Option<&'a dyn Buffers>,
}

/// One path to change: from what it holds now to what it is put back to.
pub(super) struct Write {
    pub(super) path: String,
    pub(super) current: Option<Entry>,
    pub(super) target: Option<Entry>,
}

/// A path left alone unless forced (`forceable`: a file over the cap cannot be restored at all).
pub(super) struct Held {
    pub(super) write: Write,
    pub(super) why: String,
    pub(super) forceable: bool,
}

#[derive(Default)]
pub(super) struct Plan {
    pub(super) writes: Vec<Write>,
    pub(super) held: Vec<Held>,
    pub(super) yours: Vec<String>,
}

/// What the conversation part of a rewind does.
pub(super) enum ContextPart {
    /// Take these segments off the surface.
    Delete(Vec<EditOp>),
    /// Roll the surface back to this generation (an undo).
    Rollback(u64),
}
