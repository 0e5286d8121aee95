//! The host: the one place an agent is started and driven, whoever asks. `agent-lsp run`,
//! `agent-lsp tool`, `agent-lsp mcp serve`, the editor's agent under `agent-lsp serve` and
//! every sub-agent are clients of it, and none of them imports another.
//!
//! A front end makes one [`Host`] with what all its agents share (the session store, the
//! activity board, and the [`ToolHost`]: bridge, documents, web settings, asker, buffers),
//! picks the session ([`Host::choose`]: new with a preset, or continued with the one it
//! keeps), and [`Host::open`]s a [`Conversation`] there with the model for that preset: the
//! session with its preset's plugins and tool catalog and, when a model is configured, the
//! agent. The
//! conversation takes a prompt ([`Conversation::submit`], events out through a `TurnUi`,
//! cancelled by a token) or one tool call ([`Conversation::call`]), and the front end shows
//! what comes out. [`Host::shutdown`] lets go of the servers at the end.
//!
//! How a preset becomes its plugins is [`assembly`]; how its tools become one catalog is
//! [`catalog`]; how a sub-agent is made one level down is `subagents`.

pub mod assembly;
pub mod catalog;
mod conversation;
pub mod environment;
mod subagents;
mod tools;

use std::sync::Arc;

use anyhow::Context;

use crate::activity::Activity;
use crate::agent::{Agent, Plugin};
use crate::llm::provider::Provider;
use crate::plugin::registry::PluginHost;
use crate::preset::{Preset, PresetDirs};
use crate::session::event::ParentLink;
use crate::session::log::Durability;
use crate::session::store::Store;
use crate::tools::ToolRuntime;
pub use conversation::Conversation;
pub use tools::{ToolHost, load_hooks};

/// Which session a conversation records into.
pub enum Start<'a> {
    /// A new session running this preset.
    New(Preset),
    /// The session this names (an id, a unique prefix or suffix, or `last`), with the preset
    /// it was started with: a session keeps its preset. When `preset` names another one, the
    /// session is not opened (nothing is appended to it) and the error says so.
    Continue {
        /// The session's id, a unique prefix or suffix of it, or `last`.
        session: &'a str,
        /// The preset the caller asked for, if any: it must be the session's own.
        preset: Option<&'a str>,
    },
    /// The session this names, with the tools and permissions of `preset` whatever the session
    /// runs: `agent-lsp tool --session`, the user's own calls under the preset they picked.
    Record {
        /// The session's id, a unique prefix or suffix of it, or `last`.
        session: &'a str,
        /// The preset whose tools and permissions the calls run with.
        preset: Preset,
    },
}

/// A session picked and its preset read, nothing opened yet: the front end picks the model
/// for [`Opening::preset`] (a preset may name one) before [`Host::open`].
pub struct Opening {
    preset: Preset,
    /// The id of the session to continue; `None` for a new one.
    session: Option<String>,
    /// The id a new session is made under, drawn earlier (`session/new` of ACP); a fresh one
    /// when `None`.
    new_id: Option<String>,
}

impl Opening {
    /// The preset the conversation will run.
    pub fn preset(&self) -> &Preset {
        &self.preset
    }

    /// Make the new session under `id` (drawn with `session::store::new_session_id`) rather
    /// than a fresh id; no effect when a session is continued.
    pub fn with_new_id(mut self, id: String) -> Opening {
        self.new_id = Some(id);
        self
    }
}

/// What an agent runs with, before it has a session.
pub struct Parts {
    /// Its plugins, in the order they handle events.
    pub plugins: Vec<Box<dyn Plugin>>,
    /// Its tools: the preset's catalog, permissions and the host's asker.
    pub tools: ToolRuntime,
}

/// Makes and drives the agents of one front end.
#[derive(Clone)]
pub struct Host {
    store: Store,
    /// The model of the conversation this host's agents belong to (sub-agents run on their
    /// parent's); `None` in a front end's host until [`Host::open`] is given one.
    provider: Option<Provider>,
    activity: Arc<Activity>,
    tools: ToolHost,
    /// The depth of the agents this host makes: 0 for a front end's, one more for each level
    /// of sub-agents.
    depth: u32,
    /// The preset of the agent whose children this host starts (what `general` runs).
    parent_preset: Option<Preset>,
}

impl Host {
    /// A front end's host: agents recorded in `store`'s workspace, their jobs and sub-agents
    /// shown on `activity`, their tools over `tools`.
    pub fn new(store: Store, activity: Arc<Activity>, tools: ToolHost) -> Host {
        Host {
            store,
            provider: None,
            activity,
            tools,
            depth: 0,
            parent_preset: None,
        }
    }

    /// The board the host's jobs, sub-agents and waited-for servers are shown on.
    pub fn activity(&self) -> &Arc<Activity> {
        &self.activity
    }

    /// The preset `name` as a new session of this workspace would load it: a user, built-in or
    /// workspace preset, or a `.toml` path.
    pub fn preset(&self, name: &str) -> anyhow::Result<Preset> {
        Preset::load(name, &PresetDirs::for_workspace(self.store.workspace()))
    }

    /// The plugins and tools of a top-level agent running `preset`, without a session: what
    /// `agent-lsp tool --list` shows.
    pub fn parts(&self, preset: &Preset) -> anyhow::Result<Parts> {
        self.parts_at(preset, true)
    }

    /// The session `start` names and the preset it runs; nothing is opened or written.
    pub fn choose(&self, start: Start<'_>) -> anyhow::Result<Opening> {
        Ok(match start {
            Start::New(preset) => Opening {
                preset,
                session: None,
                new_id: None,
            },
            Start::Continue { session, preset } => {
                let id = self.store.resolve(session)?;
                let history = self.store.load(&id)?;
                let header = history.header().context("the session has no header")?;
                if let Some(asked) = preset
                    && asked != header.preset
                {
                    anyhow::bail!(
                        "session {id} uses preset `{}`; a session keeps its preset (start a new session for `{asked}`)",
                        header.preset
                    );
                }
                Opening {
                    preset: Preset::of_session(header)?,
                    session: Some(id),
                    new_id: None,
                }
            }
            Start::Record { session, preset } => Opening {
                preset,
                session: Some(self.store.resolve(session)?),
                new_id: None,
            },
        })
    }

    /// A conversation in the session `opening` picked, on `provider` (`None`: no model is
    /// configured; tool calls still run). `first_prompt`, when given, is checked first: a
    /// prompt too long to record is refused before a session is made or opened.
    pub fn open(
        &self,
        opening: Opening,
        provider: Option<Provider>,
        first_prompt: Option<&str>,
    ) -> anyhow::Result<Conversation> {
        let host = Host {
            provider,
            ..self.clone()
        };
        let Opening {
            preset,
            session,
            new_id,
        } = opening;
        let parts = host.parts(&preset)?;
        let agent = host.agent(&preset, parts, None);
        if let (Some(prompt), Some(agent)) = (first_prompt, &agent.agent) {
            agent.prompt_text(prompt)?;
        }
        let session = match (&session, &new_id) {
            (Some(id), _) => self.store.open(id, Durability::Sync)?,
            (None, Some(id)) => self
                .store
                .create_session_as(id, &preset, Durability::Sync)?,
            (None, None) => self.store.create_session(&preset, Durability::Sync)?,
        };
        Ok(agent.into_conversation(session, preset))
    }

    /// The agent of `preset` over `parts` (and `child`, a sub-agent's own plugin), when a
    /// model is configured.
    fn agent(
        &self,
        preset: &Preset,
        parts: Parts,
        child: Option<Box<dyn Plugin>>,
    ) -> conversation::Unrecorded {
        let agent = self.provider.clone().map(|provider| {
            let agent = Agent::new(provider, parts.tools.clone(), preset.clone(), parts.plugins);
            match child {
                Some(child) => agent.with_plugin(child),
                None => agent,
            }
        });
        conversation::Unrecorded {
            agent,
            tools: parts.tools,
            provider: self.provider.clone(),
        }
    }

    /// A sub-agent's conversation: `preset` at this host's depth, with `child` among its
    /// plugins, in a new session under `link`, once `prompt` was found to fit.
    fn open_child(
        &self,
        preset: Preset,
        spawns: bool,
        child: Box<dyn Plugin>,
        link: ParentLink,
        prompt: &str,
    ) -> anyhow::Result<Conversation> {
        let parts = self.parts_at(&preset, spawns)?;
        let unrecorded = self.agent(&preset, parts, Some(child));
        let agent = unrecorded
            .agent
            .as_ref()
            .context("no model is configured for sub-agents")?;
        agent.prompt_text(prompt)?;
        let session = self
            .store
            .create_session_under(&preset, Durability::Sync, Some(link))?;
        Ok(unrecorded.into_conversation(session, preset))
    }

    /// The plugins and tools of an agent running `preset` at this host's depth; its `task`
    /// calls start children through a host one level down when `spawns`.
    fn parts_at(&self, preset: &Preset, spawns: bool) -> anyhow::Result<Parts> {
        let mut host: PluginHost = assembly::plugin_host(
            &self.store,
            preset,
            self.provider.clone(),
            self.activity.clone(),
        );
        if spawns && self.provider.is_some() {
            host.subagents = Some(Arc::new(Host {
                parent_preset: Some(preset.clone()),
                ..self.clone()
            }));
        }
        let assembly = assembly::assemble(preset, &host)?;
        let mut tools = self.tools.runtime(preset, &assembly, &self.activity)?;
        // A front end's agent takes the file checkpoints; a sub-agent's changes fall inside
        // the window its parent's `task` call opened.
        if self.depth == 0 && self.tools.checkpoints.enabled {
            tools = tools.with_checkpoints(crate::snapshots::Snapshots::for_state_dir(
                self.store.workspace(),
                self.store.workspace_dir(),
                self.tools.checkpoints.clone(),
            ));
        }
        Ok(Parts {
            plugins: assembly.plugins,
            tools,
        })
    }

    /// Let go of the servers at the end of the front end's process ([`ToolHost::shutdown`]).
    pub async fn shutdown(&self) {
        self.tools.shutdown().await;
    }
}

/// Compact `session` now, outside a turn, as its `preset` says (its `[plugins.compaction]`, or
/// the defaults when it has none: the user asked), on `provider` or with `summarizer`; with
/// the one line that says what came of it. The editor's `agent.compact`, ACP's `/compact` and
/// `agent-lsp session compact` all compact this way.
pub async fn compact_now(
    session: &mut crate::session::Session,
    preset: &Preset,
    provider: &Provider,
    summarizer: Option<Arc<dyn crate::compaction::summary::Summarizer>>,
    hooks: Option<&crate::hooks::Hooks>,
    cancel: &tokio_util::sync::CancellationToken,
) -> anyhow::Result<Compacted> {
    if let Some(hooks) = hooks {
        let turn = session.history().next_turn().saturating_sub(1);
        hooks.pre_compact(session, (turn, 0), true, cancel).await?;
    }
    let settings = preset
        .plugin_settings::<crate::compaction::CompactionSettings>("compaction")?
        .unwrap_or_default();
    let outcome = crate::compaction::compact_session(
        session,
        settings,
        preset.file.model.context_window,
        provider,
        summarizer,
        cancel,
    )
    .await?;
    Ok(Compacted {
        shrank: outcome.shrank(),
        message: crate::compaction::describe_outcome(&outcome)
            .unwrap_or_else(|| "nothing to compact: the session is short enough".to_owned()),
    })
}

/// What a compaction asked for by the user came to.
pub struct Compacted {
    /// Whether a checkpoint made the session shorter.
    pub shrank: bool,
    /// One line for the user.
    pub message: String,
}
