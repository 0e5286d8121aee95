//! Who an `lsp_*` call is waiting for, shown while it waits.
//!
//! A cold language server takes seconds to start and index (pyright on a large package, 10–30 s
//! on a loaded machine), and a call waits for it while the turn shows only the call's name. So
//! while calls have waited longer than [`SHOW_AFTER`], each server of the bridge that is starting
//! or reports work in progress gets an entry on the host's activity board (`language server
//! pyright · Indexing: 12/40 (30%)`), and every front end already shows the board: `run`'s
//! stderr, the editor's `$/progress` (VS Code's progress, Neovim's progress messages and
//! statusline) and the activity views. A warm call never waits that long, so it shows nothing.
//!
//! One watcher per board follows however many calls wait at once (parallel calls, a `run_code`
//! loop, sub-agents sharing the host), so each server is shown once. It looks at the servers
//! every [`LOOK_EVERY`], which also bounds how often an entry changes, and ends the entries when
//! the last call is done: `ready`, or what the server was still doing then.

use std::collections::BTreeMap;
use std::future::Future;
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

    /// Run `call`, showing the servers it waits for while it waits.
    pub(crate) async fn around<F: Future>(self: &Arc<Self>, call: F) -> F::Output {
        let _waiting = Guard::enter(self);
        call.await
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
            for health in self.bridge.health() {
                let id = format!("server:{}:{}", health.name, health.root.display());
                if !shown.contains_key(&id) {
                    if !busy(&health) {
                        continue;
                    }
                    self.board
                        .start(Kind::Server, &id, &self.title(&health), None, None);
                }
                self.board.detail(&id, &detail(&health));
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
                format!("still {}", detail(health))
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
/// reporting nothing, `answering`.
fn detail(health: &ServerHealth) -> String {
    match (&health.work, health.state.as_str()) {
        (_, "starting") => "starting".to_owned(),
        (Some(work), _) => work.clone(),
        (None, "ready") => "answering".to_owned(),
        (None, state) => state.to_owned(),
    }
}

/// One waiting call; the watcher starts with the first and is told when the last is done.
struct Guard {
    waiting: Arc<Waiting>,
}

impl Guard {
    fn enter(waiting: &Arc<Waiting>) -> Guard {
        let mut calls = waiting.calls.lock().expect("waiting calls");
        calls.waiting += 1;
        if calls.waiting == 1 {
            calls.since = Some(Instant::now());
        }
        if !calls.watching {
            calls.watching = true;
            tokio::spawn(waiting.clone().watch());
        }
        Guard {
            waiting: waiting.clone(),
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let mut calls = self.waiting.calls.lock().expect("waiting calls");
        calls.waiting -= 1;
        if calls.waiting == 0 {
            calls.since = None;
            self.waiting.idle.notify_one();
        }
    }
}
