//! Opening and replacing files inside the workspace so that the open itself cannot leave it.
//!
//! [`super::Workspace::resolve`] checks a path component by component and returns its physical
//! form: every symlink inside the root already replaced by its target. Checking and then
//! opening by name leaves a window, though: another process (or a command the agent started)
//! can swap a file or a directory on that path for a symlink to `~/.ssh` between the check and
//! the open. So the file tools open what `resolve` returned relative to a descriptor of the
//! root, with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`: the
//! kernel walks the path and refuses any symlink on it (there is none in a physical path unless
//! one was swapped in) and any step above the root. The kernel decides at the moment of the
//! open; nothing is checked first and used later.
//!
//! Replacing a file goes the same way: the temporary file is created and renamed inside a
//! descriptor of its directory, opened beneath the root, so the rename cannot land elsewhere.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags, ResolveFlags};

/// A descriptor of the workspace root that files are opened beneath.
#[derive(Clone, Debug)]
pub(crate) struct Root {
    fd: Arc<OwnedFd>,
    path: PathBuf,
}

impl Root {
    /// The canonical root `path`, opened as a directory.
    pub(crate) fn open(path: &Path) -> io::Result<Root> {
        let fd = rustix::fs::open(
            path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Root {
            fd: Arc::new(fd),
            path: path.to_owned(),
        })
    }

    /// Open the physical path `path` (under the root, as `resolve` returns it) for reading.
    /// A FIFO or device is opened without blocking, so the caller can look at what it got.
    pub(crate) fn open_read(&self, path: &Path) -> io::Result<File> {
        let fd = self.beneath(path, OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY)?;
        Ok(File::from(fd))
    }

    /// Replace the content of the physical path `path` with `bytes` so that readers see the old
    /// or the new file, never a mix, and the file lands in the directory that was checked:
    /// a temporary file is written in that directory (opened beneath the root), synced, and
    /// renamed over the name. An existing file keeps its permissions; a new one gets `0644`.
    pub(crate) fn write_atomically(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        self.write(path, bytes, false)
    }

    /// [`Root::write_atomically`] for a file that must not exist yet: the rename refuses to
    /// replace one (`RENAME_NOREPLACE`), with [`io::ErrorKind::AlreadyExists`], so a file made
    /// by someone else between a look and the write is never overwritten.
    pub(crate) fn create_atomically(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        self.write(path, bytes, true)
    }

    fn write(&self, path: &Path, bytes: &[u8], no_replace: bool) -> io::Result<()> {
        let (dir_path, name) = match (path.parent(), path.file_name()) {
            (Some(dir), Some(name)) => (dir, name),
            _ => return Err(io::Error::other("the path has no parent directory")),
        };
        let dir = self.beneath(dir_path, OFlags::RDONLY | OFlags::DIRECTORY)?;
        let mode = match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Mode::from_raw_mode(stat.st_mode) & Mode::from_bits_truncate(0o7777),
            Err(_) => Mode::from_bits_truncate(0o644),
        };
        let (temp_name, temp) = create_temp(&dir)?;
        let written = (|| {
            let mut file = File::from(temp);
            file.write_all(bytes)?;
            rustix::fs::fchmod(&file, mode)?;
            file.sync_all()?;
            if no_replace {
                rustix::fs::renameat_with(&dir, &temp_name, &dir, name, RenameFlags::NOREPLACE)?;
            } else {
                rustix::fs::renameat(&dir, &temp_name, &dir, name)?;
            }
            Ok::<(), io::Error>(())
        })();
        if written.is_err() {
            let _ = rustix::fs::unlinkat(&dir, &temp_name, AtFlags::empty());
        }
        written?;
        // Make the rename itself durable; a failure here does not undo the write.
        let _ = rustix::fs::fsync(&dir);
        Ok(())
    }

    /// Open `path` (absolute, under the root) relative to the root descriptor, refusing any
    /// symlink and any step out of the root on the way.
    fn beneath(&self, path: &Path, flags: OFlags) -> io::Result<OwnedFd> {
        let relative = path.strip_prefix(&self.path).map_err(|_| {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{} is not inside the workspace", path.display()),
            )
        })?;
        let relative = if relative.as_os_str().is_empty() {
            Path::new(".")
        } else {
            relative
        };
        let resolve =
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        rustix::fs::openat2(
            &*self.fd,
            relative,
            flags | OFlags::CLOEXEC,
            Mode::empty(),
            resolve,
        )
        .map_err(|errno| match errno {
            // A symlink (ELOOP) or a step outside (EXDEV) where `resolve` saw none: the
            // path was changed after it was checked.
            rustix::io::Errno::LOOP | rustix::io::Errno::XDEV => io::Error::new(
                io::ErrorKind::PermissionDenied,
                "it was changed into a link after it was checked; it is not opened",
            ),
            other => io::Error::from(other),
        })
    }
}

/// A new file in `dir` with a name no other writer uses: `.agent-lsp-write-<random>.tmp`.
fn create_temp(dir: &OwnedFd) -> io::Result<(String, OwnedFd)> {
    for _ in 0..16 {
        let name = format!(".agent-lsp-write-{:016x}.tmp", rand_u64());
        match rustix::fs::openat(
            dir,
            name.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_bits_truncate(0o600),
        ) {
            Ok(fd) => return Ok((name, fd)),
            Err(rustix::io::Errno::EXIST) => continue,
            Err(errno) => return Err(errno.into()),
        }
    }
    Err(io::Error::other("cannot find a free temporary file name"))
}

/// A number that differs between calls and processes, for temporary file names (not secret).
fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos()),
    );
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_swapped_in_after_the_check_is_refused_at_open() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "secret").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root_path = dir.path().canonicalize().unwrap();
        std::fs::write(root_path.join("race.txt"), "inside").unwrap();
        std::fs::create_dir(root_path.join("sub")).unwrap();
        let root = Root::open(&root_path).unwrap();
        let mut text = String::new();
        use std::io::Read;
        root.open_read(&root_path.join("race.txt"))
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "inside");

        // The file becomes a link out, and a directory on the path becomes one.
        std::fs::remove_file(root_path.join("race.txt")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), root_path.join("race.txt"))
            .unwrap();
        let error = root.open_read(&root_path.join("race.txt")).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::PermissionDenied, "{error}");
        std::fs::remove_dir(root_path.join("sub")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root_path.join("sub")).unwrap();
        assert!(root.open_read(&root_path.join("sub/secret")).is_err());
        assert!(
            root.write_atomically(&root_path.join("sub/planted"), b"x")
                .is_err()
        );
        assert!(!outside.path().join("planted").exists());
        // Outside the root by name: refused before the kernel is asked.
        assert!(root.open_read(&outside.path().join("secret")).is_err());
    }

    #[test]
    fn replacing_keeps_the_mode_and_leaves_no_temporary_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root_path = dir.path().canonicalize().unwrap();
        let script = root_path.join("run.sh");
        std::fs::write(&script, "old").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let root = Root::open(&root_path).unwrap();
        root.write_atomically(&script, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&script).unwrap(), "new");
        let mode = std::fs::metadata(&script).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o755);
        root.write_atomically(&root_path.join("fresh.txt"), b"x")
            .unwrap();
        let mode = std::fs::metadata(root_path.join("fresh.txt"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o644);
        let names: Vec<_> = std::fs::read_dir(&root_path)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(
            names.iter().all(|name| !name.ends_with(".tmp")),
            "{names:?}"
        );
    }

    #[test]
    fn creating_never_replaces_an_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        let root_path = dir.path().canonicalize().unwrap();
        let root = Root::open(&root_path).unwrap();
        let path = root_path.join("made.toml");
        root.create_atomically(&path, b"first").unwrap();
        let error = root.create_atomically(&path, b"second").unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::AlreadyExists, "{error}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "first");
        let names: Vec<_> = std::fs::read_dir(&root_path)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["made.toml"]);
    }
}
