//! `session show` with its sub-agents: each `subagent/start` row carries the child session's
//! own timeline (`subagent: {session, timeline}`, see `crate::session_report`), and the text
//! view prints it indented under the row, down to the deepest sub-agent.

use std::io::Write;

use serde_json::Value;

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
