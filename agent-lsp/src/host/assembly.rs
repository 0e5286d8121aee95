//! The assembly: a preset turned into the plugins the loop runs with. It sits above the
//! plugins, the tools, compaction and presets, so those never import each other to be put
//! together (see docs/decisions/0004-plugin-layer.md). [`registry`] is the one list of the
//! plugins a preset can name; the tools they bring join the catalog in `host::catalog`.

use std::path::Path;
use std::sync::Arc;

use super::environment::{Environment, EnvironmentSettings};
use crate::activity::Activity;
use crate::code::{self, CodeModeSettings};
use crate::compaction::pruner::ToolResultPruner;
use crate::compaction::{CompactionPlugin, CompactionSettings, PrunerSettings};
use crate::context_editor::rules::{ContextRulesPlugin, ContextRulesSettings};
use crate::instructions::{self, InstructionsSettings, ProjectInstructions};
use crate::jobs::{self, JobsPlugin, JobsSettings};
use crate::llm::provider::Provider;
use crate::memory;
use crate::memory::plugin::{MemoryPlugin, MemorySettings};
use crate::plans::{PlansPlugin, PlansSettings};
use crate::plugin::registry::{Assembly, PluginHost, PluginRegistry};
use crate::preset::Preset;
use crate::preset::authoring::{self, PresetAuthoringSettings};
use crate::session::store::Store;
use crate::skills::{self, SkillsSettings};
use crate::subagents::{self, SubagentsSettings};

/// Every plugin a preset can name, in the order they handle events: the environment first (its
/// runtime context is injected before the other pre-step plugins edit the surface), the project
/// instructions, the plan, then the pruner, the context rules, preset authoring (which only adds
/// a section and a tool), memory (its prompt section and tool), skills (their section and the
/// `skill` tool), the jobs (the ends of background jobs), the sub-agents (the `task` tool),
/// code mode (`run_code` and its API section) and the MCP servers' tools (`mcp`). Compaction runs before all of them, first thing
/// in each step.
pub fn registry() -> PluginRegistry {
    let mut registry = PluginRegistry::new();
    registry
        .register::<EnvironmentSettings>("runtime_context", Environment::parts)
        .register::<InstructionsSettings>(instructions::PLUGIN, ProjectInstructions::parts)
        .register::<PlansSettings>(crate::plans::PLUGIN, PlansPlugin::parts)
        .register::<CompactionSettings>("compaction", CompactionPlugin::parts)
        .register::<PrunerSettings>("tool_result_pruner", ToolResultPruner::parts)
        .register::<ContextRulesSettings>("context_rules", ContextRulesPlugin::parts)
        .register::<PresetAuthoringSettings>("preset_authoring", preset_authoring)
        .register::<MemorySettings>(memory::plugin::NAME, MemoryPlugin::parts)
        .register::<SkillsSettings>(skills::PLUGIN, skills::parts)
        .register::<JobsSettings>(jobs::PLUGIN, JobsPlugin::parts)
        .register::<SubagentsSettings>(subagents::PLUGIN, SubagentsSettings::parts)
        .register::<CodeModeSettings>(code::PLUGIN, CodeModeSettings::parts)
        .register::<crate::mcp::McpSettings>(crate::mcp::PLUGIN, mcp);
    registry
}

/// `[plugins.mcp]`: the tools of the MCP servers of the config file's `[mcp]` and of the
/// workspace's `.mcp.json`.
fn mcp(
    settings: crate::mcp::McpSettings,
    host: &PluginHost,
) -> anyhow::Result<crate::plugin::registry::Parts> {
    crate::mcp::parts(settings, host, || Ok(crate::config::Config::load()?.mcp))
}

/// `[plugins.preset_authoring]`: the preset guide and `preset_write`, which saves into the
/// user's presets folder (beside the config file) or the workspace's, once [`parse_preset`]
/// accepts the text, and asks the user first when the preset allows more than the running one
/// or the one it replaces, or takes the name of the preset new sessions get (the config file's
/// `preset`).
fn preset_authoring(
    _settings: PresetAuthoringSettings,
    host: &PluginHost,
) -> anyhow::Result<crate::plugin::registry::Parts> {
    let default_preset = crate::config::Config::load()
        .ok()
        .and_then(|config| config.preset)
        .unwrap_or_else(|| crate::preset::DEFAULT_PRESET.to_owned());
    let tool = authoring::PresetWrite::new(
        crate::config::Config::user_dir().map(|dir| dir.join("presets")),
        Arc::new(|workspace: &Path, name: &str, origin: &str, text: &str| {
            parse_preset(workspace, name, origin, text).map(drop)
        }),
    )
    .running(&host.preset, host.rights.clone())
    .default_preset(default_preset);
    Ok(authoring::parts(tool))
}

/// Check a preset's plugin tables against the registry: the strict parse of a whole preset is
/// [`Preset::parse`] followed by this.
pub fn check_preset(preset: &Preset) -> anyhow::Result<()> {
    registry().check(&preset.origin, &preset.file.plugins)
}

/// What the host offers the plugins of `preset` in the workspace of `store`: the workspace's
/// state directory, the model if one is configured, and the board its jobs and sub-agents post
/// into.
pub fn plugin_host(
    store: &Store,
    preset: &Preset,
    provider: Option<Provider>,
    activity: Arc<Activity>,
) -> PluginHost {
    PluginHost {
        state_dir: Some(store.workspace_dir().to_owned()),
        rights: Some(preset.rights()),
        provider,
        activity,
        ..PluginHost::detached(
            store.workspace(),
            &preset.name,
            preset.file.model.context_window,
        )
    }
}

/// The plugins of `preset` and the tools they bring.
pub fn assemble(preset: &Preset, host: &PluginHost) -> anyhow::Result<Assembly> {
    registry().build(&preset.origin, &preset.file.plugins, host)
}

/// A preset's text checked as a session's start checks it, in `workspace`: the strict parse
/// (`origin` names the file in errors), its plugin tables against the registry, and
/// `tools.enabled` against the tools there are, the built-in ones and those its plugins bring.
/// Nothing is started (the language servers behind the `lsp_*` tools start on a query, and none
/// is made here). What `preset_write` checks before it saves, and what `agent-lsp preset`
/// reports about a preset file.
pub fn parse_preset(
    workspace: &Path,
    name: &str,
    origin: &str,
    text: &str,
) -> anyhow::Result<Preset> {
    let preset = Preset::parse(name, origin, text)?;
    check_preset(&preset)?;
    let host = PluginHost::detached(workspace, &preset.name, preset.file.model.context_window);
    let assembly = assemble(&preset, &host)?;
    // The tools a session would have, made as a session's are; no server starts until a query.
    super::ToolHost::standalone(workspace, lsp_bridge::BridgeConfig::builtin())?
        .runtime(&preset, &assembly, &Arc::default())
        .map_err(|error| anyhow::anyhow!("preset {origin}: tools.enabled: {error:#}"))?;
    Ok(preset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Permission;
    use crate::tools::{PermissionPolicy, ToolRegistry, lsp};

    #[test]
    fn policies_come_from_presets() {
        let readonly = Preset::builtin("readonly").unwrap();
        let policy = PermissionPolicy::from_table(&readonly.file.permissions);
        assert_eq!(policy.permission("read"), Permission::Allow);
        assert_eq!(policy.permission("write"), Permission::Deny);
        assert_eq!(policy.permission("shell"), Permission::Deny);
        let standard = Preset::builtin("standard").unwrap();
        assert_eq!(
            PermissionPolicy::from_table(&standard.file.permissions),
            PermissionPolicy::default()
        );
    }

    #[test]
    fn every_builtin_preset_is_assembled_from_registry_names() {
        let workspace = tempfile::tempdir().unwrap();
        for (name, _) in crate::preset::BUILTIN {
            let preset = Preset::builtin(name).unwrap();
            check_preset(&preset).unwrap();
            let host = PluginHost::detached(
                workspace.path(),
                &preset.name,
                preset.file.model.context_window,
            );
            let assembly = assemble(&preset, &host).unwrap();
            let plugins = assembly
                .plugins
                .iter()
                .map(|p| p.name())
                .collect::<Vec<_>>();
            // The jobs plugin's `shell` is offered apart, in place of the built-in one.
            let mut tools = assembly
                .tools
                .iter()
                .map(|t| t.def().name)
                .collect::<Vec<_>>();
            if let Some(shell) = &assembly.shell {
                let after = tools
                    .iter()
                    .position(|t| t == "skill")
                    .map_or(0, |at| at + 1);
                tools.insert(after, shell.def().name);
            }
            match name {
                "minimal" => assert!(plugins.is_empty() && tools.is_empty()),
                "creative" => {
                    assert_eq!(plugins, ["runtime_context", "preset_authoring"]);
                    assert_eq!(tools, ["preset_write"]);
                }
                "code" => {
                    assert_eq!(
                        plugins,
                        [
                            "runtime_context",
                            "project_instructions",
                            "tool_result_pruner",
                            "code_mode"
                        ]
                    );
                    assert_eq!(tools, ["recall_history", "run_code"]);
                }
                "explore" => {
                    assert_eq!(
                        plugins,
                        [
                            "runtime_context",
                            "project_instructions",
                            "tool_result_pruner"
                        ]
                    );
                    assert_eq!(tools, ["recall_history"]);
                }
                // Without a model there is no compaction engine, and without a state directory
                // no memory section, but their tools are there.
                _ => {
                    assert_eq!(
                        plugins,
                        [
                            "runtime_context",
                            "project_instructions",
                            "plans",
                            "tool_result_pruner",
                            "context_rules",
                            "skills",
                            "jobs"
                        ]
                    );
                    assert_eq!(
                        tools,
                        [
                            "todo",
                            "recall_history",
                            "memory",
                            "skill",
                            "shell",
                            "job_output",
                            "job_kill",
                            "job_list",
                            "task"
                        ]
                    );
                }
            }
        }
    }

    #[test]
    fn a_preset_is_checked_as_a_session_start_checks_it() {
        let workspace = tempfile::tempdir().unwrap();
        let creative = crate::preset::catalog::builtin_text("creative").unwrap();
        let check = |text: &str| {
            parse_preset(workspace.path(), "mine", "mine.toml", text)
                .map(drop)
                .map_err(|error| format!("{error:#}"))
        };
        check(creative).unwrap();
        let table = "[plugins.preset_authoring]\nenabled = true";
        let line = creative
            .lines()
            .position(|line| line == "[plugins.preset_authoring]")
            .unwrap()
            + 3;
        let error =
            check(&creative.replace(table, &format!("{table}\nguide = false"))).unwrap_err();
        assert!(
            error.starts_with(&format!(
                "preset mine.toml, line {line}: [plugins.preset_authoring] `guide`: unknown field `guide`"
            )),
            "{error}"
        );
        // A tool that comes with a plugin needs the plugin.
        let error = check(&creative.replace(table, "[plugins.preset_authoring]\nenabled = false"))
            .unwrap_err();
        assert!(
            error.starts_with("preset mine.toml: tools.enabled: no tool named `preset_write`"),
            "{error}"
        );
        let error = check(&creative.replace(
            "\"grep\", \"preset_write\"",
            "\"grep\", \"teleport\", \"preset_write\"",
        ))
        .unwrap_err();
        assert!(error.contains("no tool named `teleport`"), "{error}");
    }

    /// The preset reference (presets/README.md, also the creative agent's guide) names every
    /// plugin of the registry and every tool a preset can enable.
    #[test]
    fn the_preset_reference_names_every_plugin_and_tool() {
        let readme = include_str!("../../../presets/README.md");
        for name in registry().names() {
            assert!(
                readme.contains(&format!("| `{name}` |")),
                "README lacks plugin `{name}`"
            );
        }
        let workspace = tempfile::tempdir().unwrap();
        let every_plugin = format!(
            "{}\n[plugins.preset_authoring]\nenabled = true\n",
            crate::preset::catalog::builtin_text("standard").unwrap()
        );
        let preset = Preset::parse("all", "all.toml", &every_plugin).unwrap();
        let host = PluginHost::detached(
            workspace.path(),
            &preset.name,
            preset.file.model.context_window,
        );
        let plugin_tools = assemble(&preset, &host).unwrap().tools;
        let mut names: Vec<String> = ToolRegistry::standard()
            .names()
            .map(str::to_owned)
            .collect();
        names.extend(lsp::lsp_tool_names().into_iter().map(str::to_owned));
        names.extend(["web_search".to_owned(), "web_fetch".to_owned()]);
        names.extend(plugin_tools.iter().map(|tool| tool.def().name));
        for name in names {
            assert!(
                readme.contains(&format!("`{name}`")),
                "README lacks tool `{name}`"
            );
        }
    }
}
