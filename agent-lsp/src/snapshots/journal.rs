//! The journal: what changed in the workspace since the last capture, from a file watcher, so
//! a capture after a one-file change looks at one folder instead of walking the tree.
//!
//! Each folder the first walk admitted gets its own non-recursive watch (as the file index
//! does: a recursive one would cover ignored trees and can exhaust the kernel's watch limit),
//! and every folder a later capture finds is watched too. Every event's path is put in the
//! dirty set; the capture takes the set. Before it does, it writes a marker file in the store's
//! own folder (watched as well) and waits for that event: the kernel delivers a watch's events
//! in order, so every change a finished command made is in the set by then. A lost event
//! (the kernel's queue overflowed), a marker that does not come back, or a change to an ignore
//! file (which changes what is admitted anywhere below it) makes the capture walk instead.
//!
//! Known gap, as in every watcher: a file created in a new folder between the folder's
//! creation and its watch is seen when the capture walks that folder, but a change inside a
//! folder created deeper than one level and changed again before the capture that found it
//! can be missed until the next walk.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};

/// How long a capture waits for its marker before it walks instead.
const BARRIER: Duration = Duration::from_secs(2);

#[derive(Default)]
struct Dirty {
    paths: BTreeSet<PathBuf>,
    /// Events were lost: only a walk is right.
    lost: bool,
    /// How many marker events came.
    markers: u64,
}

/// A watcher over the workspace's admitted folders and the store's own.
pub(super) struct Journal {
    watcher: Mutex<RecommendedWatcher>,
    state: Arc<(Mutex<Dirty>, Condvar)>,
    marker: PathBuf,
}

/// What changed since the last take: paths from the workspace root.
pub(super) enum Taken {
    /// These paths (files or folders, present or gone) had events.
    Paths(BTreeSet<String>),
    /// Walk: events were lost, the barrier did not come back, or an ignore file changed.
    Walk,
}

impl Journal {
    /// Watch `folders` (absolute) and `store` (where the marker goes).
    pub(super) fn start(folders: &[PathBuf], store: &Path) -> anyhow::Result<Journal> {
        let state: Arc<(Mutex<Dirty>, Condvar)> = Arc::default();
        let marker = store.join("journal-marker");
        let watcher = {
            let state = state.clone();
            let marker = marker.clone();
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                let (lock, changed) = &*state;
                let mut dirty = lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                match event {
                    Ok(event) if event.need_rescan() => dirty.lost = true,
                    Ok(event) if matches!(event.kind, EventKind::Access(_)) => {}
                    Ok(event) => {
                        for path in event.paths {
                            if path == marker {
                                dirty.markers += 1;
                            } else {
                                dirty.paths.insert(path);
                            }
                        }
                    }
                    Err(_) => dirty.lost = true,
                }
                changed.notify_all();
            })?
        };
        let journal = Journal {
            watcher: Mutex::new(watcher),
            state,
            marker,
        };
        journal.watch(std::iter::once(store.to_owned()))?;
        journal.watch(folders.iter().cloned())?;
        Ok(journal)
    }

    /// Watch more folders (ones a capture found).
    pub(super) fn watch(&self, folders: impl IntoIterator<Item = PathBuf>) -> anyhow::Result<()> {
        let mut watcher = self
            .watcher
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for folder in folders {
            // A folder gone since it was listed needs no watch.
            if let Err(error) = watcher.watch(&folder, RecursiveMode::NonRecursive)
                && folder.is_dir()
            {
                return Err(error.into());
            }
        }
        Ok(())
    }

    /// Everything that changed under `root` since the last take, once every event of what
    /// happened before this call is in.
    pub(super) fn take(&self, root: &Path) -> Taken {
        let (lock, changed) = &*self.state;
        let seen = lock.lock().unwrap_or_else(|p| p.into_inner()).markers;
        if std::fs::write(&self.marker, seen.to_string()).is_err() {
            return Taken::Walk;
        }
        let dirty = lock.lock().unwrap_or_else(|p| p.into_inner());
        let (mut dirty, timeout) = changed
            .wait_timeout_while(dirty, BARRIER, |dirty| dirty.markers <= seen)
            .unwrap_or_else(|p| p.into_inner());
        let taken = std::mem::take(&mut *dirty);
        dirty.markers = taken.markers;
        if timeout.timed_out() || taken.lost {
            return Taken::Walk;
        }
        let mut paths = BTreeSet::new();
        for path in taken.paths {
            let Some(relative) = path.strip_prefix(root).ok().and_then(Path::to_str) else {
                continue;
            };
            if relative.is_empty() {
                continue;
            }
            if relative.split('/').any(|component| component == ".git") {
                continue;
            }
            let name = relative.rsplit('/').next().unwrap_or(relative);
            if matches!(name, ".gitignore" | ".ignore") {
                // What is admitted below an ignore file may have changed.
                return Taken::Walk;
            }
            paths.insert(relative.to_owned());
        }
        Taken::Paths(paths)
    }
}
