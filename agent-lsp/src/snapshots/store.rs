//! The object database under `checkpoints/git` and the capture itself: which files changed
//! since the stat cache, their blobs, the edited tree and the commit.

use std::path::{Path, PathBuf};

use anyhow::Context;
use gix::ObjectId;
use gix::objs::tree::EntryKind;
use serde::{Deserialize, Serialize};

use super::cache::{Delta, Read, Scope, StatCache};
use super::journal::{Journal, Taken};
use super::{Checkpoint, Files, Options, Uncaptured};
use super::{scan, trees};
use crate::workspace::Workspace;

/// What kind of file an entry is, as git's tree modes say it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    /// A regular file.
    File,
    /// A regular file with the executable bit.
    Executable,
    /// A symbolic link; the blob is its target.
    Link,
}

impl FileKind {
    fn entry_kind(self) -> EntryKind {
        match self {
            FileKind::File => EntryKind::Blob,
            FileKind::Executable => EntryKind::BlobExecutable,
            FileKind::Link => EntryKind::Link,
        }
    }

    pub(super) fn of_entry(kind: EntryKind) -> Option<FileKind> {
        match kind {
            EntryKind::Blob => Some(FileKind::File),
            EntryKind::BlobExecutable => Some(FileKind::Executable),
            EntryKind::Link => Some(FileKind::Link),
            EntryKind::Tree | EntryKind::Commit => None,
        }
    }
}

/// One file of a checkpoint: its blob and kind.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Entry {
    /// The git blob id, hex.
    pub id: String,
    /// File, executable or symlink.
    pub kind: FileKind,
}

pub(super) struct Store {
    workspace: Workspace,
    dir: PathBuf,
    repo: gix::Repository,
    options: Options,
    excludes: scan::Excludes,
    cache: StatCache,
    /// Started after the first walk; `None` before, or where the kernel refused the watches.
    journal: Option<Journal>,
    /// Captures changed the cache since it was last saved.
    unsaved: bool,
}

const COMMITTER: &str = "agent-lsp";

pub(super) fn hash_blob(bytes: &[u8]) -> String {
    blob_id(bytes).map(|id| id.to_string()).unwrap_or_default()
}

fn blob_id(bytes: &[u8]) -> Option<ObjectId> {
    gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, bytes).ok()
}

impl Store {
    pub(super) fn open(workspace: &Path, dir: &Path, options: &Options) -> anyhow::Result<Store> {
        let git = dir.join("git");
        scan::private_dir(dir)
            .with_context(|| format!("cannot create the checkpoint store {}", dir.display()))?;
        let repo = if git.join("HEAD").exists() {
            gix::open_opts(&git, gix::open::Options::isolated())
        } else {
            gix::init_bare(&git)
        }
        .map_err(|error| anyhow::anyhow!("{error}"))
        .with_context(|| format!("cannot open the checkpoint store {}", git.display()))?;
        let mut store = Store {
            workspace: Workspace::new(workspace)?,
            dir: dir.to_owned(),
            repo,
            options: options.clone(),
            excludes: scan::Excludes::new(workspace, &options.exclude)?,
            cache: StatCache::default(),
            journal: None,
            unsaved: false,
        };
        store.cache = StatCache::load(&store.cache_path(), |tree| store.repo.has_object(tree))
            .unwrap_or_else(|error| {
                tracing::warn!("checkpoints: starting without a stat cache: {error:#}");
                StatCache::default()
            });
        Ok(store)
    }

    pub(super) fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    pub(super) fn capture(
        &mut self,
        session: &str,
        previous: Option<&str>,
        buffers: &[(String, String)],
    ) -> anyhow::Result<Checkpoint> {
        let _lock = scan::lock(&self.dir.join("capture.lock"))?;
        let (files, delta, how) = self.update()?;
        let uncaptured = self
            .cache
            .uncaptured
            .iter()
            .map(|(path, bytes)| Uncaptured {
                path: path.clone(),
                bytes: *bytes,
            })
            .collect();
        let buffers = self.buffers_tree(buffers)?;
        let commit = self.commit(session, previous, files, buffers)?;
        // A session's first checkpoint changes every file, which the cache lists already.
        let changed = match previous {
            Some(previous) => self.changes(previous, &commit.to_string())?,
            None => {
                let mut all: Vec<String> = self.cache.entries.keys().cloned().collect();
                all.sort();
                all
            }
        };
        Ok(Checkpoint {
            id: commit.to_string(),
            changed,
            uncaptured,
            scan: how,
            read: delta.read,
        })
    }

    /// Bring the stat cache up to date without a commit ([`super::Snapshots::warm`]).
    pub(super) fn warm(&mut self) -> anyhow::Result<()> {
        let _lock = scan::lock(&self.dir.join("capture.lock"))?;
        self.update().map(drop)
    }

    /// Bring the stat cache and its tree up to date with the workspace: the files tree, what
    /// changed, and how it was found (`walk` or `journal`). The caller holds the lock file.
    fn update(&mut self) -> anyhow::Result<(ObjectId, Delta, &'static str)> {
        let taken = gix::index::entry::stat::Time::try_from(std::time::SystemTime::now())?;
        let root = self.workspace.root().to_owned();
        let (scope, walked, how) = self.scan(&root)?;
        let base = self.cache.tree;
        let (cache, repo, max) = (&mut self.cache, &self.repo, self.options.max_file_bytes);
        let delta = cache.reconcile(&scope, walked.seen, max, |path, kind| {
            Ok(match scan::read(&root, path, kind)? {
                None => Read::Gone,
                Some(bytes) if bytes.len() as u64 > max => Read::TooBig(bytes.len() as u64),
                Some(bytes) => Read::Blob(write_blob(repo, &bytes)?),
            })
        })?;
        if scope.full {
            cache.taken = Some(taken);
        }
        let files = edit_tree(repo, base, &delta)?;
        cache.tree = Some(files);
        self.unsaved |= delta.read > 0;
        Ok((files, delta, how))
    }

    /// What to look at: the folders the journal names, or the whole workspace (the first
    /// capture of the process, and whenever the journal cannot vouch for what it missed).
    fn scan(&mut self, root: &Path) -> anyhow::Result<(Scope, scan::Walked, &'static str)> {
        if let Some(journal) = &self.journal
            && let Taken::Paths(paths) = journal.take(root)
        {
            let mut scope = Scope::default();
            for path in &paths {
                let parent = path.rfind('/').map_or("", |slash| &path[..slash]);
                scope.folders.insert(parent.to_owned());
                scope.subtrees.insert(path.clone());
            }
            let mut walked = scan::Walked::default();
            for folder in &scope.folders {
                walked.extend(scan::walk(
                    root,
                    &self.excludes,
                    &root.join(folder),
                    Some(1),
                )?);
            }
            // A folder that appeared (or moved in) is walked whole, when its parent admits it;
            // the ones the folders' listings show are the admitted ones.
            let admitted: std::collections::BTreeSet<PathBuf> =
                walked.folders.iter().cloned().collect();
            for tree in &scope.subtrees {
                let full = root.join(tree);
                if admitted.contains(&full) && !scope.folders.contains(tree) {
                    walked.extend(scan::walk(root, &self.excludes, &full, None)?);
                }
            }
            if let Err(error) = journal.watch(walked.folders.iter().cloned()) {
                self.lose_journal(&error);
            }
            return Ok((scope, walked, "journal"));
        }
        let walked = scan::walk(root, &self.excludes, root, None)?;
        let watched = match &self.journal {
            Some(journal) => journal.watch(walked.folders.iter().cloned()),
            None => Journal::start(&walked.folders, &self.dir).map(|journal| {
                self.journal = Some(journal);
            }),
        };
        if let Err(error) = watched {
            self.lose_journal(&error);
        }
        let scope = Scope {
            full: true,
            ..Scope::default()
        };
        Ok((scope, walked, "walk"))
    }

    /// A folder could not be watched (the kernel's watch limit, most often): the journal
    /// would miss what changes there, so every capture walks from now on.
    fn lose_journal(&mut self, error: &anyhow::Error) {
        tracing::warn!(
            "checkpoints: no file watcher ({error:#}); every capture walks the workspace"
        );
        self.journal = None;
    }

    /// Save the stat cache when captures changed it, so the next process starts warm.
    pub(super) fn save(&mut self) -> anyhow::Result<()> {
        if self.unsaved {
            self.cache.save(&self.cache_path())?;
            self.unsaved = false;
        }
        Ok(())
    }

    /// The tree of the buffers whose text differs from what the disk holds, or `None`.
    fn buffers_tree(&self, buffers: &[(String, String)]) -> anyhow::Result<Option<ObjectId>> {
        let disk = &self.cache.entries;
        let mut editor = None;
        for (path, text) in buffers {
            let id = blob_id(text.as_bytes());
            if disk
                .get(path)
                .is_some_and(|cached| Some(cached.id) == id && cached.kind != FileKind::Link)
            {
                continue;
            }
            let blob = write_blob(&self.repo, text.as_bytes())?;
            if editor.is_none() {
                editor = Some(
                    self.repo
                        .edit_tree(ObjectId::empty_tree(gix::hash::Kind::Sha1))
                        .map_err(|error| anyhow::anyhow!("{error}"))?,
                );
            }
            let kind = disk.get(path).map_or(FileKind::File, |cached| cached.kind);
            editor
                .as_mut()
                .expect("made above")
                .upsert(path.as_str(), kind.entry_kind(), blob)
                .map_err(|error| anyhow::anyhow!("cannot put buffer {path} in a tree: {error}"))?;
        }
        editor
            .map(|mut editor| {
                Ok(editor
                    .write()
                    .map_err(|error| anyhow::anyhow!("cannot write the buffers' tree: {error}"))?
                    .detach())
            })
            .transpose()
    }

    /// A commit of a root tree holding `files` (and `buffers`), after `previous`, under the
    /// session's ref.
    fn commit(
        &self,
        session: &str,
        previous: Option<&str>,
        files: ObjectId,
        buffers: Option<ObjectId>,
    ) -> anyhow::Result<ObjectId> {
        let mut root = self
            .repo
            .edit_tree(ObjectId::empty_tree(gix::hash::Kind::Sha1))
            .map_err(|error| anyhow::anyhow!("{error}"))?;
        root.upsert("files", EntryKind::Tree, files)
            .map_err(|error| anyhow::anyhow!("{error}"))?;
        if let Some(buffers) = buffers {
            root.upsert("buffers", EntryKind::Tree, buffers)
                .map_err(|error| anyhow::anyhow!("{error}"))?;
        }
        let tree = root
            .write()
            .map_err(|error| anyhow::anyhow!("cannot write the checkpoint's tree: {error}"))?
            .detach();
        let signature = gix::actor::Signature {
            name: COMMITTER.into(),
            email: COMMITTER.into(),
            time: gix::date::Time::new(chrono::Utc::now().timestamp(), 0),
        };
        let parents = previous
            .and_then(|previous| ObjectId::from_hex(previous.as_bytes()).ok())
            .filter(|previous| self.repo.has_object(previous))
            .into_iter()
            .collect();
        let commit = gix::objs::Commit {
            tree,
            parents,
            author: signature.clone(),
            committer: signature,
            encoding: None,
            message: format!("checkpoint of session {session}\n").into(),
            extra_headers: Vec::new(),
        };
        let id = self
            .repo
            .write_object(&commit)
            .map_err(|error| anyhow::anyhow!("cannot write the checkpoint: {error}"))?
            .detach();
        let name = format!("refs/agent-lsp/sessions/{}", scan::ref_safe(session));
        self.repo
            .reference(
                name.as_str(),
                id,
                gix::refs::transaction::PreviousValue::Any,
                "checkpoint",
            )
            .map_err(|error| anyhow::anyhow!("cannot point {name} at the checkpoint: {error}"))?;
        Ok(id)
    }

    pub(super) fn files_of(&self, id: &str) -> anyhow::Result<Files> {
        trees::files_of(&self.repo, id)
    }

    pub(super) fn changes(&self, from: &str, to: &str) -> anyhow::Result<Vec<String>> {
        trees::changes(&self.repo, from, to)
    }

    pub(super) fn blob(&self, id: &str) -> anyhow::Result<Vec<u8>> {
        trees::blob(&self.repo, id)
    }

    fn cache_path(&self) -> PathBuf {
        self.dir.join("stat-index")
    }
}

fn write_blob(repo: &gix::Repository, bytes: &[u8]) -> anyhow::Result<ObjectId> {
    Ok(repo
        .write_blob(bytes)
        .map_err(|error| anyhow::anyhow!("cannot write a blob: {error}"))?
        .detach())
}

/// `base` (the cache's last tree) edited by `delta`: only the trees on the changed paths are
/// written.
fn edit_tree(
    repo: &gix::Repository,
    base: Option<ObjectId>,
    delta: &Delta,
) -> anyhow::Result<ObjectId> {
    let base = base.unwrap_or_else(|| ObjectId::empty_tree(gix::hash::Kind::Sha1));
    if delta.upserts.is_empty() && delta.removals.is_empty() {
        return Ok(base);
    }
    let mut editor = repo
        .edit_tree(base)
        .map_err(|error| anyhow::anyhow!("cannot edit the tree {base}: {error}"))?;
    for (path, id, kind) in &delta.upserts {
        editor
            .upsert(path.as_str(), kind.entry_kind(), *id)
            .map_err(|error| anyhow::anyhow!("cannot put {path} in the tree: {error}"))?;
    }
    for path in &delta.removals {
        editor
            .remove(path.as_str())
            .map_err(|error| anyhow::anyhow!("cannot take {path} out of the tree: {error}"))?;
    }
    Ok(editor
        .write()
        .map_err(|error| anyhow::anyhow!("cannot write the tree: {error}"))?
        .detach())
}
