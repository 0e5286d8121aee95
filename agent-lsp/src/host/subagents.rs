//! Sub-agents: how the host makes a `task` call's child one level down. The host a
//! conversation's plugins are given ([`PluginHost::subagents`]) is its own, with the
//! conversation's preset and model; [`Spawner::start`] picks the child's preset (bounded by
//! the parent's permissions and the order's budgets), opens its session under the parent's
//! call, and hands back the child's turn to run.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::{Conversation, Host};
use crate::activity::{Activity, Kind};
use crate::agent::{AgentEvent, TurnOutcome, TurnUi};
use crate::preset::{Preset, PresetDirs};
use crate::session::History;
use crate::session::event::{EventBody, ParentLink, SubagentEnd, ToolCallRef};
use crate::subagents::child::ChildPlugin;
use crate::subagents::{self, Order, Report, Spawner, Started, Stop, StopReason};

impl Host {
    /// The preset a child of `agent_type` runs with: the parent's own for `general`, else the
    /// preset of that name; its steps and its permissions bounded by the budget and the
    /// parent's, and without `task` at the deepest level.
    fn child_preset(&self, order: &Order, depth: u32) -> anyhow::Result<Preset> {
        let parent = self
            .parent_preset
            .as_ref()
            .context("this host starts no sub-agents")?;
        let mut preset = if order.agent_type == subagents::GENERAL {
            parent.clone()
        } else {
            let name = &order.agent_type;
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                anyhow::bail!(
                    "`{name}` is not an agent type: give `explore`, `general` or a preset's name"
                );
            }
            Preset::load(name, &PresetDirs::for_workspace(self.store.workspace())).with_context(
                || format!("no agent type `{name}`: give `explore`, `general` or a preset's name (`agent-lsp preset list`)"),
            )?
        };
        let file = &mut preset.file;
        file.model.max_steps = file.model.max_steps.min(order.budgets.max_steps);
        if depth >= order.max_depth {
            file.tools.enabled.retain(|tool| tool != subagents::TOOL);
        }
        file.permissions = crate::permissions::at_most(
            &file.permissions,
            &parent.file.permissions,
            &file.tools.enabled,
        );
        file.sandbox = file.sandbox.at_most(&parent.file.sandbox);
        Ok(preset)
    }
}

impl Spawner for Host {
    fn start(&self, order: Order, cancel: CancellationToken) -> anyhow::Result<Started> {
        let depth = self.depth + 1;
        let preset = self.child_preset(&order, depth)?;
        let below = Host {
            depth,
            ..self.clone()
        };
        let stop = Stop::new(cancel);
        let child_plugin = ChildPlugin::new(
            &order.agent_type,
            stop.clone(),
            order.budgets.max_prompt_tokens,
        );
        let link = ParentLink {
            session_id: order.parent_session.clone(),
            call_id: order.call_id.clone(),
            agent_type: order.agent_type.clone(),
            depth,
        };
        // A prompt too long to record is refused before a session is made for it.
        let conversation = below.open_child(
            preset.clone(),
            depth < order.max_depth,
            Box::new(child_plugin),
            link,
            &order.prompt,
        )?;
        let child = conversation.session.id().to_owned();
        let title = format!(
            "{}: {}",
            order.agent_type,
            order
                .title
                .clone()
                .unwrap_or_else(|| first_words(&order.prompt))
        );
        // A sub-agent's own children are shown under it (its session is their parent).
        let parent_entry = (self.depth > 0).then_some(order.parent_session.as_str());
        self.activity.start(
            Kind::Subagent,
            &child,
            &title,
            parent_entry,
            Some(stop.token().clone()),
        );
        let run = Run {
            conversation,
            stop,
            order,
            activity: self.activity.clone(),
        };
        Ok(Started {
            child,
            preset: preset.name.clone(),
            depth,
            run: Box::pin(run.run()),
        })
    }
}

/// One child's turn.
struct Run {
    conversation: Conversation,
    stop: Stop,
    order: Order,
    activity: Arc<Activity>,
}

impl Run {
    async fn run(mut self) -> Report {
        let started = Instant::now();
        let timer = {
            let (stop, wall) = (self.stop.clone(), self.order.budgets.wall);
            tokio::spawn(async move {
                tokio::time::sleep(wall).await;
                stop.stop(StopReason::TimeBudget);
            })
        };
        let child = self.conversation.session.id().to_owned();
        let mut ui = ActivityUi {
            activity: self.activity.clone(),
            id: child.clone(),
        };
        let token = self.stop.token().clone();
        let outcome = self
            .conversation
            .submit(&self.order.prompt, &token, &mut ui)
            .await;
        timer.abort();
        let (outcome, reason, text) = match outcome {
            Ok(TurnOutcome::Answered { text, .. }) => ("answered".to_owned(), None, text),
            Ok(TurnOutcome::StepLimit { steps }) => (
                StopReason::StepBudget.outcome().to_owned(),
                Some(format!("{steps} steps")),
                last_words(self.conversation.session.history()),
            ),
            Ok(TurnOutcome::Cancelled { .. }) => match self.stop.reason() {
                Some(reason) => (
                    reason.outcome().to_owned(),
                    Some(self.budget_line(reason)),
                    last_words(self.conversation.session.history()),
                ),
                None => (
                    "cancelled".to_owned(),
                    None,
                    last_words(self.conversation.session.history()),
                ),
            },
            Err(error) => (
                "error".to_owned(),
                Some(format!("{error:#}")),
                last_words(self.conversation.session.history()),
            ),
        };
        let end = totals(
            self.conversation.session.history(),
            SubagentEnd {
                call_id: self.order.call_id.clone(),
                child: child.clone(),
                outcome,
                reason,
                duration_ms: started.elapsed().as_millis() as u64,
                ..SubagentEnd::default()
            },
        );
        let shown = match &end.reason {
            Some(reason) => format!("{} ({reason})", end.outcome.replace('_', " ")),
            None => end.outcome.replace('_', " "),
        };
        self.activity.end(&child, &shown);
        Report { end, text }
    }

    fn budget_line(&self, reason: StopReason) -> String {
        let budgets = &self.order.budgets;
        match reason {
            StopReason::StepBudget => format!("{} steps", budgets.max_steps),
            StopReason::TokenBudget => format!(
                "{} of {} prompt tokens",
                subagents::child::prompt_tokens(&self.conversation.session),
                budgets.max_prompt_tokens
            ),
            StopReason::TimeBudget => format!("{} s", budgets.wall.as_secs()),
        }
    }
}

/// `end` with the child's steps, requests and token figures from its log.
fn totals(history: &History, mut end: SubagentEnd) -> SubagentEnd {
    for event in history.events() {
        match &event.body {
            EventBody::RequestHeader(_) => end.requests += 1,
            EventBody::AssistantMessage(_) => end.steps += 1,
            EventBody::Usage(usage) => {
                end.prompt_tokens += usage.prompt_tokens;
                end.completion_tokens += usage.completion_tokens;
                end.cache_read += usage.cache_read;
            }
            _ => {}
        }
    }
    end
}

/// The text of the child's last answer, for a result that says it stopped.
fn last_words(history: &History) -> String {
    history
        .events()
        .iter()
        .rev()
        .find_map(|event| match &event.body {
            EventBody::AssistantMessage(message) if !message.text.trim().is_empty() => {
                Some(message.text.clone())
            }
            _ => None,
        })
        .unwrap_or_default()
}

/// The start of a prompt, for a title.
fn first_words(prompt: &str) -> String {
    let line = prompt.lines().next().unwrap_or_default().trim();
    match line.char_indices().nth(60) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}

/// Shows a child's progress on the activity board: its step and the tools it calls.
struct ActivityUi {
    activity: Arc<Activity>,
    id: String,
}

impl TurnUi for ActivityUi {
    fn event(&mut self, event: &AgentEvent<'_>) {
        match event {
            AgentEvent::PreStep { step, .. } => {
                self.activity.detail(&self.id, &format!("step {step}"));
            }
            AgentEvent::ToolsBeforeCall { step, calls, .. } => {
                let names = ToolCallRef::names(calls);
                self.activity
                    .detail(&self.id, &format!("step {step}: {names}"));
            }
            _ => {}
        }
    }
}
