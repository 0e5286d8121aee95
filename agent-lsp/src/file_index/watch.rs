//! A file index that stays current by itself: the first walk in the background, then a
//! `notify` watcher, and the editor's `workspace/didChangeWatchedFiles` through the same door.
//!
//! Both sources end in [`FileIndex::apply`], which looks at the disk for each changed path, so
//! the two may overlap, repeat or reorder each other without harm. The server calls
//! [`LiveIndex::apply`] for the editor's notifications and [`LiveIndex::boost_recent`] /
//! [`LiveIndex::set_open`] as documents change and open; the watcher does not boost anything,
//! since a file written by a build or a checkout is not one the programmer is working on.
//!
//! Each indexed directory gets its own non-recursive watch, rather than one recursive watch on
//! the root: a recursive inotify watch would also cover ignored trees (`node_modules/`,
//! `target/`), which are often most of a monorepo's directories and can exhaust the kernel's
//! watch limit. New directories are watched as the index admits them. If the kernel's queue
//! overflows, the index is rebuilt once: events were lost, so nothing short of a walk is right.
//!
//! Known gap: a change made in a directory after the first walk listed it and before its
//! watch is added is missed (as in every watcher-backed index); the next event for that path,
//! an editor notification, or a rebuild repairs it.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock, RwLockReadGuard, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use notify::event::{ModifyKind, RenameMode};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};

use super::changes::{ApplyOutcome, ChangeKind, DirChange, FileChange};
use super::config::FilesConfig;
use super::rank::Candidate;
use super::store::{FileIndex, IndexStatus};
use crate::workspace::{PathError, Workspace};

/// Events taken from the queue in one batch at most, so that queries get the lock between
/// batches during a long burst.
const MAX_BATCH: usize = 4096;

/// A [`FileIndex`] shared between the server's loop, the watcher thread and queries.
pub struct LiveIndex {
    shared: Arc<Shared>,
    control: Option<mpsc::Sender<Message>>,
    worker: Option<JoinHandle<()>>,
}

struct Shared {
    index: RwLock<FileIndex>,
    /// The first walk has not finished; changes are queued for after it.
    indexing: AtomicBool,
    /// Set on drop: stops the first walk and the worker.
    cancel: AtomicBool,
    watcher: Mutex<Option<RecommendedWatcher>>,
    /// Directories the kernel refused to watch (its watch limit); reported once in the log.
    watch_failures: AtomicUsize,
    /// Bumped after every change to the index, with `changed` notified, for [`LiveIndex::wait_until`].
    generation: Mutex<u64>,
    changed: Condvar,
}

enum Message {
    Event(notify::Result<notify::Event>),
    Changes(Vec<FileChange>),
    Stop,
}

impl LiveIndex {
    /// Start indexing `workspace` in the background; with `watch`, a file watcher keeps the
    /// index current. Queries answer from what is indexed so far until the walk is done (the
    /// status says `indexing`).
    pub fn start(
        workspace: &Workspace,
        config: FilesConfig,
        watch: bool,
    ) -> anyhow::Result<LiveIndex> {
        // Checks the configuration (exclude globs) before anything runs.
        let empty = FileIndex::empty(workspace, config.clone())?;
        let (sender, receiver) = mpsc::channel();
        let watcher = if watch {
            let events = sender.clone();
            let mut watcher = notify::recommended_watcher(move |event| {
                let _ = events.send(Message::Event(event));
            })?;
            // The root is watched before the walk, so that nothing created meanwhile at the
            // top is lost; the events wait in the queue until the walk is done.
            watcher.watch(workspace.root(), RecursiveMode::NonRecursive)?;
            Some(watcher)
        } else {
            None
        };
        let shared = Arc::new(Shared {
            index: RwLock::new(empty),
            indexing: AtomicBool::new(true),
            cancel: AtomicBool::new(false),
            watcher: Mutex::new(watcher),
            watch_failures: AtomicUsize::new(0),
            generation: Mutex::new(0),
            changed: Condvar::new(),
        });
        let worker = {
            let shared = Arc::clone(&shared);
            let workspace = workspace.clone();
            std::thread::Builder::new()
                .name("file-index".into())
                .spawn(move || run_worker(&shared, &workspace, config, &receiver))?
        };
        Ok(LiveIndex {
            shared,
            control: Some(sender),
            worker: Some(worker),
        })
    }

    /// A live index around an index built already, without a watcher: changes come only
    /// through [`LiveIndex::apply`] (an editor that sends `didChangeWatchedFiles`).
    pub fn from_index(index: FileIndex) -> LiveIndex {
        LiveIndex {
            shared: Arc::new(Shared {
                index: RwLock::new(index),
                indexing: AtomicBool::new(false),
                cancel: AtomicBool::new(false),
                watcher: Mutex::new(None),
                watch_failures: AtomicUsize::new(0),
                generation: Mutex::new(0),
                changed: Condvar::new(),
            }),
            control: None,
            worker: None,
        }
    }

    /// Apply changes the editor reported (`workspace/didChangeWatchedFiles`). While the first
    /// walk runs they are queued and applied after it.
    pub fn apply(&self, changes: &[FileChange]) -> ApplyOutcome {
        let outcome = {
            let mut index = write(&self.shared.index);
            if self.shared.indexing.load(Ordering::Acquire) {
                if let Some(control) = &self.control {
                    let _ = control.send(Message::Changes(changes.to_vec()));
                }
                return ApplyOutcome::default();
            }
            self.shared.apply(&mut index, changes)
        };
        self.shared.bump();
        outcome
    }

    /// Ranked candidates; see [`FileIndex::query`].
    pub fn query(&self, query: &str, limit: usize) -> Result<Vec<Candidate>, PathError> {
        self.read().query(query, limit)
    }

    /// The index's status, with whether a walk is running in the background now.
    pub fn status(&self) -> IndexStatus {
        let mut status = self.read().status();
        status.indexing = self.shared.indexing.load(Ordering::Acquire);
        status
    }

    /// See [`FileIndex::boost_recent`].
    pub fn boost_recent(&self, path: impl AsRef<Path>) {
        write(&self.shared.index).boost_recent(path);
    }

    /// See [`FileIndex::set_open`].
    pub fn set_open<P: AsRef<Path>>(&self, paths: impl IntoIterator<Item = P>) {
        write(&self.shared.index).set_open(paths);
    }

    /// The index, for reading. Hold the guard briefly: the watcher waits for it.
    pub fn read(&self) -> RwLockReadGuard<'_, FileIndex> {
        self.shared
            .index
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Wait until `condition` holds for the index, at most `timeout`; whether it held. Wakes
    /// on every change rather than polling.
    pub fn wait_until(
        &self,
        timeout: Duration,
        mut condition: impl FnMut(&FileIndex) -> bool,
    ) -> bool {
        let deadline = Instant::now() + timeout;
        let mut generation = lock(&self.shared.generation);
        loop {
            if !self.shared.indexing.load(Ordering::Acquire) && condition(&self.read()) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            generation = self
                .shared
                .changed
                .wait_timeout(generation, deadline - now)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
    }

    /// Wait until the first walk is done, at most `timeout`; whether it is.
    pub fn wait_ready(&self, timeout: Duration) -> bool {
        self.wait_until(timeout, |_| true)
    }
}

impl Drop for LiveIndex {
    fn drop(&mut self) {
        self.shared.cancel.store(true, Ordering::Release);
        // Dropping the watcher stops its events (and drops its end of the queue).
        drop(lock(&self.shared.watcher).take());
        if let Some(control) = self.control.take() {
            let _ = control.send(Message::Stop);
        }
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

impl Shared {
    fn bump(&self) {
        *lock(&self.generation) += 1;
        self.changed.notify_all();
    }

    /// Apply `changes` (the caller holds the index's write lock), watching each directory
    /// the index gains before it is read, and unwatching each it loses, in order.
    fn apply(&self, index: &mut FileIndex, changes: &[FileChange]) -> ApplyOutcome {
        let mut watcher = lock(&self.watcher);
        index.apply_observed(changes, &mut |change| {
            let Some(watcher) = watcher.as_mut() else {
                return;
            };
            match change {
                DirChange::Added(dir) => self.watch(watcher, dir),
                // The kernel drops the watch of a deleted directory itself; this covers
                // renames, where the watch would follow the inode to its new name and report
                // events under the old one. It comes before the new name is watched.
                DirChange::Removed(dir) => {
                    let _ = watcher.unwatch(dir);
                }
            }
        })
    }

    fn watch(&self, watcher: &mut RecommendedWatcher, dir: &Path) {
        if let Err(error) = watcher.watch(dir, RecursiveMode::NonRecursive) {
            let failures = self.watch_failures.fetch_add(1, Ordering::Relaxed);
            match error.kind {
                notify::ErrorKind::MaxFilesWatch => {
                    if failures == 0 {
                        tracing::warn!(
                            "file index: the kernel's limit on watches is reached; changes in some directories are only seen through the editor (raise fs.inotify.max_user_watches)"
                        );
                    }
                }
                _ => tracing::debug!(%error, dir = %dir.display(), "file index: cannot watch"),
            }
        }
    }
}

/// The worker thread: the first walk, then changes until told to stop.
fn run_worker(
    shared: &Shared,
    workspace: &Workspace,
    config: FilesConfig,
    receiver: &mpsc::Receiver<Message>,
) {
    match FileIndex::build_cancellable(workspace, config, &shared.cancel) {
        Ok(mut built) => {
            let dirs = built.watched_dirs();
            {
                let mut index = write(&shared.index);
                // Boosts set while the walk ran are kept.
                built.boosts = std::mem::take(&mut index.boosts);
                *index = built;
                shared.indexing.store(false, Ordering::Release);
            }
            if let Some(watcher) = lock(&shared.watcher).as_mut() {
                // The root is watched already.
                for dir in &dirs[1..] {
                    shared.watch(watcher, dir);
                }
            }
            shared.bump();
        }
        Err(error) => {
            if !shared.cancel.load(Ordering::Acquire) {
                tracing::warn!(%error, "file index: the first walk failed");
            }
            shared.indexing.store(false, Ordering::Release);
            shared.bump();
            return;
        }
    }

    while let Ok(first) = receiver.recv() {
        let mut changes = Vec::new();
        let mut rescan = false;
        let mut stop = false;
        let mut next = Some(first);
        let mut taken = 0;
        while let Some(message) = next.take() {
            taken += 1;
            match message {
                Message::Stop => stop = true,
                Message::Changes(more) => changes.extend(more),
                Message::Event(Ok(event)) => {
                    rescan |= event.need_rescan();
                    changes_of(event, &mut changes);
                }
                Message::Event(Err(error)) => {
                    tracing::debug!(%error, "file index: watcher error");
                }
            }
            if !stop && taken < MAX_BATCH {
                next = receiver.try_recv().ok();
            }
        }
        if stop || shared.cancel.load(Ordering::Acquire) {
            return;
        }
        if rescan {
            rebuild(shared);
        } else if !changes.is_empty() {
            shared.apply(&mut write(&shared.index), &changes);
        }
        shared.bump();
    }
}

/// After lost events: walk again and watch what is there now.
fn rebuild(shared: &Shared) {
    tracing::info!("file index: the watcher lost events; walking the workspace again");
    let mut index = write(&shared.index);
    let old = index.watched_dirs();
    if let Err(error) = index.rebuild() {
        tracing::warn!(%error, "file index: rebuild failed");
    }
    if let Some(watcher) = lock(&shared.watcher).as_mut() {
        for dir in &old {
            let _ = watcher.unwatch(dir);
        }
        for dir in index.watched_dirs() {
            shared.watch(watcher, &dir);
        }
    }
}

/// What a watcher event says changed. Kinds are hints: [`FileIndex::apply`] looks at the disk.
fn changes_of(event: notify::Event, changes: &mut Vec<FileChange>) {
    let kind = match event.kind {
        EventKind::Access(_) => return,
        EventKind::Create(_) | EventKind::Modify(ModifyKind::Name(RenameMode::To)) => {
            ChangeKind::Created
        }
        EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(RenameMode::From)) => {
            ChangeKind::Deleted
        }
        EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => {
            let mut paths = event.paths.into_iter();
            if let Some(from) = paths.next() {
                changes.push(FileChange::new(from, ChangeKind::Deleted));
            }
            changes.extend(paths.map(|to| FileChange::new(to, ChangeKind::Created)));
            return;
        }
        EventKind::Modify(_) | EventKind::Any | EventKind::Other => ChangeKind::Changed,
    };
    changes.extend(
        event
            .paths
            .into_iter()
            .map(|path| FileChange::new(path, kind)),
    );
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write(lock: &RwLock<FileIndex>) -> std::sync::RwLockWriteGuard<'_, FileIndex> {
    lock.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests;
