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
use super::{Acp, AcpError, lock};
use crate::activity::Activity;
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
    pub host: Host,
    /// The turn's state; a running turn holds it for its length.
    pub state: tokio::sync::Mutex<State>,
    /// The running turn's token, which `session/cancel` cancels.
    pub cancel: Mutex<Option<CancellationToken>>,
}

/// What a session runs with.
pub(super) struct State {
    /// The session's preset: its mode.
    pub preset: Preset,
    /// The model picked with the `model` option; the configured one when `None`.
    pub model: Option<String>,
    /// Whether the session's log exists (it was loaded, or a prompt made it).
    pub recorded: bool,
    /// The open conversation, once a prompt needed it; dropped when the model changes.
    pub conversation: Option<Conversation>,
}

impl Acp {
    /// The shared tools of the workspace `cwd` names, made on first use.
    pub(super) fn place(&self, cwd: &Path) -> Result<Place, AcpError> {
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
        let mut tools = place.tools.clone();
        tools.asker = Arc::new(ClientAsker {
            connection: connection.clone(),
            session: session.clone(),
            workspace: place.store.workspace().to_owned(),
            always: Arc::new(Mutex::new(BTreeSet::new())),
        });
        let fs = lock(&self.client).fs.clone();
        if fs.read_text_file && fs.write_text_file {
            tools.buffers = Some(Arc::new(ClientFiles {
                connection: connection.clone(),
                session,
            }));
        }
        tools.front_end = crate::mcp::front_end_tools(
            &mcp_options(servers)?,
            &self.config.mcp,
            place.store.workspace(),
            crate::session::store::state_root_of(place.store.workspace_dir()),
        );
        let host = Host::new(place.store.clone(), place.activity.clone(), tools);
        let live = Arc::new(Live {
            id: id.clone(),
            place,
            host,
            state: tokio::sync::Mutex::new(State {
                preset,
                model: None,
                recorded,
                conversation: None,
            }),
            cancel: Mutex::new(None),
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

    /// Forget a session the client closed; its turn, if one runs, is cancelled.
    pub(super) fn close(&self, id: &SessionId) -> Result<(), AcpError> {
        let live = lock(&self.sessions)
            .remove(&*id.0)
            .ok_or_else(|| AcpError::not_found(format!("no open session `{}`", id.0)))?;
        if let Some(cancel) = lock(&live.cancel).as_ref() {
            cancel.cancel();
        }
        Ok(())
    }

    /// The workspace's sessions, newest first, as `agent-lsp session list` lists them;
    /// sub-agents' sessions are reached through their parent's.
    pub(super) fn list(&self, cwd: &Path) -> Result<Vec<SessionInfo>, AcpError> {
        let place = self.place(cwd)?;
        let rows = crate::session_report::list_json(&place.store).map_err(AcpError::internal)?;
        let mut sessions = rows
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
                    place.store.workspace().to_owned(),
                )
                .title(title)
                .updated_at(row["last_activity"].as_str().map(str::to_owned))
            })
            .collect::<Vec<_>>();
        sessions.reverse();
        Ok(sessions)
    }

    /// Open a recorded session of `cwd` again (`session/load`, `session/resume`), with the
    /// preset it keeps.
    pub(super) fn reopen(
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
    /// The conversation of this session, opened (or reopened with a new model) for a prompt
    /// `prompt`; the log is made now if this is the session's first prompt.
    pub(super) fn conversation<'a>(
        &self,
        state: &'a mut State,
        acp: &Acp,
        prompt: &str,
    ) -> Result<&'a mut Conversation, AcpError> {
        if state.conversation.is_none() {
            let opening = if state.recorded {
                self.host
                    .choose(Start::Continue {
                        session: &self.id,
                        preset: None,
                    })
                    .map_err(AcpError::internal)?
            } else {
                self.host
                    .choose(Start::New(state.preset.clone()))
                    .map_err(AcpError::internal)?
                    .with_new_id(self.id.clone())
            };
            let provider = acp.provider(state.model.as_deref(), opening.preset())?;
            let conversation = self
                .host
                .open(opening, Some(provider), Some(prompt))
                .map_err(|error| AcpError::params(format!("{error:#}")))?;
            state.recorded = true;
            state.conversation = Some(conversation);
        }
        Ok(state.conversation.as_mut().expect("opened above"))
    }

    /// The session's log file.
    pub(super) fn log_path(&self) -> PathBuf {
        self.place.store.path_of(&self.id)
    }
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
