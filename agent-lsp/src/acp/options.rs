//! What a session offers the client to choose: its preset as the session's mode, the model as
//! a config option, and the slash commands (`/compact`, `/memory` and one per skill).

use std::path::Path;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, CurrentModeUpdate, SessionConfigOption,
    SessionConfigOptionCategory, SessionConfigSelectOption, SessionMode, SessionModeState,
    SessionUpdate, SetSessionConfigOptionRequest, SetSessionConfigOptionResponse,
    SetSessionModeRequest, SetSessionModeResponse, UnstructuredCommandInput,
};

use super::sessions::Live;
use super::{Acp, AcpError, lock, send};
use crate::llm::provider::{Provider, ProviderConfig};
use crate::preset::{Preset, PresetDirs};

/// The config option that picks the model.
pub(super) const MODEL_OPTION: &str = "model";

/// Every preset of `workspace` as a mode, `current` selected. A preset that cannot be read is
/// left out (`agent-lsp preset list` says why).
pub(super) fn modes(workspace: &Path, current: &str) -> SessionModeState {
    let dirs = PresetDirs::for_workspace(workspace);
    let mut names = crate::preset::catalog::list(&dirs)
        .map(|listed| {
            listed
                .iter()
                .filter(|listed| listed.shadowed_by.is_none())
                .map(|listed| listed.name().to_owned())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    names.dedup();
    let available = names
        .iter()
        .filter_map(|name| Preset::load(name, &dirs).ok())
        .map(|preset| {
            SessionMode::new(preset.name.clone(), preset.name.clone())
                .description(preset.file.description.clone())
        })
        .collect();
    SessionModeState::new(current.to_owned(), available)
}

/// The model option: the one in use and the others the endpoint offers (`/models`, when it
/// answered).
pub(super) fn model_option(current: &str, offered: &[String]) -> SessionConfigOption {
    let mut values = vec![current.to_owned()];
    values.extend(offered.iter().filter(|id| *id != current).cloned());
    SessionConfigOption::select(
        MODEL_OPTION,
        "Model",
        current.to_owned(),
        values
            .into_iter()
            .map(|id| SessionConfigSelectOption::new(id.clone(), id))
            .collect::<Vec<_>>(),
    )
    .category(SessionConfigOptionCategory::Model)
}

/// A slash command a prompt can start with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Slash {
    /// `/compact`: compact the session now.
    Compact,
    /// `/memory`: list the memories the session starts with.
    Memory,
    /// `/NAME rest`: the skill NAME, for what `rest` asks.
    Skill { name: String, rest: String },
}

/// The slash command `prompt` starts with, if it names one of `skills` or a built-in command.
pub(super) fn slash(prompt: &str, skills: &[String]) -> Option<Slash> {
    let command = prompt.trim_start().strip_prefix('/')?;
    let (name, rest) = command
        .split_once(char::is_whitespace)
        .unwrap_or((command, ""));
    match name {
        "compact" => Some(Slash::Compact),
        "memory" => Some(Slash::Memory),
        _ if skills.iter().any(|skill| skill == name) => Some(Slash::Skill {
            name: name.to_owned(),
            rest: rest.trim().to_owned(),
        }),
        _ => None,
    }
}

/// The prompt a skill's slash command stands for: what the model is asked, in its own words.
pub(super) fn skill_prompt(name: &str, rest: &str) -> String {
    if rest.is_empty() {
        format!("Load the skill `{name}` with the `skill` tool and follow it.")
    } else {
        format!("Load the skill `{name}` with the `skill` tool and follow it for this: {rest}")
    }
}

/// The names and descriptions of the skills a session of `preset` in `workspace` loads.
pub(super) fn skills(workspace: &Path, preset: &Preset) -> Vec<(String, String)> {
    let Ok(Some(settings)) = crate::skills::settings_of(preset) else {
        return Vec::new();
    };
    let user_dir = crate::config::Config::user_dir();
    crate::skills::discover(&crate::skills::Roots::new(
        &settings,
        workspace,
        user_dir.as_deref(),
    ))
    .skills
    .into_iter()
    .map(|skill| (skill.name, skill.description))
    .collect()
}

/// The commands of a session: the built-in ones and a skill's each.
pub(super) fn commands(skills: &[(String, String)]) -> Vec<AvailableCommand> {
    let mut commands = vec![
        AvailableCommand::new(
            "compact",
            "Compact the conversation now: older turns become a summary",
        ),
        AvailableCommand::new("memory", "List what the agent remembers across sessions"),
    ];
    commands.extend(skills.iter().map(|(name, description)| {
        AvailableCommand::new(name.clone(), description.clone()).input(
            AvailableCommandInput::Unstructured(UnstructuredCommandInput::new(
                "what the skill is for this time",
            )),
        )
    }));
    commands
}

impl Acp {
    /// The session's modes (the presets, its own selected) and, with a model configured, its
    /// model option; the endpoint is asked for its models the first time.
    pub(super) async fn choices(
        &self,
        live: &Live,
    ) -> (SessionModeState, Option<SessionConfigOption>) {
        let preset = lock(&live.settings).preset.clone();
        if lock(&self.offered).is_none() {
            let listed = self.list_models(&preset).await;
            if let Some(listed) = listed {
                *lock(&self.offered) = Some(listed);
            }
        }
        self.choices_now(live)
    }

    /// [`Acp::choices`] with the models the endpoint offered so far, asking nothing.
    fn choices_now(&self, live: &Live) -> (SessionModeState, Option<SessionConfigOption>) {
        let settings = lock(&live.settings);
        let modes = modes(live.place.store.workspace(), &settings.preset.name);
        let offered = lock(&self.offered).clone().unwrap_or_default();
        let option = self
            .provider_config(settings.model.as_deref(), &settings.preset)
            .ok()
            .flatten()
            .map(|config| model_option(&config.model, &offered));
        (modes, option)
    }

    /// `session/set_mode`: another preset, until the session's first prompt.
    pub(super) fn set_mode(
        &self,
        request: SetSessionModeRequest,
        connection: &ConnectionTo<Client>,
    ) -> Result<SetSessionModeResponse, AcpError> {
        let live = self.live(&request.session_id)?;
        refuse_while_running(&live, "the mode")?;
        let wanted = &*request.mode_id.0;
        let workspace = live.place.store.workspace();
        let (current, recorded) = {
            let settings = lock(&live.settings);
            (settings.preset.name.clone(), settings.recorded)
        };
        if current == wanted {
            return Ok(SetSessionModeResponse::new());
        }
        // A mode is a preset's name, never a path to a file.
        if !modes(workspace, &current)
            .available_modes
            .iter()
            .any(|mode| &*mode.id.0 == wanted)
        {
            return Err(AcpError::params(format!(
                "no mode `{wanted}`: the modes are the presets `agent-lsp preset list` shows"
            )));
        }
        if recorded {
            return Err(AcpError::params(format!(
                "this session runs preset `{current}` and a session keeps its preset; start a new session for `{wanted}`"
            )));
        }
        let preset = Preset::load(wanted, &PresetDirs::for_workspace(workspace))
            .map_err(|error| AcpError::params(format!("{error:#}")))?;
        lock(&live.settings).preset = preset;
        send(
            connection,
            &request.session_id,
            SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(wanted.to_owned())),
        );
        self.announce(&live, connection);
        Ok(SetSessionModeResponse::new())
    }

    /// `session/set_config_option` of the model: the next prompt runs on it.
    pub(super) fn set_option(
        &self,
        request: SetSessionConfigOptionRequest,
    ) -> Result<SetSessionConfigOptionResponse, AcpError> {
        let live = self.live(&request.session_id)?;
        if &*request.config_id.0 != MODEL_OPTION {
            return Err(AcpError::params(format!(
                "no config option `{}`; the agent has `{}`",
                request.config_id.0, MODEL_OPTION
            )));
        }
        let Some(model) = request.value.as_value_id() else {
            return Err(AcpError::params("`model` takes a model id"));
        };
        refuse_while_running(&live, "the model")?;
        {
            let mut settings = lock(&live.settings);
            settings.model = Some(model.0.to_string());
            // The next prompt opens the conversation again, on the new model.
            settings.reopen = true;
        }
        let (_, option) = self.choices_now(&live);
        Ok(SetSessionConfigOptionResponse::new(
            option.into_iter().collect(),
        ))
    }

    fn provider_config(
        &self,
        model: Option<&str>,
        preset: &Preset,
    ) -> anyhow::Result<Option<ProviderConfig>> {
        self.config.provider_config(
            self.options.base_url.clone(),
            model.map(str::to_owned).or(self.options.model.clone()),
            preset.file.model.name.as_deref(),
        )
    }

    /// The model endpoint for a turn of `preset`, `model` when one was picked.
    pub(super) fn provider(
        &self,
        model: Option<&str>,
        preset: &Preset,
    ) -> Result<Provider, AcpError> {
        let config = self
            .provider_config(model, preset)
            .map_err(AcpError::internal)?
            .ok_or_else(|| AcpError::failed(crate::config::Config::not_configured_message()))?;
        Provider::new(config).map_err(AcpError::internal)
    }

    /// The models the endpoint offers, within a short deadline: `None` when it does not
    /// answer (asked again at the next session).
    async fn list_models(&self, preset: &Preset) -> Option<Vec<String>> {
        let provider = self.provider(None, preset).ok()?;
        let cancel = tokio_util::sync::CancellationToken::new();
        tokio::time::timeout(
            std::time::Duration::from_secs(2),
            provider.list_models(&cancel),
        )
        .await
        .ok()?
        .ok()
    }
}

/// A session's mode and model change between turns only.
fn refuse_while_running(live: &Live, what: &str) -> Result<(), AcpError> {
    if lock(&live.turn).is_some() {
        return Err(AcpError::params(format!(
            "a turn is running; change {what} after it"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_names_a_command_only_at_its_start_and_only_a_known_one() {
        let skills = vec!["review".to_owned()];
        assert_eq!(slash("/compact", &skills), Some(Slash::Compact));
        assert_eq!(slash("  /memory", &skills), Some(Slash::Memory));
        assert_eq!(
            slash("/review the parser please", &skills),
            Some(Slash::Skill {
                name: "review".into(),
                rest: "the parser please".into()
            })
        );
        assert_eq!(slash("/usr/bin is odd", &skills), None);
        assert_eq!(slash("please /compact", &skills), None);
    }
}
