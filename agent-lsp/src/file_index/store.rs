//! The file index itself: its keys, twice (sorted for subtree removal, flat for scans), the
//! full walk that fills them, and the counts behind its status.
//!
//! How the index changes afterwards is in `changes`, how it answers a query in `query`.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ignore::IncrementalIgnore;
use serde::Serialize;

use super::config::FilesConfig;
use super::entry::{EntryKind, split_key};
use super::flat::{FlatKeys, LastQuery};
use super::rank::Boosts;
use super::walk::{Excludes, WalkRules, walk_all};
use crate::workspace::Workspace;

/// The index at a glance; `message()` is what to tell a person.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct IndexStatus {
    /// Files and directories indexed.
    pub entries: usize,
    pub files: usize,
    pub directories: usize,
    /// The entry cap was reached: some paths are not indexed.
    pub truncated: bool,
    pub max_entries: usize,
    /// Symlinks left out because they point outside the workspace, dangle or loop.
    pub refused_symlinks: usize,
    /// Paths left out because no mention could name them (e.g. a `\` in a name).
    pub unnameable: usize,
    /// Directories that could not be read (permissions, races).
    pub walk_errors: usize,
    /// The initial walk is still running (only a [`super::LiveIndex`] reports this).
    pub indexing: bool,
    /// Bumped by every change to the set of paths.
    pub generation: u64,
    /// How long the last full walk took, in milliseconds.
    pub walk_ms: u64,
    /// Full walks so far: one, unless the watcher lost events or a root ignore file changed.
    pub full_walks: u64,
}

impl IndexStatus {
    /// A sentence for a person when something is off, `None` when all is well.
    pub fn message(&self) -> Option<String> {
        if self.indexing {
            Some("indexing the workspace; candidates are incomplete until it finishes".into())
        } else if self.truncated {
            Some(format!(
                "index truncated at {} entries: some paths are not offered; exclude large folders with [files] exclude or raise [files] max_entries",
                self.max_entries
            ))
        } else {
            None
        }
    }
}

/// The paths of a workspace, for `@path` completion and ranking.
pub struct FileIndex {
    pub(super) workspace: Workspace,
    pub(super) config: FilesConfig,
    pub(super) rules: WalkRules,
    /// Index keys, relative to the root (`src/main.rs`, and `src/` for a directory), sorted
    /// for subtree removal, each with its slot in `flat`.
    pub(super) entries: BTreeMap<Box<str>, u32>,
    /// The same keys in one buffer, which is what queries scan.
    pub(super) flat: FlatKeys,
    pub(super) n_directories: usize,
    pub(super) truncated: bool,
    pub(super) refused_symlinks: usize,
    pub(super) unnameable: usize,
    pub(super) walk_errors: usize,
    pub(super) generation: u64,
    /// Bumped by every insertion or removal, so `apply` knows whether to bump `generation`.
    pub(super) mutations: u64,
    pub(super) full_walks: u64,
    pub(super) walk_time: Duration,
    /// The matches of the last query, for the next keystroke.
    pub(super) last_query: Mutex<Option<LastQuery>>,
    /// Ignore rules for single paths, loaded lazily; dropped when an ignore file changes.
    pub(super) ignore: Option<IncrementalIgnore>,
    pub(super) boosts: Boosts,
}

impl std::fmt::Debug for FileIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileIndex")
            .field("root", &self.workspace.root())
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}

impl FileIndex {
    /// An index with nothing in it yet, e.g. while the first walk runs elsewhere.
    pub fn empty(workspace: &Workspace, config: FilesConfig) -> anyhow::Result<FileIndex> {
        let excludes = Arc::new(Excludes::new(&config.exclude)?);
        Ok(FileIndex {
            rules: WalkRules {
                root: workspace.root().to_owned(),
                excludes,
            },
            workspace: workspace.clone(),
            config,
            entries: BTreeMap::new(),
            flat: FlatKeys::default(),
            n_directories: 0,
            truncated: false,
            refused_symlinks: 0,
            unnameable: 0,
            walk_errors: 0,
            generation: 0,
            mutations: 0,
            full_walks: 0,
            walk_time: Duration::ZERO,
            last_query: Mutex::new(None),
            ignore: None,
            boosts: Boosts::default(),
        })
    }

    /// Walk the workspace and index it.
    pub fn build(workspace: &Workspace, config: FilesConfig) -> anyhow::Result<FileIndex> {
        FileIndex::build_cancellable(workspace, config, &AtomicBool::new(false))
    }

    /// Walk the workspace and index it, giving up as soon as `cancel` is set.
    pub fn build_cancellable(
        workspace: &Workspace,
        config: FilesConfig,
        cancel: &AtomicBool,
    ) -> anyhow::Result<FileIndex> {
        let mut index = FileIndex::empty(workspace, config)?;
        index.rebuild_cancellable(cancel)?;
        Ok(index)
    }

    /// Walk the whole workspace again. Only for when the incremental path cannot be trusted
    /// (the watcher's event queue overflowed) or on explicit request.
    pub fn rebuild(&mut self) -> anyhow::Result<()> {
        self.rebuild_cancellable(&AtomicBool::new(false))
    }

    fn rebuild_cancellable(&mut self, cancel: &AtomicBool) -> anyhow::Result<()> {
        let started = Instant::now();
        let walked = walk_all(
            &self.workspace,
            &self.rules,
            self.config.max_entries,
            cancel,
        )?;
        let keys = walked.keys;
        self.n_directories = keys.iter().filter(|key| key.ends_with('/')).count();
        self.flat = FlatKeys::with_capacity(keys.len(), keys.iter().map(|key| key.len()).sum());
        // From sorted keys the map is built in one pass.
        self.entries = keys
            .into_iter()
            .map(|key| {
                let slot = self.flat.push(&key);
                (key, slot)
            })
            .collect();
        self.truncated = walked.truncated;
        self.refused_symlinks = walked.refused_symlinks;
        self.unnameable = walked.unnameable;
        self.walk_errors = walked.walk_errors;
        self.ignore = None;
        self.generation += 1;
        self.full_walks += 1;
        self.walk_time = started.elapsed();
        tracing::debug!(
            entries = self.entries.len(),
            truncated = self.truncated,
            ms = self.walk_time.as_millis() as u64,
            "file index: built"
        );
        Ok(())
    }

    /// The workspace the index walks, which decides what may be touched at all.
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// The exclusions and caps the index was built with.
    pub fn config(&self) -> &FilesConfig {
        &self.config
    }

    /// Counts and flags, as `agent-lsp files` reports them: entries, what was refused or cut,
    /// and the last walk's cost. A plain index is never mid-walk.
    pub fn status(&self) -> IndexStatus {
        IndexStatus {
            entries: self.entries.len(),
            files: self.entries.len() - self.n_directories,
            directories: self.n_directories,
            truncated: self.truncated,
            max_entries: self.config.max_entries,
            refused_symlinks: self.refused_symlinks,
            unnameable: self.unnameable,
            walk_errors: self.walk_errors,
            indexing: false,
            generation: self.generation,
            walk_ms: self.walk_time.as_millis() as u64,
            full_walks: self.full_walks,
        }
    }

    /// Paths indexed, files and directories together.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is indexed (an empty workspace, or everything excluded).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `relative` (a `/`-separated path from the root) is indexed, and as what.
    pub fn kind_of(&self, relative: &str) -> Option<EntryKind> {
        let relative = relative.strip_suffix('/').unwrap_or(relative);
        if self.entries.contains_key(relative) {
            Some(EntryKind::File)
        } else if self.entries.contains_key(format!("{relative}/").as_str()) {
            Some(EntryKind::Directory)
        } else {
            None
        }
    }

    /// Every indexed path in sorted order, directories without their trailing `/`.
    pub fn iter(&self) -> impl Iterator<Item = (&str, EntryKind)> + '_ {
        self.entries.keys().map(|key| split_key(key))
    }

    /// Index keys in sorted order: paths, directories with a trailing `/`.
    pub fn keys(&self) -> impl Iterator<Item = &str> + Clone + '_ {
        self.entries.keys().map(|key| &**key)
    }

    /// Rough heap size of the index in bytes: the key bytes, the key handles and the tree
    /// nodes (about two words per key, as the nodes of a set built from sorted keys are full).
    /// The allocator's own rounding comes on top; the benchmark measures resident memory too.
    pub fn heap_size_estimate(&self) -> usize {
        let word = std::mem::size_of::<usize>();
        let tree: usize = self
            .entries
            .keys()
            .map(|key| key.len() + 2 * word + 4 + 16)
            .sum();
        tree + self.flat.heap_size()
    }

    /// `path` (absolute under the root, or relative) as a `/`-separated path from the root;
    /// `None` when it is outside, climbs with `..`, is the root itself or is not UTF-8.
    pub fn relative(&self, path: &Path) -> Option<String> {
        let rest = if path.is_absolute() {
            self.workspace.strip_root(path)?
        } else {
            path
        };
        let mut parts = Vec::new();
        for component in rest.components() {
            match component {
                Component::Normal(name) => parts.push(name.to_str()?),
                Component::CurDir => {}
                _ => return None,
            }
        }
        (!parts.is_empty()).then(|| parts.join("/"))
    }

    /// Insert a key, respecting the cap; whether it is now indexed (false when it was there).
    pub(super) fn insert(&mut self, key: Box<str>) -> bool {
        if self.entries.contains_key(&key) {
            return false;
        }
        if self.entries.len() >= self.config.max_entries {
            self.truncated = true;
            return false;
        }
        if key.ends_with('/') {
            self.n_directories += 1;
        }
        self.mutations += 1;
        let slot = self.flat.push(&key);
        self.entries.insert(key, slot);
        true
    }

    /// Remove one key; whether it was there.
    pub(super) fn remove_key(&mut self, key: &str) -> bool {
        let Some(slot) = self.entries.remove(key) else {
            return false;
        };
        self.mutations += 1;
        if key.ends_with('/') {
            self.n_directories -= 1;
        }
        self.flat.kill(slot);
        if self.flat.needs_compaction() {
            self.flat.compact(&mut self.entries);
        }
        true
    }

    /// Absolute paths of the indexed directories that are real directories (not symlinks),
    /// the root first: what a watcher watches.
    pub fn watched_dirs(&self) -> Vec<PathBuf> {
        let root = self.workspace.root();
        let mut dirs = vec![root.to_owned()];
        for key in self.entries.keys() {
            if let Some(dir) = key.strip_suffix('/') {
                let path = root.join(dir);
                if !path.is_symlink() {
                    dirs.push(path);
                }
            }
        }
        dirs
    }
}
