//! `session show` with its sub-agents: each `subagent/start` row carries the child session's
//! own timeline (`subagent: {session, timeline}`), read from the child's log, and the text view
//! prints it indented under the row, down to the deepest sub-agent.

use std::io::Write;

use serde_json::{Value, json};

use crate::session::History;
use crate::session::event::EventBody;
use crate::session::store::Store;

/// Sub-agents nest at most a few levels (`max_depth` ≤ 4); the bound keeps a hand-made loop of
/// headers finite.
const MAX_DEPTH: usize = 8;

/// The rows of `history`'s timeline, each `subagent/start` with its child's timeline.
pub(super) fn timeline(history: &History, store: &Store, depth: usize) -> Vec<Value> {
    history
        .events()
        .iter()
        .map(|event| {
            let mut row = super::timeline_json(event);
            if let EventBody::SubagentStart(start) = &event.body
                && depth < MAX_DEPTH
            {
                row["subagent"] = match store.load(&start.child) {
                    Ok(child) => json!({
                        "session": start.child,
                        "timeline": timeline(&child, store, depth + 1),
                    }),
                    Err(error) => json!({
                        "session": start.child,
                        "error": format!("{error:#}"),
                    }),
                };
            }
            row
        })
        .collect()
}

/// Print the child timeline a row carries, indented `level` times.
pub(super) fn show_child(row: &Value, out: &mut impl Write, level: usize) -> anyhow::Result<()> {
    let Some(child) = row.get("subagent") else {
        return Ok(());
    };
    let indent = "    │ ".repeat(level);
    if let Some(error) = child["error"].as_str() {
        writeln!(out, "{indent}(its session cannot be read: {error})")?;
        return Ok(());
    }
    for row in child["timeline"].as_array().into_iter().flatten() {
        writeln!(
            out,
            "{indent}{:>6}  {:>9}  {:<18} {}",
            row["seq"].as_u64().unwrap_or(0),
            format!("{}.{}", row["turn"], row["step"]),
            row["kind"].as_str().unwrap_or_default(),
            row["summary"].as_str().unwrap_or_default(),
        )?;
        show_child(row, out, level + 1)?;
    }
    Ok(())
}
