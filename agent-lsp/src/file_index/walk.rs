//! The walks of the file index: which paths it admits, and the parallel walk that reads them.
//!
//! The walker is the `ignore` crate's (ripgrep's and fd's), with the prune rules it does not
//! know added on top ([`WalkRules`]); the full walk, the walks of new or re-read directories
//! and the single-path ignore matcher all go through the same rules, so they decide alike.

use std::fs::FileType;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use ignore::{DirEntry, IncrementalIgnore, WalkBuilder, WalkState};

use super::entry::{EntryKind, is_nameable, key_of, mention_spelling};
use crate::workspace::Workspace;

/// The exclude globs of the configuration, compiled.
#[derive(Debug, Default)]
pub(super) struct Excludes {
    /// Globs without `/`, matched against the entry's name.
    by_name: GlobSet,
    /// Globs with `/`, matched against the path from the workspace root.
    by_path: GlobSet,
}

impl Excludes {
    pub(super) fn new(patterns: &[String]) -> anyhow::Result<Excludes> {
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
    pub(super) fn is_excluded(&self, relative: &Path) -> bool {
        relative
            .file_name()
            .is_some_and(|name| self.by_name.is_match(name))
            || self.by_path.is_match(relative)
    }
}

/// How the walks are set up; shared by the full walk, subtree walks and the ignore matcher so
/// that all three decide alike.
#[derive(Clone, Debug)]
pub(super) struct WalkRules {
    pub(super) root: PathBuf,
    pub(super) excludes: Arc<Excludes>,
}

impl WalkRules {
    pub(super) fn builder(&self, start: &Path) -> WalkBuilder {
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

    pub(super) fn ignore_matcher(&self) -> Option<IncrementalIgnore> {
        self.builder(&self.root).build_matchers().pop()
    }
}

/// A walker over `start` (`root` or a folder in it) under the index's rules without exclude
/// globs: what the checkpoints of `snapshots` capture is exactly what the ignore files admit,
/// as the index sees it (the ignore files of `start`'s parents apply too).
pub(crate) fn workspace_walker(root: &Path, start: &Path) -> WalkBuilder {
    WalkRules {
        root: root.to_owned(),
        excludes: Arc::new(Excludes::default()),
    }
    .builder(start)
}

/// Why the walk visitor did not index an entry (counted in the status).
pub(super) enum Skip {
    RefusedSymlink,
    Unnameable,
    Other,
}

/// The index key of `relative` (a `/`-separated path from the root) if it is worth indexing:
/// a file or a directory, a symlink only when it resolves inside, and a name a mention can
/// spell.
pub(super) fn admit(
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

/// `path` relative to `root` as UTF-8, for paths the walk found under `root`. Byte-wise:
/// `Path::strip_prefix` compares component by component, which showed in the cold profile.
pub(super) fn relative_to<'a>(root: &Path, path: &'a Path) -> Option<&'a str> {
    let root = root.as_os_str().as_encoded_bytes();
    let rest = path.as_os_str().as_encoded_bytes().strip_prefix(root)?;
    let rest = if root.ends_with(b"/") {
        rest
    } else {
        rest.strip_prefix(b"/")?
    };
    std::str::from_utf8(rest).ok()
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

/// What one full walk found: the admitted keys, sorted, and what it left out.
#[derive(Debug)]
pub(super) struct FullWalk {
    pub(super) keys: Vec<Box<str>>,
    pub(super) truncated: bool,
    pub(super) refused_symlinks: usize,
    pub(super) unnameable: usize,
    pub(super) walk_errors: usize,
}

/// Walk the whole workspace in parallel under `rules`, keeping at most `max_entries` keys and
/// giving up as soon as `cancel` is set.
pub(super) fn walk_all(
    workspace: &Workspace,
    rules: &WalkRules,
    max_entries: usize,
    cancel: &AtomicBool,
) -> anyhow::Result<FullWalk> {
    let root = workspace.root().to_owned();
    let counts = WalkCounts::default();
    let n_kept = AtomicUsize::new(0);
    let truncated = AtomicBool::new(false);
    let batches: Mutex<Vec<Vec<Box<str>>>> = Mutex::new(Vec::new());

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

    rules.builder(&root).build_parallel().run(|| {
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
    Ok(FullWalk {
        keys,
        truncated: truncated.into_inner(),
        refused_symlinks: counts.refused_symlinks.into_inner(),
        unnameable: counts.unnameable.into_inner(),
        walk_errors: counts.walk_errors.into_inner(),
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
