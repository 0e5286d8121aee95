//! What a capture looks at: the walk of the workspace with the file index's rules, each
//! file's `lstat`, and the lock that serialises the captures of every process.

use std::path::Path;
use std::sync::Mutex;

use anyhow::Context;
use ignore::WalkState;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use super::FileKind;

/// The conversation is not work product: prompt documents are never captured (a context
/// rewind is what takes a conversation back).
const PROMPT_DOCUMENTS: &str = "*.agent.md";

/// The `[checkpoints] exclude` globs, in gitignore syntax from the workspace root, and the
/// prompt documents; shared, since every walk's entry filter holds it.
#[derive(Clone)]
pub(super) struct Excludes(std::sync::Arc<Gitignore>);

impl Excludes {
    pub(super) fn new(root: &Path, globs: &[String]) -> anyhow::Result<Excludes> {
        let mut builder = GitignoreBuilder::new(root);
        for glob in globs.iter().map(String::as_str).chain([PROMPT_DOCUMENTS]) {
            builder
                .add_line(None, glob)
                .with_context(|| format!("[checkpoints] exclude: invalid glob `{glob}`"))?;
        }
        Ok(Excludes(std::sync::Arc::new(builder.build()?)))
    }

    fn excludes(&self, path: &Path, is_dir: bool) -> bool {
        self.0.matched(path, is_dir).is_ignore()
    }
}

/// One file the walk found, with its `lstat`.
pub(super) struct Seen {
    /// From the root, `/`-separated.
    pub(super) path: String,
    pub(super) stat: gix::index::entry::Stat,
    pub(super) kind: FileKind,
}

/// What one walk found.
#[derive(Default)]
pub(super) struct Walked {
    pub(super) seen: Vec<Seen>,
    /// The folders it listed (absolute): what the journal watches.
    pub(super) folders: Vec<std::path::PathBuf>,
}

/// Every admitted file and symlink under `start` (the workspace `root` or a folder in it),
/// `depth` levels down at most, walked in parallel. Directories are not captured (a git tree
/// cannot hold an empty one), but the ones listed are returned for the journal to watch.
pub(super) fn walk(
    root: &Path,
    excludes: &Excludes,
    start: &Path,
    depth: Option<usize>,
) -> anyhow::Result<Walked> {
    let found: Mutex<Vec<Vec<Seen>>> = Mutex::new(Vec::new());
    let folders: Mutex<Vec<std::path::PathBuf>> = Mutex::new(Vec::new());
    let failed: Mutex<Option<String>> = Mutex::new(None);
    struct Batch<'a> {
        seen: Vec<Seen>,
        sink: &'a Mutex<Vec<Vec<Seen>>>,
    }
    impl Drop for Batch<'_> {
        fn drop(&mut self) {
            let seen = std::mem::take(&mut self.seen);
            self.sink
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push(seen);
        }
    }
    let mut builder = crate::file_index::workspace_walker(root, start);
    builder.max_depth(depth);
    builder.filter_entry({
        let root = root.to_owned();
        let excludes = excludes.clone();
        move |entry| {
            entry.depth() == 0
                || entry.file_name() != ".git"
                    && !entry.path().strip_prefix(&root).is_ok_and(|relative| {
                        excludes.excludes(relative, entry.file_type().is_some_and(|t| t.is_dir()))
                    })
        }
    });
    builder.build_parallel().run(|| {
        let mut batch = Batch {
            seen: Vec::new(),
            sink: &found,
        };
        let (failed, folders) = (&failed, &folders);
        Box::new(move |entry| {
            let entry = match entry {
                Ok(entry) => entry,
                Err(error) => {
                    tracing::debug!(%error, "checkpoints: walk error");
                    return WalkState::Continue;
                }
            };
            let Some(file_type) = entry.file_type() else {
                return WalkState::Continue;
            };
            if file_type.is_dir() {
                folders
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(entry.path().to_owned());
                return WalkState::Continue;
            }
            let Some(relative) = entry
                .path()
                .strip_prefix(root)
                .ok()
                .and_then(|relative| relative.to_str())
            else {
                // A name that is not UTF-8 cannot be named in the log; it is left out.
                return WalkState::Continue;
            };
            let metadata = match gix::index::fs::Metadata::from_path_no_follow(entry.path()) {
                Ok(metadata) => metadata,
                // Removed between the listing and the stat.
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                    return WalkState::Continue;
                }
                Err(error) => {
                    *failed.lock().unwrap_or_else(|p| p.into_inner()) =
                        Some(format!("cannot stat {relative}: {error}"));
                    return WalkState::Quit;
                }
            };
            let kind = if file_type.is_symlink() {
                FileKind::Link
            } else if !file_type.is_file() {
                return WalkState::Continue;
            } else if metadata.is_executable() {
                FileKind::Executable
            } else {
                FileKind::File
            };
            let Ok(stat) = gix::index::entry::Stat::from_fs(&metadata) else {
                return WalkState::Continue;
            };
            batch.seen.push(Seen {
                path: relative.to_owned(),
                stat,
                kind,
            });
            WalkState::Continue
        })
    });
    if let Some(failed) = failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        anyhow::bail!(failed);
    }
    let seen = found
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .flatten()
        .collect();
    Ok(Walked {
        seen,
        folders: folders.into_inner().unwrap_or_else(|p| p.into_inner()),
    })
}

impl Walked {
    /// Add what another walk found.
    pub(super) fn extend(&mut self, other: Walked) {
        self.seen.extend(other.seen);
        self.folders.extend(other.folders);
    }
}

/// The bytes of `path` as a blob holds them: a file's content or a link's target. `None`:
/// it went away since the walk.
pub(super) fn read(root: &Path, path: &str, kind: FileKind) -> anyhow::Result<Option<Vec<u8>>> {
    use std::os::unix::ffi::OsStrExt;
    let full = root.join(path);
    let read = match kind {
        FileKind::Link => {
            std::fs::read_link(&full).map(|target| target.as_os_str().as_bytes().to_vec())
        }
        FileKind::File | FileKind::Executable => std::fs::read(&full),
    };
    match read {
        Ok(bytes) => Ok(Some(bytes)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error).with_context(|| format!("cannot read {path}")),
    }
}

/// The lock file's exclusive lock, held until dropped: one capture at a time per store,
/// whichever process takes it.
pub(super) fn lock(path: &Path) -> anyhow::Result<nix::fcntl::Flock<std::fs::File>> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, errno)| anyhow::anyhow!("cannot lock {}: {errno}", path.display()))
}

/// Create `dir` as the user's alone (0700): it holds copies of the workspace's files.
pub(super) fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// A session id as a ref name component: ids are `[0-9a-z-]`, anything else becomes `_`.
pub(super) fn ref_safe(session: &str) -> String {
    session
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}
