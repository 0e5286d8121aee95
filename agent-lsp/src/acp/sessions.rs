//! The sessions a client has open: each one of our sessions, in the workspace its `cwd` names,
//! with the host its turns run on.
//!
//! A session's log is made at its first prompt, under the id `session/new` gave the client,
//! so the mode (the preset) can be chosen until then: a session keeps its preset, as
//! everywhere else. Every session of a workspace shares one bridge to its language servers,
//! attached to the workspace's shared bridge when an `agent-lsp serve` already runs there.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{McpServer, SessionId, SessionInfo};
use tokio_util::sync::CancellationToken;

use super::client::{ClientAsker, ClientFiles};
use super::tail::TailSlot;
use super::{Acp, AcpError, lock};
use crate::activity::Activity;
use crate::agent::bounds::PromptTooLong;
use crate::host::{Conversation, Host, Start, ToolHost};
use crate::mcp::config::{McpOptions, ServerConfig};
use crate::preset::Preset;
use crate::session::store::Store;

/// The tools and store every session of one workspace shares.
#[derive(Clone)]
pub(super) struct Place {
    pub store: Store,
    pub tools: ToolHost,
    pub activity: Arc<Activity>,
    /// The workspace's file checkpoints, held so the capture warmed when the place was made
    /// (in the background: on a big tree a process's first capture takes a walk) is the one
    /// the first turn finds.
    _snapshots: Option<Arc<crate::snapshots::Snapshots>>,
}

/// One session the client has open.
pub(super) struct Live {
    pub id: String,
    pub place: Place,
    /// The workspace's tools with this session's asker and buffers, before its preset's MCP
    /// servers are added (see [`Live::host`]).
    tools: ToolHost,
    /// The MCP servers the client passed for the session.
    servers: McpOptions,
    /// What the session runs with, changed only between turns.
    pub settings: Mutex<Settings>,
    /// The open conversation, once a prompt needed it; the running turn holds it.
    pub conversation: tokio::sync::Mutex<Option<Conversation>>,
    /// The token of the prompt in flight, from its request to its answer: `session/cancel`
    /// cancels it, and a second prompt, a mode or a model is refused while it is there.
    pub turn: Mutex<Option<CancellationToken>>,
    /// The running turn's tail, where the asker shows a call before asking about it.
    pub tail: TailSlot,
}

/// What a session runs with.
pub(super) struct Settings {
    /// The session's preset: its mode.
    pub preset: Preset,
    /// The model picked with the `model` option; the configured one when `None`.
    pub model: Option<String>,
    /// Whether the session's log exists (it was loaded, or a prompt made it).
    pub recorded: bool,
    /// The model changed: the next prompt opens the conversation again.
    pub reopen: bool,
}

impl Acp {
    /// The shared tools of the workspace `cwd` names, made on first use.
    pub(super) fn place(&self, cwd: &Path) -> Result<Place, AcpError> {
        let workspace = workspace_of(cwd)?;
        let mut places = lock(&self.places);
        if let Some(place) = places.get(&workspace) {
            return Ok(place.clone());
        }
        let store = Store::for_workspace(&workspace).map_err(AcpError::internal)?;
        let tools = ToolHost::owned(
            &store,
            &self.config,
            Arc::new(crate::tools::HeadlessAsker::default()),
            "acp",
        )
        .map_err(AcpError::internal)?;
        let snapshots = tools.checkpoints.enabled.then(|| {
            let snapshots = crate::snapshots::Snapshots::for_state_dir(
                store.workspace(),
                store.workspace_dir(),
                tools.checkpoints.clone(),
            );
            let warming = snapshots.clone();
            tokio::task::spawn_blocking(move || {
                if let Err(error) = warming.warm() {
                    tracing::warn!("the file checkpoints could not be prepared: {error:#}");
                }
            });
            snapshots
        });
        let place = Place {
            store,
            tools,
            activity: Arc::new(Activity::default()),
            _snapshots: snapshots,
        };
        places.insert(workspace, place.clone());
        Ok(place)
    }

    /// Open a session for the client: `id` in `place`, running `preset`, with the client's
    /// MCP servers, asking and reading through `connection`.
    pub(super) fn open(
        &self,
        id: String,
        place: Place,
        preset: Preset,
        recorded: bool,
        servers: &[McpServer],
        connection: &ConnectionTo<Client>,
    ) -> Result<Arc<Live>, AcpError> {
        let session = SessionId::new(id.clone());
        let tail = TailSlot::default();
        let mut tools = place.tools.clone();
        tools.asker = Arc::new(ClientAsker {
            connection: connection.clone(),
            session: session.clone(),
            workspace: place.store.workspace().to_owned(),
            always: Arc::new(Mutex::new(BTreeSet::new())),
            tail: tail.clone(),
        });
        let fs = lock(&self.client).fs.clone();
        if fs.read_text_file && fs.write_text_file {
            tools.buffers = Some(Arc::new(ClientFiles {
                connection: connection.clone(),
                session,
            }));
        }
        let servers = mcp_options(servers)?;
        let live = Arc::new(Live {
            id: id.clone(),
            place,
            tools,
            servers,
            settings: Mutex::new(Settings {
                preset,
                model: None,
                recorded,
                reopen: false,
            }),
            conversation: tokio::sync::Mutex::new(None),
            turn: Mutex::new(None),
            tail,
        });
        lock(&self.sessions).insert(id, live.clone());
        Ok(live)
    }

    /// The session the client named, if it has it open.
    pub(super) fn live(&self, id: &SessionId) -> Result<Arc<Live>, AcpError> {
        lock(&self.sessions).get(&*id.0).cloned().ok_or_else(|| {
            AcpError::not_found(format!(
                "no open session `{}`: create one with session/new, or open it with session/load or session/resume",
                id.0
            ))
        })
    }

    /// Forget a session the client closed; its turn, if one runs, is cancelled, and until it
    /// has let go of the log the session is `closing` (opening it again waits for that).
    pub(super) fn close(self: &Arc<Self>, id: &SessionId) -> Result<(), AcpError> {
        let live = lock(&self.sessions)
            .remove(&*id.0)
            .ok_or_else(|| AcpError::not_found(format!("no open session `{}`", id.0)))?;
        if let Some(cancel) = lock(&live.turn).as_ref() {
            cancel.cancel();
        }
        lock(&self.closing).insert(live.id.clone(), live.clone());
        let acp = self.clone();
        tokio::spawn(async move {
            drop(live.conversation.lock().await);
            lock(&acp.closing).remove(&live.id);
        });
        Ok(())
    }

    /// The sessions of the workspace `cwd` names, newest first, as `agent-lsp session list`
    /// lists them (sub-agents' sessions are reached through their parent's); without `cwd`,
    /// those of the workspaces sessions were opened in. Listing starts nothing.
    pub(super) fn list(&self, cwd: Option<&Path>) -> Result<Vec<SessionInfo>, AcpError> {
        let stores = match cwd {
            Some(cwd) => {
                vec![Store::for_workspace(&workspace_of(cwd)?).map_err(AcpError::internal)?]
            }
            None => lock(&self.places)
                .values()
                .map(|place| place.store.clone())
                .collect(),
        };
        let mut sessions = Vec::new();
        for store in &stores {
            sessions.extend(listed(store)?);
        }
        sessions.sort_by(|a, b| b.updated_at.cmp(&a.updated_at));
        Ok(sessions)
    }

    /// Open a recorded session of `cwd` again (`session/load`, `session/resume`), with the
    /// preset it keeps.
    pub(super) async fn reopen(
        &self,
        id: &SessionId,
        cwd: &Path,
        servers: &[McpServer],
        connection: &ConnectionTo<Client>,
    ) -> Result<Arc<Live>, AcpError> {
        // A session closed while its turn ran: its log is free once that turn let go of it.
        let closing = lock(&self.closing).get(&*id.0).cloned();
        if let Some(closing) = closing {
            drop(closing.conversation.lock().await);
        }
        tokio::task::block_in_place(|| self.reopen_now(id, cwd, servers, connection))
    }

    fn reopen_now(
        &self,
        id: &SessionId,
        cwd: &Path,
        servers: &[McpServer],
        connection: &ConnectionTo<Client>,
    ) -> Result<Arc<Live>, AcpError> {
        let place = self.place(cwd)?;
        // A session this process has open, made by `session/new` and not prompted yet (its
        // log does not exist) or already loaded: the same session again.
        if let Some(live) = lock(&self.sessions).get(&*id.0).cloned() {
            if live.place.store.workspace() != place.store.workspace() {
                return Err(AcpError::params(format!(
                    "session `{}` is in {}, not {}",
                    id.0,
                    live.place.store.workspace().display(),
                    place.store.workspace().display()
                )));
            }
            return Ok(live);
        }
        // Only a whole id: a client's session id is never a prefix.
        let ids = place.store.ids().map_err(AcpError::internal)?;
        if !ids.iter().any(|known| **known == *id.0) {
            return Err(AcpError::not_found(format!(
                "no session `{}` in {}",
                id.0,
                place.store.workspace().display()
            )));
        }
        let history = place.store.load(&id.0).map_err(AcpError::internal)?;
        let header = history
            .header()
            .ok_or_else(|| AcpError::internal(anyhow::anyhow!("the session has no header")))?;
        let preset = Preset::of_session(header).map_err(AcpError::internal)?;
        self.open(id.0.to_string(), place, preset, true, servers, connection)
    }
}

impl Live {
    /// The host of a conversation running `preset`: the client's MCP servers join its tools
    /// under the preset's `[plugins.mcp]`, as the config file's do (a preset without it has
    /// no MCP tools). Made when the conversation opens, so a mode chosen before the first
    /// prompt decides.
    fn host(&self, preset: &Preset, config: &crate::config::Config) -> Result<Host, AcpError> {
        let mut tools = self.tools.clone();
        let settings = preset
            .plugin_settings::<crate::mcp::McpSettings>(crate::mcp::PLUGIN)
            .map_err(AcpError::internal)?;
        match settings {
            Some(settings) => {
                tools.front_end = crate::mcp::front_end_tools(
                    &self.servers,
                    &settings,
                    &config.mcp,
                    self.place.store.workspace(),
                    crate::session::store::state_root_of(self.place.store.workspace_dir()),
                );
            }
            None if !self.servers.servers.is_empty() => {
                tracing::warn!(preset = %preset.name, "the client's MCP servers are not used: the preset has no [plugins.mcp]");
            }
            None => {}
        }
        Ok(Host::new(
            self.place.store.clone(),
            self.place.activity.clone(),
            tools,
        ))
    }

    /// Open this session's conversation for `prompt` if it is not (or the model changed):
    /// the log is made now if this is the session's first prompt. A prompt too long to record
    /// is refused as bad input, before anything is written.
    pub(super) fn open_conversation(
        &self,
        conversation: &mut Option<Conversation>,
        acp: &Acp,
        prompt: &str,
    ) -> Result<(), AcpError> {
        let (preset, model, recorded) = {
            let mut settings = lock(&self.settings);
            if std::mem::take(&mut settings.reopen) {
                *conversation = None;
            }
            (
                settings.preset.clone(),
                settings.model.clone(),
                settings.recorded,
            )
        };
        if conversation.is_some() {
            return Ok(());
        }
        // Opening starts the client's MCP servers never seen before, reads the log and may
        // wait for its lock: off the async workers.
        let opened = tokio::task::block_in_place(|| {
            let host = self.host(&preset, &acp.config)?;
            let opening = if recorded {
                host.choose(Start::Continue {
                    session: &self.id,
                    preset: None,
                })
            } else {
                host.choose(Start::New(preset))
                    .map(|opening| opening.with_new_id(self.id.clone()))
            }
            .map_err(AcpError::internal)?;
            let provider = acp.provider(model.as_deref(), opening.preset())?;
            host.open(opening, Some(provider), Some(prompt))
                .map_err(|error| match error.downcast_ref::<PromptTooLong>() {
                    Some(too_long) => AcpError::params(too_long.to_string()),
                    None => AcpError::failed(format!("{error:#}")),
                })
        })?;
        lock(&self.settings).recorded = true;
        *conversation = Some(opened);
        Ok(())
    }

    /// The session's log file.
    pub(super) fn log_path(&self) -> PathBuf {
        self.place.store.path_of(&self.id)
    }
}

/// The workspace `cwd` names: absolute, there, a folder, canonical.
fn workspace_of(cwd: &Path) -> Result<PathBuf, AcpError> {
    if !cwd.is_absolute() {
        return Err(AcpError::params(format!(
            "`cwd` must be an absolute path, not {}",
            cwd.display()
        )));
    }
    let workspace = cwd.canonicalize().map_err(|error| {
        AcpError::params(format!("`cwd` {} cannot be used: {error}", cwd.display()))
    })?;
    if !workspace.is_dir() {
        return Err(AcpError::params(format!(
            "`cwd` {} is not a folder",
            workspace.display()
        )));
    }
    Ok(workspace)
}

/// The sessions of `store` as a client lists them.
fn listed(store: &Store) -> Result<Vec<SessionInfo>, AcpError> {
    let rows = crate::session_report::list_json(store).map_err(AcpError::internal)?;
    Ok(rows
        .iter()
        .filter(|row| row["parent"].is_null() && row["error"].is_null())
        .map(|row| {
            let title = row["first_prompt"].as_str().map(|prompt| {
                let line = prompt.lines().next().unwrap_or_default();
                match line.char_indices().nth(80) {
                    Some((at, _)) => format!("{}…", &line[..at]),
                    None => line.to_owned(),
                }
            });
            SessionInfo::new(
                row["id"].as_str().unwrap_or_default().to_owned(),
                store.workspace().to_owned(),
            )
            .title(title)
            .updated_at(row["last_activity"].as_str().map(str::to_owned))
        })
        .collect())
}

/// The client's MCP servers as our configuration writes them. The client's servers are the
/// user's own (their editor's settings), trusted like the config file's.
fn mcp_options(servers: &[McpServer]) -> Result<McpOptions, AcpError> {
    let mut options = McpOptions::default();
    for server in servers {
        let (name, config) = match server {
            McpServer::Stdio(stdio) => (
                stdio.name.clone(),
                ServerConfig {
                    command: Some(stdio.command.to_string_lossy().into_owned()),
                    args: stdio.args.clone(),
                    env: stdio
                        .env
                        .iter()
                        .map(|var| (var.name.clone(), var.value.clone()))
                        .collect(),
                    ..ServerConfig::default()
                },
            ),
            McpServer::Http(http) => (
                http.name.clone(),
                ServerConfig {
                    url: Some(http.url.clone()),
                    headers: http
                        .headers
                        .iter()
                        .map(|header| (header.name.clone(), header.value.clone()))
                        .collect(),
                    ..ServerConfig::default()
                },
            ),
            _ => {
                return Err(AcpError::params(
                    "only stdio and HTTP MCP servers are supported (the agent does not offer `sse`)",
                ));
            }
        };
        if options.servers.insert(name.clone(), config).is_some() {
            return Err(AcpError::params(format!(
                "two MCP servers are named `{name}`"
            )));
        }
    }
    Ok(options)
}
