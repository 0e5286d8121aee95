//! What a plugin records in the session for itself: `plugin/state` events, which live only in
//! the log (never on the model's surface). A plugin whose prompt section is built from something
//! that may change (the memories, the project's `AGENTS.md`) records what it used the first time
//! and rebuilds the section from that record afterwards, so a resumed session has the same
//! prompt; a goal set in the editor is one too.

use anyhow::Context;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::session::event::{Event, EventBody, PluginState};
use crate::session::{History, NewEvent, Session};

/// The records of `plugin`, oldest first, with the events that carry them.
pub fn records<'h>(
    history: &'h History,
    plugin: &'h str,
) -> impl DoubleEndedIterator<Item = (&'h Event, &'h Value)> + 'h {
    history
        .events()
        .iter()
        .filter_map(move |event| match &event.body {
            EventBody::PluginState(state) if state.plugin == plugin => Some((event, &state.data)),
            _ => None,
        })
}

/// Append a record of `plugin` to the session; returns its seq.
pub fn record(session: &mut Session, turn: u32, plugin: &str, data: Value) -> anyhow::Result<u64> {
    let body = EventBody::PluginState(PluginState {
        plugin: plugin.to_owned(),
        data,
    });
    Ok(session.append(NewEvent::new(turn, 0, body))?.seq)
}

/// The first record of `plugin` in `session`, read as `T`, or, when there is none yet, what
/// `build` makes, recorded now; `what` names the record in the error for one that does not
/// read (`the memories session ID recorded cannot be read`).
pub fn recorded_or<T: Serialize + DeserializeOwned>(
    session: &mut Session,
    turn: u32,
    plugin: &str,
    what: &str,
    build: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let recorded = records(session.history(), plugin)
        .next()
        .map(|(_, data)| data.clone());
    if let Some(data) = recorded {
        return serde_json::from_value(data).with_context(|| {
            format!(
                "the {what} session {} recorded cannot be read",
                session.id()
            )
        });
    }
    let built = build()?;
    record(session, turn, plugin, serde_json::to_value(&built)?)?;
    Ok(built)
}

/// A plugin's prompt section for the session it last contributed to, so its record is read
/// once per session rather than on every turn.
#[derive(Debug, Default)]
pub struct SectionCache {
    /// The session's id and its section (`None`: the plugin adds none).
    current: Option<(String, Option<String>)>,
}

impl SectionCache {
    /// The section of `session`: the one kept, or `build`'s (from the session's record), kept.
    pub fn section(
        &mut self,
        session: &mut Session,
        build: impl FnOnce(&mut Session) -> anyhow::Result<Option<String>>,
    ) -> anyhow::Result<Option<String>> {
        if let Some((id, section)) = &self.current
            && id == session.id()
        {
            return Ok(section.clone());
        }
        let section = build(session)?;
        self.current = Some((session.id().to_owned(), section.clone()));
        Ok(section)
    }
}
