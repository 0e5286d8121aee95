//! Folders outside the workspace that a session may read, and only read: a loaded skill's.
//!
//! The `skill` tool grants its skill's folder to the session that loaded it
//! ([`Workspace::grant_read`]). `read` resolves its path through [`Workspace::resolve_read`]:
//! the workspace's own rules first, and only when they refuse an absolute path, that path
//! inside a folder the session was granted, by the same rules rooted at that folder (a `..`
//! above it, or a symlink whose real path leaves it, is refused). The file is then opened
//! beneath the folder's own descriptor, as a workspace file is beneath the root's, so a link
//! swapped in after the check is refused too.
//!
//! Only `read` asks for this. `write`, `edit`, `shell`, `list`, `glob` and `grep` resolve
//! through [`Workspace::resolve`] alone, and the atomic writes open beneath the workspace root
//! only, so a grant never lets anything change a skill's files. Grants are held by the process
//! for the session they were made for; a session resumed in another process loads the skill
//! again to read its files (the `skill` result says so).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::{PathError, Workspace};

/// At most this many grants are held; the oldest go first. A long-lived `serve` makes a grant
/// per skill a session loads, so the list must not grow without end.
const MAX_GRANTS: usize = 1024;

/// The grants of one workspace, shared by its clones (the tool runtime's and every call's).
#[derive(Clone, Debug, Default)]
pub(super) struct ReadRoots(Arc<Mutex<Vec<Grant>>>);

#[derive(Debug)]
struct Grant {
    /// The session the folder was granted to (`None` for a call outside any session, like
    /// `agent-lsp tool skill`).
    session: Option<String>,
    /// The folder, as a workspace of its own: its canonical path and its descriptor.
    root: Workspace,
}

impl ReadRoots {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Grant>> {
        // A panic while holding the lock leaves a plain list behind: still usable.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The granted folder (of any session) that holds the physical `path`, for opening it.
    pub(super) fn holding(&self, path: &Path) -> Option<Workspace> {
        self.lock()
            .iter()
            .find(|grant| path.starts_with(grant.root.root()))
            .map(|grant| grant.root.clone())
    }
}

impl Workspace {
    /// Let `session` read the files under `folder` (an existing directory) with `read`; returns
    /// the folder's canonical path, the one the model should pass on.
    pub fn grant_read(&self, session: Option<&str>, folder: &Path) -> anyhow::Result<PathBuf> {
        let root = Workspace::new(folder)?;
        let canonical = root.root().to_owned();
        let mut grants = self.read_roots.lock();
        let session = session.map(str::to_owned);
        if !grants
            .iter()
            .any(|grant| grant.session == session && grant.root.root() == canonical)
        {
            if grants.len() >= MAX_GRANTS {
                grants.remove(0);
            }
            grants.push(Grant { session, root });
        }
        Ok(canonical)
    }

    /// The physical path `user_path` names for a tool that only reads: inside the workspace
    /// (see [`Workspace::resolve`]), or, for an absolute path the workspace refuses, inside a
    /// folder granted to `session`, confined to that folder by the same rules.
    pub fn resolve_read(
        &self,
        session: Option<&str>,
        user_path: &str,
    ) -> Result<PathBuf, PathError> {
        let refused = match self.resolve(user_path) {
            Ok(path) => return Ok(path),
            Err(refused @ PathError::AbsoluteOutside { .. }) => refused,
            Err(other) => return Err(other),
        };
        let path = Path::new(user_path);
        let grants = self.read_roots.lock();
        let Some(grant) = grants.iter().find(|grant| {
            grant.session.as_deref() == session && grant.root.strip_root(path).is_some()
        }) else {
            return Err(refused);
        };
        grant
            .root
            .resolve(user_path)
            .map_err(|source| PathError::InReadRoot {
                path: user_path.to_owned(),
                root: grant.root.root().display().to_string(),
                source: Box::new(source),
            })
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::os::unix::fs::symlink;

    use super::*;

    /// `tmp/ws` is the workspace, `tmp/skill` a folder outside it with a file, a link to a
    /// secret beside it and a link inside; `tmp/secret.txt` must stay out of reach.
    fn fixture() -> (tempfile::TempDir, Workspace, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join("ws")).unwrap();
        std::fs::create_dir_all(base.join("skill/docs")).unwrap();
        std::fs::write(base.join("skill/docs/guide.md"), "guide\n").unwrap();
        std::fs::write(base.join("secret.txt"), "secret\n").unwrap();
        symlink(base.join("secret.txt"), base.join("skill/leak")).unwrap();
        symlink("docs/guide.md", base.join("skill/inner")).unwrap();
        let workspace = Workspace::new(base.join("ws")).unwrap();
        (tmp, workspace, base)
    }

    fn read(workspace: &Workspace, path: &Path) -> String {
        let mut text = String::new();
        workspace
            .open_read(path)
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        text
    }

    #[test]
    fn a_granted_folder_is_readable_by_its_session_only_and_stays_confined() {
        let (_tmp, workspace, base) = fixture();
        let guide = base.join("skill/docs/guide.md").display().to_string();
        let refused = workspace.resolve_read(Some("s1"), &guide).unwrap_err();
        assert!(
            matches!(refused, PathError::AbsoluteOutside { .. }),
            "{refused}"
        );

        let folder = workspace
            .grant_read(Some("s1"), &base.join("skill"))
            .unwrap();
        assert_eq!(folder, base.join("skill"));
        let path = workspace.resolve_read(Some("s1"), &guide).unwrap();
        assert_eq!(read(&workspace, &path), "guide\n");
        let inner = format!("{}/inner", folder.display());
        let path = workspace.resolve_read(Some("s1"), &inner).unwrap();
        assert_eq!(path, base.join("skill/docs/guide.md"));

        // Another session, a link out, a climb out: refused.
        assert!(workspace.resolve_read(Some("s2"), &guide).is_err());
        assert!(workspace.resolve_read(None, &guide).is_err());
        let leak = workspace
            .resolve_read(Some("s1"), &format!("{}/leak", folder.display()))
            .unwrap_err()
            .to_string();
        assert!(
            leak.contains("a folder this session may only read") && leak.contains("symlink `leak`"),
            "{leak}"
        );
        let climb = format!("{}/../secret.txt", folder.display());
        assert!(workspace.resolve_read(Some("s1"), &climb).is_err());

        // Writing never resolves there, and the write path opens beneath the workspace only.
        assert!(workspace.resolve(&guide).is_err());
        assert!(
            workspace
                .write_atomically(&base.join("skill/docs/guide.md"), b"changed")
                .is_err()
        );
        assert_eq!(
            std::fs::read_to_string(base.join("skill/docs/guide.md")).unwrap(),
            "guide\n"
        );
    }

    #[test]
    fn grants_are_shared_by_clones_and_made_once() {
        let (_tmp, workspace, base) = fixture();
        let clone = workspace.clone();
        clone.grant_read(Some("s1"), &base.join("skill")).unwrap();
        clone.grant_read(Some("s1"), &base.join("skill")).unwrap();
        assert_eq!(workspace.read_roots.lock().len(), 1);
        let guide = base.join("skill/docs/guide.md").display().to_string();
        assert!(workspace.resolve_read(Some("s1"), &guide).is_ok());
        assert!(
            workspace
                .grant_read(Some("s1"), &base.join("missing"))
                .is_err()
        );
    }
}
