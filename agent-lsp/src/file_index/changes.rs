//! How the file index follows the file system after its first walk: each reported change is
//! a hint, checked on disk with one `lstat`; a new directory is walked, a changed ignore file
//! re-reads the directory it governs. Nothing here rescans the workspace.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

use super::entry::EntryKind;
use super::store::FileIndex;
use super::walk::{Skip, admit, relative_to};

/// What happened to a path, as the watcher or the editor reports it. The index treats it as
/// a hint and looks at the disk: a `Deleted` path that exists again is kept, a `Changed` path
/// it never saw is added. That way a lost or reordered event cannot leave it wrong for good.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    /// A path appeared; a directory is walked for what it holds.
    Created,
    /// A path's content or metadata changed; the index only needs to know it exists.
    Changed,
    /// A path went away; a directory takes everything under it along.
    Deleted,
}

/// One change to apply: `path` is absolute (under the workspace root) or relative to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileChange {
    /// The path that changed, absolute under the root or relative to it.
    pub path: PathBuf,
    /// What the reporter says happened: a hint, checked against the disk.
    pub kind: ChangeKind,
}

impl FileChange {
    /// A change of `kind` to `path`.
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

/// Names of the ignore files whose change re-reads the rules of their directory.
const IGNORE_FILE_NAMES: [&str; 2] = [".gitignore", ".ignore"];

impl FileIndex {
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
}
