//! Approving the workspace's `.mcp.json`: what the user is shown and what is recorded, the same
//! whoever asks (`agent-lsp mcp approve` on a terminal, the editor's `agent.mcp.approve` and the
//! question `serve` asks when a session would start with an unapproved file).
//!
//! What is approved is the workspace together with the digest of the bytes that were read and
//! shown, never "the file": a file changed between the question and the answer stays
//! unapproved, since the user saw other servers than it now runs, and the same bytes in another
//! workspace are asked about again, since a relative path in them names that workspace's file.
//! For the same reason the question shows each relative path that names a file of the
//! workspace resolved (`python3 /repo/srv.py`, not `python3 srv.py`): the servers run in the
//! workspace, and what the user approves is which files they run.

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
    /// The workspace whose file it is: an approval is for this workspace alone.
    pub workspace: PathBuf,
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
    if state::is_approved(state_root, workspace, &file.digest) {
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
                .map(|transport| shown(&transport, workspace))
                .unwrap_or_else(|error| format!("(invalid: {error})"));
            (name.clone(), what)
        })
        .collect();
    Ok(Standing::Unapproved(Question {
        workspace: workspace.to_owned(),
        file: file.path,
        digest: file.digest,
        servers,
    }))
}

/// What the user is shown of a server: the command line (relative paths of workspace files
/// resolved, see [`resolved`]) and its environment (a variable such as `LD_PRELOAD` changes
/// what runs), or the URL and the names of its headers (their values usually hold a token).
fn shown(transport: &Transport, workspace: &Path) -> String {
    let summary = match transport {
        Transport::Stdio { command, args, .. } => {
            // A command without a slash is looked up on PATH, never in the workspace.
            let command = if command.contains('/') {
                resolved(command, workspace)
            } else {
                command.clone()
            };
            std::iter::once(command)
                .chain(args.iter().map(|arg| resolved(arg, workspace)))
                .collect::<Vec<_>>()
                .join(" ")
        }
        Transport::Http { .. } => transport.summary(),
    };
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

/// `word` as the user is shown it: a relative path that names a file of the workspace (where
/// the server runs) becomes its absolute path, anything else stays as written.
fn resolved(word: &str, workspace: &Path) -> String {
    let path = Path::new(word);
    if word.is_empty() || path.is_absolute() || !workspace.join(path).is_file() {
        return word.to_owned();
    }
    // `components` drops the `.` of `./srv.py`.
    let absolute: PathBuf = workspace.join(path).components().collect();
    absolute.display().to_string()
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

    /// Record the user's approval of the bytes this question was made from, in its workspace.
    pub fn approve(&self, state_root: &Path) -> anyhow::Result<()> {
        state::approve(state_root, &self.workspace, &self.digest, &self.file)
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
            r#"{"mcpServers": {"b": {"type": "http", "url": "http://127.0.0.1:9/mcp"}, "a": {"command": "node", "args": ["s.js", "x"], "env": {"LD_PRELOAD": "/tmp/x.so"}}, "c": {"command": "./run.sh", "args": ["./s.js", "s.js/", "missing.js"]}}}"#,
        )
        .unwrap();
        std::fs::write(workspace.path().join("s.js"), "").unwrap();
        std::fs::write(workspace.path().join("run.sh"), "").unwrap();
        let root = workspace.path().display();
        let Standing::Unapproved(question) = standing(workspace.path(), state_root.path()).unwrap()
        else {
            panic!("a new file is unapproved");
        };
        assert_eq!(
            question.describe(),
            format!(
                "{} runs these MCP servers:\n  a: node {root}/s.js x (environment: LD_PRELOAD=/tmp/x.so)\n  b: http://127.0.0.1:9/mcp\n  c: {root}/run.sh {root}/s.js s.js/ missing.js",
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
        assert!(state::is_approved(
            state_root.path(),
            workspace.path(),
            &question.digest
        ));
    }
}
