//! Volatile state for the model, injected into the history only when it changes.
//!
//! Putting cwd, open documents, the git branch or the date into the system prompt would change
//! the request prefix and throw away the provider's cache. Instead each pre-step takes a
//! [`RuntimeSnapshot`] and [`RuntimeContextProjection::project`] appends a `context/runtime`
//! event only when the snapshot differs from the last one the model can still see. The
//! projection keeps no state of its own: it reads the last visible `context/runtime` event, so a
//! restarted process never injects the same snapshot twice, and a snapshot that a compaction
//! shadowed is injected again.

use std::collections::BTreeMap;
use std::path::Path;

use crate::session::event::{EventBody, RuntimeContext};
use crate::session::{History, NewEvent, Session};

/// Key/value facts about the environment, compared as a whole.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuntimeSnapshot(pub BTreeMap<String, String>);

impl RuntimeSnapshot {
    /// The environment of an agent working in `workspace` with these documents open.
    /// The date has day granularity so the snapshot changes at most once a day on its own.
    pub fn collect(workspace: &Path, open_documents: &[String]) -> RuntimeSnapshot {
        let mut facts = BTreeMap::new();
        let cwd = std::env::current_dir()
            .map(|dir| dir.display().to_string())
            .unwrap_or_default();
        facts.insert("cwd".to_owned(), cwd);
        facts.insert("workspace".to_owned(), workspace.display().to_string());
        facts.insert(
            "os".to_owned(),
            format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
        );
        facts.insert(
            "date".to_owned(),
            chrono::Local::now().format("%Y-%m-%d").to_string(),
        );
        if let Some(branch) = git_branch(workspace) {
            facts.insert("git_branch".to_owned(), branch);
        }
        if !open_documents.is_empty() {
            facts.insert("open_documents".to_owned(), open_documents.join(", "));
        }
        RuntimeSnapshot(facts)
    }

    /// The message text the model sees.
    pub fn render(&self) -> String {
        let mut text = String::from("<runtime-context>\n");
        for (key, value) in &self.0 {
            text.push_str(key);
            text.push_str(": ");
            text.push_str(value);
            text.push('\n');
        }
        text.push_str("</runtime-context>");
        text
    }
}

/// The branch checked out in `workspace`, read from `.git/HEAD` without running git.
fn git_branch(workspace: &Path) -> Option<String> {
    let head = std::fs::read_to_string(workspace.join(".git").join("HEAD")).ok()?;
    let head = head.trim();
    Some(match head.strip_prefix("ref: refs/heads/") {
        Some(branch) => branch.to_owned(),
        None => format!("detached at {}", head.get(..12).unwrap_or(head)),
    })
}

/// Decides whether a snapshot enters the session.
#[derive(Clone, Copy, Debug, Default)]
pub struct RuntimeContextProjection;

impl RuntimeContextProjection {
    /// The last environment snapshot still visible to the model, recovered from the history.
    pub fn last_visible(history: &History) -> Option<(u64, &BTreeMap<String, String>)> {
        Self::last_visible_from(history, None)
    }

    /// The last snapshot of `source` (a plugin's name; `None` for the environment) still
    /// visible to the model.
    pub fn last_visible_from<'h>(
        history: &'h History,
        source: Option<&str>,
    ) -> Option<(u64, &'h BTreeMap<String, String>)> {
        history
            .runtime_context_seqs()
            .iter()
            .rev()
            .filter(|seq| history.surface().contains(**seq))
            .find_map(|&seq| match &history.event(seq)?.body {
                EventBody::RuntimeContext(context) if context.source.as_deref() == source => {
                    Some((seq, &context.snapshot))
                }
                _ => None,
            })
    }

    /// Append the environment `snapshot` as a `context/runtime` message if it differs from the
    /// last visible one. Returns the seq of the appended event, or `None` when nothing changed.
    pub fn project(
        session: &mut Session,
        turn: u32,
        step: u32,
        snapshot: &RuntimeSnapshot,
    ) -> anyhow::Result<Option<u64>> {
        Self::project_from(session, turn, step, None, &snapshot.0, snapshot.render())
    }

    /// Append the facts of `source` (with the text the model reads) as a `context/runtime`
    /// message if they differ from the last visible ones of the same source. Each source is
    /// compared on its own, so a plugin's change does not repeat the environment, and the
    /// environment's does not repeat a plugin's.
    pub fn project_from(
        session: &mut Session,
        turn: u32,
        step: u32,
        source: Option<&str>,
        facts: &BTreeMap<String, String>,
        text: String,
    ) -> anyhow::Result<Option<u64>> {
        if Self::last_visible_from(session.history(), source).is_some_and(|(_, last)| last == facts)
        {
            return Ok(None);
        }
        let body = EventBody::RuntimeContext(RuntimeContext {
            source: source.map(str::to_owned),
            snapshot: facts.clone(),
            text,
        });
        Ok(Some(session.append(NewEvent::new(turn, step, body))?.seq))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::event::{SessionHeader, SurfaceOp, UserMessage};
    use crate::session::log::Durability;

    fn snapshot(value: &str) -> RuntimeSnapshot {
        RuntimeSnapshot(
            [("git_branch".to_owned(), value.to_owned())]
                .into_iter()
                .collect(),
        )
    }

    #[test]
    fn injects_on_change_only_survives_restarts_and_reinjects_after_shadowing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let header = SessionHeader::for_test("s", "standard");
        let mut session = Session::create(&path, header, Durability::Sync).unwrap();
        let first =
            RuntimeContextProjection::project(&mut session, 1, 1, &snapshot("main")).unwrap();
        assert_eq!(first, Some(2));
        assert_eq!(
            RuntimeContextProjection::project(&mut session, 1, 2, &snapshot("main")).unwrap(),
            None
        );
        drop(session);

        // A restarted process recovers the snapshot from the log: no double injection.
        let mut session = Session::open(&path, Durability::Sync).unwrap();
        assert_eq!(
            RuntimeContextProjection::project(&mut session, 2, 1, &snapshot("main")).unwrap(),
            None
        );
        assert_eq!(
            RuntimeContextProjection::project(&mut session, 2, 2, &snapshot("dev")).unwrap(),
            Some(3)
        );

        // Once a checkpoint shadows it, the model no longer sees it, so it comes back.
        let summary = EventBody::UserMessage(UserMessage {
            text: "summary".into(),
            origin: "compaction".into(),
        });
        session
            .append(NewEvent::new(3, 0, summary).with_op(SurfaceOp::Replace { start: 2, end: 3 }))
            .unwrap();
        assert_eq!(
            RuntimeContextProjection::project(&mut session, 3, 1, &snapshot("dev")).unwrap(),
            Some(5)
        );
        assert_eq!(
            session.history().events()[4].body,
            EventBody::RuntimeContext(RuntimeContext {
                source: None,
                snapshot: snapshot("dev").0,
                text: "<runtime-context>\ngit_branch: dev\n</runtime-context>".into()
            })
        );
    }
}
