//! The workspace's file checkpoints: what every admitted file held at a moment, kept in a bare
//! git object database of our own, so a rewind can put back what the agent's turns changed
//! (docs/decisions/0009-rewind.md).
//!
//! The store lives in the workspace's state directory (`checkpoints/git`), never in the user's
//! `.git`, and is opened isolated: no user or system git configuration applies, no filters, so a
//! blob is the file's exact bytes. Commands the sandbox holds cannot write the state directory,
//! so the model cannot alter its own checkpoints.
//!
//! A process's first capture ([`Snapshots::capture`]) walks the workspace with the file index's
//! rules (`.gitignore`, `.ignore`, git's excludes, `.git/` pruned); every later one lists only
//! the folders the journal (`journal.rs`, a file watcher) says changed since. Either reads only
//! the files whose `lstat` differs from the stat cache (`cache.rs`; or is racy: changed within
//! the timestamp granularity of the last walk), as git's own index does. The new tree is the previous
//! one edited on the changed paths, so a capture writes one blob per changed file, the trees on
//! their paths and a commit: the store grows with what changed, not with the tree. The commit
//! hangs under `refs/agent-lsp/sessions/<session>`, so every checkpoint of a session stays
//! reachable.
//!
//! This module knows nothing of sessions or of who changed a file: the session log records each
//! checkpoint (`files/checkpoint`), and the `rewind` module decides from the log what to put
//! back, through [`Snapshots::files_of`], [`Snapshots::changes`] and [`Snapshots::restore`].

mod cache;
mod journal;
mod restore;
mod scan;
mod store;
#[cfg(test)]
mod tests;
mod trees;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

pub use restore::RestoreError;
pub use store::{Entry, FileKind};

/// Failure injection for the crash tests (`tests/e2e/rewind_crash.rs`): the process aborts here
/// when `AGENT_LSP_CRASH_AT` names this point, as a SIGKILL at that moment would end it.
pub fn crash_point(at: &str) {
    if std::env::var_os("AGENT_LSP_CRASH_AT").is_some_and(|named| named == at) {
        std::process::abort();
    }
}

/// The largest file a capture keeps by default (5 MiB): bigger files are named as uncaptured,
/// and a rewind says it cannot restore them.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 5 * 1024 * 1024;

/// The `[checkpoints]` options of the configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Options {
    /// Take checkpoints at all.
    pub enabled: bool,
    /// Files larger than this are not captured.
    pub max_file_bytes: u64,
    /// Globs (gitignore syntax, from the workspace root) of files never captured, beside the
    /// ignore files' own.
    pub exclude: Vec<String>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            enabled: true,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            exclude: Vec::new(),
        }
    }
}

/// A file a capture left out because it is over the size cap.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Uncaptured {
    /// From the workspace root, `/`-separated.
    pub path: String,
    /// Its size when the capture saw it.
    pub bytes: u64,
}

/// What one capture wrote and found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// The commit: the checkpoint's id in the log.
    pub id: String,
    /// The paths that differ from the previous checkpoint of the session (all of them for the
    /// first), sorted.
    pub changed: Vec<String>,
    /// Files over the size cap.
    pub uncaptured: Vec<Uncaptured>,
    /// `walk`: the whole workspace was listed and stat'ed; `journal`: only the folders the
    /// file watcher named since the last capture.
    pub scan: &'static str,
    /// How many files were read because the stat cache could not vouch for them.
    pub read: usize,
}

/// The checkpoints of one workspace, shared by every session of the process that works in it.
/// Captures are serialised: within the process by a lock, across processes by a lock file.
pub struct Snapshots {
    workspace: PathBuf,
    dir: PathBuf,
    options: Options,
    state: Mutex<Option<store::Store>>,
}

impl std::fmt::Debug for Snapshots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshots")
            .field("workspace", &self.workspace)
            .field("dir", &self.dir)
            .finish()
    }
}

impl Snapshots {
    /// The checkpoints of `workspace` (canonical) kept in `dir` (`<state dir>/checkpoints`);
    /// nothing is created until the first capture or read.
    pub fn new(workspace: &Path, dir: PathBuf, options: Options) -> Arc<Snapshots> {
        Arc::new(Snapshots {
            workspace: workspace.to_owned(),
            dir,
            options,
            state: Mutex::new(None),
        })
    }

    /// The checkpoints of `workspace` kept in the state directory `workspace_dir`, one
    /// instance per directory in this process, so every session shares the stat cache.
    pub fn for_state_dir(
        workspace: &Path,
        workspace_dir: &Path,
        options: Options,
    ) -> Arc<Snapshots> {
        static OPEN: Mutex<BTreeMap<PathBuf, std::sync::Weak<Snapshots>>> =
            Mutex::new(BTreeMap::new());
        let dir = workspace_dir.join("checkpoints");
        let mut open = OPEN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(found) = open.get(&dir).and_then(std::sync::Weak::upgrade)
            && found.options == options
        {
            return found;
        }
        let made = Snapshots::new(workspace, dir.clone(), options);
        open.insert(dir, Arc::downgrade(&made));
        made
    }

    /// The folder of the store.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The workspace the captures read.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    fn with_store<T>(
        &self,
        work: impl FnOnce(&mut store::Store) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if state.is_none() {
            *state = Some(store::Store::open(
                &self.workspace,
                &self.dir,
                &self.options,
            )?);
        }
        work(state.as_mut().expect("opened above"))
    }

    /// Capture the workspace now as the next checkpoint of `session`, after `previous` (its
    /// last checkpoint's id, `None` for its first), with `buffers`: the editor's open documents
    /// whose text may differ from the disk (path from the root, text).
    pub fn capture(
        &self,
        session: &str,
        previous: Option<&str>,
        buffers: &[(String, String)],
    ) -> anyhow::Result<Checkpoint> {
        self.with_store(|store| store.capture(session, previous, buffers))
    }

    /// Do now what makes a process's first capture slow (opening the store, loading the stat
    /// cache, the walk that starts the journal, reading what changed since the cache was
    /// saved), without a checkpoint: a front end whose sessions live long calls it when a
    /// session opens, so its first turn's capture lists only what changed since.
    pub fn warm(&self) -> anyhow::Result<()> {
        self.with_store(|store| store.warm())
    }

    /// Save the stat cache if captures changed it since (the end of a turn: the next process
    /// starts warm).
    pub fn save(&self) -> anyhow::Result<()> {
        self.with_store(|store| store.save())
    }

    /// Every file of checkpoint `id`, with what the editor's buffers held over them
    /// ([`Files::effective`]).
    pub fn files_of(&self, id: &str) -> anyhow::Result<Files> {
        self.with_store(|store| store.files_of(id))
    }

    /// The paths whose effective content differs between checkpoints `from` and `to`.
    pub fn changes(&self, from: &str, to: &str) -> anyhow::Result<Vec<String>> {
        self.with_store(|store| store.changes(from, to))
    }

    /// The bytes of blob `id`.
    pub fn blob(&self, id: &str) -> anyhow::Result<Vec<u8>> {
        self.with_store(|store| store.blob(id))
    }

    /// The blob id `bytes` would have: what a restore compares a file's current text with.
    pub fn hash(bytes: &[u8]) -> String {
        store::hash_blob(bytes)
    }

    /// What `path` (from the root) holds on disk now, as an entry (`None`: absent).
    pub fn current(&self, path: &str) -> anyhow::Result<Option<Entry>> {
        restore::current(&self.workspace, path)
    }

    /// Put `entry` at `path` on disk (a file with its mode, or a symlink), or remove the file
    /// when `entry` is `None`. The path must stay inside the workspace; its last component is
    /// never followed.
    pub fn restore(&self, path: &str, entry: Option<&Entry>) -> Result<(), RestoreError> {
        let mut found = Ok(());
        let opened = self.with_store(|store| {
            let bytes = match entry {
                Some(entry) => Some(store.blob(&entry.id)?),
                None => None,
            };
            found = restore::write(
                store.workspace(),
                path,
                entry.map(|entry| entry.kind),
                bytes.as_deref(),
            );
            Ok(())
        });
        opened.map_err(RestoreError::Store)?;
        found
    }
}

/// The files of one checkpoint: the disk's, and the editor's unsaved texts over them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Files {
    /// Path from the root → what the disk held.
    pub disk: BTreeMap<String, Entry>,
    /// Path from the root → the text of the editor's buffer, where it differed from the disk.
    pub buffers: BTreeMap<String, Entry>,
}

impl Files {
    /// What the user saw at `path`: the editor's buffer where it had one, else the disk.
    pub fn effective(&self, path: &str) -> Option<&Entry> {
        self.buffers.get(path).or_else(|| self.disk.get(path))
    }
}
