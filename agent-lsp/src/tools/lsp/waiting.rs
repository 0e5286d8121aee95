//! Who an `lsp_*` call is waiting for, shown while it waits.
//!
//! A cold language server takes seconds to start and index (pyright on a large package, 10–30 s
//! on a loaded machine), and a call waits for it while the turn shows only the call's name. So
//! while calls have waited longer than [`SHOW_AFTER`], the server of each waiting call's file,
//! and every other server of the bridge that is starting or reports work in progress, gets an
//! entry on the host's activity board (`language server pyright · Indexing: 12/40 (30%)`, or
//! `answering (4 s)` for a server that works on the request without reporting progress, as
//! pyright does while it analyses a package for its first answer), and every front end already
//! shows the board: `run`'s
//! stderr, the editor's `$/progress` (VS Code's progress, Neovim's progress messages and
//! statusline) and the activity views. A warm call never waits that long, so it shows nothing.
//!
//! One watcher per board follows however many calls wait at once (parallel calls, a `run_code`
//! loop, sub-agents sharing the host), so each server is shown once. It looks at the servers
//! every [`LOOK_EVERY`], which also bounds how often an entry changes, and ends the entries when
//! the last call is done: `ready`, or what the server was still doing then.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lsp_bridge::{Bridge, ServerHealth};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::activity::{Activity, Kind};

/// How long calls wait before the servers they wait for are shown.
const SHOW_AFTER: Duration = Duration::from_millis(500);
/// How often the servers are looked at while calls wait.
const LOOK_EVERY: Duration = Duration::from_millis(250);

/// The servers' side of the activity board for one tool host.
pub(crate) struct Waiting {
    board: Arc<Activity>,
    bridge: Arc<Bridge>,
    calls: Mutex<Calls>,
    /// Woken when the last waiting call is done, so the entries end at once.
    idle: Notify,
}

#[derive(Default)]
struct Calls {
    waiting: usize,
    /// The files of the waiting calls that name one, one entry per call.
    files: Vec<PathBuf>,
    /// When the calls began to wait (the first of them, since none waited).
    since: Option<Instant>,
    watching: bool,
}

impl Waiting {
    pub(crate) fn new(board: Arc<Activity>, bridge: Arc<Bridge>) -> Arc<Waiting> {
        Arc::new(Waiting {
            board,
            bridge,
            calls: Mutex::new(Calls::default()),
            idle: Notify::new(),
        })
    }

    /// Run `call` about `file` (when it names one), showing the servers it waits for while it
    /// waits.
    pub(crate) async fn around<F: Future>(
        self: &Arc<Self>,
        file: Option<PathBuf>,
        call: F,
    ) -> F::Output {
        let _waiting = Guard::enter(self, file);
        call.await
    }

    /// The (server, root) of each file a waiting call is about.
    async fn waited_for(&self) -> BTreeSet<(String, PathBuf)> {
        let files = self.calls.lock().expect("waiting calls").files.clone();
        let mut servers = BTreeSet::new();
        for file in files {
            if let Some(config) = self.bridge.config_for_async(&file).await {
                servers.insert((config.name.clone(), self.bridge.root_for(&config, &file)));
            }
        }
        servers
    }

    /// Follow the servers until no call waits any more.
    async fn watch(self: Arc<Self>) {
        let mut shown: BTreeMap<String, ServerHealth> = BTreeMap::new();
        loop {
            tokio::select! {
                () = tokio::time::sleep(LOOK_EVERY) => {}
                () = self.idle.notified() => {}
            }
            let since = {
                let mut calls = self.calls.lock().expect("waiting calls");
                if calls.waiting == 0 {
                    calls.watching = false;
                    break;
                }
                calls.since
            };
            if since.is_none_or(|since| since.elapsed() < SHOW_AFTER) {
                continue;
            }
            let waited_for = self.waited_for().await;
            let waited = since.map_or(Duration::ZERO, |since| since.elapsed());
            for health in self.bridge.health() {
                let id = format!("server:{}:{}", health.name, health.root.display());
                if !shown.contains_key(&id) {
                    let called = waited_for.contains(&(health.name.clone(), health.root.clone()));
                    if !busy(&health) && !called {
                        continue;
                    }
                    self.board
                        .start(Kind::Server, &id, &self.title(&health), None, None);
                }
                self.board.detail(&id, &detail(&health, waited));
                shown.insert(id, health);
            }
        }
        let now = self.bridge.health();
        for (id, then) in shown {
            let health = now
                .iter()
                .find(|health| health.name == then.name && health.root == then.root)
                .unwrap_or(&then);
            let outcome = if busy(health) {
                format!("still {}", detail(health, Duration::ZERO))
            } else {
                health.state.clone()
            };
            self.board.end_alone(&id, &outcome);
        }
    }

    /// The server's name, and its root when that is not one of the workspace's folders.
    fn title(&self, health: &ServerHealth) -> String {
        if self.bridge.workspace_folders().contains(&health.root) {
            health.name.clone()
        } else {
            format!("{} ({})", health.name, health.root.display())
        }
    }
}

/// Whether a call may be waiting on the server: it starts, or it says it is working.
fn busy(health: &ServerHealth) -> bool {
    health.state == "starting" || health.work.is_some()
}

/// What the server does: `starting`, its work (`Indexing: 12/40 (30%)`), or, ready and
/// reporting nothing, `answering (4 s)`, counting the seconds the calls have waited so that a
/// long wait shows it is alive.
fn detail(health: &ServerHealth, waited: Duration) -> String {
    match (&health.work, health.state.as_str()) {
        (_, "starting") => "starting".to_owned(),
        (Some(work), _) => work.clone(),
        (None, "ready") if waited.as_secs() > 0 => format!("answering ({} s)", waited.as_secs()),
        (None, "ready") => "answering".to_owned(),
        (None, state) => state.to_owned(),
    }
}

/// One waiting call; the watcher starts with the first and is told when the last is done.
struct Guard {
    waiting: Arc<Waiting>,
    file: Option<PathBuf>,
}

impl Guard {
    fn enter(waiting: &Arc<Waiting>, file: Option<PathBuf>) -> Guard {
        let mut calls = waiting.calls.lock().expect("waiting calls");
        calls.waiting += 1;
        calls.files.extend(file.clone());
        if calls.waiting == 1 {
            calls.since = Some(Instant::now());
        }
        if !calls.watching {
            calls.watching = true;
            tokio::spawn(waiting.clone().watch());
        }
        Guard {
            waiting: waiting.clone(),
            file,
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let mut calls = self.waiting.calls.lock().expect("waiting calls");
        calls.waiting -= 1;
        if let Some(file) = &self.file
            && let Some(at) = calls.files.iter().position(|other| other == file)
        {
            calls.files.swap_remove(at);
        }
        if calls.waiting == 0 {
            calls.since = None;
            self.waiting.idle.notify_one();
        }
    }
}
