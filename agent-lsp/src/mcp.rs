//! The MCP client, the `mcp` plugin: the tools of the user's MCP servers (`[mcp.servers.NAME]`
//! in the config file) and of the workspace's `.mcp.json` (once the user approved the file) in
//! the catalog as `mcp__SERVER__TOOL`, each call sent to its server.
//!
//! The catalog must be known when the system prompt is assembled, and be the same for the
//! whole session, yet servers start lazily. So a server's tool list is cached under the state
//! root after each start (`state.rs`, keyed by the server's declaration): a session whose
//! servers were seen before builds its catalog from the cache without starting any, and a
//! server starts on its first call. A server never seen is started when the catalog is built,
//! all of them at once, each within `start_timeout_secs`; one that fails or hangs adds no tools
//! and is logged (and shown by `agent-lsp mcp list`), and the others are unaffected. A tool
//! list that changed reaches the next session, never the running one.
//!
//! Every call is a call of the session's tool runtime (permission, timeout, output cap, log);
//! `mcp__*` tools not named in a preset's `[permissions]` get its `mcp` key (default `ask`,
//! see `crate::permissions`). The workspace's servers are the repository's say: they run only
//! after the user approved the file's bytes in that workspace (`agent-lsp mcp approve`, or in
//! the editor, see `approval.rs`); a changed file, or the same file in another workspace, needs
//! a new approval.

pub(crate) mod approval;
pub mod client;
pub(crate) mod config;
pub(crate) mod lines;
pub mod state;
pub mod tool;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::permissions::MCP_TOOL_PREFIX;
use crate::plugin::registry::{InvalidSetting, Parts, PluginHost, PluginSettings};
use crate::plugin::tool::Tool;
use crate::sandbox::Sandbox;
use config::{Declared, McpOptions, Source};
use state::CachedTool;

/// The plugin's name in presets.
pub const PLUGIN: &str = "mcp";

/// `[plugins.mcp]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSettings {
    /// Whether the preset offers MCP servers' tools at all.
    pub enabled: bool,
    /// Only these servers' tools (by name); all of them when absent.
    #[serde(default)]
    pub servers: Option<Vec<String>>,
    /// How long a server may take to start and list its tools.
    #[serde(default = "default_start_timeout")]
    pub start_timeout_secs: u64,
    /// How long one call may take, the server's start included.
    #[serde(default = "default_call_timeout")]
    pub call_timeout_secs: u64,
}

fn default_start_timeout() -> u64 {
    10
}

fn default_call_timeout() -> u64 {
    120
}

impl McpSettings {
    /// The settings of a preset without a `[plugins.mcp]` table, for `agent-lsp mcp list`.
    pub fn defaults() -> McpSettings {
        McpSettings {
            enabled: true,
            servers: None,
            start_timeout_secs: default_start_timeout(),
            call_timeout_secs: default_call_timeout(),
        }
    }

    fn start_timeout(&self) -> Duration {
        Duration::from_secs(self.start_timeout_secs)
    }

    fn wanted(&self, name: &str) -> bool {
        self.servers
            .as_ref()
            .is_none_or(|names| names.iter().any(|wanted| wanted == name))
    }
}

impl PluginSettings for McpSettings {
    fn enabled(&self) -> bool {
        self.enabled
    }

    fn validate(&self) -> Result<(), InvalidSetting> {
        for (key, value) in [
            ("start_timeout_secs", self.start_timeout_secs),
            ("call_timeout_secs", self.call_timeout_secs),
        ] {
            if !(1..=3600).contains(&value) {
                return Err(InvalidSetting {
                    key,
                    message: format!("must be 1 to 3600 seconds, not {value}"),
                });
            }
        }
        Ok(())
    }
}

/// The plugin's constructor: the tools of the servers, no plugin of its own. Without a state
/// directory (a preset being checked) nothing is started and no tool is brought, and the
/// servers' declarations are not read: `user_servers` reads the config file's `[mcp]` (the
/// host's to read, `host::assembly::registry`; this module sits below the configuration).
pub fn parts(
    settings: McpSettings,
    host: &PluginHost,
    user_servers: impl FnOnce() -> anyhow::Result<McpOptions>,
) -> anyhow::Result<Parts> {
    let Some(state_dir) = &host.state_dir else {
        return Ok(Parts::default());
    };
    let state_root = crate::session::store::state_root_of(state_dir);
    let options = user_servers()?;
    // The preset's sandbox holds its servers too when it says so (`mcp_servers`).
    let sandbox = host
        .rights
        .as_ref()
        .map(|rights| &rights.sandbox)
        .filter(|policy| policy.mcp_servers && policy.mode != crate::sandbox::Mode::Off)
        .map(|policy| Arc::new(Sandbox::detect(policy.clone(), &host.workspace)));
    let servers = usable(&settings, &options, &host.workspace, state_root, sandbox)?;
    Ok(Parts {
        plugin: None,
        tools: catalog(&settings, &servers, state_root),
        shell: None,
    })
}

/// A declared server that may be used, with what the catalog needs of it.
pub struct Usable {
    /// The server as declared: name, source and transport.
    pub declared: Declared,
    /// The handle of the server, shared by every agent of the process (one connection per
    /// workspace and digest).
    pub server: Arc<client::Server>,
    /// What identifies its tool list (name, source, transport): the key of the cached list, so
    /// the catalog is built without starting the server.
    pub digest: String,
    /// Why it may not run (its workspace file is not approved).
    pub blocked: Option<String>,
}

/// The servers of the config file and the workspace file that `settings` wants and that are
/// well declared and not shadowed.
pub fn usable(
    settings: &McpSettings,
    options: &McpOptions,
    workspace: &Path,
    state_root: Option<&Path>,
    sandbox: Option<Arc<Sandbox>>,
) -> anyhow::Result<Vec<Usable>> {
    let mut usable = Vec::new();
    // The workspace's file comes with the repository: one that cannot be read (a link out of
    // the workspace, a FIFO, too large, not JSON) leaves the session the user's servers, and
    // `agent-lsp mcp list` says why.
    let declared = config::declared(options, workspace).unwrap_or_else(|error| {
        tracing::warn!("{error:#}; only the config file's MCP servers are used");
        config::declared_by_user(options)
    });
    for (declared, config) in declared {
        if declared.shadowed || !settings.wanted(&declared.name) {
            continue;
        }
        usable.extend(Usable::new(
            declared,
            &config,
            workspace,
            state_root,
            sandbox.clone(),
        ));
    }
    Ok(usable)
}

impl Usable {
    /// The server `declared` as `config` writes it, `None` (logged) when its declaration is
    /// unusable.
    fn new(
        declared: Declared,
        config: &config::ServerConfig,
        workspace: &Path,
        state_root: Option<&Path>,
        sandbox: Option<Arc<Sandbox>>,
    ) -> Option<Usable> {
        let transport = match &declared.transport {
            Ok(transport) => transport.clone(),
            Err(error) => {
                tracing::warn!(server = %declared.name, "MCP server not used: {error}");
                return None;
            }
        };
        let digest = declared.digest(config);
        let blocked = unapproved(&declared, workspace, state_root);
        let server = client::server(
            &declared.name,
            &digest,
            transport,
            workspace.to_owned(),
            state_root.map(Path::to_owned),
            sandbox,
        );
        Some(Usable {
            declared,
            server,
            digest,
            blocked,
        })
    }
}

/// The tools of the MCP servers a front end was handed for a session (an ACP client's
/// `mcpServers`), trusted as the user's own, under the preset's `[plugins.mcp]` `settings`
/// (none when it disables MCP); a server named like one of the config file's (`user`) is left
/// out, as a workspace file's is: the config file decides.
pub fn front_end_tools(
    servers: &McpOptions,
    settings: &McpSettings,
    user: &McpOptions,
    workspace: &Path,
    state_root: Option<&Path>,
) -> Vec<Arc<dyn Tool>> {
    if !settings.enabled {
        return Vec::new();
    }
    let usable = config::declared_by_user(servers)
        .into_iter()
        .filter(|(declared, _)| {
            let shadowed = user.servers.contains_key(&declared.name);
            if shadowed {
                tracing::warn!(server = %declared.name, "the client's MCP server is not used: the config file declares one of the same name");
            }
            !shadowed
        })
        .filter(|(declared, _)| settings.wanted(&declared.name))
        .filter_map(|(declared, config)| {
            Usable::new(declared, &config, workspace, state_root, None)
        })
        .collect::<Vec<_>>();
    catalog(settings, &usable, state_root)
}

/// Why a workspace server may not run, or `None` when it may (a user's server always may).
fn unapproved(declared: &Declared, workspace: &Path, state_root: Option<&Path>) -> Option<String> {
    let Source::Workspace { file, digest } = &declared.source else {
        return None;
    };
    if state_root.is_some_and(|root| state::is_approved(root, workspace, digest)) {
        return None;
    }
    Some(format!(
        "MCP server `{}` comes from {}, whose current contents the user has not approved, so it does not run; the user approves them with `agent-lsp mcp approve` in the workspace, or in the editor (`agent.mcp.approve`; they join the next session)",
        declared.name,
        file.display()
    ))
}

/// The catalog entries of `servers`: from each one's cached tool list, or listed now (all
/// servers at once) for those never seen.
fn catalog(
    settings: &McpSettings,
    servers: &[Usable],
    state_root: Option<&Path>,
) -> Vec<Arc<dyn Tool>> {
    let cached = servers
        .iter()
        .map(|usable| state_root.and_then(|root| state::cached_tools(root, &usable.digest)))
        .collect::<Vec<_>>();
    let to_start = servers
        .iter()
        .zip(&cached)
        .filter(|(usable, cached)| cached.is_none() && usable.blocked.is_none())
        .map(|(usable, _)| usable.server.clone())
        .collect::<Vec<_>>();
    let timeout = settings.start_timeout();
    // Nothing to start (the usual case: no servers, or every list cached) needs no runtime.
    let listed = if to_start.is_empty() {
        Vec::new()
    } else {
        client::block_on(async move {
            let lists = to_start.iter().map(|server| server.list_tools(timeout));
            let results = futures_util::future::join_all(lists).await;
            to_start
                .iter()
                .map(|server| server.name.clone())
                .zip(results)
                .collect::<Vec<_>>()
        })
    };
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    let mut names = BTreeSet::new();
    for (usable, cached) in servers.iter().zip(cached) {
        let list = match cached {
            Some(list) => list,
            None => match listed
                .iter()
                .find(|(name, _)| *name == usable.declared.name)
            {
                Some((_, Ok(list))) => list.clone(),
                Some((_, Err(error))) => {
                    tracing::warn!(server = %usable.declared.name, "MCP server adds no tools: {error}");
                    continue;
                }
                None => {
                    if let Some(blocked) = &usable.blocked {
                        tracing::warn!(server = %usable.declared.name, "{blocked}");
                    }
                    continue;
                }
            },
        };
        for remote in &list {
            let name = tool_name(&usable.declared.name, &remote.name);
            if !names.insert(name.clone()) {
                tracing::warn!(tool = %name, "two MCP tools have the same catalog name; the second is left out");
                continue;
            }
            let mut tool = tool::McpTool::new(
                usable.server.clone(),
                name,
                remote,
                Duration::from_secs(settings.call_timeout_secs),
                timeout,
            );
            tool.blocked = usable.blocked.clone();
            tools.push(Arc::new(tool));
        }
    }
    tools
}

/// The catalog name of a server's tool: `mcp__SERVER__TOOL`, with what providers refuse in a
/// tool name (anything but letters, digits, `_` and `-`) replaced by `_`, at most 64 characters.
pub fn tool_name(server: &str, tool: &str) -> String {
    let tool: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut name = format!("{MCP_TOOL_PREFIX}{server}__{tool}");
    name.truncate(64);
    name
}

/// One server as `agent-lsp mcp list` shows it.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The server's name, as declared.
    pub name: String,
    /// `user` (the config file) or `workspace` (the workspace's `.mcp.json`).
    pub source: &'static str,
    /// The workspace file that declares it, for a workspace server.
    pub file: Option<String>,
    /// The transport in a few words (the command, or the URL); `None` when it is invalid.
    pub transport: Option<String>,
    /// Running, failed, not approved, shadowed or invalid, with the reason.
    pub state: String,
    /// The tool names the model would see, sorted; empty unless it was listed.
    pub tools: Vec<String>,
}

/// Every declared server with its state: the usable ones started (at once, each within the
/// start timeout) and their tools listed, the others with why they are not used.
pub fn report(
    options: &McpOptions,
    workspace: &Path,
    state_root: Option<&Path>,
) -> anyhow::Result<Vec<Report>> {
    let settings = McpSettings::defaults();
    // `mcp list` reports the servers as the user started them, outside any preset's sandbox.
    let servers = usable(&settings, options, workspace, state_root, None)?;
    let timeout = settings.start_timeout();
    let live = servers
        .iter()
        .filter(|usable| usable.blocked.is_none())
        .map(|usable| usable.server.clone())
        .collect::<Vec<_>>();
    let results = client::block_on(async move {
        let mut results = Vec::new();
        let lists = live.iter().map(|server| server.list_tools(timeout));
        for (server, listed) in live.iter().zip(futures_util::future::join_all(lists).await) {
            results.push((server.name.clone(), listed, server.status().await));
        }
        results
    });
    let mut reports = Vec::new();
    for (declared, _config) in config::declared(options, workspace)? {
        let file = match &declared.source {
            Source::Workspace { file, .. } => Some(file.display().to_string()),
            Source::User => None,
        };
        let mut report = Report {
            name: declared.name.clone(),
            source: declared.source.as_str(),
            file,
            transport: declared.transport.as_ref().ok().map(|t| t.summary()),
            state: String::new(),
            tools: Vec::new(),
        };
        report.state = if let Err(error) = &declared.transport {
            format!("invalid: {error}")
        } else if declared.shadowed {
            "shadowed: the user's server of this name is used".to_owned()
        } else if unapproved(&declared, workspace, state_root).is_some() {
            "not approved: run `agent-lsp mcp approve` to let the workspace's .mcp.json servers run"
                .to_owned()
        } else {
            match results.iter().find(|(name, _, _)| *name == declared.name) {
                Some((_, Ok(tools), status)) => {
                    report.tools = tools
                        .iter()
                        .map(|tool: &CachedTool| tool_name(&declared.name, &tool.name))
                        .collect();
                    report.tools.sort();
                    status.clone()
                }
                Some((_, Err(error), _)) => format!("failed: {error}"),
                None => "not used".to_owned(),
            }
        };
        reports.push(report);
    }
    Ok(reports)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_names_are_what_providers_take() {
        assert_eq!(tool_name("fs", "read_file"), "mcp__fs__read_file");
        assert_eq!(
            tool_name("docs", "search.v2 (beta)"),
            "mcp__docs__search_v2__beta_"
        );
        assert_eq!(tool_name("s", &"x".repeat(100)).len(), 64);
    }
}
