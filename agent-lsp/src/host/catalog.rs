//! The one place a session's tool catalog is put together: the built-in file tools and shell,
//! the `lsp_*` tools, the web tools, the tools the preset's plugins bring (MCP servers' tools
//! among them) and the tools only one front end adds (`mcp serve`'s `files` and session tools).
//!
//! Every tool is built once, with what it needs, and registered once: the registry refuses a
//! second tool of the same name, so nothing is silently replaced. The one tool a plugin may
//! offer in place of a built-in is `shell` ([`Assembly::shell`]: the jobs plugin's, which can
//! also start background jobs), and it is taken here, by the field that says so, not by a
//! clash of names.

use std::sync::Arc;

use crate::plugin::registry::Assembly;
use crate::plugin::tool::Tool;
use crate::preset::Preset;
use crate::tools::{ToolRegistry, edit, fs, lsp, search, shell, web};
use crate::web::WebRuntime;

/// What a catalog is built from, beside the preset that picks from it.
pub struct Sources<'a> {
    /// The `lsp_*` tools, over the host's bridge.
    pub lsp: &'a lsp::LspTools,
    /// The web tools' runtime, with the user's `[web]` settings.
    pub web: &'a WebRuntime,
    /// The tools the preset's plugins brought, and the `shell` one of them offers.
    pub plugins: &'a Assembly,
    /// The tools the front end adds whatever the preset enables (`mcp serve`'s own).
    pub front_end: &'a [Arc<dyn Tool>],
}

/// The tools of `preset`: those its `tools.enabled` names, every MCP server tool its `mcp`
/// plugin brought (those are whatever the servers list, so `tools.enabled` cannot name them),
/// and the front end's own. Naming a tool there is not is an error, and so is a plugin's tool
/// that takes a name already taken.
pub fn build(preset: &Preset, sources: Sources<'_>) -> anyhow::Result<ToolRegistry> {
    let mut offered: Vec<(Arc<dyn Tool>, &str)> = vec![
        (Arc::new(fs::Read), "built in"),
        (Arc::new(fs::List), "built in"),
        (Arc::new(fs::Write), "built in"),
        (Arc::new(search::Glob), "built in"),
        (Arc::new(search::Grep), "built in"),
        (Arc::new(edit::Edit), "built in"),
    ];
    offered.push(match &sources.plugins.shell {
        Some(shell) => (shell.clone(), "a plugin"),
        None => (Arc::new(shell::Shell), "built in"),
    });
    for tool in sources.lsp.all() {
        offered.push((Arc::new(tool), "built in"));
    }
    let (web_search, web_fetch) = web::tools(sources.web.clone());
    offered.push((Arc::new(web_search), "built in"));
    offered.push((Arc::new(web_fetch), "built in"));
    for tool in &sources.plugins.tools {
        offered.push((tool.clone(), "a plugin"));
    }

    let mut enabled = preset.file.tools.enabled.clone();
    enabled.extend(
        sources
            .plugins
            .tools
            .iter()
            .map(|tool| tool.def().name)
            .filter(|name| name.starts_with(crate::permissions::MCP_TOOL_PREFIX)),
    );
    let mut registry = ToolRegistry::new();
    for (tool, from) in offered {
        add(&mut registry, tool, from)?;
    }
    let mut registry = registry.only(&enabled)?;
    for tool in sources.front_end {
        add(&mut registry, tool.clone(), "the front end")?;
    }
    Ok(registry)
}

/// Register `tool`, or say which name two tools claim.
fn add(registry: &mut ToolRegistry, tool: Arc<dyn Tool>, from: &str) -> anyhow::Result<()> {
    let name = tool.def().name;
    if registry.get(&name).is_some() {
        anyhow::bail!(
            "two tools are named `{name}`: one from {from} and one registered before it; a tool's name must be unique in a catalog"
        );
    }
    registry.register_shared(tool);
    Ok(())
}

#[cfg(test)]
mod tests {
    use futures_util::future::BoxFuture;
    use serde_json::json;

    use super::*;
    use crate::llm::ToolDef;
    use crate::plugin::outcomes::ToolOutput;
    use crate::plugin::registry::PluginHost;
    use crate::plugin::tool::{CallArgs, ToolContext};

    /// A tool of the given name (`read`: one that takes a built-in's name).
    struct Named(&'static str);

    impl Tool for Named {
        fn def(&self) -> ToolDef {
            ToolDef {
                name: self.0.into(),
                description: "Not the real read.".into(),
                parameters: json!({"type": "object"}),
            }
        }

        fn read_only(&self) -> bool {
            true
        }

        fn run(&self, _ctx: ToolContext, _args: CallArgs) -> BoxFuture<'static, ToolOutput> {
            Box::pin(async { ToolOutput::ok("impostor") })
        }
    }

    fn lsp() -> lsp::LspTools {
        let bridge = lsp_bridge::Bridge::new(lsp_bridge::BridgeConfig::builtin(), Vec::new());
        let documents = Arc::new(lsp_bridge::documents::DocumentMirror::new());
        lsp::LspTools::new(lsp_bridge::queries::Queries::new(
            Arc::new(bridge),
            documents,
        ))
    }

    fn web() -> WebRuntime {
        WebRuntime::new(&Default::default(), None).unwrap()
    }

    #[test]
    fn a_plugin_tool_that_takes_a_built_in_name_is_refused_not_swapped_in() {
        let preset = Preset::builtin("standard").unwrap();
        let plugins = Assembly {
            tools: vec![Arc::new(Named("read"))],
            ..Assembly::default()
        };
        let sources = Sources {
            lsp: &lsp(),
            web: &web(),
            plugins: &plugins,
            front_end: &[],
        };
        let error = build(&preset, sources).err().expect("a clash");
        assert!(
            format!("{error:#}").contains("two tools are named `read`"),
            "{error:#}"
        );
    }

    /// The plugins `preset` assembles, nothing started.
    fn assembly_of(preset: &Preset) -> Assembly {
        let workspace = tempfile::tempdir().unwrap();
        let host = PluginHost::detached(workspace.path(), &preset.name, 128_000);
        super::super::assembly::assemble(preset, &host).unwrap()
    }

    #[test]
    fn the_jobs_plugin_shell_is_the_catalog_shell_and_the_only_one() {
        let preset = Preset::builtin("standard").unwrap();
        let plugins = assembly_of(&preset);
        assert!(plugins.shell.is_some(), "the standard preset runs jobs");
        let sources = Sources {
            lsp: &lsp(),
            web: &web(),
            plugins: &plugins,
            front_end: &[],
        };
        let registry = build(&preset, sources).unwrap();
        let shell = registry
            .catalog()
            .into_iter()
            .find(|def| def.name == "shell");
        let shell = shell.expect("a shell");
        assert!(
            shell.parameters["properties"]["background"].is_object(),
            "{shell:?}"
        );
        let names = registry.names().filter(|name| *name == "shell").count();
        assert_eq!(names, 1);
    }

    #[test]
    fn front_end_tools_join_whatever_the_preset_enables_and_clash_like_any_other() {
        let preset = Preset::builtin("readonly").unwrap();
        let plugins = assembly_of(&preset);
        let front_end: Vec<Arc<dyn Tool>> = vec![Arc::new(Named("read"))];
        let sources = Sources {
            lsp: &lsp(),
            web: &web(),
            plugins: &plugins,
            front_end: &front_end,
        };
        let error = build(&preset, sources)
            .err()
            .expect("`read` is the preset's");
        assert!(format!("{error:#}").contains("the front end"), "{error:#}");

        let front_end: Vec<Arc<dyn Tool>> = vec![Arc::new(Named("files"))];
        let sources = Sources {
            lsp: &lsp(),
            web: &web(),
            plugins: &plugins,
            front_end: &front_end,
        };
        let registry = build(&preset, sources).unwrap();
        assert!(!preset.file.tools.enabled.iter().any(|name| name == "files"));
        assert!(registry.get("files").is_some());
    }
}
