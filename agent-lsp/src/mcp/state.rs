//! What the MCP client keeps under the user's state root (`<state>/mcp/`): the approvals of
//! workspace `.mcp.json` files, one file per approval, and the last tool list of each server,
//! so the next session's catalog is known (and byte-identical) without starting anything.
//!
//! An approval names the workspace and the digest of its file's bytes together
//! (`crate::approvals`, which the hooks' approvals share).
//!
//! The approvals of earlier versions, in `<state>/mcp/approved/`, named the bytes alone and
//! said nothing of the workspace they were given for beyond one path; they are no longer read,
//! so each workspace is asked once again, with the question that names what its relative
//! paths resolve to.

use std::path::{Path, PathBuf};

use crate::approvals::{self, write_atomically};
use serde::{Deserialize, Serialize};

/// One tool as a server listed it, as the catalog needs it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CachedTool {
    /// The server's own name for the tool.
    pub name: String,
    /// The server's description of the tool, given to the model as is.
    pub description: String,
    /// The JSON schema of the tool's arguments, given to the model as the tool's parameters.
    pub input_schema: serde_json::Value,
    /// The server's `readOnlyHint`.
    #[serde(default)]
    pub read_only: bool,
}

/// The folder of the client's files under the state root.
pub fn dir(state_root: &Path) -> PathBuf {
    state_root.join("mcp")
}

pub use crate::approvals::digest_bytes;

/// What names an approval: the workspace and the digest of its `.mcp.json` (see
/// `crate::approvals`).
pub fn approval_key(workspace: &Path, digest: &str) -> String {
    approvals::key(workspace, "mcp_json_sha256", digest)
}

fn approvals_dir(state_root: &Path) -> PathBuf {
    dir(state_root).join("approvals")
}

/// Whether the user approved the file of `workspace` with these bytes.
pub fn is_approved(state_root: &Path, workspace: &Path, digest: &str) -> bool {
    approvals::is_approved(&approvals_dir(state_root), &approval_key(workspace, digest))
}

/// Remember that the user approved the file `file` of `workspace` with this digest.
pub fn approve(
    state_root: &Path,
    workspace: &Path,
    digest: &str,
    file: &Path,
) -> anyhow::Result<()> {
    approvals::approve(
        &approvals_dir(state_root),
        &approval_key(workspace, digest),
        file,
        digest,
    )
}

fn tools_path(state_root: &Path, server_digest: &str) -> PathBuf {
    dir(state_root)
        .join("tools")
        .join(format!("{server_digest}.json"))
}

/// The tool list last seen for a server, if any (an unreadable file counts as none).
pub fn cached_tools(state_root: &Path, server_digest: &str) -> Option<Vec<CachedTool>> {
    let text = std::fs::read(tools_path(state_root, server_digest)).ok()?;
    serde_json::from_slice(&text).ok()
}

/// Keep a server's tool list for the next session.
pub fn cache_tools(
    state_root: &Path,
    server_digest: &str,
    tools: &[CachedTool],
) -> anyhow::Result<()> {
    write_atomically(
        &tools_path(state_root, server_digest),
        &serde_json::to_vec_pretty(tools)?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_approval_names_the_workspace_and_the_bytes_and_a_tool_list_round_trips() {
        let state = tempfile::tempdir().unwrap();
        let (a, b) = (Path::new("/w/a"), Path::new("/w/b"));
        let digest = digest_bytes(b"{}");
        assert!(!is_approved(state.path(), a, &digest));
        approve(state.path(), a, &digest, &a.join(".mcp.json")).unwrap();
        assert!(is_approved(state.path(), a, &digest));
        assert!(!is_approved(state.path(), a, &digest_bytes(b"{ }")));
        assert!(!is_approved(state.path(), b, &digest));
        // A record of an earlier version (the bytes alone) approves nothing.
        let old = dir(state.path()).join("approved").join(digest_bytes(b"[]"));
        std::fs::create_dir_all(old.parent().unwrap()).unwrap();
        std::fs::write(&old, "/w/b/.mcp.json\n").unwrap();
        assert!(!is_approved(state.path(), b, &digest_bytes(b"[]")));

        let tools = vec![CachedTool {
            name: "echo".into(),
            description: "Echo.".into(),
            input_schema: serde_json::json!({"type": "object"}),
            read_only: true,
        }];
        assert_eq!(cached_tools(state.path(), "s"), None);
        cache_tools(state.path(), "s", &tools).unwrap();
        assert_eq!(cached_tools(state.path(), "s"), Some(tools));
    }
}
