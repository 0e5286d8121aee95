//! `agent-lsp acp`: the agent as an Agent Client Protocol server on stdio, for the editors
//! that host agents in a panel of their own (Zed, the JetBrains IDEs, Neovim's and Emacs'
//! agent plugins). Protocol version 1 over the official crate (`agent-client-protocol`,
//! docs/decisions/0010-acp.md); nothing but JSON-RPC goes to stdout, logs go to stderr.
//!
//! It is a front end of the one host, as `run` and `serve` are: a session is one of our
//! sessions (`sessions.rs`, opened by `opening.rs`), a prompt a turn of its conversation
//! (`turn.rs`) whose log is what the client is shown (`tail.rs` reads it as it grows,
//! `updates.rs` maps each event); a call whose permission is `ask` asks the client, and the
//! file tools read and write through it when it offers `fs` (`client.rs`); presets are the
//! session's modes, the model a config option, skills and `/compact`, `/memory` its slash
//! commands (`options.rs`).
//!
//! No handler waits on a turn or on the client: the connection reads the next message only
//! once a handler returns, and `session/cancel` and the answers to the agent's own requests
//! must get through while a turn runs. What takes time runs on a task that answers.

mod client;
mod opening;
mod options;
mod sessions;
mod tail;
mod turn;
mod updates;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AuthenticateRequest, AuthenticateResponse, CancelNotification,
    ClientCapabilities, CloseSessionRequest, CloseSessionResponse, Implementation,
    InitializeRequest, InitializeResponse, ListSessionsRequest, ListSessionsResponse,
    LoadSessionRequest, LoadSessionResponse, McpCapabilities, NewSessionRequest,
    NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse, ResumeSessionRequest,
    ResumeSessionResponse, SessionCapabilities, SessionCloseCapabilities, SessionId,
    SessionListCapabilities, SessionNotification, SessionResumeCapabilities, SessionUpdate,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest,
    SetSessionModeResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Stdio};
use futures_util::FutureExt;

use crate::config::Config;
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
    /// Sessions the client closed whose cancelled turn has not let go of the log yet.
    closing: Mutex<HashMap<String, Arc<Live>>>,
    /// The models the endpoint offers, once it answered.
    offered: Mutex<Option<Vec<String>>>,
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
        closing: Mutex::new(HashMap::new()),
        offered: Mutex::new(None),
    });
    let served = runtime.block_on(connect(acp.clone()));
    runtime.block_on(async {
        let places = lock(&acp.places).values().cloned().collect::<Vec<_>>();
        for place in places {
            place.tools.shutdown().await;
        }
    });
    crate::jobs::kill_all();
    // A checkpoint walk still warming a big tree is not waited for: the client is gone.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    served.map_err(|error| anyhow::anyhow!("the ACP connection failed: {error}"))
}

async fn connect(acp: Arc<Acp>) -> Result<(), agent_client_protocol::Error> {
    Agent
        .v1()
        .name("agent-lsp")
        .on_receive_request(
            {
                let acp = acp.clone();
                async move |request: InitializeRequest,
                            responder: Responder<InitializeResponse>,
                            _| { responder.respond(acp.initialize(request)) }
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
            {
                let acp = acp.clone();
                async move |request: NewSessionRequest,
                            responder: Responder<NewSessionResponse>,
                            connection: ConnectionTo<Client>| {
                    // Opening may start MCP servers and read a long log: off the loop.
                    let acp = acp.clone();
                    tokio::spawn(async move {
                        let made = acp.new_session(request, &connection).await;
                        answer(responder, made, &acp, &connection)
                    });
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let acp = acp.clone();
                async move |request: LoadSessionRequest,
                            responder: Responder<LoadSessionResponse>,
                            connection: ConnectionTo<Client>| {
                    // Opening may start MCP servers and read a long log: off the loop.
                    let acp = acp.clone();
                    tokio::spawn(async move {
                        let loaded = acp.load_session(request, &connection).await;
                        answer(responder, loaded, &acp, &connection)
                    });
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let acp = acp.clone();
                async move |request: ResumeSessionRequest,
                            responder: Responder<ResumeSessionResponse>,
                            connection: ConnectionTo<Client>| {
                    // Opening may start MCP servers and read a long log: off the loop.
                    let acp = acp.clone();
                    tokio::spawn(async move {
                        let resumed = acp.resume_session(request, &connection).await;
                        answer(responder, resumed, &acp, &connection)
                    });
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let acp = acp.clone();
                async move |request: ListSessionsRequest,
                            responder: Responder<ListSessionsResponse>,
                            _| {
                    // Listing reads every session's log: off the loop.
                    let acp = acp.clone();
                    tokio::task::spawn_blocking(move || {
                        let listed = acp
                            .list(request.cwd.as_deref())
                            .map(ListSessionsResponse::new);
                        responder.respond_with_result(listed.map_err(Into::into))
                    });
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let acp = acp.clone();
                async move |request: CloseSessionRequest,
                            responder: Responder<CloseSessionResponse>,
                            _| {
                    let closed = acp
                        .close(&request.session_id)
                        .map(|()| CloseSessionResponse::new());
                    responder.respond_with_result(closed.map_err(Into::into))
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let acp = acp.clone();
                async move |request: SetSessionModeRequest,
                            responder: Responder<SetSessionModeResponse>,
                            connection: ConnectionTo<Client>| {
                    let set = acp.set_mode(request, &connection);
                    responder.respond_with_result(set.map_err(Into::into))
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let acp = acp.clone();
                async move |request: SetSessionConfigOptionRequest,
                            responder: Responder<SetSessionConfigOptionResponse>,
                            _| {
                    let set = acp.set_option(request);
                    responder.respond_with_result(set.map_err(Into::into))
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let acp = acp.clone();
                async move |request: PromptRequest,
                            responder: Responder<PromptResponse>,
                            connection: ConnectionTo<Client>| {
                    // The turn's token exists before the handler returns, so a cancel that
                    // follows at once finds it; the turn runs beside the connection, which
                    // goes on reading.
                    let started = acp.start_turn(&request.session_id);
                    let (live, cancel) = match started {
                        Ok(started) => started,
                        Err(error) => return responder.respond_with_error(error.into()),
                    };
                    let acp = acp.clone();
                    tokio::spawn(async move {
                        // A turn that panics still answers its prompt and frees its session.
                        let turn = turn::prompt(&acp, &live, request, &cancel, &connection);
                        let answered = std::panic::AssertUnwindSafe(turn)
                            .catch_unwind()
                            .await
                            .unwrap_or_else(|_| {
                                Err(AcpError::failed(
                                    "the turn stopped on an internal error (see agent-lsp's log on stderr); the session can go on",
                                ))
                            });
                        *lock(&live.turn) = None;
                        let _ = responder.respond_with_result(answered.map_err(Into::into));
                    });
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            {
                let acp = acp.clone();
                async move |cancel: CancelNotification, _: ConnectionTo<Client>| {
                    if let Ok(live) = acp.live(&cancel.session_id)
                        && let Some(token) = lock(&live.turn).as_ref()
                    {
                        token.cancel();
                    }
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(Stdio::new())
        .await?;
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
    /// Mark a prompt of `session` in flight and give its token; refused while one is.
    fn start_turn(
        &self,
        session: &SessionId,
    ) -> Result<(Arc<Live>, tokio_util::sync::CancellationToken), AcpError> {
        let live = self.live(session)?;
        let mut turn = lock(&live.turn);
        if turn.is_some() {
            return Err(AcpError::params(
                "a turn is already running in this session; wait for it or cancel it (session/cancel)",
            ));
        }
        let token = tokio_util::sync::CancellationToken::new();
        *turn = Some(token.clone());
        drop(turn);
        Ok((live, token))
    }

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
}

/// Send `update` about `session`; a client that is gone is no error of the turn's.
fn send(connection: &ConnectionTo<Client>, session: &SessionId, update: SessionUpdate) {
    if let Err(error) =
        connection.send_notification(SessionNotification::new(session.clone(), update))
    {
        tracing::debug!(%error, "a session/update could not be sent");
    }
}

/// A lock whose holder panicked still guards data that is whole (every holder writes it in one
/// step), so it is taken anyway.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
