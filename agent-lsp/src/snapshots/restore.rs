//! Putting a checkpoint's file back on disk, and reading what a path holds now.
//!
//! Every path is checked against the workspace: its folder goes through `Workspace::resolve`
//! (no `..` out, no symlinked folder pointing outside), and its last component is never
//! followed, so a restore replaces a symlink rather than writing through it.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::{Entry, FileKind};
use crate::workspace::Workspace;

/// Why a path could not be restored.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// The path leaves the workspace or names something that is not a file.
    #[error("{0}")]
    Refused(String),
    /// The disk refused the write.
    #[error("{path}: {source}")]
    Io {
        /// From the workspace root.
        path: String,
        /// What the disk said.
        source: std::io::Error,
    },
    /// The store lacks the blob.
    #[error("{0:#}")]
    Store(anyhow::Error),
}

/// The folder `path`'s file lies in, checked, and its file name.
fn place(workspace: &Workspace, path: &str) -> Result<(PathBuf, PathBuf), RestoreError> {
    let relative = Path::new(path);
    let name = relative
        .file_name()
        .filter(|_| !relative.is_absolute() && !path.ends_with('/'))
        .ok_or_else(|| RestoreError::Refused(format!("{path}: not a file path")))?;
    let folder = match relative.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(parent) => workspace
            .resolve(&parent.to_string_lossy())
            .map_err(|error| RestoreError::Refused(format!("{path}: {error}")))?,
        None => workspace.root().to_owned(),
    };
    Ok((folder.clone(), folder.join(name)))
}

/// What `path` holds on disk now (`None`: nothing, or a folder).
pub(super) fn current(root: &Path, path: &str) -> anyhow::Result<Option<Entry>> {
    let full = root.join(path);
    let metadata = match std::fs::symlink_metadata(&full) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error.into()),
    };
    let (kind, bytes) = if metadata.file_type().is_symlink() {
        let target = std::fs::read_link(&full)?;
        (FileKind::Link, target.as_os_str().as_bytes().to_vec())
    } else if metadata.is_file() {
        use std::os::unix::fs::PermissionsExt;
        let kind = if metadata.permissions().mode() & 0o111 != 0 {
            FileKind::Executable
        } else {
            FileKind::File
        };
        (kind, std::fs::read(&full)?)
    } else {
        return Ok(None);
    };
    Ok(Some(Entry {
        id: super::store::hash_blob(&bytes),
        kind,
    }))
}

/// Put `bytes` of `kind` at `path`, or remove the file when `kind` is `None`.
pub(super) fn write(
    workspace: &Workspace,
    path: &str,
    kind: Option<FileKind>,
    bytes: Option<&[u8]>,
) -> Result<(), RestoreError> {
    let io = |source| RestoreError::Io {
        path: path.to_owned(),
        source,
    };
    let (kind, bytes) = match (kind, bytes) {
        (Some(kind), Some(bytes)) => (kind, bytes),
        _ => {
            // Removing needs the folder only; a folder that is gone already holds no file.
            let (folder, full) = match place(workspace, path) {
                Ok(place) => place,
                Err(RestoreError::Refused(_)) if !workspace.root().join(path).exists() => {
                    return Ok(());
                }
                Err(error) => return Err(error),
            };
            match std::fs::symlink_metadata(&full) {
                Ok(metadata) if metadata.is_dir() => {
                    return Err(RestoreError::Refused(format!("{path}: is a folder now")));
                }
                Ok(_) => std::fs::remove_file(&full).map_err(io)?,
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => return Err(io(error)),
            }
            remove_empty_folders(workspace.root(), &folder);
            return Ok(());
        }
    };
    let relative = Path::new(path);
    if let Some(parent) = relative.parent().filter(|p| !p.as_os_str().is_empty()) {
        // Folders the checkpoint had and the work tree lost come back first; `resolve` below
        // then checks the whole chain.
        let folder = workspace
            .resolve(&parent.to_string_lossy())
            .map_err(|error| RestoreError::Refused(format!("{path}: {error}")))?;
        std::fs::create_dir_all(&folder).map_err(io)?;
    }
    let (_, full) = place(workspace, path)?;
    if std::fs::symlink_metadata(&full).is_ok_and(|metadata| metadata.is_dir()) {
        return Err(RestoreError::Refused(format!("{path}: is a folder now")));
    }
    match kind {
        FileKind::Link => {
            let target = std::ffi::OsStr::from_bytes(bytes);
            let temporary = full.with_file_name(format!(
                ".{}.agent-lsp-restore.{}",
                full.file_name()
                    .map_or("".into(), |name| name.to_string_lossy()),
                std::process::id()
            ));
            let _ = std::fs::remove_file(&temporary);
            std::os::unix::fs::symlink(target, &temporary).map_err(io)?;
            std::fs::rename(&temporary, &full).map_err(io)?;
        }
        FileKind::File | FileKind::Executable => {
            use std::os::unix::fs::PermissionsExt;
            if std::fs::symlink_metadata(&full)
                .is_ok_and(|metadata| metadata.file_type().is_symlink())
            {
                std::fs::remove_file(&full).map_err(io)?;
            }
            workspace.write_atomically(&full, bytes).map_err(io)?;
            let mode = std::fs::metadata(&full).map_err(io)?.permissions().mode();
            let wanted = match kind {
                FileKind::Executable => mode | ((mode & 0o444) >> 2) | 0o100,
                _ => mode & !0o111,
            };
            if wanted != mode {
                std::fs::set_permissions(&full, std::fs::Permissions::from_mode(wanted))
                    .map_err(io)?;
            }
        }
    }
    Ok(())
}

/// Remove `folder` and its parents while they are empty, up to (not including) `root`: a
/// folder the agent's file brought goes with it.
fn remove_empty_folders(root: &Path, folder: &Path) {
    let mut folder = folder.to_owned();
    while folder != root && folder.starts_with(root) {
        if std::fs::remove_dir(&folder).is_err() {
            break;
        }
        if !folder.pop() {
            break;
        }
    }
}
