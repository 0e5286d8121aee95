//! The stat cache: what each file held at the last capture and its `lstat` then, so a capture
//! reads only the files whose stat changed. It mirrors the store's latest tree exactly, and
//! is brought up to date over a scope: the whole workspace after a walk, or the folders the
//! journal named.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use anyhow::Context;
use gix::ObjectId;
use gix::bstr::ByteSlice;

use super::FileKind;
use super::scan::Seen;

/// Every field of the stat counts, nanoseconds included: the cache is this machine's own.
const STAT_OPTIONS: gix::index::entry::stat::Options = gix::index::entry::stat::Options {
    trust_ctime: true,
    check_stat: true,
    use_nsec: true,
    use_stdev: true,
};

/// What the cache knows of one path: its `lstat` when it was last read, and what it held.
#[derive(Clone, Debug)]
pub(super) struct Cached {
    pub(super) stat: gix::index::entry::Stat,
    pub(super) id: ObjectId,
    pub(super) kind: FileKind,
}

/// The files of the tree `tree` with the stats they had when it was captured. Every version
/// that was once written is self-consistent (its entries are exactly its tree's), so any of
/// them is safe to start from: a stale stat only makes a file be read again.
#[derive(Default)]
pub(super) struct StatCache {
    pub(super) tree: Option<ObjectId>,
    /// When the stats of the last whole walk were taken: a file modified in that second or
    /// later may have changed again without its stat showing it, so a walk reads it again
    /// (git's "racy" entries).
    pub(super) taken: Option<gix::index::entry::stat::Time>,
    pub(super) entries: HashMap<String, Cached>,
    /// Files over the size cap, with their sizes: in no tree, but named by every checkpoint.
    pub(super) uncaptured: BTreeMap<String, u64>,
}

/// Which paths a capture looked at: all of them, or the files directly in some folders and
/// everything under others.
#[derive(Default)]
pub(super) struct Scope {
    pub(super) full: bool,
    pub(super) folders: BTreeSet<String>,
    pub(super) subtrees: BTreeSet<String>,
}

impl Scope {
    fn covers(&self, path: &str) -> bool {
        if self.full {
            return true;
        }
        let parent = path.rfind('/').map_or("", |slash| &path[..slash]);
        self.folders.contains(parent)
            || self.subtrees.iter().any(|tree| {
                path.strip_prefix(tree.as_str())
                    .is_some_and(|rest| rest.starts_with('/'))
            })
    }
}

/// What reading a file gave.
pub(super) enum Read {
    /// Its blob, written to the store.
    Blob(ObjectId),
    /// Over the cap: its size.
    TooBig(u64),
    /// Gone since the walk.
    Gone,
}

/// What changed in the cache: the tree edits a capture makes.
#[derive(Default)]
pub(super) struct Delta {
    pub(super) upserts: Vec<(String, ObjectId, FileKind)>,
    pub(super) removals: Vec<String>,
    /// Files read because the cache could not vouch for them.
    pub(super) read: usize,
}

impl StatCache {
    /// Bring the cache up to date over `scope` with what a walk of it `seen`, reading (with
    /// `read`) what the cache cannot vouch for; the tree edits that makes.
    pub(super) fn reconcile(
        &mut self,
        scope: &Scope,
        seen: Vec<Seen>,
        max_bytes: u64,
        mut read: impl FnMut(&str, FileKind) -> anyhow::Result<Read>,
    ) -> anyhow::Result<Delta> {
        let mut delta = Delta::default();
        let mut present = BTreeSet::new();
        for Seen { path, stat, kind } in seen {
            // Trusted only when the stat matches to the nanosecond and the file was last
            // modified in a second before the one the stats were taken in.
            let trusted = self.entries.get(&path).filter(|cached| {
                cached.kind == kind
                    && cached.stat.matches(&stat, STAT_OPTIONS)
                    && self
                        .taken
                        .is_some_and(|taken| cached.stat.mtime.secs < taken.secs)
            });
            if trusted.is_some() {
                present.insert(path);
                continue;
            }
            let size = u64::from(stat.size);
            let outcome = if size > max_bytes && kind != FileKind::Link {
                Read::TooBig(size)
            } else {
                delta.read += 1;
                read(&path, kind)?
            };
            match outcome {
                Read::Blob(id) => {
                    let same = self
                        .entries
                        .get(&path)
                        .is_some_and(|old| old.id == id && old.kind == kind);
                    if !same {
                        delta.upserts.push((path.clone(), id, kind));
                    }
                    self.uncaptured.remove(&path);
                    self.entries.insert(path.clone(), Cached { stat, id, kind });
                    present.insert(path);
                }
                Read::TooBig(bytes) => {
                    if self.entries.remove(&path).is_some() {
                        delta.removals.push(path.clone());
                    }
                    self.uncaptured.insert(path.clone(), bytes);
                    present.insert(path);
                }
                Read::Gone => {}
            }
        }
        let gone: Vec<String> = self
            .entries
            .keys()
            .filter(|path| scope.covers(path) && !present.contains(*path))
            .cloned()
            .collect();
        for path in gone {
            self.entries.remove(&path);
            delta.removals.push(path);
        }
        self.uncaptured
            .retain(|path, _| !scope.covers(path) || present.contains(path));
        Ok(delta)
    }

    /// Written as a first line with the tree and the time of the stats, then a git index of
    /// each entry's stat, blob and mode; to a temporary file renamed into place, so a reader
    /// sees a whole version or the one before.
    pub(super) fn save(&self, path: &Path) -> anyhow::Result<()> {
        use gix::index::entry::{Flags, Mode};
        let Some(tree) = self.tree else {
            return Ok(());
        };
        let taken = self.taken.unwrap_or_default();
        let mut state = gix::index::State::new(gix::hash::Kind::Sha1);
        for (name, cached) in &self.entries {
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
                name.as_bytes().as_bstr(),
            );
        }
        state.sort_entries();
        let mut bytes = format!("{tree} {} {}\n", taken.secs, taken.nsecs).into_bytes();
        state
            .write_to(&mut bytes, Default::default())
            .map_err(|error| anyhow::anyhow!("{error}"))?;
        // `State::write_to` leaves the trailing checksum to the file writer; an all-zero one is
        // git's "not computed" (index.skipHash), which the reader accepts.
        bytes.extend_from_slice(&[0; 20]);
        let temporary = path.with_extension(format!("{}.tmp", std::process::id()));
        std::fs::write(&temporary, bytes)?;
        std::fs::rename(&temporary, path)?;
        Ok(())
    }

    /// The cache saved at `path`, if its tree is in the store (`has`).
    pub(super) fn load(path: &Path, has: impl Fn(&ObjectId) -> bool) -> anyhow::Result<StatCache> {
        let bytes = match std::fs::read(path) {
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
        anyhow::ensure!(has(&tree), "its tree {tree} is not in the store");
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
            entries.insert(
                entry.path(&state).to_str_lossy().into_owned(),
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
            // Not saved: the next walk finds them again.
            uncaptured: BTreeMap::new(),
        })
    }
}
