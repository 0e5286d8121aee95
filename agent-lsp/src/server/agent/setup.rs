//! How the editor's agent gets its session: the model from the editor's
//! `initializationOptions` and the config file, the preset, and the conversation the
//! [`host`](crate::host) opens over the editor's bridge, documents and buffers (the same for
//! the agent and its sub-agents).

use std::sync::Arc;

use serde_json::json;

use super::buffers::EditorBuffers;
use super::ui::EditorAsker;
use super::{Host, State};
use crate::host::{Start, ToolHost};
use crate::llm::provider::Provider;
use crate::preset::{Preset, PresetDirs};
use crate::server::{ResponseError, Shared, internal};

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
        let web = crate::web::WebRuntime::new(
            &shared.config.web,
            crate::config::Config::path().as_deref(),
        )
        .map_err(internal)?;
        let mut tools = ToolHost::editor(
            workspace,
            shared.bridge()?.clone(),
            shared.documents().clone(),
            web,
            Arc::new(EditorAsker {
                shared: Arc::downgrade(shared),
            }),
            Arc::new(EditorBuffers::new(shared)),
        );
        tools.checkpoints = shared.config.checkpoints.clone();
        tools.hooks = shared.config.hooks.clone();
        let host = crate::host::Host::new(store, self.activity.clone(), tools);
        let opening = host.choose(Start::New(preset)).map_err(internal)?;
        let conversation = host
            .open(opening, provider.clone(), None)
            .map_err(internal)?;
        // A sandbox the preset asks for and this machine cannot give is the user's to know
        // before the first command runs.
        let unheld = (conversation.tools.sandbox())
            .and_then(|sandbox| sandbox.unheld(&conversation.preset().name));
        if let Some(unheld) = unheld {
            shared.notify_editor(
                "window/showMessage",
                json!({"type": 2, "message": format!("agent-lsp: {unheld}")}),
            );
        }
        *self.provider.lock().expect("provider") = provider;
        *self.session_id.lock().expect("session id") = Some(conversation.session.id().to_owned());
        Ok(conversation)
    }
}
