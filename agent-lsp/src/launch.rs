//! Starting agents: the one place a preset becomes the plugins, tools and (for a sub-agent)
//! the session an agent runs with, for `agent-lsp run`, `agent-lsp serve` and the `task`
//! tool's sub-agents alike.
//!
//! A [`Launcher`] is made once per host with what every agent of that host shares: the
//! session store, the model, the activity board, and the [`ToolHost`], which builds a
//! preset's tool runtime over the host's one bridge and document mirror (so a sub-agent queries the same
//! warm language servers and, under `serve`, reads the editor's unsaved buffers, with the same
//! asker for `ask` permissions). [`Launcher::parts`] gives the top-level agent its parts; the
//! launcher it puts into the host ([`PluginHost::subagents`]) makes that agent's children one
//! level deeper ([`Spawner::start`]), and so on down to the preset's `max_depth`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::activity::{Activity, Kind};
use crate::agent::{Agent, AgentEvent, TurnOutcome, TurnUi};
use crate::llm::provider::Provider;
use crate::plugin::Plugin;
use crate::plugin::registry::PluginHost;
use crate::plugin::tool::Tool;
use crate::preset::{Preset, PresetDirs};
use crate::session::event::{EventBody, ParentLink, SubagentEnd, ToolCallRef};
use crate::session::log::Durability;
use crate::session::store::Store;
use crate::session::{History, Session};
use crate::subagents::child::ChildPlugin;
use crate::subagents::{self, Order, Report, Spawner, Started, Stop, StopReason};
use crate::tools::buffers::Buffers;
use crate::tools::{Asker, ToolRuntime};

/// What every agent of a host gets its tools over: the workspace, the one bridge to its
/// language servers and the document mirror they share with the editor, the user's `[web]`
/// settings, who answers `ask`, and the editor's buffers under `serve`.
#[derive(Clone)]
pub struct ToolHost {
    pub workspace: PathBuf,
    pub bridge: lsp_bridge::Bridge,
    pub documents: Arc<lsp_bridge::documents::DocumentMirror>,
    pub web: crate::web::WebRuntime,
    pub asker: Arc<dyn Asker>,
    pub buffers: Option<Arc<dyn Buffers>>,
    /// The workspace's shared bridge, for hosts that may attach to another process's warm
    /// servers (`run`, `tool`, `mcp serve`); `serve` publishes its own and never attaches.
    pub shared: Option<Arc<crate::shared_bridge::SharedBridge>>,
}

impl ToolHost {
    /// The tool runtime of `preset`, with the tools its plugins brought; the language servers
    /// a slow `lsp_*` call waits for are shown on `activity`.
    pub fn runtime(
        &self,
        preset: &Preset,
        plugin_tools: &[Arc<dyn Tool>],
        activity: &Arc<Activity>,
    ) -> anyhow::Result<ToolRuntime> {
        let queries = lsp_bridge::queries::Queries::new(
            Arc::new(self.bridge.clone()),
            self.documents.clone(),
        );
        let mut lsp_tools =
            crate::tools::lsp::LspTools::new(queries).with_activity(activity.clone());
        if let Some(shared) = &self.shared {
            lsp_tools = lsp_tools.with_shared(shared.clone());
        }
        let runtime =
            crate::harness::runtime_over(&self.workspace, preset, lsp_tools, plugin_tools)?
                .with_web(self.web.clone())
                .with_asker(self.asker.clone());
        Ok(match &self.buffers {
            Some(buffers) => runtime.with_buffers(buffers.clone()),
            None => runtime,
        })
    }
}

/// What an agent runs with.
pub struct Parts {
    pub plugins: Vec<Box<dyn Plugin>>,
    pub tools: ToolRuntime,
}

/// Makes the agents of one host.
#[derive(Clone)]
pub struct Launcher {
    store: Store,
    provider: Option<Provider>,
    activity: Arc<Activity>,
    tools: ToolHost,
    /// The depth of the agents this launcher makes parts for: 0 for the top-level agent.
    depth: u32,
    /// The preset of the agent whose children this launcher starts (what `general` runs).
    preset: Option<Preset>,
}

impl Launcher {
    pub fn new(
        store: Store,
        provider: Option<Provider>,
        activity: Arc<Activity>,
        tools: ToolHost,
    ) -> Launcher {
        Launcher {
            store,
            provider,
            activity,
            tools,
            depth: 0,
            preset: None,
        }
    }

    pub fn activity(&self) -> &Arc<Activity> {
        &self.activity
    }

    /// The plugins and tools of the top-level agent running `preset`.
    pub fn parts(&self, preset: &Preset) -> anyhow::Result<Parts> {
        self.parts_at(preset, true)
    }

    /// The plugins and tools of an agent running `preset` at this launcher's depth; its `task`
    /// calls start children through a launcher one level down when `spawns`.
    fn parts_at(&self, preset: &Preset, spawns: bool) -> anyhow::Result<Parts> {
        let mut host: PluginHost = crate::harness::host(
            &self.store,
            preset,
            self.provider.clone(),
            self.activity.clone(),
        );
        if spawns && self.provider.is_some() {
            host.subagents = Some(Arc::new(Launcher {
                preset: Some(preset.clone()),
                ..self.clone()
            }));
        }
        let assembly = crate::harness::assemble(preset, &host)?;
        let tools = self
            .tools
            .runtime(preset, &assembly.tools, &self.activity)?;
        Ok(Parts {
            plugins: assembly.plugins,
            tools,
        })
    }

    /// The preset a child of `agent_type` runs with: the parent's own for `general`, else the
    /// preset of that name; its steps and its permissions bounded by the budget and the
    /// parent's, and without `task` at the deepest level.
    fn child_preset(&self, order: &Order, depth: u32) -> anyhow::Result<Preset> {
        let parent = self
            .preset
            .as_ref()
            .context("this launcher starts no sub-agents")?;
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
        Ok(preset)
    }
}

impl Spawner for Launcher {
    fn start(&self, order: Order, cancel: CancellationToken) -> anyhow::Result<Started> {
        let provider = self
            .provider
            .clone()
            .context("no model is configured for sub-agents")?;
        let depth = self.depth + 1;
        let preset = self.child_preset(&order, depth)?;
        let below = Launcher {
            depth,
            ..self.clone()
        };
        let parts = below.parts_at(&preset, depth < order.max_depth)?;
        let stop = Stop::new(cancel);
        let agent = Agent::new(provider, parts.tools, preset.clone(), parts.plugins).with_plugin(
            Box::new(ChildPlugin::new(
                &order.agent_type,
                stop.clone(),
                order.budgets.max_prompt_tokens,
            )),
        );
        // A prompt too long to record is refused before a session is made for it.
        agent.prompt_text(&order.prompt)?;
        let session = self.store.create_session_under(
            &preset,
            Durability::Sync,
            Some(ParentLink {
                session_id: order.parent_session.clone(),
                call_id: order.call_id.clone(),
                agent_type: order.agent_type.clone(),
                depth,
            }),
        )?;
        let child = session.id().to_owned();
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
            agent,
            session,
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
    agent: Agent,
    session: Session,
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
        let child = self.session.id().to_owned();
        let mut ui = ActivityUi {
            activity: self.activity.clone(),
            id: child.clone(),
        };
        let token = self.stop.token().clone();
        let outcome = self
            .agent
            .run_turn(&mut self.session, &self.order.prompt, &token, &mut ui)
            .await;
        timer.abort();
        let (outcome, reason, text) = match outcome {
            Ok(TurnOutcome::Answered { text, .. }) => ("answered".to_owned(), None, text),
            Ok(TurnOutcome::StepLimit { steps }) => (
                StopReason::StepBudget.outcome().to_owned(),
                Some(format!("{steps} steps")),
                last_words(self.session.history()),
            ),
            Ok(TurnOutcome::Cancelled { .. }) => match self.stop.reason() {
                Some(reason) => (
                    reason.outcome().to_owned(),
                    Some(self.budget_line(reason)),
                    last_words(self.session.history()),
                ),
                None => (
                    "cancelled".to_owned(),
                    None,
                    last_words(self.session.history()),
                ),
            },
            Err(error) => (
                "error".to_owned(),
                Some(format!("{error:#}")),
                last_words(self.session.history()),
            ),
        };
        let end = totals(
            self.session.history(),
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
                subagents::child::prompt_tokens(&self.session),
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
