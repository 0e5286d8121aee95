//! What the MCP client keeps under the user's state root (`<state>/mcp/`): the approvals of
//! workspace `.mcp.json` files, one empty-named file per approved digest, and the last tool
//! list of each server, so the next session's catalog is known (and byte-identical) without
//! starting anything.
//!
//! An approval names the digest of the file's bytes, not its path: a repository that changes
//! its `.mcp.json` (a pull, a branch) needs a new approval, and two clones of the same file
//! share one.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One tool as a server listed it, as the catalog needs it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CachedTool {
    /// The server's own name for the tool.
    pub name: String,
    pub description: String,
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

fn approval_path(state_root: &Path, digest: &str) -> PathBuf {
    dir(state_root).join("approved").join(digest)
}

/// Whether the user approved a workspace file with these bytes.
pub fn is_approved(state_root: &Path, digest: &str) -> bool {
    approval_path(state_root, digest).is_file()
}

/// Remember that the user approved the file at `file` with this digest; the approval file holds
/// the path it was approved at, for whoever looks.
pub fn approve(state_root: &Path, digest: &str, file: &Path) -> anyhow::Result<()> {
    write_atomically(
        &approval_path(state_root, digest),
        format!("{}\n", file.display()).as_bytes(),
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
    fn an_approval_names_the_bytes_and_a_tool_list_round_trips() {
        let state = tempfile::tempdir().unwrap();
        let digest = digest_bytes(b"{}");
        assert!(!is_approved(state.path(), &digest));
        approve(state.path(), &digest, Path::new("/w/.mcp.json")).unwrap();
        assert!(is_approved(state.path(), &digest));
        assert!(!is_approved(state.path(), &digest_bytes(b"{ }")));

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
