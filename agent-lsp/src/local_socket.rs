//! Unix sockets only their owner can connect to, for `serve --listen unix:PATH` (which therefore
//! needs no token) and the shared bridge's socket in the state directory. The socket file is
//! created 0600, and every connection's peer is checked to be the same user (`SO_PEERCRED`),
//! which holds even if the file's mode is changed later.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

use anyhow::{Context, bail};

/// Bind a socket at `path`, mode 0600. A socket of the user's left by a server that is gone
/// is replaced; anything else at `path` (a file, another user's socket, a socket someone
/// listens on) is refused rather than removed.
///
/// The socket is bound inside a fresh directory only the user can enter, narrowed to 0600 and
/// then renamed to `path` (never over anything that appeared there meanwhile), so it is never
/// reachable with a wider mode. (Narrowing the umask around `bind` would do the same, but the
/// umask is the whole process's, and another thread's files would get it too.)
pub fn bind_owner_only(path: &Path) -> anyhow::Result<UnixListener> {
    let shown = path.display();
    match std::fs::symlink_metadata(path) {
        Ok(metadata)
            if metadata.file_type().is_socket()
                && metadata.uid() == rustix::process::getuid().as_raw() =>
        {
            if UnixStream::connect(path).is_ok() {
                bail!("another server listens on {shown}");
            }
            std::fs::remove_file(path)
                .with_context(|| format!("cannot remove the stale socket {shown}"))?;
        }
        Ok(_) => {
            bail!("{shown} exists and is not a socket of yours: remove it or choose another path")
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(error).with_context(|| format!("cannot read {shown}")),
    }
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let staging = tempfile::Builder::new()
        .prefix(".agent-lsp-")
        .tempdir_in(directory)
        .with_context(|| {
            format!(
                "cannot create a private directory in {}",
                directory.display()
            )
        })?;
    let staged = staging.path().join("s");
    let listener =
        UnixListener::bind(&staged).with_context(|| format!("cannot listen on {shown}"))?;
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot make {shown} private"))?;
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        &staged,
        rustix::fs::CWD,
        path,
        rustix::fs::RenameFlags::NOREPLACE,
    )
    .with_context(|| format!("cannot listen on {shown}"))?;
    Ok(listener)
}

/// Whether the process at the other end of `stream` runs as this user.
pub fn peer_is_owner(stream: &tokio::net::UnixStream) -> std::io::Result<bool> {
    Ok(stream.peer_cred()?.uid() == rustix::process::getuid().as_raw())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_is_owner_only_and_only_a_stale_socket_of_ours_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.sock");
        let listener = bind_owner_only(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        // Someone listens: refused.
        let error = format!("{:#}", bind_owner_only(&path).unwrap_err());
        assert!(error.contains("another server listens"), "{error}");
        // The server is gone, its socket left behind: replaced.
        drop(listener);
        let _listener = bind_owner_only(&path).unwrap();
        // A file that is not a socket is never removed.
        let file = dir.path().join("notes.txt");
        std::fs::write(&file, "keep me").unwrap();
        let error = format!("{:#}", bind_owner_only(&file).unwrap_err());
        assert!(error.contains("is not a socket of yours"), "{error}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
    }
}
