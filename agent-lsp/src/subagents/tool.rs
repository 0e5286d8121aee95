//! The `task` tool: one call, one sub-agent, its final answer as the result.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::Deserialize;
use tokio::sync::Semaphore;

use super::{DEFAULT_TYPE, GENERAL, Order, Report, Spawner, SubagentsSettings, TOOL};
use crate::plugin::outcomes::ToolOutput;
use crate::plugin::tool::ToolContext;
use crate::plugin::typed::TypedTool;
use crate::session::event::{EventBody, SubagentStart};

/// Time a call is given beyond the child's wall budget to end cleanly (its calls answered,
/// its log flushed) before the runtime's own timeout would cut it off.
const GRACE: Duration = Duration::from_secs(60);

/// The arguments of `task`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskArgs {
    /// The whole task: what to find or do, where to look, what the answer must contain.
    prompt: String,
    /// `explore` (default), `general`, or a preset's name.
    #[serde(default)]
    agent_type: Option<String>,
    /// A few words naming the task, shown to the programmer.
    // For the views (progress, the trajectory); the prompt's start otherwise.
    #[serde(default)]
    description: Option<String>,
}

/// The `task` tool of one agent: its settings, its spawner and the slots its children run in.
pub struct Task {
    settings: SubagentsSettings,
    spawner: Option<Arc<dyn Spawner>>,
    slots: Arc<Semaphore>,
}

impl Task {
    /// The `task` tool with `settings`' budgets and concurrency, starting children through
    /// `spawner` (the host; `None` where no model is configured, and every call then says so).
    pub fn new(settings: SubagentsSettings, spawner: Option<Arc<dyn Spawner>>) -> Task {
        let slots = Arc::new(Semaphore::new(settings.max_concurrent));
        Task {
            settings,
            spawner,
            slots,
        }
    }
}

impl TypedTool for Task {
    type Args = TaskArgs;

    fn name(&self) -> &str {
        TOOL
    }

    fn description(&self) -> String {
        let budgets = self.settings.budgets();
        format!(
            "Hand a self-contained piece of work to a sub-agent; its final answer is this call's result. The sub-agent starts with a fresh context (it does not see this conversation: put everything it needs in `prompt`, with paths and names), works with its own tools in a session of its own, and only its answer comes back, so your context stays small. Use it to explore broadly (many reads and searches) or to run independent pieces of work; several `task` calls in one step run at the same time. `agent_type`: `{DEFAULT_TYPE}` (the default: reads, searches and the language-server tools, changes nothing), `{GENERAL}` (your own tools, for changes), or the name of a preset. A sub-agent stops after {} steps, {} prompt tokens or {} s, whichever comes first, and then says so.",
            budgets.max_steps,
            budgets.max_prompt_tokens,
            budgets.wall.as_secs()
        )
    }

    fn read_only(&self) -> bool {
        false
    }

    fn runs_beside_itself(&self) -> bool {
        true
    }

    fn timeout(&self, _args: &TaskArgs) -> Option<Duration> {
        Some(self.settings.budgets().wall + GRACE)
    }

    fn run(&self, ctx: ToolContext, args: TaskArgs) -> BoxFuture<'static, ToolOutput> {
        let spawner = self.spawner.clone();
        let slots = self.slots.clone();
        let settings = self.settings.clone();
        Box::pin(async move {
            let Some(spawner) = spawner else {
                return ToolOutput::error(
                    "sub-agents cannot start here (this agent is itself a sub-agent at the preset's `max_depth`, or runs without a model); do the work yourself",
                );
            };
            let (Some(session_id), Some(events)) = (ctx.session_id.clone(), ctx.events.clone())
            else {
                return ToolOutput::error("`task` needs a session to record its sub-agent in");
            };
            if args.prompt.trim().is_empty() {
                return ToolOutput::error("`prompt` is empty: say what the sub-agent is to do");
            }
            let agent_type = args
                .agent_type
                .filter(|name| !name.trim().is_empty())
                .unwrap_or_else(|| DEFAULT_TYPE.to_owned());
            // A slot first, so the child's wall time counts from when it can run.
            let _slot = tokio::select! {
                slot = slots.acquire_owned() => slot.expect("the semaphore is never closed"),
                () = ctx.cancel.cancelled() => {
                    return ToolOutput::error("cancelled before the sub-agent started").with_meta("cancelled", true);
                }
            };
            let order = Order {
                agent_type: agent_type.clone(),
                prompt: args.prompt,
                title: args.description,
                parent_session: session_id,
                call_id: ctx.call_id.clone(),
                budgets: settings.budgets(),
                max_depth: settings.max_depth,
            };
            let started = match spawner.start(order, ctx.cancel.child_token()) {
                Ok(started) => started,
                Err(error) => {
                    return ToolOutput::error(format!("the sub-agent could not start: {error:#}"));
                }
            };
            events.record(EventBody::SubagentStart(SubagentStart {
                call_id: ctx.call_id.clone(),
                child: started.child.clone(),
                agent_type,
                preset: started.preset.clone(),
                depth: started.depth,
            }));
            let report = started.run.await;
            events.record(EventBody::SubagentEnd(report.end.clone()));
            output(report)
        })
    }
}

/// The call's result: the answer, or what stopped the child, with where its steps are.
fn output(report: Report) -> ToolOutput {
    let end = &report.end;
    let whereabouts = format!(
        "(sub-agent session {}: {} step{}; `recall_history` with `session` = this id reads its steps)",
        end.child,
        end.steps,
        if end.steps == 1 { "" } else { "s" }
    );
    let stopped = |why: String| {
        let last = if report.text.trim().is_empty() {
            String::new()
        } else {
            format!("\n\nIts last message:\n{}", report.text.trim())
        };
        ToolOutput::error(format!("{why}{last}\n\n{whereabouts}"))
    };
    let reason = end.reason.clone().unwrap_or_default();
    let output = match end.outcome.as_str() {
        "answered" => ToolOutput::ok(format!("{}\n\n{whereabouts}", report.text.trim_end())),
        "step_budget" => stopped(format!(
            "the sub-agent stopped before it answered: it used its step budget ({reason})"
        )),
        "token_budget" => stopped(format!(
            "the sub-agent stopped before it answered: it used its prompt-token budget ({reason})"
        )),
        "time_budget" => stopped(format!(
            "the sub-agent stopped before it answered: it used its wall-time budget ({reason})"
        )),
        "cancelled" => {
            stopped("the sub-agent was cancelled".to_owned()).with_meta("cancelled", true)
        }
        _ => stopped(format!("the sub-agent failed: {reason}")),
    };
    output.with_meta(
        "subagent",
        serde_json::to_value(end).expect("a subagent/end serializes"),
    )
}
