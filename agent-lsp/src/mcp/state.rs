//! What the MCP client keeps under the user's state root (`<state>/mcp/`): the approvals of
//! workspace `.mcp.json` files, one file per approval, and the last tool list of each server,
//! so the next session's catalog is known (and byte-identical) without starting anything.
//!
//! An approval names the workspace and the digest of its file's bytes together: a repository
//! that changes its `.mcp.json` (a pull, a branch) needs a new approval, and so does another
//! repository with the same bytes, since `{"command": "python3", "args": ["srv.py"]}` runs
//! each repository's own `srv.py` (the servers run in their workspace).
//!
//! The approvals of earlier versions, in `<state>/mcp/approved/`, named the bytes alone and
//! said nothing of the workspace they were given for beyond one path; they are no longer read,
//! so each workspace is asked once again, with the question that names what its relative
//! paths resolve to.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

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

/// Hex SHA-256 of a file's bytes.
pub fn digest_bytes(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// What names an approval: the workspace (its canonical path, so two spellings of one folder
/// share it) and the digest of its file's bytes, hashed together.
pub fn approval_key(workspace: &Path, digest: &str) -> String {
    let workspace = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_owned());
    let value = serde_json::json!({
        "workspace": workspace.to_string_lossy(),
        "mcp_json_sha256": digest,
    });
    crate::canonical::sha256_hex(&crate::canonical::canonical_json(&value))
}

fn approval_path(state_root: &Path, workspace: &Path, digest: &str) -> PathBuf {
    dir(state_root)
        .join("approvals")
        .join(approval_key(workspace, digest))
}

/// Whether the user approved the file of `workspace` with these bytes.
pub fn is_approved(state_root: &Path, workspace: &Path, digest: &str) -> bool {
    approval_path(state_root, workspace, digest).is_file()
}

/// Remember that the user approved the file `file` of `workspace` with this digest; the
/// approval file holds the file's path and digest, for whoever looks.
pub fn approve(
    state_root: &Path,
    workspace: &Path,
    digest: &str,
    file: &Path,
) -> anyhow::Result<()> {
    write_atomically(
        &approval_path(state_root, workspace, digest),
        format!("{}\nsha256 {digest}\n", file.display()).as_bytes(),
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

/// Write `bytes` to `path` by rename, so a reader never sees half a file.
fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use anyhow::Context;
    use std::io::Write;
    let folder = path.parent().expect("state files live in a folder");
    std::fs::create_dir_all(folder)
        .with_context(|| format!("failed to create {}", folder.display()))?;
    let mut file = tempfile::NamedTempFile::new_in(folder)
        .with_context(|| format!("failed to write in {}", folder.display()))?;
    file.write_all(bytes)?;
    file.persist(path)
        .with_context(|| format!("failed to write {}", path.display()))?;
    Ok(())
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
