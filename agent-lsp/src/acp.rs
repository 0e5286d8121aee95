//! `agent-lsp acp`: the agent as an Agent Client Protocol server on stdio, for the editors
//! that host agents in a panel of their own (Zed, the JetBrains IDEs, Neovim's and Emacs'
//! agent plugins). Protocol version 1 over the official crate (`agent-client-protocol`,
//! docs/decisions/0010-acp.md); nothing but JSON-RPC goes to stdout, logs go to stderr.
//!
//! It is a front end of the one host, as `run` and `serve` are: a session is one of our
//! sessions ([`sessions`]), a prompt a turn of its conversation ([`turn`]) whose log is what
//! the client is shown ([`updates`]); a call whose permission is `ask` asks the client, and the
//! file tools read and write through it when it offers `fs` ([`client`]); presets are the
//! session's modes, the model a config option, skills and `/compact`, `/memory` its slash
//! commands ([`options`]).
//!
//! Each handler answers at once, or hands its work to a task: the connection reads the next
//! message only once a handler returns, and `session/cancel` must get through while a turn
//! runs.

mod client;
mod options;
mod sessions;
mod turn;
mod updates;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AuthenticateRequest, AuthenticateResponse, AvailableCommandsUpdate,
    CancelNotification, ClientCapabilities, CloseSessionRequest, CloseSessionResponse,
    Implementation, InitializeRequest, InitializeResponse, ListSessionsRequest,
    ListSessionsResponse, LoadSessionRequest, LoadSessionResponse, McpCapabilities,
    NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest, ResumeSessionRequest,
    ResumeSessionResponse, SessionCapabilities, SessionCloseCapabilities, SessionId,
    SessionListCapabilities, SessionNotification, SessionResumeCapabilities, SessionUpdate,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest,
    SetSessionModeResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Stdio};

use crate::config::Config;
use crate::llm::provider::Provider;
use crate::preset::{DEFAULT_PRESET, Preset};
use sessions::{Live, Place};

/// What `agent-lsp acp` was started with.
#[derive(Debug, Default)]
pub struct AcpOptions {
    /// The preset new sessions start in (the config file's, else the default, when `None`).
    pub preset: Option<String>,
    /// The model endpoint's base URL, over the config file's.
    pub base_url: Option<String>,
    /// The model, over the config file's and the preset's.
    pub model: Option<String>,
}

/// The state every handler shares.
pub(crate) struct Acp {
    options: AcpOptions,
    config: Config,
    /// What the client said it can do at `initialize`.
    client: Mutex<ClientCapabilities>,
    /// The tools of each workspace sessions were opened in.
    places: Mutex<HashMap<PathBuf, Place>>,
    /// The sessions the client has open, by id.
    sessions: Mutex<HashMap<String, Arc<Live>>>,
    /// The models the endpoint offers, asked once.
    offered: tokio::sync::OnceCell<Vec<String>>,
}

/// An error as the client gets it: a JSON-RPC code and a message saying what to do.
#[derive(Debug)]
pub(crate) struct AcpError {
    code: agent_client_protocol::ErrorCode,
    message: String,
}

impl AcpError {
    fn params(message: impl Into<String>) -> AcpError {
        AcpError {
            code: agent_client_protocol::ErrorCode::INVALID_PARAMS,
            message: message.into(),
        }
    }

    fn not_found(message: impl Into<String>) -> AcpError {
        AcpError {
            code: agent_client_protocol::ErrorCode::RESOURCE_NOT_FOUND,
            message: message.into(),
        }
    }

    /// A turn or a command that failed (the model endpoint, compaction).
    fn failed(message: impl Into<String>) -> AcpError {
        AcpError {
            code: agent_client_protocol::ErrorCode::INTERNAL_ERROR,
            message: message.into(),
        }
    }

    fn internal(error: anyhow::Error) -> AcpError {
        AcpError::failed(format!("{error:#}"))
    }
}

impl From<AcpError> for agent_client_protocol::Error {
    fn from(error: AcpError) -> agent_client_protocol::Error {
        agent_client_protocol::Error::new(error.code, error.message)
    }
}

/// Serve ACP on stdin and stdout until the client closes them.
pub fn serve(options: AcpOptions) -> anyhow::Result<()> {
    let config = Config::load()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let acp = Arc::new(Acp {
        options,
        config,
        client: Mutex::new(ClientCapabilities::default()),
        places: Mutex::new(HashMap::new()),
        sessions: Mutex::new(HashMap::new()),
        offered: tokio::sync::OnceCell::new(),
    });
    let served = runtime.block_on(connect(acp.clone()));
    runtime.block_on(async {
        let places = lock(&acp.places).values().cloned().collect::<Vec<_>>();
        for place in places {
            place.tools.shutdown().await;
        }
    });
    crate::jobs::kill_all();
    served.map_err(|error| anyhow::anyhow!("the ACP connection failed: {error}"))
}

async fn connect(acp: Arc<Acp>) -> Result<(), agent_client_protocol::Error> {
    let (a, b, c, d, e, f, g, h, i, j, k) = (
        acp.clone(),
        acp.clone(),
        acp.clone(),
        acp.clone(),
        acp.clone(),
        acp.clone(),
        acp.clone(),
        acp.clone(),
        acp.clone(),
        acp.clone(),
        acp,
    );
    Agent
        .v1()
        .name("agent-lsp")
        .on_receive_request(
            async move |request: InitializeRequest, responder: Responder<InitializeResponse>, _| {
                responder.respond(a.initialize(request))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_: AuthenticateRequest, responder: Responder<AuthenticateResponse>, _| {
                responder.respond(AuthenticateResponse::new())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest,
                        responder: Responder<NewSessionResponse>,
                        connection: ConnectionTo<Client>| {
                let made = b.new_session(request, &connection).await;
                answer(responder, made, &b, &connection)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest,
                        responder: Responder<LoadSessionResponse>,
                        connection: ConnectionTo<Client>| {
                let loaded = c.load_session(request, &connection).await;
                answer(responder, loaded, &c, &connection)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ResumeSessionRequest,
                        responder: Responder<ResumeSessionResponse>,
                        connection: ConnectionTo<Client>| {
                let resumed = d.resume_session(request, &connection).await;
                answer(responder, resumed, &d, &connection)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ListSessionsRequest,
                        responder: Responder<ListSessionsResponse>,
                        _| {
                let cwd = match request.cwd {
                    Some(cwd) => cwd,
                    None => std::env::current_dir().unwrap_or_default(),
                };
                let listed = e.list(&cwd).map(ListSessionsResponse::new);
                responder.respond_with_result(listed.map_err(Into::into))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: CloseSessionRequest,
                        responder: Responder<CloseSessionResponse>,
                        _| {
                let closed = f
                    .close(&request.session_id)
                    .map(|()| CloseSessionResponse::new());
                responder.respond_with_result(closed.map_err(Into::into))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionModeRequest,
                        responder: Responder<SetSessionModeResponse>,
                        connection: ConnectionTo<Client>| {
                let set = g.set_mode(request, &connection).await;
                responder.respond_with_result(set.map_err(Into::into))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionConfigOptionRequest,
                        responder: Responder<SetSessionConfigOptionResponse>,
                        _| {
                let set = h.set_option(request).await;
                responder.respond_with_result(set.map_err(Into::into))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest,
                        responder: Responder<agent_client_protocol::v1::schema::PromptResponse>,
                        connection: ConnectionTo<Client>| {
                // The turn runs beside the connection, which goes on reading (a cancel).
                let acp = i.clone();
                tokio::spawn(async move {
                    let answered = turn::prompt(&acp, request, &connection).await;
                    let _ = responder.respond_with_result(answered.map_err(Into::into));
                });
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |cancel: CancelNotification, _: ConnectionTo<Client>| {
                if let Ok(live) = j.live(&cancel.session_id)
                    && let Some(token) = lock(&live.cancel).as_ref()
                {
                    token.cancel();
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(Stdio::new())
        .await?;
    drop(k);
    Ok(())
}

/// Answer a request that opened a session with its response, then tell the client the
/// session's slash commands (it can route them once it knows the session).
fn answer<R: agent_client_protocol::JsonRpcResponse>(
    responder: Responder<R>,
    made: Result<(R, Arc<Live>), AcpError>,
    acp: &Acp,
    connection: &ConnectionTo<Client>,
) -> Result<(), agent_client_protocol::Error> {
    match made {
        Ok((response, live)) => {
            responder.respond(response)?;
            acp.announce(&live, connection);
            Ok(())
        }
        Err(error) => responder.respond_with_error(error.into()),
    }
}

impl Acp {
    fn initialize(&self, request: InitializeRequest) -> InitializeResponse {
        *lock(&self.client) = request.client_capabilities.clone();
        InitializeResponse::new(ProtocolVersion::V1)
            .agent_capabilities(
                AgentCapabilities::new()
                    .load_session(true)
                    .prompt_capabilities(PromptCapabilities::new().embedded_context(true))
                    .mcp_capabilities(McpCapabilities::new().http(true))
                    .session_capabilities(
                        SessionCapabilities::new()
                            .list(SessionListCapabilities::new())
                            .resume(SessionResumeCapabilities::new())
                            .close(SessionCloseCapabilities::new()),
                    ),
            )
            .agent_info(
                Implementation::new("agent-lsp", env!("CARGO_PKG_VERSION"))
                    .title("agent-lsp".to_owned()),
            )
    }

    async fn new_session(
        &self,
        request: NewSessionRequest,
        connection: &ConnectionTo<Client>,
    ) -> Result<(NewSessionResponse, Arc<Live>), AcpError> {
        let place = self.place(&request.cwd)?;
        let name = self
            .options
            .preset
            .as_deref()
            .or(self.config.preset.as_deref())
            .unwrap_or(DEFAULT_PRESET);
        let preset = Preset::load(
            name,
            &crate::preset::PresetDirs::for_workspace(place.store.workspace()),
        )
        .map_err(|error| AcpError::params(format!("{error:#}")))?;
        let id = crate::session::store::new_session_id();
        let live = self.open(
            id.clone(),
            place,
            preset,
            false,
            &request.mcp_servers,
            connection,
        )?;
        let (modes, option) = self.choices(&live).await;
        Ok((
            NewSessionResponse::new(SessionId::new(id))
                .modes(modes)
                .config_options(vec![option]),
            live,
        ))
    }

    async fn load_session(
        &self,
        request: LoadSessionRequest,
        connection: &ConnectionTo<Client>,
    ) -> Result<(LoadSessionResponse, Arc<Live>), AcpError> {
        let live = self.reopen(
            &request.session_id,
            &request.cwd,
            &request.mcp_servers,
            connection,
        )?;
        // The history goes out before the answer, as the protocol asks.
        let history = live
            .place
            .store
            .load(&live.id)
            .map_err(AcpError::internal)?;
        let window = lock_state_window(&live).await;
        let workspace = live.place.store.workspace().to_owned();
        let nesting = updates::Nesting::default();
        let mut last_usage = None;
        for event in history.events() {
            for update in updates::of_event(event, &workspace, updates::Reading::Load, &nesting) {
                send(connection, &request.session_id, update);
            }
            if let crate::session::event::EventBody::Usage(usage) = &event.body {
                last_usage = Some(usage.clone());
            }
        }
        if let Some(usage) = last_usage {
            send(
                connection,
                &request.session_id,
                updates::usage(usage.prompt_tokens, usage.completion_tokens, window),
            );
        }
        let (modes, option) = self.choices(&live).await;
        Ok((
            LoadSessionResponse::new()
                .modes(modes)
                .config_options(vec![option]),
            live,
        ))
    }

    async fn resume_session(
        &self,
        request: ResumeSessionRequest,
        connection: &ConnectionTo<Client>,
    ) -> Result<(ResumeSessionResponse, Arc<Live>), AcpError> {
        let live = self.reopen(
            &request.session_id,
            &request.cwd,
            &request.mcp_servers,
            connection,
        )?;
        let (modes, option) = self.choices(&live).await;
        Ok((
            ResumeSessionResponse::new()
                .modes(modes)
                .config_options(vec![option]),
            live,
        ))
    }

    /// The slash commands a session offers, once the client knows the session.
    fn announce(&self, live: &Live, connection: &ConnectionTo<Client>) {
        let preset = live.state.try_lock().map(|state| state.preset.clone()).ok();
        let skills = preset
            .map(|preset| options::skills(live.place.store.workspace(), &preset))
            .unwrap_or_default();
        send(
            connection,
            &SessionId::new(live.id.clone()),
            SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(
                options::commands(&skills),
            )),
        );
    }

    /// The session's modes (the presets, its own selected) and its model option.
    async fn choices(
        &self,
        live: &Live,
    ) -> (
        agent_client_protocol::v1::schema::SessionModeState,
        agent_client_protocol::v1::schema::SessionConfigOption,
    ) {
        let state = live.state.lock().await;
        let current = self.model_of(state.model.as_deref(), &state.preset);
        let modes = options::modes(live.place.store.workspace(), &state.preset.name);
        let preset = state.preset.clone();
        drop(state);
        let offered = self.offered(&preset).await;
        (modes, options::model_option(&current, offered))
    }

    async fn set_mode(
        &self,
        request: SetSessionModeRequest,
        connection: &ConnectionTo<Client>,
    ) -> Result<SetSessionModeResponse, AcpError> {
        let live = self.live(&request.session_id)?;
        let Ok(mut state) = live.state.try_lock() else {
            return Err(AcpError::params(
                "a turn is running; change the mode after it",
            ));
        };
        let wanted = &*request.mode_id.0;
        if state.preset.name == wanted {
            return Ok(SetSessionModeResponse::new());
        }
        if state.recorded {
            return Err(AcpError::params(format!(
                "this session runs preset `{}` and a session keeps its preset; start a new session for `{wanted}`",
                state.preset.name
            )));
        }
        state.preset = Preset::load(
            wanted,
            &crate::preset::PresetDirs::for_workspace(live.place.store.workspace()),
        )
        .map_err(|error| AcpError::params(format!("{error:#}")))?;
        drop(state);
        send(
            connection,
            &request.session_id,
            SessionUpdate::CurrentModeUpdate(
                agent_client_protocol::v1::schema::CurrentModeUpdate::new(wanted.to_owned()),
            ),
        );
        self.announce(&live, connection);
        Ok(SetSessionModeResponse::new())
    }

    async fn set_option(
        &self,
        request: SetSessionConfigOptionRequest,
    ) -> Result<SetSessionConfigOptionResponse, AcpError> {
        let live = self.live(&request.session_id)?;
        if &*request.config_id.0 != options::MODEL_OPTION {
            return Err(AcpError::params(format!(
                "no config option `{}`; the agent has `{}`",
                request.config_id.0,
                options::MODEL_OPTION
            )));
        }
        let Some(model) = request.value.as_value_id() else {
            return Err(AcpError::params("`model` takes a model id"));
        };
        let Ok(mut state) = live.state.try_lock() else {
            return Err(AcpError::params(
                "a turn is running; change the model after it",
            ));
        };
        state.model = Some(model.0.to_string());
        // The next prompt opens the conversation again, on the new model.
        state.conversation = None;
        drop(state);
        let (_, option) = self.choices(&live).await;
        Ok(SetSessionConfigOptionResponse::new(vec![option]))
    }

    /// The model a session of `preset` runs on, `model` when one was picked.
    fn model_of(&self, model: Option<&str>, preset: &Preset) -> String {
        self.provider_config(model, preset)
            .ok()
            .flatten()
            .map(|config| config.model)
            .unwrap_or_else(|| "not configured".to_owned())
    }

    fn provider_config(
        &self,
        model: Option<&str>,
        preset: &Preset,
    ) -> anyhow::Result<Option<crate::llm::provider::ProviderConfig>> {
        self.config.provider_config(
            self.options.base_url.clone(),
            model.map(str::to_owned).or(self.options.model.clone()),
            preset.file.model.name.as_deref(),
        )
    }

    /// The model endpoint for a turn of `preset`, `model` when one was picked.
    fn provider(&self, model: Option<&str>, preset: &Preset) -> Result<Provider, AcpError> {
        let config = self
            .provider_config(model, preset)
            .map_err(AcpError::internal)?
            .ok_or_else(|| AcpError::failed(Config::not_configured_message()))?;
        Provider::new(config).map_err(AcpError::internal)
    }

    /// The models the endpoint offers, asked once with a short deadline: a slow or absent
    /// `/models` leaves the option with the configured model alone.
    async fn offered(&self, preset: &Preset) -> &[String] {
        self.offered
            .get_or_init(|| async {
                let Ok(provider) = self.provider(None, preset) else {
                    return Vec::new();
                };
                let cancel = tokio_util::sync::CancellationToken::new();
                let listed = tokio::time::timeout(
                    std::time::Duration::from_secs(2),
                    provider.list_models(&cancel),
                )
                .await;
                match listed {
                    Ok(Ok(models)) => models,
                    _ => Vec::new(),
                }
            })
            .await
    }
}

async fn lock_state_window(live: &Live) -> u64 {
    live.state.lock().await.preset.file.model.context_window
}

fn send(connection: &ConnectionTo<Client>, session: &SessionId, update: SessionUpdate) {
    if let Err(error) =
        connection.send_notification(SessionNotification::new(session.clone(), update))
    {
        tracing::debug!(%error, "a session/update could not be sent");
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
