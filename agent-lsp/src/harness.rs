//! The assembly: a preset turned into the parts the loop runs with. It sits above the tools,
//! compaction and presets, so those never import each other to be put together (see
//! docs/decisions/0004-plugin-layer.md).

use std::path::Path;
use std::sync::Arc;

use crate::preset::Preset;
use crate::preset::authoring::PresetWrite;
use crate::tools::{PermissionPolicy, ToolRegistry, ToolRuntime, lsp, web};
use crate::workspace::Workspace;

/// The tools of `preset` for `workspace`: the file tools and the `lsp_*` tools over a bridge to
/// the workspace's language servers (started lazily, on the first query that needs each), with
/// the preset's permissions and fresh diagnostics after every write. The bridge is returned too,
/// so the caller can shut its servers down.
pub fn runtime_for(
    workspace: &Path,
    preset: &Preset,
    servers: lsp_bridge::BridgeConfig,
) -> anyhow::Result<(ToolRuntime, lsp_bridge::Bridge)> {
    let bridge =
        lsp_bridge::Bridge::new(servers, vec![Workspace::new(workspace)?.root().to_owned()]);
    let documents = Arc::new(lsp_bridge::documents::DocumentMirror::new());
    Ok((
        runtime_with(workspace, preset, bridge.clone(), documents)?,
        bridge,
    ))
}

/// The tools of `preset` over an existing bridge and document mirror: the editor-facing server
/// shares both with the editor, so the agent sees the editor's unsaved buffers and warm servers.
pub fn runtime_with(
    workspace: &Path,
    preset: &Preset,
    bridge: lsp_bridge::Bridge,
    documents: Arc<lsp_bridge::documents::DocumentMirror>,
) -> anyhow::Result<ToolRuntime> {
    let workspace = Workspace::new(workspace)?;
    let queries = lsp_bridge::queries::Queries::new(Arc::new(bridge), documents);
    let lsp_tools = lsp::LspTools::new(queries);
    let mut registry = ToolRegistry::standard();
    for tool in lsp_tools.all() {
        registry.register(tool);
    }
    registry.register(crate::compaction::recall::RecallHistory);
    registry.register(PresetWrite::new(
        crate::config::Config::user_dir().map(|dir| dir.join("presets")),
        Arc::new(|name: &str, origin: &str, text: &str| {
            parse_preset(name, origin, text).map(|_| ())
        }),
    ));
    // Web tools without the user's `[web]` settings (fetch works, search says what to
    // configure); callers with a configuration replace them with `ToolRuntime::with_web`.
    let (web_search, web_fetch) = web::tools(crate::web::WebRuntime::new(&Default::default())?);
    registry.register(web_search).register(web_fetch);
    let registry = registry.only(&preset.file.tools.enabled)?;
    Ok(ToolRuntime::new(workspace, registry)
        .with_policy(PermissionPolicy::from_table(&preset.file.permissions))
        .with_write_observer(Arc::new(lsp_tools)))
}

/// A preset's text parsed and checked as a session's preset is: the strict parse (`origin`
/// names the file in errors). What `preset_write` checks before it saves, and what `agent-lsp
/// preset` reports about a preset file.
pub fn parse_preset(name: &str, origin: &str, text: &str) -> anyhow::Result<Preset> {
    Preset::parse(name, origin, text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Permission;

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
}
