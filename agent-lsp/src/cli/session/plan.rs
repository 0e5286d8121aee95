//! The plan's part of `agent-lsp session`: the goal and the plan `session show` prints, and
//! `session goal`, which prints the goal or sets one (the record `agent.goal.set` writes).

use std::io::Write;

use super::preview;
use crate::session::History;
use crate::session::store::Store;

/// The session's goal and its current plan, one item per line.
pub(super) fn show(history: &History, out: &mut impl Write) -> anyhow::Result<()> {
    if let Some(goal) = crate::plans::goal(history) {
        let source = match (goal.source, goal.by.as_deref()) {
            (crate::plans::GoalSource::Prompt, _) => "first prompt",
            (_, Some("editor")) => "set in the editor",
            (_, Some("cli")) => "set with `session goal`",
            _ => "set",
        };
        writeln!(out, "goal       ({source}) {}", preview(&goal.text, 100))?;
    }
    if let Some((seq, plan)) = crate::plans::current(history) {
        writeln!(
            out,
            "plan       {} (todo result {seq})",
            if plan.items.is_empty() {
                "empty".to_owned()
            } else {
                plan.summary()
            }
        )?;
        for line in plan.lines() {
            writeln!(out, "           {line}")?;
        }
    }
    Ok(())
}

/// `agent-lsp session goal`: print the goal, or record a new one (`plans::set_goal`, the same
/// record as the editor's `agent.goal.set`), refused when the session's preset has no plans
/// plugin to show it to the model.
pub(super) fn goal(
    store: &Store,
    query: &str,
    text: Option<&str>,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let Some(text) = text else {
        let history = store.load(query)?;
        match crate::plans::goal(&history) {
            Some(goal) => writeln!(out, "{}", goal.text)?,
            None => anyhow::bail!("session {query} has no goal yet: it has no prompt"),
        }
        return Ok(());
    };
    let (mut session, preset) = super::open_with_preset(store, query)?;
    let enabled = preset
        .plugin_settings::<crate::plans::PlansSettings>(crate::plans::PLUGIN)?
        .is_some_and(|settings| settings.enabled);
    anyhow::ensure!(
        enabled,
        "the session's preset `{}` has no plans plugin ([plugins.plans]), so the model would never see the goal",
        preset.name
    );
    let goal = crate::plans::set_goal(&mut session, text, "cli")?;
    writeln!(out, "goal set (event {})", goal.seq)?;
    Ok(())
}
