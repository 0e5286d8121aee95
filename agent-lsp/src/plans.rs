//! Plans: the `todo` list the model keeps for a task, and the session's goal.
//!
//! A long task drifts: after twenty tool calls and a compaction the model no longer sees what it
//! set out to do, nor which steps are left. The `todo` tool lets it write the plan down (the
//! whole list every time, each item `pending`, `in_progress` or `done`, at most one in progress),
//! and the `plans` plugin shows it the list as runtime context whenever the list changes, so
//! the plan is in every request without ever touching the cached system prompt.
//!
//! Nothing here is held in memory between calls: the current list is the one the latest
//! successful `todo` call recorded (its `tool/result` carries the validated list in `meta.plan`),
//! and the goal is the session's first prompt or the latest one set with `agent.goal.set`
//! (a `plugin/state` event of this plugin). So a restarted process, `agent-lsp session show`,
//! the trajectory, the editor's `agent.status` and the loop all read the same plan from the log.
//!
//! The goal is also what a compaction must not lose: `compaction::summary` copies it verbatim
//! from the log into every checkpoint (never from the model's summary), see [`goal`].

pub mod tool;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::plugin::outcomes::ToolCallOutcome;
use crate::plugin::registry::{Parts, PluginHost, PluginSettings};
use crate::plugin::{Plugin, RuntimeContribution};
use crate::session::event::EventBody;
use crate::session::{History, Session};

/// The plugin's name: its `[plugins.plans]` table, its runtime-context source and its
/// `plugin/state` records.
pub const PLUGIN: &str = "plans";

/// The tool's name.
pub const TOOL: &str = "todo";

/// At most this many items in a plan.
pub const MAX_ITEMS: usize = 50;

/// At most this many characters in an item's text.
pub const MAX_ITEM_CHARS: usize = 300;

/// At most this many characters in a goal set with `agent.goal.set` (a first prompt is the goal
/// as it is; prompts have their own bound).
pub const MAX_GOAL_CHARS: usize = 4000;

/// Where an item stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Not started.
    Pending,
    /// Being worked on; at most one item of a plan is.
    InProgress,
    /// Finished; the item stays in the list so the model sees what is behind it.
    Done,
}

impl Status {
    /// The name the `todo` tool's schema and `meta.plan` use.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::InProgress => "in_progress",
            Status::Done => "done",
        }
    }

    /// The checkbox the model and the terminal see: `[ ]`, `[>]`, `[x]`.
    pub fn mark(self) -> &'static str {
        match self {
            Status::Pending => "[ ]",
            Status::InProgress => "[>]",
            Status::Done => "[x]",
        }
    }
}

/// One step of a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Item {
    /// What to do, in one line.
    pub text: String,
    /// `pending`, `in_progress` or `done`.
    pub status: Status,
}

/// A whole list, as one `todo` call gave it (the tool's arguments, and what the log keeps).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// The whole plan, in order.
    #[schemars(length(max = MAX_ITEMS))]
    pub items: Vec<Item>,
}

impl Plan {
    /// The items not done yet, in order.
    pub fn open(&self) -> impl Iterator<Item = &Item> {
        self.items.iter().filter(|item| item.status != Status::Done)
    }

    /// How many items are done, for progress lines (`3/5`).
    pub fn done(&self) -> usize {
        self.items
            .iter()
            .filter(|item| item.status == Status::Done)
            .count()
    }

    /// The item in progress, if any.
    pub fn in_progress(&self) -> Option<&Item> {
        self.items
            .iter()
            .find(|item| item.status == Status::InProgress)
    }

    /// One line per item: `[x] Read the lexer`.
    pub fn lines(&self) -> Vec<String> {
        self.items
            .iter()
            .map(|item| format!("{} {}", item.status.mark(), item.text))
            .collect()
    }

    /// A one-line summary: `2/5 done, now: Fix lex()` (or `next:` the first pending item).
    pub fn summary(&self) -> String {
        let mut text = format!("{}/{} done", self.done(), self.items.len());
        if let Some(item) = self.in_progress() {
            text.push_str(&format!(", now: {}", item.text));
        } else if let Some(item) = self.open().next() {
            text.push_str(&format!(", next: {}", item.text));
        }
        text
    }

    /// The open items on one line: `[>] Fix lex(); [ ] Run the tests`.
    pub fn open_line(&self) -> String {
        self.open()
            .map(|item| format!("{} {}", item.status.mark(), item.text))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The plan as the `todo` result's `meta.plan` records it.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("a plan serializes")
    }
}

/// Where the goal came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GoalSource {
    /// The session's first prompt.
    Prompt,
    /// Set with `agent.goal.set` or `agent-lsp session goal` (recorded as this plugin's
    /// `plugin/state`).
    Set,
}

/// The session's goal and the event it was read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Goal {
    /// The goal itself, copied verbatim into every checkpoint.
    pub text: String,
    /// Whether it is the first prompt or was set later.
    pub source: GoalSource,
    /// The seq of the event it was read from (the `user/message` or the `plugin/state`).
    pub seq: u64,
    /// Who set it (`editor`, `cli`), for a goal that is not the first prompt.
    pub by: Option<String>,
}

/// The plan of the latest successful `todo` call, and the seq of its `tool/result`.
pub fn current(history: &History) -> Option<(u64, Plan)> {
    history.events().iter().rev().find_map(plan_of)
}

/// The plan a tool call recorded, if it is a successful `todo` call.
fn recorded(outcome: &ToolCallOutcome) -> Option<Plan> {
    if outcome.call.name != TOOL || outcome.output.is_error {
        return None;
    }
    serde_json::from_value(outcome.output.meta.get("plan")?.clone()).ok()
}

/// What a progress display (the terminal's, the editor's `$/progress`) last showed of the plan,
/// so it shows the plan again only when a `todo` call changed it. It starts from the session's
/// plan, so a turn that resends the list it found shows no change.
#[derive(Clone, Debug, Default)]
pub struct Watch(Option<Plan>);

impl Watch {
    /// A watch that starts from the session's current plan, so a resent unchanged list shows
    /// nothing.
    pub fn new(history: &History) -> Watch {
        Watch(current(history).map(|(_, plan)| plan))
    }

    /// The plan `outcome` recorded, if it is a `todo` call that changed it.
    pub fn changed(&mut self, outcome: &ToolCallOutcome) -> Option<&Plan> {
        let plan = recorded(outcome)?;
        if self.0.as_ref() == Some(&plan) {
            return None;
        }
        self.0 = Some(plan);
        self.0.as_ref()
    }
}

/// The session's goal: the latest set with `agent.goal.set`, else the first prompt.
pub fn goal(history: &History) -> Option<Goal> {
    let set = history.events().iter().rev().find_map(|event| {
        goal_of(event).map(|text| Goal {
            text: text.to_owned(),
            source: GoalSource::Set,
            seq: event.seq,
            by: match &event.body {
                EventBody::PluginState(state) => state.data["by"].as_str().map(str::to_owned),
                _ => None,
            },
        })
    });
    set.or_else(|| {
        history.events().iter().find_map(|event| match &event.body {
            EventBody::UserMessage(message) if message.origin == "prompt" => Some(Goal {
                text: message.text.clone(),
                source: GoalSource::Prompt,
                seq: event.seq,
                by: None,
            }),
            _ => None,
        })
    })
}

/// The plan `event` recorded, if it is a successful `todo` result.
pub fn plan_of(event: &crate::session::event::Event) -> Option<(u64, Plan)> {
    let EventBody::ToolResult(result) = &event.body else {
        return None;
    };
    if result.name != TOOL {
        return None;
    }
    // Only the tool's own successful results carry `meta.plan`; an error, a refused or
    // interrupted call, and the pruner's or the context editor's copies do not.
    let plan = serde_json::from_value(result.meta.get("plan")?.clone()).ok()?;
    Some((event.seq, plan))
}

/// The goal text `event` set, if it is this plugin's `plugin/state` with a goal.
fn goal_of(event: &crate::session::event::Event) -> Option<&str> {
    match &event.body {
        EventBody::PluginState(state) if state.plugin == PLUGIN => state.data["goal"].as_str(),
        _ => None,
    }
}

/// Check a goal the programmer set: one that is empty or longer than [`MAX_GOAL_CHARS`] is
/// refused with what to change.
pub fn check_goal(text: &str) -> Result<&str, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("the goal is empty; say what the session is for".into());
    }
    let chars = text.chars().count();
    if chars > MAX_GOAL_CHARS {
        return Err(format!(
            "the goal is {chars} characters long; at most {MAX_GOAL_CHARS}: shorten it"
        ));
    }
    Ok(text)
}

/// Record `text` as the session's goal, set `by` the editor (`agent.goal.set`) or the command
/// line (`agent-lsp session goal`): a `plugin/state` event of this plugin, which only the log
/// holds; the plugin shows it to the model from the next step on. Returns the goal as recorded
/// (trimmed), or why it was refused.
pub fn set_goal(session: &mut Session, text: &str, by: &str) -> anyhow::Result<Goal> {
    let text = check_goal(text).map_err(anyhow::Error::msg)?.to_owned();
    let turn = session.history().next_turn().saturating_sub(1);
    let seq =
        crate::plugin::state::record(session, turn, PLUGIN, json!({ "goal": text, "by": by }))?;
    session.flush()?;
    Ok(Goal {
        text,
        source: GoalSource::Set,
        seq,
        by: Some(by.to_owned()),
    })
}

/// The plan as front ends show it (`agent.status`, `session show --json`, the trajectory):
/// `{goal, goal_source, items: [{text, status}], open}`.
pub fn view(history: &History) -> Value {
    let goal = goal(history);
    let plan = current(history).map(|(_, plan)| plan).unwrap_or_default();
    json!({
        "goal": goal.as_ref().map(|goal| goal.text.as_str()),
        "goal_source": goal.as_ref().map(|goal| goal.source),
        "items": plan.items,
        "open": plan.open().count(),
    })
}

/// The text of the plan's runtime context: the goal when it was set with `agent.goal.set` (a
/// first prompt is on the surface already), then the list.
pub fn runtime_text(goal: Option<&str>, plan: Option<&Plan>) -> String {
    let mut text = String::new();
    if let Some(goal) = goal {
        text.push_str("<goal>\n");
        text.push_str(goal);
        text.push_str("\n</goal>");
    }
    if let Some(plan) = plan {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str("<todo>\n");
        if plan.items.is_empty() {
            text.push_str("(the plan is empty)");
        } else {
            text.push_str(&plan.lines().join("\n"));
        }
        text.push_str("\n</todo>");
    }
    text
}

/// `[plugins.plans]` of a preset.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlansSettings {
    /// Whether the preset has the `todo` tool and the plan in the runtime context.
    pub enabled: bool,
}

impl PluginSettings for PlansSettings {
    fn enabled(&self) -> bool {
        self.enabled
    }
}

/// Shows the model the current plan (and a goal that was set) as runtime context.
#[derive(Default)]
pub struct PlansPlugin {
    cursor: Cursor,
}

impl PlansPlugin {
    /// The registry entry of `[plugins.plans]`: the plugin and the `todo` tool.
    pub fn parts(_settings: PlansSettings, _host: &PluginHost) -> anyhow::Result<Parts> {
        Ok(Parts {
            plugin: Some(Box::new(PlansPlugin::default())),
            tools: vec![Arc::new(tool::Todo)],
            shell: None,
        })
    }
}

impl Plugin for PlansPlugin {
    fn name(&self) -> &'static str {
        PLUGIN
    }

    fn runtime_context(
        &mut self,
        history: &History,
    ) -> anyhow::Result<Option<RuntimeContribution>> {
        self.cursor.update(history);
        let plan = self
            .cursor
            .plan
            .and_then(|seq| history.event(seq))
            .and_then(plan_of)
            .map(|(_, plan)| plan);
        let goal = self
            .cursor
            .goal
            .and_then(|seq| history.event(seq))
            .and_then(goal_of);
        if plan.is_none() && goal.is_none() {
            return Ok(None);
        }
        // Equal lists render equal, so the loop appends the list only when it changed.
        let mut facts = BTreeMap::new();
        if let Some(plan) = &plan {
            facts.insert("todo".to_owned(), plan.lines().join("\n"));
        }
        if let Some(goal) = goal {
            facts.insert("goal".to_owned(), goal.to_owned());
        }
        Ok(Some(RuntimeContribution {
            source: Some(PLUGIN.to_owned()),
            text: runtime_text(goal, plan.as_ref()),
            facts,
        }))
    }
}

/// Where the latest plan and goal records are, found by reading each event once: a lookup
/// aid over the log, rebuilt from it when the session changes, never a copy of the plan.
#[derive(Debug, Default)]
struct Cursor {
    session: String,
    through: u64,
    plan: Option<u64>,
    goal: Option<u64>,
}

impl Cursor {
    fn update(&mut self, history: &History) {
        let session = history
            .header()
            .map_or("", |header| header.session_id.as_str());
        if session != self.session || history.last_seq() < self.through {
            *self = Cursor {
                session: session.to_owned(),
                ..Cursor::default()
            };
        }
        let from = history
            .events()
            .partition_point(|event| event.seq <= self.through);
        for event in &history.events()[from..] {
            if plan_of(event).is_some() {
                self.plan = Some(event.seq);
            }
            if goal_of(event).is_some() {
                self.goal = Some(event.seq);
            }
        }
        self.through = history.last_seq();
    }
}
