//! The host's activity board ([`crate::activity::Activity`]: background jobs, sub-agents)
//! mirrored to the editor as `$/progress`, one work-done token per entry: `begin` (cancellable
//! when the entry is) when it is first seen running, `report` when its detail changes, `end`
//! with its outcome. The editor's cancel on such a token cancels the entry
//! ([`Shown::cancel`], from `window/workDoneProgress/cancel`).
//!
//! LSP progress does not nest, so an entry's title says what it belongs to: its parent entry
//! (a sub-agent's job), else the turn that was running when it started. One task per
//! connection follows the board ([`watch`]); it looks at the whole board after each change, so
//! a burst of changes costs one look, and an entry that started and ended between two looks is
//! never shown (it would flash by anyway; `agent.status` still lists it).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::Host;
use super::ui::create_token;
use crate::activity::Entry;
use crate::server::Shared;

/// The entries the editor was shown, by entry id.
#[derive(Default)]
pub(crate) struct Shown {
    entries: Mutex<HashMap<String, ShownEntry>>,
}

struct ShownEntry {
    /// `None` when the editor refused the token: the entry is then not tried again.
    token: Option<Value>,
    detail: String,
}

impl Shown {
    /// The editor cancelled progress `token`: cancel its entry. Returns whether it was one of
    /// the board's tokens.
    pub(crate) fn cancel(&self, host: &Host, token: &Value) -> bool {
        let id = self
            .entries
            .lock()
            .expect("shown entries")
            .iter()
            .find(|(_, shown)| shown.token.as_ref() == Some(token))
            .map(|(id, _)| id.clone());
        match id {
            Some(id) => {
                host.activity.cancel(&id);
                true
            }
            None => false,
        }
    }
}

/// Follow the board of `shared`'s host for as long as the connection lives, when the editor
/// takes server-initiated progress.
pub(crate) fn watch(shared: &Arc<Shared>) {
    if !shared.client_supports("/window/workDoneProgress") {
        return;
    }
    let mut changed = shared.host.activity.changed();
    let runtime = shared.agent_runtime.clone();
    let shared = Arc::downgrade(shared);
    runtime.spawn(async move {
        loop {
            match shared.upgrade() {
                Some(shared) => look(&shared).await,
                None => return,
            }
            // The board goes with the connection's state, and this task with it.
            if changed.changed().await.is_err() {
                return;
            }
        }
    });
}

/// One look at the board: begin what is new, report what changed, end what ended.
async fn look(shared: &Arc<Shared>) {
    let host = &shared.host;
    let board = host.activity.list();
    let new = {
        let shown = host.shown.entries.lock().expect("shown entries");
        board
            .iter()
            .filter(|entry| entry.running() && !shown.contains_key(&entry.id))
            .cloned()
            .collect::<Vec<_>>()
    };
    for entry in new {
        let token = create_token(shared, host, "activity").await;
        let title = title(&entry, &board, host.turn_title().as_deref());
        host.shown.entries.lock().expect("shown entries").insert(
            entry.id.clone(),
            ShownEntry {
                token: token.clone(),
                detail: entry.detail.clone(),
            },
        );
        if let Some(token) = token {
            let mut value =
                json!({"kind": "begin", "title": title, "cancellable": entry.cancellable});
            if !entry.detail.is_empty() {
                value["message"] = json!(entry.detail);
            }
            shared.notify_editor("$/progress", json!({"token": token, "value": value}));
        }
    }
    // The board may have changed while tokens were created: what is on it now is reported.
    let board = host.activity.list();
    let mut shown = host.shown.entries.lock().expect("shown entries");
    shown.retain(|id, shown| {
        let entry = board.iter().find(|entry| entry.id == *id);
        let ended = entry.is_none_or(|entry| !entry.running());
        let Some(token) = &shown.token else {
            return !ended;
        };
        if ended {
            let outcome = entry.and_then(|entry| entry.outcome.as_deref());
            shared.notify_editor(
                "$/progress",
                json!({"token": token, "value": {"kind": "end", "message": outcome.unwrap_or("ended")}}),
            );
            return false;
        }
        let detail = &entry.expect("not ended").detail;
        if *detail != shown.detail {
            shown.detail = detail.clone();
            shared.notify_editor(
                "$/progress",
                json!({"token": token, "value": {"kind": "report", "message": detail}}),
            );
        }
        true
    });
}

/// `job: cargo test (in agent: fix)`, `job: cargo test (in sub-agent explore: find x)`: the
/// entry's kind and title, and what it belongs to: its parent on the board, else the turn
/// running when it was first seen.
fn title(entry: &Entry, board: &[Entry], turn: Option<&str>) -> String {
    let mut title = format!("{}: {}", entry.kind.word(), entry.title);
    let parent = entry
        .parent
        .as_deref()
        .and_then(|parent| board.iter().find(|other| other.id == parent));
    match (parent, turn) {
        (Some(parent), _) => {
            title.push_str(&format!(" (in {} {})", parent.kind.word(), parent.title));
        }
        (None, Some(turn)) => title.push_str(&format!(" (in {turn})")),
        (None, None) => {}
    }
    title
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activity::{Activity, Kind};

    #[test]
    fn a_title_says_what_its_entry_belongs_to() {
        let board = Activity::default();
        board.start(Kind::Subagent, "child", "explore: find x", None, None);
        board.start(Kind::Job, "job-1@7", "cargo test", Some("child"), None);
        board.start(Kind::Job, "job-2@8", "sleep 9", None, None);
        let list = board.list();
        assert_eq!(
            title(&list[1], &list, Some("agent: fix")),
            "job: cargo test (in sub-agent explore: find x)"
        );
        assert_eq!(
            title(&list[0], &list, Some("agent: fix")),
            "sub-agent: explore: find x (in agent: fix)"
        );
        assert_eq!(title(&list[2], &list, None), "job: sleep 9");
    }
}
