//! What runs beside a session's turn: background jobs, sub-agents and the language servers a
//! slow `lsp_*` call waits for, as the editor shows them.
//!
//! The session log is the record of what happened; this board is only the live view of what is
//! running now, for `$/progress`, `agent.status`, the VS Code tree and the Neovim float. The
//! jobs plugin and the sub-agents post into the board their host gives them
//! ([`crate::plugin::registry::PluginHost::activity`]); the editor-facing server watches it
//! ([`Activity::changed`]) and cancels an entry through it ([`Activity::cancel`]), so neither
//! side imports the other.
//!
//! Ended entries stay listed (with their outcome) until [`ENDED_KEPT`] newer ones ended, so a
//! view that polls sees how a short job went.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// How many ended entries are kept for the views.
pub const ENDED_KEPT: usize = 16;

/// What kind of thing an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Job,
    Subagent,
    /// A language server an `lsp_*` call waits for while it starts or indexes.
    Server,
}

impl Kind {
    /// The kind as the views name it (`job`, `sub-agent`).
    pub fn word(self) -> &'static str {
        match self {
            Kind::Job => "job",
            Kind::Subagent => "sub-agent",
            Kind::Server => "language server",
        }
    }
}

/// One running (or recently ended) job or sub-agent.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Entry {
    /// The job's id (`job-1`) or the child session's id.
    pub id: String,
    pub kind: Kind,
    /// The command line, or the sub-agent's type and prompt, shortened.
    pub title: String,
    /// The entry this one runs under (a sub-agent's job, a sub-agent's sub-agent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub started_ms: u64,
    /// The latest line of progress: the step a sub-agent is at, a job's last output line.
    pub detail: String,
    /// `None` while it runs; then how it ended (`exit 3`, `answered`, `step budget`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// Whether the editor can cancel it.
    pub cancellable: bool,
}

impl Entry {
    pub fn running(&self) -> bool {
        self.outcome.is_none()
    }
}

struct Slot {
    entry: Entry,
    cancel: Option<CancellationToken>,
}

/// The board of one session host (a `run`, an editor connection).
pub struct Activity {
    slots: Mutex<Vec<Slot>>,
    /// Bumped on every change; views wait on it.
    version: watch::Sender<u64>,
}

impl std::fmt::Debug for Activity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Activity")
            .field("entries", &self.list())
            .finish()
    }
}

impl Default for Activity {
    fn default() -> Activity {
        Activity {
            slots: Mutex::new(Vec::new()),
            version: watch::channel(0).0,
        }
    }
}

impl Activity {
    /// Post a running entry. `cancel`, when given, is what [`Activity::cancel`] cancels.
    pub fn start(
        &self,
        kind: Kind,
        id: &str,
        title: &str,
        parent: Option<&str>,
        cancel: Option<CancellationToken>,
    ) {
        let entry = Entry {
            id: id.to_owned(),
            kind,
            title: title.to_owned(),
            parent: parent.map(str::to_owned),
            started_ms: now_ms(),
            detail: String::new(),
            outcome: None,
            cancellable: cancel.is_some(),
        };
        let mut slots = self.slots.lock().expect("activity");
        slots.retain(|slot| slot.entry.id != id);
        slots.push(Slot { entry, cancel });
        drop(slots);
        self.bump();
    }

    /// Replace the progress line of a running entry.
    pub fn detail(&self, id: &str, detail: &str) {
        let changed = self.with(id, |slot| {
            if slot.entry.detail == detail || !slot.entry.running() {
                return false;
            }
            slot.entry.detail = detail.to_owned();
            true
        });
        if changed == Some(true) {
            self.bump();
        }
    }

    /// Mark an entry ended; older ended entries beyond [`ENDED_KEPT`] are dropped.
    pub fn end(&self, id: &str, outcome: &str) {
        self.end_with(id, outcome, None);
    }

    /// Mark an entry ended with an outcome that says all (a server's `ready`): its last
    /// progress line, now out of date, is cleared in the same change.
    pub fn end_alone(&self, id: &str, outcome: &str) {
        self.end_with(id, outcome, Some(String::new()));
    }

    fn end_with(&self, id: &str, outcome: &str, detail: Option<String>) {
        let mut slots = self.slots.lock().expect("activity");
        let Some(slot) = slots.iter_mut().find(|slot| slot.entry.id == id) else {
            return;
        };
        if !slot.entry.running() {
            return;
        }
        if let Some(detail) = detail {
            slot.entry.detail = detail;
        }
        slot.entry.outcome = Some(outcome.to_owned());
        slot.entry.cancellable = false;
        slot.cancel = None;
        let ended = slots.iter().filter(|slot| !slot.entry.running()).count();
        let mut excess = ended.saturating_sub(ENDED_KEPT);
        slots.retain(|slot| {
            if excess > 0 && !slot.entry.running() {
                excess -= 1;
                return false;
            }
            true
        });
        drop(slots);
        self.bump();
    }

    /// Cancel a running entry; `false` when there is none by that id or it cannot be cancelled.
    pub fn cancel(&self, id: &str) -> bool {
        match self.with(id, |slot| slot.cancel.clone()).flatten() {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// Every entry, in the order they started.
    pub fn list(&self) -> Vec<Entry> {
        self.slots
            .lock()
            .expect("activity")
            .iter()
            .map(|slot| slot.entry.clone())
            .collect()
    }

    /// The entries still running.
    pub fn running(&self) -> Vec<Entry> {
        self.list().into_iter().filter(Entry::running).collect()
    }

    /// A receiver that sees a new value after every change.
    pub fn changed(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    fn with<T>(&self, id: &str, f: impl FnOnce(&mut Slot) -> T) -> Option<T> {
        let mut slots = self.slots.lock().expect("activity");
        slots.iter_mut().find(|slot| slot.entry.id == id).map(f)
    }

    fn bump(&self) {
        self.version.send_modify(|version| *version += 1);
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_start_report_end_and_cancel() {
        let board = Activity::default();
        let mut changed = board.changed();
        let token = CancellationToken::new();
        board.start(
            Kind::Subagent,
            "child",
            "explore: find x",
            None,
            Some(token.clone()),
        );
        board.start(Kind::Job, "job-1", "sleep 2", Some("child"), None);
        assert!(changed.has_changed().unwrap());
        changed.mark_unchanged();
        board.detail("child", "step 2");
        board.detail("child", "step 2");
        assert_eq!(*changed.borrow_and_update(), 3);
        assert!(!board.cancel("job-1"), "a job posted without a token");
        assert!(board.cancel("child") && token.is_cancelled());
        board.end("child", "cancelled");
        board.end("child", "answered");
        let list = board.list();
        assert_eq!(list[0].outcome.as_deref(), Some("cancelled"));
        assert!(!list[0].cancellable && list[1].running());
        assert_eq!(board.running().len(), 1);
        assert_eq!(list[1].parent.as_deref(), Some("child"));
    }

    #[test]
    fn only_the_latest_ended_entries_are_kept() {
        let board = Activity::default();
        for n in 0..ENDED_KEPT + 5 {
            let id = format!("job-{n}");
            board.start(Kind::Job, &id, "true", None, None);
            board.end(&id, "exit 0");
        }
        board.start(Kind::Job, "live", "sleep 9", None, None);
        let list = board.list();
        assert_eq!(list.len(), ENDED_KEPT + 1);
        assert_eq!(list[0].id, "job-5");
        assert!(list.last().unwrap().running());
    }
}
