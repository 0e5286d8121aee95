//! The user's approvals of workspace files that run commands: a repository's `.mcp.json`
//! (`crate::mcp`) and its hooks files (`crate::hooks`). A cloned repository brings these files,
//! so what they run needs the user's word once before it runs.
//!
//! An approval names the workspace and the digest of the file's bytes together: a repository
//! that changes its file (a pull, a branch, the agent writing it) needs a new approval, and so
//! does another repository with the same bytes, since `python3 srv.py` runs each repository's
//! own `srv.py`. Each approval is one file in a folder of the state root, named by that key.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Hex SHA-256 of a file's bytes.
pub fn digest_bytes(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The key of an approval: the workspace (its canonical path, so two spellings of one folder
/// share it) and the digest of its file's bytes under `field` (which names what kind of file
/// it is), hashed together.
pub fn key(workspace: &Path, field: &str, digest: &str) -> String {
    let workspace = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_owned());
    let value = serde_json::json!({
        "workspace": workspace.to_string_lossy(),
        field: digest,
    });
    crate::canonical::sha256_hex(&crate::canonical::canonical_json(&value))
}

/// Whether the approval `key` is recorded in the folder `approvals`.
pub fn is_approved(approvals: &Path, key: &str) -> bool {
    approvals.join(key).is_file()
}

/// Record the approval `key` in the folder `approvals`; the file holds the approved file's
/// path and digest, for whoever looks.
pub fn approve(approvals: &Path, key: &str, file: &Path, digest: &str) -> anyhow::Result<()> {
    write_atomically(
        &approvals.join(key),
        format!("{}\nsha256 {digest}\n", file.display()).as_bytes(),
    )
}

/// Write `bytes` to `path` by rename, so a reader never sees half a file.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use anyhow::Context;
    use std::io::Write;
    let folder: PathBuf = path
        .parent()
        .expect("state files live in a folder")
        .to_owned();
    std::fs::create_dir_all(&folder)
        .with_context(|| format!("failed to create {}", folder.display()))?;
    let mut file = tempfile::NamedTempFile::new_in(&folder)
        .with_context(|| format!("failed to write in {}", folder.display()))?;
    file.write_all(bytes)?;
    file.persist(path)
        .with_context(|| format!("failed to write {}", path.display()))?;
    Ok(())
}
