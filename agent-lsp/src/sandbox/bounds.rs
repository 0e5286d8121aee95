//! How one policy compares with another: a sub-agent's preset is named by the model (and may
//! come from the workspace), so its commands are held at least as tightly as its parent's; and
//! a preset the agent saves that loosens the sandbox is named to the user before it is saved.

use super::{Mode, Policy};

/// How much a mode lets a command write, least first.
fn openness(mode: Mode) -> u8 {
    match mode {
        Mode::ReadOnly => 0,
        Mode::WorkspaceWrite => 1,
        Mode::Off => 2,
    }
}

impl Policy {
    /// This policy, no looser than `parent` in anything: the stricter mode, and the network
    /// only where both allow it.
    pub fn at_most(&self, parent: &Policy) -> Policy {
        let mode = if openness(self.mode) <= openness(parent.mode) {
            self.mode
        } else {
            parent.mode
        };
        Policy {
            mode,
            network: self.network && parent.network,
            mcp_servers: self.mcp_servers || parent.mcp_servers,
            ..self.clone()
        }
    }

    /// How this policy lets commands do more than `other`, as a phrase; `None` when it does
    /// not.
    pub fn looser_than(&self, other: &Policy) -> Option<String> {
        let mut more = Vec::new();
        if openness(self.mode) > openness(other.mode) {
            more.push(format!(
                "mode {} ({} there)",
                self.mode.as_str(),
                other.mode.as_str()
            ));
        }
        if self.network && !other.network {
            more.push("network on (off there)".to_owned());
        }
        if other.mcp_servers && !self.mcp_servers && self.mode != Mode::Off {
            more.push("MCP servers outside the sandbox (inside there)".to_owned());
        }
        (!more.is_empty()).then(|| more.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(mode: Mode, network: bool) -> Policy {
        Policy {
            mode,
            network,
            ..Policy::default()
        }
    }

    #[test]
    fn a_child_policy_is_never_looser_than_its_parents() {
        let parent = policy(Mode::WorkspaceWrite, false);
        let child = policy(Mode::Off, true).at_most(&parent);
        assert_eq!((child.mode, child.network), (Mode::WorkspaceWrite, false));
        let strict = policy(Mode::ReadOnly, false).at_most(&policy(Mode::Off, true));
        assert_eq!((strict.mode, strict.network), (Mode::ReadOnly, false));
    }

    #[test]
    fn looser_names_each_loosening_and_nothing_else() {
        let held = policy(Mode::WorkspaceWrite, false);
        assert_eq!(
            policy(Mode::Off, true).looser_than(&held).as_deref(),
            Some("mode off (workspace-write there), network on (off there)")
        );
        assert_eq!(policy(Mode::ReadOnly, false).looser_than(&held), None);
        assert_eq!(held.looser_than(&held), None);
    }
}
