//! The `runtime_context` plugin: the environment (cwd, workspace, date, git branch, …) as
//! runtime context, so that volatile facts never enter the system prompt and its cached prefix.

use std::path::PathBuf;

use serde::Deserialize;

use crate::context::runtime::RuntimeSnapshot;
use crate::plugin::registry::{Parts, PluginHost, PluginSettings};
use crate::plugin::{Plugin, RuntimeContribution};
use crate::session::History;

/// `[plugins.runtime_context]` of a preset.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentSettings {
    enabled: bool,
}

impl PluginSettings for EnvironmentSettings {
    fn enabled(&self) -> bool {
        self.enabled
    }
}

/// Collects the environment before each step; the loop injects it when it changed.
pub struct Environment {
    workspace: PathBuf,
}

impl Environment {
    /// The plugin for the preset's workspace; the registry calls it when the preset enables
    /// `runtime_context`.
    pub(super) fn parts(
        _settings: EnvironmentSettings,
        host: &PluginHost,
    ) -> anyhow::Result<Parts> {
        Ok(Parts {
            plugin: Some(Box::new(Environment {
                workspace: host.workspace.clone(),
            })),
            tools: Vec::new(),
            shell: None,
        })
    }
}

impl Plugin for Environment {
    fn name(&self) -> &'static str {
        "runtime_context"
    }

    fn runtime_context(
        &mut self,
        history: &History,
    ) -> anyhow::Result<Option<RuntimeContribution>> {
        let mut snapshot = RuntimeSnapshot::collect(&self.workspace, &[]);
        if let Some(note) = crate::rewind::files_note(history) {
            snapshot.0.insert("files_rewound".to_owned(), note);
        }
        Ok(Some(RuntimeContribution {
            source: None,
            text: snapshot.render(),
            facts: snapshot.0,
        }))
    }
}
