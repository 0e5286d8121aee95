//! How the editor's agent gets its session: the model from the editor's
//! `initializationOptions` and the config file, the preset, and the plugins and tools the
//! [`Launcher`](crate::launch::Launcher) makes over the editor's bridge, documents and buffers
//! (the same for the agent and its sub-agents).

use std::sync::Arc;

use super::buffers::EditorBuffers;
use super::ui::EditorAsker;
use super::{Host, State};
use crate::agent::Agent;
use crate::llm::provider::Provider;
use crate::preset::{Preset, PresetDirs};
use crate::server::{ResponseError, Shared, internal};
use crate::session::log::Durability;

/// Model settings an editor passes in `initializationOptions` (the VS Code extension passes the
/// key from its secret storage this way, so it never lands in a settings file).
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EditorOptions {
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    pub preset: Option<String>,
}

impl Host {
    /// A new session's state, with `preset` or the one the editor or the config names.
    pub(super) fn make_state(
        &self,
        shared: &Arc<Shared>,
        preset: Option<Preset>,
    ) -> Result<State, ResponseError> {
        let workspace = self.workspace()?.to_owned();
        let options = self.options.get().cloned().unwrap_or_default();
        let preset = match preset {
            Some(preset) => preset,
            None => Preset::load(
                &self.preset_name(shared),
                &PresetDirs::for_workspace(&workspace),
            )
            .map_err(internal)?,
        };
        let editor_key = options
            .api_key
            .as_deref()
            .map(str::trim)
            .filter(|key| !key.is_empty());
        // A key from the editor alone is enough: it is for the default endpoint unless a base
        // URL is configured (which is what makes `Config::provider_config` see a configured model).
        let base_url = options.base_url.clone().or_else(|| {
            (editor_key.is_some() && shared.config.provider.base_url.is_none())
                .then(|| crate::llm::provider::ProviderConfig::default().base_url)
        });
        let provider = shared
            .config
            .provider_config(
                base_url,
                options.model.clone(),
                preset.file.model.name.as_deref(),
            )
            .map_err(internal)?
            .map(|mut config| {
                if let Some(key) = editor_key {
                    config.api_key = Some(key.to_owned());
                }
                config
            })
            .map(Provider::new)
            .transpose()
            .map_err(internal)?;
        let store = self.store()?;
        // The agent and its sub-agents get their tools the same way: over the editor's bridge,
        // documents and buffers, asking the editor for `ask` permissions.
        let tools = crate::launch::ToolHost {
            workspace: workspace.clone(),
            bridge: shared.bridge()?.clone(),
            documents: shared.documents().clone(),
            web: crate::web::WebRuntime::new(
                &shared.config.web,
                crate::config::Config::path().as_deref(),
            )
            .map_err(internal)?,
            asker: Arc::new(EditorAsker {
                shared: Arc::downgrade(shared),
            }),
            buffers: Some(Arc::new(EditorBuffers::new(shared))),
            shared: None,
        };
        let launcher = crate::launch::Launcher::new(
            store.clone(),
            provider.clone(),
            self.activity.clone(),
            tools,
        );
        let parts = launcher.parts(&preset).map_err(internal)?;
        let tools = parts.tools;
        let session = store
            .create_session(&preset, Durability::Sync)
            .map_err(internal)?;
        let agent = provider
            .clone()
            .map(|provider| Agent::new(provider, tools.clone(), preset.clone(), parts.plugins));
        *self.provider.lock().expect("provider") = provider.clone();
        *self.session_id.lock().expect("session id") = Some(session.id().to_owned());
        Ok(State {
            tools,
            session,
            preset,
            agent,
            provider,
        })
    }
}
