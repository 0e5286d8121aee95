//! The index of workspace paths behind `@path` completion: one parallel walk, then incremental.
//!
//! `@path` completion must answer while the programmer types, in a 100k-file monorepo, so the
//! paths are walked once (in parallel, with the `ignore` crate, the walker of ripgrep and fd)
//! and kept in memory; after that the index follows the file system through
//! [`FileIndex::apply`], which the watcher ([`super::watch`]) and the editor's
//! `workspace/didChangeWatchedFiles` both feed. A change never triggers a rescan of the
//! workspace: it costs one `lstat` of the changed path, plus a walk of the changed directory
//! when a directory appears or an ignore file inside it changes.
//!
//! What is indexed, and why:
//!
//! - Files *and directories* (`@src/` is a useful reference too). Directories are stored with a
//!   trailing `/`, which makes the kind part of the key and keeps a directory next to its
//!   contents in the sorted set (deleting a directory is one range removal).
//! - `.gitignore`, `.ignore`, `.git/info/exclude` and git's global excludes are honoured, also
//!   outside a git checkout (a fresh project still has its ignore files), exactly as the file
//!   tools do (`tools/search.rs`). Hidden files are included (`.github/` matters), `.git/` is
//!   not. The `[files] exclude` globs of the configuration prune further: a glob without `/`
//!   matches a name at any depth (`*.min.js`, `node_modules`), one with `/` matches the path
//!   from the root (`vendor/**`).
//! - Symlinks are checked through [`Workspace::resolve`], the one boundary check of the
//!   workspace: a link whose target stays inside is indexed with its target's kind, a link
//!   pointing out, dangling or looping is not indexed at all. Links are not descended into:
//!   a directory they point to is inside the workspace and already indexed under its real
//!   path, so descending would only list it twice (and a link to an ancestor would loop).
//! - Every indexed path is one a mention can name: paths [`Workspace::resolve`] would refuse
//!   by their spelling (a `\` in a name, say) are skipped and counted.
//!
//! Caps: at most [`FilesConfig::max_entries`] paths are kept; past that the walk stops and the
//! status says "index truncated" (which paths are kept is then whatever the parallel walk met
//! first). Queries return at most [`FilesConfig::max_candidates`] candidates.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::FileType;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use ignore::{DirEntry, IncrementalIgnore, WalkBuilder, WalkState};
use serde::{Deserialize, Serialize};

use super::rank::{Boosts, Candidate, Key, KeyFacts, Scorer};
use super::{PathError, Workspace};

/// Paths indexed before the index reports itself truncated.
pub const DEFAULT_MAX_ENTRIES: usize = 200_000;
/// Candidates one query returns at most, whatever limit the caller asks for.
pub const DEFAULT_MAX_CANDIDATES: usize = 200;

/// The `[files]` table of the configuration file, as written (every key optional).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilesOptions {
    /// Globs of paths to leave out of `@path` completion, on top of the ignore files.
    pub exclude: Option<Vec<String>>,
    /// Paths indexed at most (default 200000).
    pub max_entries: Option<usize>,
    /// Candidates a query returns at most (default 200).
    pub max_candidates: Option<usize>,
}

/// What the file index is allowed to do, resolved from [`FilesOptions`].
#[derive(Clone, Debug)]
pub struct FilesConfig {
    /// Globs pruned from the walk: without `/` they match a name at any depth, with `/` the
    /// path from the workspace root. A pruned directory is not descended into.
    pub exclude: Vec<String>,
    /// Paths (files and directories) kept at most; the walk stops there and the index says
    /// it is truncated.
    pub max_entries: usize,
    /// Candidates a query returns at most.
    pub max_candidates: usize,
}

impl Default for FilesConfig {
    fn default() -> FilesConfig {
        FilesConfig {
            exclude: Vec::new(),
            max_entries: DEFAULT_MAX_ENTRIES,
            max_candidates: DEFAULT_MAX_CANDIDATES,
        }
    }
}

impl FilesConfig {
    pub fn from_options(options: &FilesOptions) -> FilesConfig {
        let defaults = FilesConfig::default();
        FilesConfig {
            exclude: options.exclude.clone().unwrap_or_default(),
            max_entries: options.max_entries.unwrap_or(defaults.max_entries),
            max_candidates: options.max_candidates.unwrap_or(defaults.max_candidates),
        }
    }
}

/// Whether a path is a file or a directory (a symlink counts as what it points to).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    File,
    Directory,
}

/// What happened to a path, as the watcher or the editor reports it. The index treats it as
/// a hint and looks at the disk: a `Deleted` path that exists again is kept, a `Changed` path
/// it never saw is added. That way a lost or reordered event cannot leave it wrong for good.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    Created,
    Changed,
    Deleted,
}

/// One change to apply: `path` is absolute (under the workspace root) or relative to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileChange {
    pub path: PathBuf,
    pub kind: ChangeKind,
}

impl FileChange {
    pub fn new(path: impl Into<PathBuf>, kind: ChangeKind) -> FileChange {
        FileChange {
            path: path.into(),
            kind,
        }
    }
}

/// What [`FileIndex::apply`] did to the set of directories (absolute paths).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApplyOutcome {
    pub added_dirs: Vec<PathBuf>,
    pub removed_dirs: Vec<PathBuf>,
}

/// A directory entering or leaving the index, told to an observer as it happens (see
/// [`FileIndex::apply_observed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirChange<'a> {
    /// Told before anything below the directory is read, so a watcher added now misses
    /// nothing: what appears before the watch is found by the read, what appears after it
    /// is reported by the watch.
    Added(&'a Path),
    Removed(&'a Path),
}

/// Collects the outcome of an apply and tells the observer as it goes.
struct Sink<'a> {
    outcome: ApplyOutcome,
    observer: &'a mut dyn FnMut(DirChange<'_>),
}

impl Sink<'_> {
    fn added(&mut self, dir: PathBuf) {
        (self.observer)(DirChange::Added(&dir));
        self.outcome.added_dirs.push(dir);
    }

    fn removed(&mut self, dir: PathBuf) {
        (self.observer)(DirChange::Removed(&dir));
        self.outcome.removed_dirs.push(dir);
    }
}

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
    /// The initial walk is still running (only a [`super::watch::LiveIndex`] reports this).
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

/// Names of the ignore files whose change re-reads the rules of their directory.
const IGNORE_FILE_NAMES: [&str; 2] = [".gitignore", ".ignore"];

/// The exclude globs of the configuration, compiled.
#[derive(Debug, Default)]
struct Excludes {
    /// Globs without `/`, matched against the entry's name.
    by_name: GlobSet,
    /// Globs with `/`, matched against the path from the workspace root.
    by_path: GlobSet,
}

impl Excludes {
    fn new(patterns: &[String]) -> anyhow::Result<Excludes> {
        let mut by_name = GlobSetBuilder::new();
        let mut by_path = GlobSetBuilder::new();
        for pattern in patterns {
            let trimmed = pattern.strip_prefix("./").unwrap_or(pattern);
            let trimmed = trimmed.strip_suffix('/').unwrap_or(trimmed);
            anyhow::ensure!(
                !trimmed.is_empty(),
                "[files] exclude: the glob `{pattern}` is empty"
            );
            let glob = GlobBuilder::new(trimmed)
                .literal_separator(true)
                .build()
                .with_context(|| format!("[files] exclude: invalid glob `{pattern}`"))?;
            if trimmed.contains('/') {
                by_path.add(glob);
            } else {
                by_name.add(glob);
            }
        }
        Ok(Excludes {
            by_name: by_name.build()?,
            by_path: by_path.build()?,
        })
    }

    fn is_empty(&self) -> bool {
        self.by_name.is_empty() && self.by_path.is_empty()
    }

    /// Whether the path `relative` (from the root, `/`-separated) is excluded.
    fn is_excluded(&self, relative: &Path) -> bool {
        relative
            .file_name()
            .is_some_and(|name| self.by_name.is_match(name))
            || self.by_path.is_match(relative)
    }
}

/// How the walks are set up; shared by the full walk, subtree walks and the ignore matcher so
/// that all three decide alike.
#[derive(Clone, Debug)]
struct WalkRules {
    root: PathBuf,
    excludes: Arc<Excludes>,
}

impl WalkRules {
    fn builder(&self, start: &Path) -> WalkBuilder {
        let mut builder = WalkBuilder::new(start);
        builder
            .hidden(false)
            .parents(true)
            .ignore(true)
            .git_ignore(true)
            .git_global(true)
            .git_exclude(true)
            .require_git(false)
            .follow_links(false);
        let rules = self.clone();
        builder.filter_entry(move |entry| rules.keep(entry));
        builder
    }

    /// The prune rules the `ignore` crate does not know: `.git/` and the exclude globs.
    fn keep(&self, entry: &DirEntry) -> bool {
        if entry.depth() == 0 {
            return true;
        }
        if entry.file_name() == ".git" {
            return false;
        }
        if self.excludes.is_empty() {
            return true;
        }
        match entry.path().strip_prefix(&self.root) {
            Ok(relative) => !self.excludes.is_excluded(relative),
            Err(_) => false,
        }
    }

    fn ignore_matcher(&self) -> Option<IncrementalIgnore> {
        self.builder(&self.root).build_matchers().pop()
    }
}

/// Why the walk visitor did not index an entry (counted in the status).
enum Skip {
    RefusedSymlink,
    Unnameable,
    Other,
}

/// The index key of `relative` (a `/`-separated path from the root) if it is worth indexing:
/// a file or a directory, a symlink only when it resolves inside, and a name a mention can
/// spell.
fn admit(
    workspace: &Workspace,
    relative: &str,
    file_type: FileType,
) -> Result<(Box<str>, EntryKind), Skip> {
    if !is_nameable(relative) {
        return Err(Skip::Unnameable);
    }
    let kind = if file_type.is_symlink() {
        // The boundary check of the whole workspace, reused: it refuses links that point out,
        // dangle or loop, and returns the physical target otherwise.
        let target = workspace
            .resolve(&mention_spelling(relative))
            .map_err(|_| Skip::RefusedSymlink)?;
        match std::fs::metadata(&target) {
            Ok(metadata) if metadata.is_dir() => EntryKind::Directory,
            Ok(metadata) if metadata.is_file() => EntryKind::File,
            _ => return Err(Skip::Other),
        }
    } else if file_type.is_dir() {
        EntryKind::Directory
    } else if file_type.is_file() {
        EntryKind::File
    } else {
        // Sockets, fifos and devices are nothing a model can read.
        return Err(Skip::Other);
    };
    Ok((key_of(relative, kind), kind))
}

/// `relative` as a mention spells it: unchanged, or behind `./` when its first component
/// would otherwise be taken for something else (`~name` for a home directory, `c:` for a
/// drive letter); [`Workspace::resolve`] accepts both spellings for the same file.
pub(crate) fn mention_spelling(relative: &str) -> std::borrow::Cow<'_, str> {
    if super::check_syntax(relative).is_err() {
        let dotted = format!("./{relative}");
        if super::check_syntax(&dotted).is_ok() {
            return dotted.into();
        }
    }
    relative.into()
}

/// Whether some spelling of `relative` passes the workspace's syntax rules.
fn is_nameable(relative: &str) -> bool {
    super::check_syntax(relative).is_ok() || super::check_syntax(&format!("./{relative}")).is_ok()
}

fn key_of(relative: &str, kind: EntryKind) -> Box<str> {
    match kind {
        EntryKind::File => relative.into(),
        EntryKind::Directory => {
            // Sized exactly, so that turning it into a box does not reallocate.
            let mut key = String::with_capacity(relative.len() + 1);
            key.push_str(relative);
            key.push('/');
            key.into_boxed_str()
        }
    }
}

/// `path` relative to `root` as UTF-8, for paths the walk found under `root`. Byte-wise:
/// `Path::strip_prefix` compares component by component, which showed in the cold profile.
fn relative_to<'a>(root: &Path, path: &'a Path) -> Option<&'a str> {
    let root = root.as_os_str().as_encoded_bytes();
    let rest = path.as_os_str().as_encoded_bytes().strip_prefix(root)?;
    let rest = if root.ends_with(b"/") {
        rest
    } else {
        rest.strip_prefix(b"/")?
    };
    std::str::from_utf8(rest).ok()
}

/// Split an index key into the path (no trailing `/`) and its kind.
pub(crate) fn split_key(key: &str) -> (&str, EntryKind) {
    match key.strip_suffix('/') {
        Some(path) => (path, EntryKind::Directory),
        None => (key, EntryKind::File),
    }
}

/// Counters of one walk.
#[derive(Debug, Default)]
struct WalkCounts {
    refused_symlinks: AtomicUsize,
    unnameable: AtomicUsize,
    walk_errors: AtomicUsize,
}

impl WalkCounts {
    fn count(&self, skip: Skip) {
        match skip {
            Skip::RefusedSymlink => self.refused_symlinks.fetch_add(1, Ordering::Relaxed),
            Skip::Unnameable => self.unnameable.fetch_add(1, Ordering::Relaxed),
            Skip::Other => 0,
        };
    }
}

/// The paths of a workspace, for `@path` completion and ranking.
pub struct FileIndex {
    workspace: Workspace,
    config: FilesConfig,
    rules: WalkRules,
    /// Index keys, relative to the root (`src/main.rs`, and `src/` for a directory), sorted
    /// for subtree removal, each with its slot in `flat`.
    entries: BTreeMap<Box<str>, u32>,
    /// The same keys in one buffer, which is what queries scan.
    flat: FlatKeys,
    n_directories: usize,
    truncated: bool,
    refused_symlinks: usize,
    unnameable: usize,
    walk_errors: usize,
    generation: u64,
    /// Bumped by every insertion or removal, so `apply` knows whether to bump `generation`.
    mutations: u64,
    full_walks: u64,
    walk_time: Duration,
    /// The matches of the last query, for the next keystroke.
    last_query: Mutex<Option<LastQuery>>,
    /// Ignore rules for single paths, loaded lazily; dropped when an ignore file changes.
    ignore: Option<IncrementalIgnore>,
    pub(crate) boosts: Boosts,
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
        let root = self.workspace.root().to_owned();
        let max_entries = self.config.max_entries;
        let counts = WalkCounts::default();
        let n_kept = AtomicUsize::new(0);
        let truncated = AtomicBool::new(false);
        let batches: Mutex<Vec<Vec<Box<str>>>> = Mutex::new(Vec::new());
        let workspace = &self.workspace;

        /// One walker thread's share of the keys; handed over when the thread is done.
        struct Visitor<'a> {
            keys: Vec<Box<str>>,
            sink: &'a Mutex<Vec<Vec<Box<str>>>>,
        }
        impl Drop for Visitor<'_> {
            fn drop(&mut self) {
                let keys = std::mem::take(&mut self.keys);
                if let Ok(mut sink) = self.sink.lock() {
                    sink.push(keys);
                }
            }
        }

        self.rules.builder(&root).build_parallel().run(|| {
            let mut visitor = Visitor {
                keys: Vec::new(),
                sink: &batches,
            };
            let (root, counts, n_kept, truncated) = (&root, &counts, &n_kept, &truncated);
            Box::new(move |entry| {
                if cancel.load(Ordering::Relaxed) {
                    return WalkState::Quit;
                }
                let entry = match entry {
                    Ok(entry) => entry,
                    Err(error) => {
                        tracing::debug!(%error, "file index: walk error");
                        counts.walk_errors.fetch_add(1, Ordering::Relaxed);
                        return WalkState::Continue;
                    }
                };
                if entry.depth() == 0 {
                    return WalkState::Continue;
                }
                let Some(file_type) = entry.file_type() else {
                    return WalkState::Continue;
                };
                let Some(relative) = relative_to(root, entry.path()) else {
                    counts.unnameable.fetch_add(1, Ordering::Relaxed);
                    return skip_dir(file_type);
                };
                match admit(workspace, relative, file_type) {
                    Ok((key, _)) => {
                        if n_kept.fetch_add(1, Ordering::Relaxed) >= max_entries {
                            truncated.store(true, Ordering::Relaxed);
                            return WalkState::Quit;
                        }
                        visitor.keys.push(key);
                        WalkState::Continue
                    }
                    Err(skip) => {
                        counts.count(skip);
                        // Nothing under a directory that cannot be named can be named either.
                        skip_dir(file_type)
                    }
                }
            })
        });
        anyhow::ensure!(
            !cancel.load(Ordering::Relaxed),
            "the file walk was cancelled"
        );

        let mut keys: Vec<Box<str>> = batches
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .into_iter()
            .flatten()
            .collect();
        keys.sort_unstable();
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
        self.truncated = truncated.into_inner();
        self.refused_symlinks = counts.refused_symlinks.into_inner();
        self.unnameable = counts.unnameable.into_inner();
        self.walk_errors = counts.walk_errors.into_inner();
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

    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    pub fn config(&self) -> &FilesConfig {
        &self.config
    }

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

    pub fn len(&self) -> usize {
        self.entries.len()
    }

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

    /// The ranked candidates for `query` (fuzzy, see [`super::rank`]), at most `limit` and at
    /// most the configured candidate cap. A query that names something outside the workspace
    /// (`..`, an absolute path elsewhere, a NUL byte, ...) is refused with the same reasons
    /// as a path; an absolute path inside the root is matched as the path under it.
    pub fn query(&self, query: &str, limit: usize) -> Result<Vec<Candidate>, PathError> {
        let query = self.normalize_query(query)?;
        let limit = limit.min(self.config.max_candidates);
        // Taken out, not held: queries from other threads must not wait for this one.
        let narrowed = self
            .last_query
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
            .filter(|last| last.narrows_to(self.generation, &query))
            .map(|last| last.matched);
        let n_keys = narrowed.as_ref().map_or(self.flat.slots.len(), Vec::len);
        let threads = (n_keys / super::rank::MIN_KEYS_PER_THREAD).clamp(1, ranking_threads());
        let scorer = Scorer::new(&query);
        let ranked = super::rank::rank(
            &scorer,
            self.flat
                .chunks(narrowed.as_deref(), threads, scorer.mask()),
            &self.boosts,
            limit,
        );
        if !query.is_empty() && limit > 0 {
            *self
                .last_query
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(LastQuery {
                generation: self.generation,
                query,
                matched: ranked.matched,
            });
        }
        Ok(ranked.candidates)
    }

    /// [`FileIndex::query`] without the previous query's matches to start from.
    #[cfg(test)]
    fn query_from_scratch(&self, query: &str, limit: usize) -> Result<Vec<Candidate>, PathError> {
        *self.last_query.lock().unwrap() = None;
        self.query(query, limit)
    }

    /// The query as the matcher sees it, or why it is refused. Each whitespace-separated word
    /// is checked as a path (fzf-style prefixes `!`, `^` and `'` aside): a query is not a path,
    /// but a query naming the outside has no answer the programmer should get.
    fn normalize_query(&self, query: &str) -> Result<String, PathError> {
        if query.contains('\0') {
            return Err(PathError::NulByte);
        }
        let mut words = Vec::new();
        for word in query.split_whitespace() {
            let bare = word.trim_start_matches(['!', '^', '\'']);
            if bare.is_empty() {
                words.push(word.to_owned());
                continue;
            }
            super::check_syntax(bare)?;
            let path = Path::new(bare);
            let relative = if path.is_absolute() {
                self.workspace
                    .strip_root(path)
                    .ok_or_else(|| PathError::AbsoluteOutside {
                        path: bare.to_owned(),
                        root: self.workspace.root().display().to_string(),
                    })?
            } else {
                path
            };
            if relative.components().any(|c| c == Component::ParentDir) {
                return Err(PathError::EscapesRoot {
                    path: bare.to_owned(),
                });
            }
            let prefix = &word[..word.len() - bare.len()];
            let relative = relative.to_string_lossy();
            let relative = relative.strip_prefix("./").unwrap_or(&relative);
            if !relative.is_empty() {
                words.push(format!("{prefix}{relative}"));
            }
        }
        Ok(words.join(" "))
    }

    /// Mark `path` as just edited: it ranks higher for a while (the most recent most).
    pub fn boost_recent(&mut self, path: impl AsRef<Path>) {
        if let Some(relative) = self.relative(path.as_ref()) {
            self.boosts.touch(&relative);
        }
    }

    /// The files open in the editor now: they rank higher while open.
    pub fn set_open<P: AsRef<Path>>(&mut self, paths: impl IntoIterator<Item = P>) {
        let open = paths
            .into_iter()
            .filter_map(|path| self.relative(path.as_ref()))
            .collect();
        self.boosts.set_open(open);
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

    /// Bring the index up to date with `changes` without rescanning: each changed path is
    /// looked at on disk (one `lstat`), a new directory is walked, and a changed ignore file
    /// re-walks the directory it governs. Paths outside the workspace, inside `.git/`, ignored
    /// or excluded are left out, as in the full walk.
    pub fn apply(&mut self, changes: &[FileChange]) -> ApplyOutcome {
        self.apply_observed(changes, &mut |_| {})
    }

    /// [`FileIndex::apply`], telling `observer` about each directory that enters or leaves the
    /// index, in order, as it happens (a watcher watches and unwatches them).
    pub fn apply_observed(
        &mut self,
        changes: &[FileChange],
        observer: &mut dyn FnMut(DirChange<'_>),
    ) -> ApplyOutcome {
        let mut sink = Sink {
            outcome: ApplyOutcome::default(),
            observer,
        };
        let mut reload_dirs: BTreeSet<String> = BTreeSet::new();
        let before = self.mutations;
        for change in changes {
            let Some(relative) = self.relative(&change.path) else {
                continue;
            };
            if relative.split('/').any(|part| part == ".git") {
                continue;
            }
            let name = relative.rsplit('/').next().unwrap_or(&relative);
            if IGNORE_FILE_NAMES.contains(&name) {
                let dir = relative
                    .rsplit_once('/')
                    .map(|(dir, _)| dir.to_owned())
                    .unwrap_or_default();
                reload_dirs.insert(dir);
            }
            self.reconcile(&relative, &mut sink);
        }
        if !reload_dirs.is_empty() {
            // The rules changed: the cached matchers are stale.
            self.ignore = None;
            // A reload of `a/` covers any reload of `a/b/`.
            let mut covered: Vec<&str> = Vec::new();
            for dir in &reload_dirs {
                if covered
                    .iter()
                    .any(|outer| outer.is_empty() || dir.starts_with(&format!("{outer}/")))
                {
                    continue;
                }
                covered.push(dir);
                self.reload_dir(dir, &mut sink);
            }
        }
        if self.mutations != before {
            self.generation += 1;
        }
        sink.outcome
    }

    /// Make the index agree with the disk about `relative`.
    fn reconcile(&mut self, relative: &str, outcome: &mut Sink<'_>) {
        let absolute = self.workspace.root().join(relative);
        let metadata = match std::fs::symlink_metadata(&absolute) {
            Ok(metadata) => metadata,
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                self.remove_subtree(relative, outcome);
                return;
            }
            Err(error) => {
                tracing::debug!(%error, path = relative, "file index: cannot look at a changed path");
                return;
            }
        };
        let indexed = self.kind_of(relative);
        let on_disk = admit(&self.workspace, relative, metadata.file_type());
        match (indexed, on_disk) {
            (Some(old), Ok((_, new))) if old == new => {}
            (_, Ok(_)) => {
                self.remove_subtree(relative, outcome);
                self.add_with_missing_parents(relative, outcome);
            }
            (_, Err(_)) => self.remove_subtree(relative, outcome),
        }
    }

    /// Add `relative` (which exists): when its parent is not indexed either (the event for the
    /// parent was lost, or it is ignored), the topmost missing ancestor is added instead,
    /// which walks down to `relative` if the rules allow.
    fn add_with_missing_parents(&mut self, relative: &str, outcome: &mut Sink<'_>) {
        let mut target = relative;
        while let Some((parent, _)) = target.rsplit_once('/') {
            if self.entries.contains_key(format!("{parent}/").as_str()) {
                break;
            }
            target = parent;
        }
        self.add_path(target, outcome);
    }

    /// Add one path whose parent is indexed (or is the root), if the rules allow, and walk it
    /// when it is a directory.
    fn add_path(&mut self, relative: &str, outcome: &mut Sink<'_>) {
        let absolute = self.workspace.root().join(relative);
        let Ok(metadata) = std::fs::symlink_metadata(&absolute) else {
            return;
        };
        let file_type = metadata.file_type();
        let path = Path::new(relative);
        if self.rules.excludes.is_excluded(path) {
            return;
        }
        // Links are not descended into: a path below an indexed symlinked directory is known
        // under the link's target already (and `lstat` above went through the link).
        if let Some((parent, _)) = relative.rsplit_once('/')
            && self.workspace.root().join(parent).is_symlink()
        {
            return;
        }
        let is_dir = file_type.is_dir();
        let rules = &self.rules;
        let matcher = self.ignore.get_or_insert_with(|| {
            rules
                .ignore_matcher()
                .expect("a walk builder with one root has one matcher")
        });
        if matcher.matched(path, is_dir).is_ignore() {
            return;
        }
        match admit(&self.workspace, relative, file_type) {
            Ok((key, kind)) => {
                if !self.insert(key) {
                    return;
                }
                if kind == EntryKind::Directory && !file_type.is_symlink() {
                    outcome.added(absolute.clone());
                    self.walk_subtree(&absolute, outcome);
                }
            }
            Err(Skip::RefusedSymlink) => self.refused_symlinks += 1,
            Err(Skip::Unnameable) => self.unnameable += 1,
            Err(Skip::Other) => {}
        }
    }

    /// Index what is below the directory `absolute` (which is indexed already).
    fn walk_subtree(&mut self, absolute: &Path, outcome: &mut Sink<'_>) {
        let root = self.workspace.root().to_owned();
        for entry in self.rules.builder(absolute).build() {
            let entry = match entry {
                Ok(entry) => entry,
                Err(error) => {
                    tracing::debug!(%error, "file index: walk error");
                    self.walk_errors += 1;
                    continue;
                }
            };
            if entry.depth() == 0 {
                continue;
            }
            let (Some(file_type), Some(relative)) =
                (entry.file_type(), relative_to(&root, entry.path()))
            else {
                self.unnameable += 1;
                continue;
            };
            match admit(&self.workspace, relative, file_type) {
                Ok((key, kind)) => {
                    if !self.insert(key) {
                        if self.truncated {
                            return;
                        }
                        continue;
                    }
                    if kind == EntryKind::Directory && !file_type.is_symlink() {
                        // The walk reads this directory only when asked for the next entry.
                        outcome.added(entry.into_path());
                    }
                }
                Err(Skip::RefusedSymlink) => self.refused_symlinks += 1,
                Err(Skip::Unnameable) => self.unnameable += 1,
                Err(Skip::Other) => {}
            }
        }
    }

    /// Re-read what the ignore rules of `dir` (a path from the root, `""` for the root) allow
    /// below it: what is there is dropped and walked again with the current rules.
    fn reload_dir(&mut self, dir: &str, outcome: &mut Sink<'_>) {
        let absolute = if dir.is_empty() {
            self.full_walks += 1;
            self.workspace.root().to_owned()
        } else {
            if !self.entries.contains_key(format!("{dir}/").as_str()) {
                // The directory itself is not indexed (ignored or gone): nothing below it is.
                return;
            }
            self.workspace.root().join(dir)
        };
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        self.remove_below(&prefix, outcome);
        // The cap may have been hit before; what the rules allow now is walked afresh.
        self.walk_subtree(&absolute, outcome);
    }

    /// Insert a key, respecting the cap; whether it is now indexed (false when it was there).
    fn insert(&mut self, key: Box<str>) -> bool {
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
    fn remove_key(&mut self, key: &str) -> bool {
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

    /// Remove `relative` whatever it is, and everything below it if it is a directory.
    fn remove_subtree(&mut self, relative: &str, outcome: &mut Sink<'_>) {
        self.remove_key(relative);
        let dir = format!("{relative}/");
        if self.remove_key(&dir) {
            outcome.removed(self.workspace.root().join(relative));
        }
        self.remove_below(&dir, outcome);
    }

    /// Remove every key strictly below the directory key `prefix` (`""`: everything).
    fn remove_below(&mut self, prefix: &str, outcome: &mut Sink<'_>) {
        // Keys below `dir/` sort after `dir/` and before `dir0` (`0` follows `/` in ASCII).
        let removed: Vec<Box<str>> = if prefix.is_empty() {
            self.entries.keys().cloned().collect()
        } else {
            let end = format!("{}0", &prefix[..prefix.len() - 1]);
            self.entries
                .range::<str, _>((
                    std::ops::Bound::Excluded(prefix),
                    std::ops::Bound::Excluded(end.as_str()),
                ))
                .map(|(key, _)| key.clone())
                .collect()
        };
        let root = self.workspace.root().to_owned();
        for key in removed {
            self.remove_key(&key);
            if let Some(dir) = key.strip_suffix('/') {
                outcome.removed(root.join(dir));
            }
        }
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

/// The index keys one after another in a single buffer, for queries. A query looks at every
/// key: scanning one buffer, with what the ranker needs to know about each key computed once
/// when it is added ([`KeyFacts`]), costs much less than following a tree's pointers to 100k
/// separate strings. New keys are appended; removed ones leave a hole until holes make up a
/// quarter of the slots, when the buffer is rewritten.
#[derive(Debug, Default)]
struct FlatKeys {
    text: String,
    /// Where each key is in `text`, and what the ranker wants to know about it without
    /// looking at the text; a removed key has length [`FlatKeys::DEAD`].
    slots: Vec<Slot>,
    /// Each slot's `facts.path_mask` again (0 once removed), densely: a query first runs
    /// through this array alone, and most keys end there.
    path_masks: Vec<u64>,
    n_dead: usize,
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    start: u32,
    len: u32,
    facts: KeyFacts,
}

impl FlatKeys {
    const DEAD: u32 = u32::MAX;

    fn with_capacity(n_keys: usize, n_bytes: usize) -> FlatKeys {
        FlatKeys {
            text: String::with_capacity(n_bytes),
            slots: Vec::with_capacity(n_keys),
            path_masks: Vec::with_capacity(n_keys),
            n_dead: 0,
        }
    }

    fn push(&mut self, key: &str) -> u32 {
        let start = self.text.len() as u32;
        self.text.push_str(key);
        let facts = KeyFacts::of(key);
        self.slots.push(Slot {
            start,
            len: key.len() as u32,
            facts,
        });
        self.path_masks.push(facts.path_mask());
        (self.slots.len() - 1) as u32
    }

    fn kill(&mut self, slot: u32) {
        self.slots[slot as usize].len = FlatKeys::DEAD;
        self.path_masks[slot as usize] = 0;
        self.n_dead += 1;
    }

    fn needs_compaction(&self) -> bool {
        self.n_dead > 1024 && self.n_dead * 4 > self.slots.len()
    }

    /// Rewrite the buffer without holes, renumbering the slots in `entries`.
    fn compact(&mut self, entries: &mut BTreeMap<Box<str>, u32>) {
        let mut fresh = FlatKeys {
            text: String::with_capacity(self.text.len()),
            slots: Vec::with_capacity(entries.len()),
            path_masks: Vec::with_capacity(entries.len()),
            n_dead: 0,
        };
        for (key, slot) in entries.iter_mut() {
            *slot = fresh.push(key);
        }
        *self = fresh;
    }

    /// The live keys among `slots` (all of them when `None`) whose characters include all of
    /// `mask`, in `n` runs of about equal length, for ranking on `n` threads.
    fn chunks<'a>(&'a self, slots: Option<&'a [u32]>, n: usize, mask: u64) -> Vec<KeyIter<'a>> {
        let total = slots.map_or(self.slots.len(), <[u32]>::len);
        let size = total.div_ceil(n.max(1)).max(1);
        (0..total)
            .step_by(size)
            .map(|from| {
                let to = (from + size).min(total);
                let indices = match slots {
                    Some(slots) => Indices::Listed(slots[from..to].iter()),
                    None => Indices::Run {
                        base: from,
                        masks: &self.path_masks[from..to],
                        position: 0,
                    },
                };
                KeyIter {
                    flat: self,
                    mask,
                    indices,
                }
            })
            .collect()
    }

    fn heap_size(&self) -> usize {
        self.text.capacity()
            + self.slots.capacity() * std::mem::size_of::<Slot>()
            + self.path_masks.capacity() * std::mem::size_of::<u64>()
    }
}

/// Keys of one chunk for the ranker: the scan that every query makes, kept a plain loop over
/// the dense masks.
struct KeyIter<'a> {
    flat: &'a FlatKeys,
    mask: u64,
    indices: Indices<'a>,
}

enum Indices<'a> {
    /// Slots `base..base + masks.len()`, of which `position` are done.
    Run {
        base: usize,
        masks: &'a [u64],
        position: usize,
    },
    /// The slots the last query matched.
    Listed(std::slice::Iter<'a, u32>),
}

impl<'a> Iterator for KeyIter<'a> {
    type Item = Key<'a>;

    fn next(&mut self) -> Option<Key<'a>> {
        let mask = self.mask;
        loop {
            let index = match &mut self.indices {
                Indices::Run {
                    base,
                    masks,
                    position,
                } => {
                    let found = masks[*position..]
                        .iter()
                        .position(|&key_mask| key_mask & mask == mask)?;
                    let index = *position + found;
                    *position = index + 1;
                    *base + index
                }
                Indices::Listed(slots) => {
                    let index = *slots.next()? as usize;
                    if self.flat.path_masks[index] & mask != mask {
                        continue;
                    }
                    index
                }
            };
            let slot = &self.flat.slots[index];
            if slot.len == FlatKeys::DEAD {
                continue;
            }
            let start = slot.start as usize;
            return Some(Key {
                text: &self.flat.text[start..start + slot.len as usize],
                facts: slot.facts,
                slot: index as u32,
            });
        }
    }
}

/// What the last query matched. The next keystroke usually extends the query, and a longer
/// query can only match a subset of what the shorter one matched, so it looks at those keys
/// only: the first keystroke scans the index, the following ones a shrinking part of it.
#[derive(Debug)]
struct LastQuery {
    /// The index generation it was computed at; any change to the index voids it.
    generation: u64,
    query: String,
    matched: Vec<u32>,
}

impl LastQuery {
    /// Whether `query`'s matches are all among this one's. Appending characters narrows every
    /// fzf-syntax form except negation (`!abc` excludes less than `!ab`).
    fn narrows_to(&self, generation: u64, query: &str) -> bool {
        self.generation == generation
            && !self.query.is_empty()
            && query.starts_with(&self.query)
            && !query.contains('!')
    }
}

/// Threads a query may use: the cores this process may run on (looked up once).
fn ranking_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| {
        std::thread::available_parallelism()
            .map(usize::from)
            .unwrap_or(1)
            .min(8)
    })
}

/// Do not descend into a directory that is not indexed.
fn skip_dir(file_type: FileType) -> WalkState {
    if file_type.is_dir() {
        WalkState::Skip
    } else {
        WalkState::Continue
    }
}

#[cfg(test)]
pub(crate) mod tests;
