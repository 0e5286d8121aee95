//! The workspace root and the confinement of every path a tool is given to it.
//!
//! Paths come from the model (and, through `@path` references, from the programmer), so they
//! are untrusted input. Every file tool turns its `path` argument into a real path through
//! [`Workspace::resolve`], and only ever touches the path it returns. The rules, in the order
//! they are checked:
//!
//! - **Syntax** (nothing is touched on disk yet): empty paths, NUL bytes, paths over
//!   [`MAX_PATH_BYTES`] bytes or with a component over [`MAX_COMPONENT_BYTES`] bytes, Windows
//!   forms (any `\`, a drive letter such as `C:`, UNC `\\server\share`), URLs (`file:///…`) and
//!   home-directory forms (`~`, `~user`) are refused. A backslash is a legal byte in a Unix file
//!   name, but from a model it is nearly always a Windows separator, and treating it as a name
//!   would silently create odd files. `~` is not expanded (there is no shell here); it is refused
//!   rather than taken as a literal directory name, because the model almost certainly meant the
//!   home directory. A file literally named `~` is still reachable as `./~`.
//! - **Absolute paths** must lie under the root; the rest is then treated like a relative path.
//! - **Walking**: the path is resolved one component at a time from the canonical root, the way
//!   the kernel does it. A `..` that would climb above the root is refused *even if later
//!   components would come back in* (`../ws/a.txt`): the model has no business naming the
//!   workspace from outside, and refusing the climb means nothing outside is ever looked at.
//!   A component that is a symlink is canonicalized and must land inside the root; so a symlink
//!   pointing out is refused whether it is the last component or a directory in the middle
//!   (`link_dir/../x` is refused at `link_dir`, which is also what keeps `..` after a symlink
//!   honest). A dangling symlink is refused, because where it would lead cannot be checked and
//!   writing through it would create its target. Once a component does not exist, nothing
//!   below it can be a symlink, so the rest is resolved lexically (this is what lets `write`
//!   create `new_dir/new_file` while still checking the nearest existing ancestor).
//!
//! Architecture Invariant: the returned path is the physical path (symlinks inside the root
//! resolved) and lies under the canonical root.
//!
//! A check is not a guarantee on its own: another process (or a command the agent started) can
//! swap a file or directory on the path for a symlink between `resolve` and the tool's use of
//! the path. So the tools open, create and replace files through [`Workspace::open_read`] and
//! [`Workspace::write_atomically`], which hand the physical path to the kernel relative to a
//! descriptor of the root and refuse any symlink or step out of it at the moment of the open
//! (see `confined`).

mod confined;
mod read_roots;

use std::ffi::OsStr;
use std::io;
use std::path::{Component, Path, PathBuf};

use anyhow::Context;
use thiserror::Error;

/// Read at most `max` bytes of a configuration file a repository may bring (`.mcp.json`,
/// AGENTS.md, presets): a regular file only, refused with a clear error otherwise (a FIFO is not
/// waited on, a device such as `/dev/zero` is not read until memory runs out). The bytes, and
/// the file's size (more than `max` when it was cut); `Ok(None)` when nothing is there. Callers resolve a workspace
/// file inside the workspace first ([`Workspace::resolve`]), so no link leads out of it.
pub fn read_regular(path: &Path, max: u64) -> io::Result<Option<(Vec<u8>, u64)>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
    {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(io::Error::other(
            "not a regular file (a FIFO, a device or a folder)",
        ));
    }
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes)?;
    let size = metadata.len().max(bytes.len() as u64);
    Ok(Some((bytes, size)))
}

/// Longest path accepted, in bytes (Linux `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;
/// Longest path component accepted, in bytes (`NAME_MAX` on common file systems).
pub const MAX_COMPONENT_BYTES: usize = 255;

/// Why a path was refused. The `Display` text is shown to the model as is, so it says what was
/// refused and why in words a model can act on.
#[derive(Debug, Error)]
pub enum PathError {
    /// An empty string names no file; most likely the model left the argument blank.
    #[error("the path is empty")]
    Empty,
    /// A NUL byte ends a path at the system call, so the file touched would not be the one the
    /// string names.
    #[error("the path contains a NUL byte")]
    NulByte,
    /// Longer than [`MAX_PATH_BYTES`]: refused before any system call would fail on it.
    #[error("the path is {len} bytes long; at most {MAX_PATH_BYTES} are allowed")]
    TooLong {
        /// The path's length in bytes.
        len: usize,
    },
    /// One component is longer than [`MAX_COMPONENT_BYTES`], which no common file system
    /// accepts as a name.
    #[error(
        "the path component `{prefix}…` is {len} bytes long; at most {MAX_COMPONENT_BYTES} are allowed"
    )]
    ComponentTooLong {
        /// The start of the component, enough for the model to recognise it without echoing
        /// the whole overlong name back.
        prefix: String,
        /// The component's length in bytes.
        len: usize,
    },
    /// A backslash, a drive letter or a UNC path: Windows forms, refused rather than taken as
    /// odd Unix file names (see the module documentation).
    #[error(
        "`{path}` looks like a Windows path ({what}); use `/`-separated paths relative to the workspace root"
    )]
    WindowsPath {
        /// The path as given.
        path: String,
        /// Which Windows form was recognised, so the message says what to change.
        what: &'static str,
    },
    /// A `scheme://` URL (often `file:///…`) where a path was expected.
    #[error("`{path}` is a URL, not a path; use a path relative to the workspace root")]
    Url {
        /// The URL as given.
        path: String,
    },
    /// Starts with `~`, which no shell expands here; see the module documentation for why it
    /// is not taken as a literal name.
    #[error(
        "`{path}` starts with `~`, which is not expanded and would point outside the workspace; for a file literally named `~`, write `./~`"
    )]
    HomeDirectory {
        /// The path as given.
        path: String,
    },
    /// An absolute path that is not under the root. [`Workspace::resolve_read`] matches on
    /// this variant to look for the path in a folder granted for reading instead.
    #[error("`{path}` is an absolute path outside the workspace root `{root}`")]
    AbsoluteOutside {
        /// The path as given.
        path: String,
        /// The canonical root, so the model can rewrite the path relative to it.
        root: String,
    },
    /// A `..` that would climb above the root, refused even if later components come back in.
    #[error(
        "`{path}` climbs above the workspace root with `..`; only paths inside the workspace are allowed"
    )]
    EscapesRoot {
        /// The path as given.
        path: String,
    },
    /// A symlink on the path resolves to somewhere outside the root.
    #[error(
        "`{path}` goes through the symlink `{link}`, which points outside the workspace (to `{target}`)"
    )]
    SymlinkOutside {
        /// The path as given.
        path: String,
        /// The offending link, relative to the root.
        link: String,
        /// Where the link leads (canonical), so the programmer can see why it was refused.
        target: String,
    },
    /// A symlink on the path whose target does not exist: where it leads cannot be checked,
    /// and writing through it would create the target wherever that is.
    #[error(
        "`{path}` goes through the symlink `{link}`, whose target does not exist, so where it leads cannot be checked"
    )]
    DanglingSymlink {
        /// The path as given.
        path: String,
        /// The dangling link, relative to the root.
        link: String,
    },
    /// The path lies in a folder granted to the session for reading, but breaks that folder's
    /// confinement (the same rules as the workspace's).
    #[error(
        "`{path}` is in `{root}`, a folder this session may only read, and is refused there: {source}"
    )]
    InReadRoot {
        /// The path as given.
        path: String,
        /// The granted folder the path was resolved in.
        root: String,
        /// Why the granted folder refused it.
        source: Box<PathError>,
    },
    /// Checking a component failed for another reason than its absence (permissions, I/O):
    /// the path is refused rather than used unchecked.
    #[error("`{path}` could not be checked: {source}")]
    Io {
        /// The path as given.
        path: String,
        /// The error of the check.
        #[source]
        source: io::Error,
    },
}

/// The directory the agent works in; every file tool is confined to it.
#[derive(Clone, Debug)]
pub struct Workspace {
    /// Canonical (symlink-free, absolute) root.
    root: PathBuf,
    /// The root as given, when it differs from the canonical one, so that absolute paths
    /// written through a symlinked root (e.g. `/tmp` → `/private/tmp`) are still recognised.
    given_root: Option<PathBuf>,
    /// The root opened as a directory: what files are opened beneath.
    beneath: confined::Root,
    /// Folders outside the root that sessions may read (see `read_roots`).
    read_roots: read_roots::ReadRoots,
}

impl Workspace {
    /// A workspace rooted at `root`, which must be an existing directory.
    pub fn new(root: impl AsRef<Path>) -> anyhow::Result<Workspace> {
        let given = root.as_ref();
        let canonical = std::fs::canonicalize(given)
            .with_context(|| format!("workspace root {} cannot be resolved", given.display()))?;
        anyhow::ensure!(
            canonical.is_dir(),
            "workspace root {} is not a directory",
            canonical.display()
        );
        let given_root = (given.is_absolute() && given != canonical).then(|| given.to_owned());
        let beneath = confined::Root::open(&canonical)
            .with_context(|| format!("workspace root {} cannot be opened", canonical.display()))?;
        Ok(Workspace {
            root: canonical,
            given_root,
            beneath,
            read_roots: Default::default(),
        })
    }

    /// Open a path `resolve` (or `resolve_read`) returned for reading, refusing it if a link
    /// was swapped onto it since (see `confined`): beneath the root, or beneath the granted
    /// folder that holds it. FIFOs and devices open without blocking.
    pub fn open_read(&self, path: &Path) -> io::Result<std::fs::File> {
        if !path.starts_with(&self.root)
            && let Some(folder) = self.read_roots.holding(path)
        {
            return folder.open_read(path);
        }
        self.beneath.open_read(path)
    }

    /// Replace the file at a path `resolve` returned with `bytes`, atomically (readers see the
    /// old or the new content), in the directory that was checked. Its directory must exist.
    pub fn write_atomically(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        self.beneath.write_atomically(path, bytes)
    }

    /// [`Workspace::write_atomically`] for a file that must not exist yet: an existing one is
    /// left alone and the error is [`io::ErrorKind::AlreadyExists`].
    pub fn create_atomically(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        self.beneath.create_atomically(path, bytes)
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `path` relative to the root, `/`-separated, for showing to the model; `.` for the root.
    /// Paths outside the root (which `resolve` never returns) are shown in full.
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rest) if rest.as_os_str().is_empty() => ".".to_owned(),
            Ok(rest) => rest.to_string_lossy().into_owned(),
            Err(_) => path.to_string_lossy().into_owned(),
        }
    }

    /// The physical path `user_path` names inside the workspace, or why it is refused.
    /// See the module documentation for the rules.
    pub fn resolve(&self, user_path: &str) -> Result<PathBuf, PathError> {
        check_syntax(user_path)?;
        let path = Path::new(user_path);
        let relative = if path.is_absolute() {
            self.strip_root(path)
                .ok_or_else(|| PathError::AbsoluteOutside {
                    path: user_path.to_owned(),
                    root: self.root.display().to_string(),
                })?
        } else {
            path
        };

        let mut current = self.root.clone();
        // Whether `current` exists; once it does not, nothing below it can be a symlink.
        let mut exists = true;
        for component in relative.components() {
            match component {
                Component::CurDir => {}
                Component::ParentDir => {
                    // `current` is always at or below the root, so the root is the only place
                    // where `..` would leave it.
                    if current == self.root {
                        return Err(PathError::EscapesRoot {
                            path: user_path.to_owned(),
                        });
                    }
                    current.pop();
                    exists = exists || current.exists();
                }
                Component::Normal(name) => {
                    current.push(name);
                    if exists {
                        exists = self.follow(&mut current, user_path)?;
                    }
                }
                // A relative path (or what is left of an absolute one after the root) has
                // neither; refuse rather than guess if the standard library ever yields one.
                Component::RootDir | Component::Prefix(_) => {
                    return Err(PathError::AbsoluteOutside {
                        path: user_path.to_owned(),
                        root: self.root.display().to_string(),
                    });
                }
            }
        }
        Ok(current)
    }

    /// What is left of an absolute `path` once the root is taken off, if it starts with it.
    pub(crate) fn strip_root<'a>(&self, path: &'a Path) -> Option<&'a Path> {
        path.strip_prefix(&self.root).ok().or_else(|| {
            self.given_root
                .as_ref()
                .and_then(|given| path.strip_prefix(given).ok())
        })
    }

    /// If `current` (just extended by one existing-or-not component) is a symlink, replace it
    /// by its canonical target, which must be inside the root. Returns whether `current` exists.
    fn follow(&self, current: &mut PathBuf, user_path: &str) -> Result<bool, PathError> {
        let metadata = match std::fs::symlink_metadata(&*current) {
            Ok(metadata) => metadata,
            // `NotADirectory`: a file used as a directory; the tool's own access will fail with
            // a clear message, and nothing below a file can be a symlink.
            Err(err)
                if matches!(
                    err.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                return Ok(false);
            }
            Err(source) => {
                return Err(PathError::Io {
                    path: user_path.to_owned(),
                    source,
                });
            }
        };
        if !metadata.file_type().is_symlink() {
            return Ok(true);
        }
        let link = self.display(current);
        match std::fs::canonicalize(&*current) {
            Ok(target) if target.starts_with(&self.root) => {
                *current = target;
                Ok(true)
            }
            Ok(target) => Err(PathError::SymlinkOutside {
                path: user_path.to_owned(),
                link,
                target: target.display().to_string(),
            }),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Err(PathError::DanglingSymlink {
                path: user_path.to_owned(),
                link,
            }),
            Err(source) => Err(PathError::Io {
                path: user_path.to_owned(),
                source,
            }),
        }
    }
}

/// The checks that need no file system.
pub(crate) fn check_syntax(user_path: &str) -> Result<(), PathError> {
    let owned = || user_path.to_owned();
    if user_path.is_empty() {
        return Err(PathError::Empty);
    }
    if user_path.contains('\0') {
        return Err(PathError::NulByte);
    }
    if user_path.len() > MAX_PATH_BYTES {
        return Err(PathError::TooLong {
            len: user_path.len(),
        });
    }
    if let Some(component) = Path::new(user_path)
        .components()
        .map(Component::as_os_str)
        .find(|component| component.len() > MAX_COMPONENT_BYTES)
    {
        return Err(PathError::ComponentTooLong {
            prefix: prefix_of(component),
            len: component.len(),
        });
    }
    if user_path.starts_with("\\\\") || user_path.starts_with("//") && user_path.len() > 2 {
        // `//server/share` is also how Windows tools print UNC paths; on POSIX it is absolute
        // and would be refused below anyway, but naming it helps the model.
        return Err(PathError::WindowsPath {
            path: owned(),
            what: "a UNC network path",
        });
    }
    if user_path.contains('\\') {
        return Err(PathError::WindowsPath {
            path: owned(),
            what: "it contains `\\`",
        });
    }
    let bytes = user_path.as_bytes();
    if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        return Err(PathError::WindowsPath {
            path: owned(),
            what: "a drive letter",
        });
    }
    if is_url(user_path) {
        return Err(PathError::Url { path: owned() });
    }
    if user_path.starts_with('~') {
        return Err(PathError::HomeDirectory { path: owned() });
    }
    Ok(())
}

/// `scheme://…` with an RFC 3986 scheme.
fn is_url(text: &str) -> bool {
    let Some((scheme, _)) = text.split_once("://") else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

fn prefix_of(component: &OsStr) -> String {
    component.to_string_lossy().chars().take(24).collect()
}

#[cfg(test)]
mod tests;
