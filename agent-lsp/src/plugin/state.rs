//! What a plugin records in the session for itself: `plugin/state` events, which live only in
//! the log (never on the model's surface). A plugin whose prompt section is built from something
//! that may change (the memories, the project's `AGENTS.md`) records what it used the first time
//! and rebuilds the section from that record afterwards, so a resumed session has the same
//! prompt; a goal set in the editor is one too.

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
