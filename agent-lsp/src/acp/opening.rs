//! The requests that open a session for the client: `session/new` (a new session of ours,
//! its log made at its first prompt), `session/load` (a recorded session shown again from its
//! log, before the answer, as the protocol asks) and `session/resume` (continued without
//! replay); and the slash commands a client is told of once it knows the session.

use std::sync::Arc;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AvailableCommandsUpdate, LoadSessionRequest, LoadSessionResponse, NewSessionRequest,
    NewSessionResponse, ResumeSessionRequest, ResumeSessionResponse, SessionId, SessionUpdate,
};

use super::sessions::Live;
use super::{Acp, AcpError, options, send, updates};
use crate::preset::{DEFAULT_PRESET, Preset};

impl Acp {
    pub(super) async fn new_session(
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

    pub(super) async fn load_session(
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
        // The history goes out before the answer, as the protocol asks; a session not
        // prompted yet has none.
        let history = match live.log_path().exists() {
            true => Some(
                live.place
                    .store
                    .load(&live.id)
                    .map_err(AcpError::internal)?,
            ),
            false => None,
        };
        let window = lock_state_window(&live).await;
        let workspace = live.place.store.workspace().to_owned();
        let nesting = updates::Nesting::default();
        let mut last_usage = None;
        for event in history.iter().flat_map(|history| history.events()) {
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
                updates::usage(&usage, window),
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

    pub(super) async fn resume_session(
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
    pub(super) fn announce(&self, live: &Live, connection: &ConnectionTo<Client>) {
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
}

async fn lock_state_window(live: &Live) -> u64 {
    live.state.lock().await.preset.file.model.context_window
}
