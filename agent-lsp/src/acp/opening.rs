//! The requests that open a session for the client: `session/new` (a new session of ours,
//! its log made at its first prompt), `session/load` (a recorded session shown again from its
//! log, before the answer, as the protocol asks) and `session/resume` (continued without
//! replay); and the slash commands a client is told of once it knows the session.
//!
//! Each runs on a task of its own, off the connection's dispatch loop: opening may start the
//! client's MCP servers and read a long log.

use std::sync::Arc;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AvailableCommandsUpdate, LoadSessionRequest, LoadSessionResponse, NewSessionRequest,
    NewSessionResponse, ResumeSessionRequest, ResumeSessionResponse, SessionId, SessionUpdate,
};

use super::sessions::Live;
use super::tail::{Sender, Tail};
use super::updates::Reading;
use super::{Acp, AcpError, lock, options, send};
use crate::preset::{DEFAULT_PRESET, Preset, PresetDirs};

impl Acp {
    pub(super) async fn new_session(
        &self,
        request: NewSessionRequest,
        connection: &ConnectionTo<Client>,
    ) -> Result<(NewSessionResponse, Arc<Live>), AcpError> {
        let live = tokio::task::block_in_place(|| {
            let place = self.place(&request.cwd)?;
            let name = self
                .options
                .preset
                .as_deref()
                .or(self.config.preset.as_deref())
                .unwrap_or(DEFAULT_PRESET);
            let preset = Preset::load(name, &PresetDirs::for_workspace(place.store.workspace()))
                .map_err(|error| AcpError::params(format!("{error:#}")))?;
            let id = self.fresh_id(&place);
            self.open(id, place, preset, false, &request.mcp_servers, connection)
        })?;
        let (modes, option) = self.choices(&live).await;
        Ok((
            NewSessionResponse::new(SessionId::new(live.id.clone()))
                .modes(modes)
                .config_options(option.into_iter().collect::<Vec<_>>()),
            live,
        ))
    }

    /// An id no session of this process or of the workspace's store has: ids carry 16 random
    /// bits per second, so two sessions of one second may draw the same one.
    fn fresh_id(&self, place: &super::sessions::Place) -> String {
        loop {
            let id = crate::session::store::new_session_id();
            let taken = lock(&self.sessions).contains_key(&id)
                || lock(&self.closing).contains_key(&id)
                || place.store.path_of(&id).exists();
            if !taken {
                return id;
            }
        }
    }

    pub(super) async fn load_session(
        &self,
        request: LoadSessionRequest,
        connection: &ConnectionTo<Client>,
    ) -> Result<(LoadSessionResponse, Arc<Live>), AcpError> {
        let live = self
            .reopen(
                &request.session_id,
                &request.cwd,
                &request.mcp_servers,
                connection,
            )
            .await?;
        // The history goes out before the answer, as the protocol asks, read as a turn's is
        // (the sub-agents' logs followed); a session not prompted yet has none.
        let window = lock(&live.settings).preset.file.model.context_window;
        let mut tail = Tail::new(
            live.log_path(),
            live.place.store.workspace().to_owned(),
            Sender {
                connection: connection.clone(),
                session: request.session_id.clone(),
            },
            window,
            Reading::Load,
        );
        tokio::task::block_in_place(|| tail.pump());
        let (modes, option) = self.choices(&live).await;
        Ok((
            LoadSessionResponse::new()
                .modes(modes)
                .config_options(option.into_iter().collect::<Vec<_>>()),
            live,
        ))
    }

    pub(super) async fn resume_session(
        &self,
        request: ResumeSessionRequest,
        connection: &ConnectionTo<Client>,
    ) -> Result<(ResumeSessionResponse, Arc<Live>), AcpError> {
        let live = self
            .reopen(
                &request.session_id,
                &request.cwd,
                &request.mcp_servers,
                connection,
            )
            .await?;
        let (modes, option) = self.choices(&live).await;
        Ok((
            ResumeSessionResponse::new()
                .modes(modes)
                .config_options(option.into_iter().collect::<Vec<_>>()),
            live,
        ))
    }

    /// The slash commands a session offers, once the client knows the session.
    pub(super) fn announce(&self, live: &Live, connection: &ConnectionTo<Client>) {
        let preset = lock(&live.settings).preset.clone();
        let skills = options::skills(live.place.store.workspace(), &preset);
        send(
            connection,
            &SessionId::new(live.id.clone()),
            SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(
                options::commands(&skills),
            )),
        );
    }
}
