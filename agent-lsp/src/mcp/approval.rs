//! Approving the workspace's `.mcp.json`: what the user is shown and what is recorded, the same
//! whoever asks (`agent-lsp mcp approve` on a terminal, the editor's `agent.mcp.approve` and the
//! question `serve` asks when a session would start with an unapproved file).
//!
//! What is approved is the digest of the bytes that were read and shown, never "the file": a
//! file changed between the question and the answer stays unapproved, since the user saw other
//! servers than it now runs.

use std::path::{Path, PathBuf};

use super::config::{Transport, WORKSPACE_FILE, read_workspace_file};
use super::state;

/// Where the workspace's `.mcp.json` stands with the user.
pub enum Standing {
    /// The workspace has no `.mcp.json`.
    NoFile,
    /// Its current bytes are approved.
    Approved { file: PathBuf, digest: String },
    /// Its current bytes are not approved: what to show the user.
    Unapproved(Question),
}

/// An unapproved `.mcp.json`, as the user is asked about it.
#[derive(Clone, Debug)]
pub struct Question {
    pub file: PathBuf,
    /// The digest of the bytes read, what approving records.
    pub digest: String,
    /// Each server's name and what it runs (`command args…` or the URL), sorted by name.
    pub servers: Vec<(String, String)>,
}

/// Read the workspace's `.mcp.json` and look its bytes up among the approvals under
/// `state_root`.
pub fn standing(workspace: &Path, state_root: &Path) -> anyhow::Result<Standing> {
    let Some(file) = read_workspace_file(workspace)? else {
        return Ok(Standing::NoFile);
    };
    if state::is_approved(state_root, &file.digest) {
        return Ok(Standing::Approved {
            file: file.path,
            digest: file.digest,
        });
    }
    let servers = file
        .servers
        .iter()
        .map(|(name, server)| {
            let what = server
                .transport()
                .map(|transport| shown(&transport))
                .unwrap_or_else(|error| format!("(invalid: {error})"));
            (name.clone(), what)
        })
        .collect();
    Ok(Standing::Unapproved(Question {
        file: file.path,
        digest: file.digest,
        servers,
    }))
}

/// What the user is shown of a server: the command line and its environment (a variable such
/// as `LD_PRELOAD` changes what runs), or the URL and the names of its headers (their values
/// usually hold a token).
fn shown(transport: &Transport) -> String {
    let summary = transport.summary();
    match transport {
        Transport::Stdio { env, .. } if !env.is_empty() => {
            let env = env
                .iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect::<Vec<_>>()
                .join(" ");
            format!("{summary} (environment: {env})")
        }
        Transport::Http { headers, .. } if !headers.is_empty() => {
            let names = headers.keys().cloned().collect::<Vec<_>>().join(", ");
            format!("{summary} (headers: {names})")
        }
        _ => summary,
    }
}

/// The error of approving where there is nothing to approve.
pub fn no_file() -> anyhow::Error {
    anyhow::anyhow!("the workspace has no {WORKSPACE_FILE} to approve")
}

impl Question {
    /// `FILE runs these MCP servers:` and one `  NAME: WHAT` line per server.
    pub fn describe(&self) -> String {
        let mut text = format!("{} runs these MCP servers:", self.file.display());
        for (name, what) in &self.servers {
            text.push_str(&format!("\n  {name}: {what}"));
        }
        text
    }

    /// Record the user's approval of the bytes this question was made from.
    pub fn approve(&self, state_root: &Path) -> anyhow::Result<()> {
        state::approve(state_root, &self.digest, &self.file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shown_bytes_are_what_is_approved() {
        let workspace = tempfile::tempdir().unwrap();
        let state_root = tempfile::tempdir().unwrap();
        assert!(matches!(
            standing(workspace.path(), state_root.path()).unwrap(),
            Standing::NoFile
        ));
        let file = workspace.path().join(WORKSPACE_FILE);
        std::fs::write(
            &file,
            r#"{"mcpServers": {"b": {"type": "http", "url": "http://127.0.0.1:9/mcp"}, "a": {"command": "node", "args": ["s.js", "x"], "env": {"LD_PRELOAD": "/tmp/x.so"}}}}"#,
        )
        .unwrap();
        let Standing::Unapproved(question) = standing(workspace.path(), state_root.path()).unwrap()
        else {
            panic!("a new file is unapproved");
        };
        assert_eq!(
            question.describe(),
            format!(
                "{} runs these MCP servers:\n  a: node s.js x (environment: LD_PRELOAD=/tmp/x.so)\n  b: http://127.0.0.1:9/mcp",
                file.display()
            )
        );
        // The file changes after the question was shown: approving it approves what was shown.
        std::fs::write(&file, r#"{"mcpServers": {}}"#).unwrap();
        question.approve(state_root.path()).unwrap();
        assert!(matches!(
            standing(workspace.path(), state_root.path()).unwrap(),
            Standing::Unapproved(_)
        ));
        assert!(state::is_approved(state_root.path(), &question.digest));
    }
}
