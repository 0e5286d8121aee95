//! The `todo` tool: the model writes its whole plan, every time.
//!
//! The whole list rather than edits to it: a model that resends the list cannot get an item
//! number wrong, the result is the complete plan (what the log keeps and every reader derives
//! the plan from), and equal lists compare equal, so an unchanged plan does not reach the model
//! again. The list is checked before it counts (one item in progress at most, short one-line
//! items, a bounded count); a call that breaks a rule gets an error result saying what to fix,
//! and the previous plan stays the current one.

use futures_util::future::BoxFuture;

use super::{Item, MAX_ITEM_CHARS, MAX_ITEMS, Plan, Status, TOOL};
use crate::plugin::outcomes::ToolOutput;
use crate::plugin::tool::ToolContext;
use crate::plugin::typed::TypedTool;

/// The `todo` tool.
#[derive(Clone, Copy, Debug, Default)]
pub struct Todo;

impl TypedTool for Todo {
    type Args = Plan;

    fn name(&self) -> &str {
        TOOL
    }

    fn description(&self) -> String {
        format!(
            "Keep the plan of a task that takes several steps: give the whole list every time \
             (it replaces the previous one), each item with its `text` and `status` \
             (`pending`, `in_progress` or `done`). At most one item is `in_progress`: mark an \
             item in_progress when you start it and done as soon as it is finished. The current \
             list is shown to you in a <todo> message whenever it changes; an empty list clears \
             it. When you end your answer with items still open, the programmer is told so. \
             At most {MAX_ITEMS} items of one line and at most {MAX_ITEM_CHARS} characters each."
        )
    }

    /// It touches no file and no process: it may run beside the reads of its step.
    fn read_only(&self) -> bool {
        true
    }

    fn run(&self, _ctx: ToolContext, args: Plan) -> BoxFuture<'static, ToolOutput> {
        let output = match check(args) {
            Ok(plan) => {
                let text = format!(
                    "Plan saved: {} ({}). It is shown to you as <todo> from the next step on.",
                    counted(plan.items.len(), "item"),
                    breakdown(&plan)
                );
                ToolOutput::ok(text).with_meta("plan", plan.to_value())
            }
            Err(output) => output,
        };
        Box::pin(async move { output })
    }
}

/// The plan with its texts trimmed, or the error output saying which rule it breaks.
pub fn check(mut plan: Plan) -> Result<Plan, ToolOutput> {
    let refuse = |message: String| {
        Err(ToolOutput::error(format!(
            "{message}; the previous plan stays the current one"
        )))
    };
    if plan.items.len() > MAX_ITEMS {
        return refuse(format!(
            "the plan has {} items, at most {MAX_ITEMS} are allowed: merge or drop some",
            plan.items.len()
        ));
    }
    for (index, item) in plan.items.iter_mut().enumerate() {
        let number = index + 1;
        let text = item.text.trim();
        if text.is_empty() {
            return refuse(format!("item {number} has no text: say what the step is"));
        }
        if text.contains(['\n', '\r']) {
            return refuse(format!(
                "item {number} spans several lines: give each item one line"
            ));
        }
        let chars = text.chars().count();
        if chars > MAX_ITEM_CHARS {
            return refuse(format!(
                "item {number} is {chars} characters long, at most {MAX_ITEM_CHARS} are allowed: shorten it"
            ));
        }
        item.text = text.to_owned();
    }
    let running = plan
        .items
        .iter()
        .enumerate()
        .filter(|(_, item)| item.status == Status::InProgress)
        .map(|(index, _)| (index + 1).to_string())
        .collect::<Vec<_>>();
    if running.len() > 1 {
        return refuse(format!(
            "{} items are in_progress (items {}), and at most one may be at a time: mark the others pending or done",
            running.len(),
            running.join(", ")
        ));
    }
    Ok(plan)
}

fn breakdown(plan: &Plan) -> String {
    let count = |status| {
        plan.items
            .iter()
            .filter(|item: &&Item| item.status == status)
            .count()
    };
    format!(
        "{} done, {} in progress, {} pending",
        count(Status::Done),
        count(Status::InProgress),
        count(Status::Pending)
    )
}

fn counted(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}
