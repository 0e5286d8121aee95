//! The object database under `checkpoints/git` and the capture itself: which files changed
//! since the stat cache, their blobs, the edited tree and the commit.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::Context;
use gix::ObjectId;
use gix::bstr::ByteSlice;
use gix::objs::tree::EntryKind;
use serde::{Deserialize, Serialize};

use super::scan::{self, Seen};
use super::{Checkpoint, Files, Options, Uncaptured};
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

    fn of_entry(kind: EntryKind) -> Option<FileKind> {
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

/// What the stat cache knows of one path: its `lstat` when it was last read, and what it held.
#[derive(Clone, Debug)]
struct Cached {
    stat: gix::index::entry::Stat,
    id: ObjectId,
    kind: FileKind,
}

/// The files of the tree `tree` with the stats they had when it was captured. Every version
/// that was once written is self-consistent (its entries are exactly its tree's), so any of
/// them is safe to start from: a stale stat only makes a file be read again.
#[derive(Default)]
struct StatCache {
    tree: Option<ObjectId>,
    /// When the stats were taken: a file modified at or after it may have changed again within
    /// the same timestamp, so it is read again (git's "racy" entries).
    taken: Option<gix::index::entry::stat::Time>,
    entries: HashMap<String, Cached>,
}

pub(super) struct Store {
    workspace: Workspace,
    dir: PathBuf,
    repo: gix::Repository,
    options: Options,
    excludes: scan::Excludes,
    cache: StatCache,
}

const COMMITTER: &str = "agent-lsp";

/// Every field of the stat counts, nanoseconds included: the cache is this machine's own.
const STAT_OPTIONS: gix::index::entry::stat::Options = gix::index::entry::stat::Options {
    trust_ctime: true,
    check_stat: true,
    use_nsec: true,
    use_stdev: true,
};

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
        };
        store.cache = store.load_cache().unwrap_or_else(|error| {
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
        let taken = gix::index::entry::stat::Time::try_from(std::time::SystemTime::now())?;
        let walked = scan::walk(self.workspace.root(), &self.excludes)?;
        let mut entries = HashMap::with_capacity(walked.seen.len());
        let mut uncaptured = Vec::new();
        let mut read = 0usize;
        for Seen { path, stat, kind } in walked.seen {
            // Trusted only when the stat matches to the nanosecond and the file was last
            // modified in a second before the one the stats were taken in: a change within
            // that second may not show in the stat (git's racy entries).
            let cached = self.cache.entries.get(&path).filter(|cached| {
                cached.kind == kind
                    && cached.stat.matches(&stat, STAT_OPTIONS)
                    && self
                        .cache
                        .taken
                        .is_some_and(|taken| cached.stat.mtime.secs < taken.secs)
            });
            let id = match cached {
                Some(cached) => cached.id,
                None if u64::from(stat.size) > self.options.max_file_bytes
                    && kind != FileKind::Link =>
                {
                    uncaptured.push(Uncaptured {
                        path,
                        bytes: u64::from(stat.size),
                    });
                    continue;
                }
                None => {
                    read += 1;
                    let Some(bytes) = scan::read(self.workspace.root(), &path, kind)? else {
                        continue;
                    };
                    if bytes.len() as u64 > self.options.max_file_bytes {
                        uncaptured.push(Uncaptured {
                            path,
                            bytes: bytes.len() as u64,
                        });
                        continue;
                    }
                    self.write_blob(&bytes)?
                }
            };
            entries.insert(path, Cached { stat, id, kind });
        }
        uncaptured.sort_by(|a, b| a.path.cmp(&b.path));

        let files = self.edit_tree(&entries)?;
        let buffers = self.buffers_tree(&entries, buffers)?;
        let commit = self.commit(session, previous, files, buffers)?;
        self.cache = StatCache {
            tree: Some(files),
            taken: Some(taken),
            entries,
        };
        if read > 0
            && let Err(error) = self.save_cache()
        {
            tracing::warn!("checkpoints: the stat cache was not saved: {error:#}");
        }
        let changed = match previous {
            Some(previous) => self.changes(previous, &commit.to_string())?,
            None => self
                .files_of(&commit.to_string())?
                .disk
                .into_keys()
                .collect(),
        };
        Ok(Checkpoint {
            id: commit.to_string(),
            tree: files.to_string(),
            buffers: buffers.map(|id| id.to_string()),
            changed,
            uncaptured,
            scan: "walk",
            read,
        })
    }

    fn write_blob(&self, bytes: &[u8]) -> anyhow::Result<ObjectId> {
        Ok(self
            .repo
            .write_blob(bytes)
            .map_err(|error| anyhow::anyhow!("cannot write a blob: {error}"))?
            .detach())
    }

    /// The cache's tree edited to hold exactly `entries`: only the paths that differ are
    /// touched, so only the trees on their paths are written.
    fn edit_tree(&self, entries: &HashMap<String, Cached>) -> anyhow::Result<ObjectId> {
        let base = self
            .cache
            .tree
            .unwrap_or_else(|| ObjectId::empty_tree(gix::hash::Kind::Sha1));
        let mut editor = self
            .repo
            .edit_tree(base)
            .map_err(|error| anyhow::anyhow!("cannot edit the tree {base}: {error}"))?;
        let mut edits = 0;
        for (path, cached) in entries {
            let same = self
                .cache
                .entries
                .get(path)
                .is_some_and(|old| old.id == cached.id && old.kind == cached.kind);
            if !same || self.cache.tree.is_none() {
                editor
                    .upsert(path.as_str(), cached.kind.entry_kind(), cached.id)
                    .map_err(|error| anyhow::anyhow!("cannot put {path} in the tree: {error}"))?;
                edits += 1;
            }
        }
        for path in self.cache.entries.keys() {
            if !entries.contains_key(path) {
                editor.remove(path.as_str()).map_err(|error| {
                    anyhow::anyhow!("cannot take {path} out of the tree: {error}")
                })?;
                edits += 1;
            }
        }
        if edits == 0 {
            return Ok(base);
        }
        Ok(editor
            .write()
            .map_err(|error| anyhow::anyhow!("cannot write the tree: {error}"))?
            .detach())
    }

    /// The tree of the buffers whose text differs from what the disk holds, or `None`.
    fn buffers_tree(
        &self,
        disk: &HashMap<String, Cached>,
        buffers: &[(String, String)],
    ) -> anyhow::Result<Option<ObjectId>> {
        let mut editor = None;
        for (path, text) in buffers {
            let id = blob_id(text.as_bytes());
            if disk
                .get(path)
                .is_some_and(|cached| Some(cached.id) == id && cached.kind != FileKind::Link)
            {
                continue;
            }
            let blob = self.write_blob(text.as_bytes())?;
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

    /// The `files` and `buffers` trees of checkpoint `id`.
    fn trees_of(&self, id: &str) -> anyhow::Result<(ObjectId, Option<ObjectId>)> {
        let id = ObjectId::from_hex(id.as_bytes())
            .with_context(|| format!("`{id}` is no checkpoint id"))?;
        let commit = self
            .repo
            .find_commit(id)
            .map_err(|error| anyhow::anyhow!("checkpoint {id} is not in the store: {error}"))?;
        let root = commit
            .tree_id()
            .map_err(|error| anyhow::anyhow!("checkpoint {id} is damaged: {error}"))?;
        let root = self.find_tree_entries(root.detach())?;
        let files = root
            .iter()
            .find(|(name, ..)| name == "files")
            .map(|(_, id, _)| *id)
            .with_context(|| format!("checkpoint {id} has no files"))?;
        let buffers = root
            .iter()
            .find(|(name, ..)| name == "buffers")
            .map(|(_, id, _)| *id);
        Ok((files, buffers))
    }

    fn find_tree_entries(
        &self,
        id: ObjectId,
    ) -> anyhow::Result<Vec<(String, ObjectId, EntryKind)>> {
        let tree = self
            .repo
            .find_tree(id)
            .map_err(|error| anyhow::anyhow!("tree {id} is not in the store: {error}"))?;
        let decoded = tree
            .decode()
            .map_err(|error| anyhow::anyhow!("tree {id} is damaged: {error}"))?;
        Ok(decoded
            .entries
            .iter()
            .map(|entry| {
                (
                    entry.filename.to_str_lossy().into_owned(),
                    entry.oid.to_owned(),
                    entry.mode.kind(),
                )
            })
            .collect())
    }

    /// Every file under tree `id`, with `prefix` before its path.
    fn flatten(
        &self,
        id: ObjectId,
        prefix: &str,
        out: &mut BTreeMap<String, Entry>,
    ) -> anyhow::Result<()> {
        for (name, oid, kind) in self.find_tree_entries(id)? {
            let path = format!("{prefix}{name}");
            match FileKind::of_entry(kind) {
                Some(kind) => {
                    out.insert(
                        path,
                        Entry {
                            id: oid.to_string(),
                            kind,
                        },
                    );
                }
                None if kind == EntryKind::Tree => self.flatten(oid, &format!("{path}/"), out)?,
                None => {}
            }
        }
        Ok(())
    }

    pub(super) fn files_of(&self, id: &str) -> anyhow::Result<Files> {
        let (files, buffers) = self.trees_of(id)?;
        let mut out = Files::default();
        self.flatten(files, "", &mut out.disk)?;
        if let Some(buffers) = buffers {
            self.flatten(buffers, "", &mut out.buffers)?;
        }
        Ok(out)
    }

    /// The paths that differ between trees `a` and `b` (either may be absent), skipping equal
    /// subtrees: a one-file change costs the trees on its path.
    fn diff(
        &self,
        a: Option<ObjectId>,
        b: Option<ObjectId>,
        prefix: &str,
        out: &mut Vec<String>,
    ) -> anyhow::Result<()> {
        if a == b {
            return Ok(());
        }
        let list =
            |id: Option<ObjectId>| -> anyhow::Result<BTreeMap<String, (ObjectId, EntryKind)>> {
                Ok(match id {
                    Some(id) => self
                        .find_tree_entries(id)?
                        .into_iter()
                        .map(|(name, oid, kind)| (name, (oid, kind)))
                        .collect(),
                    None => BTreeMap::new(),
                })
            };
        let (left, right) = (list(a)?, list(b)?);
        let names: std::collections::BTreeSet<&String> = left.keys().chain(right.keys()).collect();
        for name in names {
            let (l, r) = (left.get(name), right.get(name));
            if l == r {
                continue;
            }
            let path = format!("{prefix}{name}");
            let tree = |side: Option<&(ObjectId, EntryKind)>| {
                side.filter(|(_, kind)| *kind == EntryKind::Tree)
                    .map(|(id, _)| *id)
            };
            let (lt, rt) = (tree(l), tree(r));
            if lt.is_some() || rt.is_some() {
                self.diff(lt, rt, &format!("{path}/"), out)?;
            }
            let blob = |side: Option<&(ObjectId, EntryKind)>| {
                side.filter(|(_, kind)| *kind != EntryKind::Tree).copied()
            };
            if blob(l) != blob(r) {
                out.push(path);
            }
        }
        Ok(())
    }

    pub(super) fn changes(&self, from: &str, to: &str) -> anyhow::Result<Vec<String>> {
        let ((from_files, from_buffers), (to_files, to_buffers)) =
            (self.trees_of(from)?, self.trees_of(to)?);
        let mut candidates = Vec::new();
        self.diff(Some(from_files), Some(to_files), "", &mut candidates)?;
        self.diff(from_buffers, to_buffers, "", &mut candidates)?;
        candidates.sort();
        candidates.dedup();
        if from_buffers.is_none() && to_buffers.is_none() {
            return Ok(candidates);
        }
        // A path whose buffer hid a change on disk (or the other way) is a change only when
        // what the user saw differs.
        let (before, after) = (self.files_of(from)?, self.files_of(to)?);
        candidates.retain(|path| before.effective(path) != after.effective(path));
        Ok(candidates)
    }

    pub(super) fn blob(&self, id: &str) -> anyhow::Result<Vec<u8>> {
        let oid =
            ObjectId::from_hex(id.as_bytes()).with_context(|| format!("`{id}` is no blob id"))?;
        let blob = self.repo.find_blob(oid).map_err(|error| {
            anyhow::anyhow!("blob {id} is not in the checkpoint store: {error}")
        })?;
        Ok(blob.data.clone())
    }

    fn cache_path(&self) -> PathBuf {
        self.dir.join("stat-index")
    }

    /// The stat cache: a first line with the tree it describes and when its stats were taken,
    /// then a git index of each entry's stat, blob and mode. Written to a temporary file and
    /// renamed into place, so a reader sees a whole version or the one before.
    fn save_cache(&self) -> anyhow::Result<()> {
        use gix::index::entry::{Flags, Mode};
        let Some(tree) = self.cache.tree else {
            return Ok(());
        };
        let mut state = gix::index::State::new(gix::hash::Kind::Sha1);
        let taken = self.cache.taken.unwrap_or_default();
        for (path, cached) in &self.cache.entries {
            let mode = match cached.kind {
                FileKind::File => Mode::FILE,
                FileKind::Executable => Mode::FILE_EXECUTABLE,
                FileKind::Link => Mode::SYMLINK,
            };
            state.dangerously_push_entry(
                cached.stat,
                cached.id,
                Flags::empty(),
                mode,
                path.as_bytes().as_bstr(),
            );
        }
        state.sort_entries();
        let temporary = self
            .dir
            .join(format!("stat-index.{}.tmp", std::process::id()));
        let mut bytes = Vec::new();
        state
            .write_to(&mut bytes, Default::default())
            .map_err(|error| anyhow::anyhow!("{error}"))?;
        let mut framed = format!("{tree} {} {}\n", taken.secs, taken.nsecs).into_bytes();
        framed.extend_from_slice(&bytes);
        // `State::write_to` leaves the trailing checksum to the file writer; an all-zero one is
        // git's "not computed" (index.skipHash), which the reader accepts.
        framed.extend_from_slice(&[0; 20]);
        std::fs::write(&temporary, framed)?;
        std::fs::rename(&temporary, self.cache_path())?;
        Ok(())
    }

    fn load_cache(&self) -> anyhow::Result<StatCache> {
        let bytes = match std::fs::read(self.cache_path()) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(StatCache::default());
            }
            Err(error) => return Err(error.into()),
        };
        let newline = bytes
            .iter()
            .position(|byte| *byte == b'\n')
            .context("no first line")?;
        let first = std::str::from_utf8(&bytes[..newline])?;
        let mut fields = first.split(' ');
        let mut field = || fields.next().context("a short first line");
        let tree = ObjectId::from_hex(field()?.as_bytes())?;
        let taken = gix::index::entry::stat::Time {
            secs: field()?.parse()?,
            nsecs: field()?.parse()?,
        };
        anyhow::ensure!(
            self.repo.has_object(tree),
            "its tree {tree} is not in the store"
        );
        let (state, _) = gix::index::State::from_bytes(
            &bytes[newline + 1..],
            filetime::FileTime::zero(),
            gix::hash::Kind::Sha1,
            Default::default(),
        )
        .map_err(|error| anyhow::anyhow!("{error}"))?;
        let mut entries = HashMap::with_capacity(state.entries().len());
        for entry in state.entries() {
            let kind = match entry.mode {
                mode if mode == gix::index::entry::Mode::FILE_EXECUTABLE => FileKind::Executable,
                mode if mode == gix::index::entry::Mode::SYMLINK => FileKind::Link,
                _ => FileKind::File,
            };
            let path = entry.path(&state).to_str_lossy().into_owned();
            entries.insert(
                path,
                Cached {
                    stat: entry.stat,
                    id: entry.id,
                    kind,
                },
            );
        }
        Ok(StatCache {
            tree: Some(tree),
            taken: Some(taken),
            entries,
        })
    }
}
