//! Presets: named assemblies of model settings, tools, permissions and plugins.
//!
//! The built-in presets are the files in the repository's `presets/` folder, compiled in; the
//! user's and the workspace's presets are files of the same shape, found by name ([`catalog`]
//! has the lookup order and the rules for names). `--preset` takes a name or a path to a TOML
//! file. A session records the preset's name and full text in its header and keeps using that
//! text when it is resumed, even if the file changed since.
//!
//! Parsing is strict (unknown keys are errors), and errors name the file, the line and the key,
//! because a typo in a permission table must not silently allow a tool.

pub mod authoring;
pub mod catalog;

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, bail};
use serde::Deserialize;

use toml::Spanned;

use crate::llm::{ModelParams, Thinking};
use crate::permissions::{POLICY_KEYS, Permission};
use crate::plugin::registry::{PluginSettings, PluginTable};
use crate::session::store::PresetRecord;
pub use catalog::PresetDirs;

/// `(name, text)` of every built-in preset.
pub const BUILTIN: [(&str, &str); 6] = [
    ("code", include_str!("../../presets/code.toml")),
    ("creative", include_str!("../../presets/creative.toml")),
    ("explore", include_str!("../../presets/explore.toml")),
    ("minimal", include_str!("../../presets/minimal.toml")),
    ("readonly", include_str!("../../presets/readonly.toml")),
    ("standard", include_str!("../../presets/standard.toml")),
];

/// The preset a session runs with when neither the command line nor the config file names one.
pub const DEFAULT_PRESET: &str = "standard";

fn default_max_tool_calls_per_step() -> u32 {
    32
}

/// `[model]` of a preset: the model settings every request of a session uses.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSection {
    /// Model name; the command line and the config file override it.
    pub name: Option<String>,
    /// Thinking mode, sent as is (see [`Thinking`]); absent leaves the model's default.
    pub thinking: Option<Thinking>,
    /// The provider's `reasoning_effort`, sent as is; absent sends none.
    pub reasoning_effort: Option<String>,
    /// Sampling temperature; absent leaves it to the provider.
    pub temperature: Option<f64>,
    /// The most tokens one answer may take; absent leaves it to the provider.
    pub max_tokens: Option<u32>,
    /// Model steps per turn before the loop stops and says so.
    pub max_steps: u32,
    /// Tool calls of one model step that run; the answer's record keeps only these, and the
    /// rest are dropped from it unrun, with a note saying so (see `agent::bounds`). A model
    /// that batches reads makes a handful of calls per step, rarely twenty; a runaway one can
    /// make thousands, and every call kept costs its result in each later request.
    #[serde(default = "default_max_tool_calls_per_step")]
    pub max_tool_calls_per_step: u32,
    /// The model's context window in tokens, for pressure checks.
    pub context_window: u64,
}

/// `[tools]` of a preset: which tools the model is offered.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsSection {
    /// Tools in the catalog. The catalog is the same whatever the permissions, so the request
    /// prefix stays cacheable; permissions refuse calls at run time.
    pub enabled: Vec<String>,
}

/// The parsed contents of a preset file.
#[derive(Clone, Debug, PartialEq)]
pub struct PresetFile {
    /// What the preset is for, shown by `agent-lsp preset list`.
    pub description: String,
    /// `[model]`.
    pub model: ModelSection,
    /// `[tools]`.
    pub tools: ToolsSection,
    /// `default` plus one entry per tool name.
    pub permissions: BTreeMap<String, Permission>,
    /// The `[plugins.NAME]` tables, in file order. The plugin registry reads them (each plugin
    /// its own keys, strictly); this module only keeps where each key is.
    pub plugins: Vec<PluginTable>,
    /// `[sandbox]`: what the commands the agent runs may touch (`off` when absent).
    pub sandbox: crate::sandbox::Policy,
}

/// A preset file as TOML gives it, with the spans of the plugin tables.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPresetFile {
    description: String,
    model: ModelSection,
    tools: ToolsSection,
    permissions: BTreeMap<String, Permission>,
    #[serde(default)]
    plugins: BTreeMap<String, Spanned<BTreeMap<String, Spanned<toml::Value>>>>,
    #[serde(default)]
    sandbox: crate::sandbox::Policy,
}

impl RawPresetFile {
    fn into_file(self, text: &str) -> PresetFile {
        let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
        let mut plugins = self
            .plugins
            .into_iter()
            .map(|(name, table)| {
                let line = line_of(table.span().start);
                let mut key_lines = BTreeMap::new();
                let mut values = toml::Table::new();
                for (key, value) in table.into_inner() {
                    key_lines.insert(key.clone(), line_of(value.span().start));
                    values.insert(key, value.into_inner());
                }
                PluginTable {
                    name,
                    line,
                    key_lines,
                    table: values,
                }
            })
            .collect::<Vec<_>>();
        plugins.sort_by_key(|table| table.line);
        PresetFile {
            description: self.description,
            model: self.model,
            tools: self.tools,
            permissions: self.permissions,
            plugins,
            sandbox: self.sandbox,
        }
    }
}

/// A loaded preset: its name, where it came from, its text and its contents.
#[derive(Clone, Debug, PartialEq)]
pub struct Preset {
    /// The name it was looked up by, recorded in the session header.
    pub name: String,
    /// Where it came from, as errors name it (`presets/standard.toml`, a path).
    pub origin: String,
    /// The text as read, recorded in the session header.
    pub text: String,
    /// What the file says.
    pub file: PresetFile,
}

impl<'a> From<&'a Preset> for PresetRecord<'a> {
    fn from(preset: &'a Preset) -> PresetRecord<'a> {
        PresetRecord {
            name: &preset.name,
            text: &preset.text,
        }
    }
}

impl Preset {
    /// A preset by name (the user's, a built-in or the workspace's, see [`catalog`]), or a
    /// preset file by path (anything containing `/` or ending in `.toml`).
    pub fn load(name_or_path: &str, dirs: &PresetDirs) -> anyhow::Result<Preset> {
        if catalog::is_path(name_or_path) {
            let path = Path::new(name_or_path);
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("failed to read preset file {}", path.display()))?;
            let name = path.file_stem().map_or(name_or_path.into(), |stem| {
                stem.to_string_lossy().into_owned()
            });
            return Preset::parse(&name, &path.display().to_string(), &text);
        }
        catalog::find(name_or_path, dirs)?.parse()
    }

    /// A built-in preset by name.
    pub fn builtin(name: &str) -> anyhow::Result<Preset> {
        match catalog::builtin_text(name) {
            Some(text) => Preset::parse(name, &format!("presets/{name}.toml"), text),
            None => bail!(
                "no built-in preset named `{name}`; they are {}",
                BUILTIN.map(|(name, _)| name).join(", ")
            ),
        }
    }

    /// The preset a session started with: the text recorded in its header, so that a resumed
    /// session behaves as it did even if the preset's file changed since; the preset by name,
    /// looked up for the session's workspace, for sessions that recorded no text.
    pub fn of_session(header: &crate::session::event::SessionHeader) -> anyhow::Result<Preset> {
        match &header.preset_text {
            Some(text) => Preset::parse(
                &header.preset,
                &format!("the preset recorded in session {}", header.session_id),
                text,
            ),
            None => Preset::load(
                &header.preset,
                &PresetDirs::for_workspace(Path::new(&header.workspace)),
            ),
        }
    }

    /// Parse preset text; `origin` names the file in errors.
    pub fn parse(name: &str, origin: &str, text: &str) -> anyhow::Result<Preset> {
        let raw: RawPresetFile =
            toml::from_str(text).map_err(|error| anyhow::anyhow!("preset {origin}: {error}"))?;
        let file = raw.into_file(text);
        if !file.permissions.contains_key("default") {
            bail!("preset {origin}: [permissions] needs a `default` entry (allow, ask or deny)");
        }
        for tool in file
            .permissions
            .keys()
            .filter(|key| !POLICY_KEYS.contains(&key.as_str()))
            .filter(|key| !key.starts_with(crate::permissions::MCP_TOOL_PREFIX))
        {
            if !file.tools.enabled.contains(tool) {
                bail!(
                    "preset {origin}: [permissions] names `{tool}`, which is not in tools.enabled"
                );
            }
        }
        if file.model.max_steps == 0 {
            bail!("preset {origin}: model.max_steps must be at least 1");
        }
        if file.model.max_tool_calls_per_step == 0 {
            bail!("preset {origin}: model.max_tool_calls_per_step must be at least 1");
        }
        Ok(Preset {
            name: name.to_owned(),
            origin: origin.to_owned(),
            text: text.to_owned(),
            file,
        })
    }

    /// The table `[plugins.NAME]`, if the preset has one.
    pub fn plugin_table(&self, name: &str) -> Option<&PluginTable> {
        self.file.plugins.iter().find(|table| table.name == name)
    }

    /// The settings of plugin `name` read as `S` (strictly, errors naming line and key), or
    /// `None` when the preset has no such table.
    pub fn plugin_settings<S: PluginSettings>(&self, name: &str) -> anyhow::Result<Option<S>> {
        self.plugin_table(name)
            .map(|table| table.settings(&self.origin))
            .transpose()
    }

    /// The permission for one tool.
    pub fn permission(&self, tool: &str) -> Permission {
        if !self.file.permissions.contains_key("default") {
            return self
                .file
                .permissions
                .get(tool)
                .copied()
                .unwrap_or(Permission::Deny);
        }
        crate::permissions::PermissionPolicy::from_table(&self.file.permissions).permission(tool)
    }

    /// What the preset lets a session do, to compare it with another preset's.
    pub fn rights(&self) -> crate::permissions::Rights {
        crate::permissions::Rights {
            enabled: self.file.tools.enabled.iter().cloned().collect(),
            policy: crate::permissions::PermissionPolicy::from_table(&self.file.permissions),
            mcp_servers: self.plugin_table(crate::mcp::PLUGIN).is_some_and(|table| {
                table.table.get("enabled") == Some(&toml::Value::Boolean(true))
            }),
            sandbox: self.file.sandbox.clone(),
        }
    }

    /// Model parameters sent with every request.
    pub fn model_params(&self) -> ModelParams {
        let model = &self.file.model;
        ModelParams {
            temperature: model.temperature,
            max_tokens: model.max_tokens,
            thinking: model.thinking,
            reasoning_effort: model.reasoning_effort.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_preset_parses() {
        for (name, _) in BUILTIN {
            let preset = Preset::builtin(name).unwrap();
            assert_eq!(preset.name, name);
        }
        let readonly = Preset::builtin("readonly").unwrap();
        assert_eq!(readonly.permission("edit"), Permission::Deny);
        assert_eq!(readonly.permission("read"), Permission::Allow);
        assert_eq!(
            Preset::builtin("standard").unwrap().permission("shell"),
            Permission::Ask
        );
        let minimal = Preset::builtin("minimal").unwrap();
        assert!(minimal.plugin_table("compaction").is_none());
        assert!(minimal.plugin_table("context_rules").is_none());
        let standard = Preset::builtin("standard").unwrap();
        assert_eq!(standard.file.model.max_tool_calls_per_step, 32);
        let compaction = standard.plugin_table("compaction").unwrap();
        assert_eq!(compaction.table["background"], toml::Value::Boolean(true));
        assert_eq!(
            (compaction.line, compaction.key_lines["background"]),
            (
                line_of(&standard.text, "[plugins.compaction]"),
                line_of(&standard.text, "background = true")
            )
        );
        // The catalog does not depend on permissions.
        assert_eq!(
            readonly.file.tools.enabled,
            Preset::builtin("standard").unwrap().file.tools.enabled
        );
    }

    fn line_of(text: &str, needle: &str) -> usize {
        text.lines().position(|line| line == needle).unwrap() + 1
    }

    #[test]
    fn a_broken_preset_names_file_line_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broken.toml");
        std::fs::write(
            &path,
            "description = \"x\"\n[model]\nmax_steps = 3\ncontext_window = 10\nthinkng = \"enabled\"\n[tools]\nenabled = []\n[permissions]\ndefault = \"allow\"\n",
        )
        .unwrap();
        let err = Preset::load(path.to_str().unwrap(), &PresetDirs::builtin_only())
            .unwrap_err()
            .to_string();
        assert!(err.contains("broken.toml"), "{err}");
        assert!(err.contains("line 5"), "{err}");
        assert!(err.contains("thinkng"), "{err}");

        std::fs::write(&path, "description = \"x\"\n[model]\nmax_steps = 3\ncontext_window = 10\n[tools]\nenabled = []\n[permissions]\ndefault = \"sometimes\"\n").unwrap();
        let err = Preset::load(path.to_str().unwrap(), &PresetDirs::builtin_only())
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 8") && err.contains("sometimes"), "{err}");

        std::fs::write(&path, "description = \"x\"\n[model]\nmax_steps = 3\nmax_tool_calls_per_step = 0\ncontext_window = 10\n[tools]\nenabled = []\n[permissions]\ndefault = \"allow\"\n").unwrap();
        let err = Preset::load(path.to_str().unwrap(), &PresetDirs::builtin_only())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("model.max_tool_calls_per_step must be at least 1"),
            "{err}"
        );

        let err = Preset::load("nonesuch", &PresetDirs::builtin_only())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("code, creative, explore, minimal, readonly, standard"),
            "{err}"
        );
    }
}
