//! Where MCP servers are declared, and what one declaration means: the user's config file
//! (`[mcp.servers.NAME]`) and the workspace's `.mcp.json` (`{"mcpServers": {NAME: …}}`, the
//! format other agents read), each server either a command over stdio or a URL over streamable
//! HTTP.
//!
//! A server of the workspace's file is the repository's say, not the user's: it runs only once
//! the user approved that file's exact bytes in that workspace (`super::state`), and its name
//! never replaces one of the user's servers (like workspace presets and skills, it is listed as
//! shadowed).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::canonical::{canonical_json, sha256_hex};

/// The workspace's file of servers, at its root.
pub const WORKSPACE_FILE: &str = ".mcp.json";

/// `[mcp]` of the config file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpOptions {
    /// `[mcp.servers.NAME]`: the user's servers.
    #[serde(default)]
    pub servers: BTreeMap<String, ServerConfig>,
}

/// One server as written, in the config file or in `.mcp.json`: `command` (with `args` and
/// `env`) for a child over stdio, or `url` (with `headers`) for streamable HTTP. `type` is
/// accepted because other agents write it (`stdio`, `http`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

/// How the client reaches a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

impl Transport {
    /// One line for `agent-lsp mcp list`: the command line or the URL (header values are left
    /// out: they usually hold a token).
    pub fn summary(&self) -> String {
        match self {
            Transport::Stdio { command, args, .. } => std::iter::once(command.as_str())
                .chain(args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            Transport::Http { url, .. } => url.clone(),
        }
    }
}

impl ServerConfig {
    /// The transport this declaration names, or what is wrong with it.
    pub fn transport(&self) -> Result<Transport, String> {
        let kind = self.kind.as_deref();
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => Err("give either `command` or `url`, not both".into()),
            (None, None) => Err("give `command` (stdio) or `url` (streamable HTTP)".into()),
            (Some(command), None) => {
                if !matches!(kind, None | Some("stdio")) {
                    return Err(format!(
                        "`type` is {:?} but `command` is given",
                        kind.unwrap()
                    ));
                }
                if !self.headers.is_empty() {
                    return Err("`headers` is for a `url` server".into());
                }
                Ok(Transport::Stdio {
                    command: command.clone(),
                    args: self.args.clone(),
                    env: self.env.clone(),
                })
            }
            (None, Some(url)) => {
                match kind {
                    None | Some("http" | "streamable-http" | "streamableHttp") => {}
                    Some("sse") => {
                        return Err("the old SSE transport is not supported; give the server's streamable HTTP endpoint".into());
                    }
                    Some(other) => return Err(format!("`type` {other:?} is not stdio or http")),
                }
                if !self.args.is_empty() || !self.env.is_empty() {
                    return Err("`args` and `env` are for a `command` server".into());
                }
                let parsed = url::Url::parse(url).map_err(|error| format!("`url`: {error}"))?;
                if !matches!(parsed.scheme(), "http" | "https") {
                    return Err(format!(
                        "`url` must be http or https, not {}",
                        parsed.scheme()
                    ));
                }
                Ok(Transport::Http {
                    url: url.clone(),
                    headers: self.headers.clone(),
                })
            }
        }
    }
}

/// Where a server was declared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// The user's config file.
    User,
    /// The workspace's `.mcp.json`, whose bytes have this digest (what an approval names, with
    /// the workspace).
    Workspace { file: PathBuf, digest: String },
}

impl Source {
    pub fn as_str(&self) -> &'static str {
        match self {
            Source::User => "user",
            Source::Workspace { .. } => "workspace",
        }
    }
}

/// One declared server.
#[derive(Clone, Debug)]
pub struct Declared {
    pub name: String,
    pub source: Source,
    /// The transport, or why the declaration is unusable.
    pub transport: Result<Transport, String>,
    /// A user's server of the same name wins over a workspace's.
    pub shadowed: bool,
}

impl Declared {
    /// What identifies this server's tool list: its name, where it comes from and its transport
    /// as written, in canonical JSON. A changed command or URL is another server, whose tools
    /// are listed afresh.
    pub fn digest(&self, config: &ServerConfig) -> String {
        let value = json!({
            "name": self.name,
            "source": self.source.as_str(),
            "server": serde_json::to_value(config).expect("a server config serializes"),
        });
        sha256_hex(&canonical_json(&value))
    }
}

/// Whether `name` may name a server: it becomes part of tool names (`mcp__NAME__TOOL`), which
/// providers limit to letters, digits, `_` and `-`; `__` would make the split ambiguous.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !name.contains("__")
}

/// The workspace's `.mcp.json` as read.
pub struct WorkspaceFile {
    pub path: PathBuf,
    /// The digest of its bytes, what an approval names (with the workspace).
    pub digest: String,
    /// Its servers as written; one this client cannot read has an `invalid: …` type.
    pub servers: BTreeMap<String, ServerConfig>,
}

/// The most a workspace's `.mcp.json` may hold.
const MAX_WORKSPACE_FILE: u64 = 1 << 20;

/// The workspace file's servers as written, and the digest of its bytes; `Ok(None)` when the
/// workspace has no such file.
pub fn read_workspace_file(workspace: &Path) -> anyhow::Result<Option<WorkspaceFile>> {
    #[derive(Deserialize)]
    struct File {
        #[serde(rename = "mcpServers", default)]
        mcp_servers: BTreeMap<String, serde_json::Value>,
    }
    let path = workspace.join(WORKSPACE_FILE);
    // A cloned repository brings this file: only a regular file inside the workspace, and
    // never more than `MAX_WORKSPACE_FILE` of it.
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    let resolved = crate::workspace::Workspace::new(workspace)
        .and_then(|root| Ok(root.resolve(WORKSPACE_FILE)?))
        .map_err(|error| anyhow::anyhow!("{} is not read: {error:#}", path.display()))?;
    let bytes = match crate::workspace::read_regular(&resolved, MAX_WORKSPACE_FILE) {
        Ok(Some((bytes, size))) if size <= MAX_WORKSPACE_FILE => bytes,
        Ok(Some((_, size))) => anyhow::bail!(
            "{} is not read: {size} bytes, more than the {} KiB an .mcp.json may have",
            path.display(),
            MAX_WORKSPACE_FILE >> 10
        ),
        Ok(None) => return Ok(None),
        Err(error) => anyhow::bail!("{} is not read: {error}", path.display()),
    };
    let digest = crate::mcp::state::digest_bytes(&bytes);
    let file: File = serde_json::from_slice(&bytes)
        .map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?;
    let mut servers = BTreeMap::new();
    for (name, value) in file.mcp_servers {
        // A server written in a way this client does not read is reported (as a declaration
        // whose transport is an error), not a reason to drop the file's other servers.
        let config =
            serde_json::from_value::<ServerConfig>(value).unwrap_or_else(|error| ServerConfig {
                kind: Some(format!("invalid: {error}")),
                ..ServerConfig::default()
            });
        servers.insert(name, config);
    }
    Ok(Some(WorkspaceFile {
        path,
        digest,
        servers,
    }))
}

/// Every declared server, sorted by name (a shadowed one after the server it yields to), with
/// the declaration it was read from.
pub fn declared(
    user: &McpOptions,
    workspace: &Path,
) -> anyhow::Result<Vec<(Declared, ServerConfig)>> {
    let mut found = declared_by_user(user);
    if let Some(file) = read_workspace_file(workspace)? {
        for (name, config) in file.servers {
            let source = Source::Workspace {
                file: file.path.clone(),
                digest: file.digest.clone(),
            };
            let mut declared = declare(&name, source, &config);
            declared.shadowed = user.servers.contains_key(&name);
            found.push((declared, config));
        }
    }
    found.sort_by(|(a, _), (b, _)| (&a.name, a.shadowed).cmp(&(&b.name, b.shadowed)));
    Ok(found)
}

/// The config file's servers alone, sorted by name: what a session uses when the workspace's
/// file cannot be read.
pub fn declared_by_user(user: &McpOptions) -> Vec<(Declared, ServerConfig)> {
    let mut found: Vec<_> = user
        .servers
        .iter()
        .map(|(name, config)| (declare(name, Source::User, config), config.clone()))
        .collect();
    found.sort_by(|(a, _), (b, _)| a.name.cmp(&b.name));
    found
}

fn declare(name: &str, source: Source, config: &ServerConfig) -> Declared {
    let transport = if !valid_name(name) {
        Err(format!(
            "`{name}` is not a server name: 1 to 32 letters, digits, `_` or `-`, without `__`"
        ))
    } else if let Some(invalid) = config
        .kind
        .as_deref()
        .and_then(|kind| kind.strip_prefix("invalid: "))
    {
        Err(invalid.to_owned())
    } else {
        config.transport()
    };
    Declared {
        name: name.to_owned(),
        source,
        transport,
        shadowed: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transport(json: &str) -> Result<Transport, String> {
        serde_json::from_str::<ServerConfig>(json)
            .map_err(|error| error.to_string())?
            .transport()
    }

    #[test]
    fn a_declaration_is_a_command_or_a_url() {
        assert_eq!(
            transport(r#"{"command": "npx", "args": ["-y", "x"], "env": {"A": "1"}}"#),
            Ok(Transport::Stdio {
                command: "npx".into(),
                args: vec!["-y".into(), "x".into()],
                env: BTreeMap::from([("A".into(), "1".into())]),
            })
        );
        assert_eq!(
            transport(r#"{"type": "http", "url": "https://h/mcp", "headers": {"X": "y"}}"#),
            Ok(Transport::Http {
                url: "https://h/mcp".into(),
                headers: BTreeMap::from([("X".into(), "y".into())]),
            })
        );
        for (json, error) in [
            (r#"{}"#, "give `command` (stdio) or `url`"),
            (r#"{"command": "a", "url": "http://h"}"#, "not both"),
            (r#"{"type": "sse", "url": "http://h/sse"}"#, "SSE transport"),
            (r#"{"type": "http", "command": "a"}"#, "`type` is \"http\""),
            (r#"{"url": "file:///x"}"#, "http or https"),
            (r#"{"command": "a", "cwd": "/"}"#, "unknown field `cwd`"),
        ] {
            let got = transport(json).unwrap_err();
            assert!(got.contains(error), "{json}: {got}");
        }
    }

    #[test]
    fn the_workspace_file_never_replaces_a_users_server() {
        let workspace = tempfile::tempdir().unwrap();
        std::fs::write(
            workspace.path().join(WORKSPACE_FILE),
            r#"{"mcpServers": {"docs": {"command": "repo-docs"}, "git": {"command": "git-mcp"}, "bad__name": {"command": "x"}}}"#,
        )
        .unwrap();
        let user: McpOptions = toml::from_str("[servers.docs]\ncommand = \"my-docs\"\n").unwrap();
        let found = declared(&user, workspace.path()).unwrap();
        let summary = found
            .iter()
            .map(|(d, _)| {
                (
                    d.name.as_str(),
                    d.source.as_str(),
                    d.shadowed,
                    d.transport.is_ok(),
                )
            })
            .collect::<Vec<_>>();
        assert_eq!(
            summary,
            [
                ("bad__name", "workspace", false, false),
                ("docs", "user", false, true),
                ("docs", "workspace", true, true),
                ("git", "workspace", false, true),
            ]
        );
    }
}
