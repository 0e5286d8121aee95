//! One command's way out of the sandbox, and what a command the sandbox stopped is told.
//!
//! A sandbox that holds every command lets a preset run them without asking (`[permissions]
//! sandboxed`); the price is that some ordinary work needs more than it allows (fetching
//! dependencies needs the network, `git commit` writes `.git/`). The model then asks, in the
//! call itself, to leave it ([`Leave`]): the runtime asks the user for that one call, and the
//! record of the call says what was asked and what was answered.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Mechanism, Mode, Sandbox};

/// What a command asks beyond its sandbox, for this one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Leave {
    /// The network on; the file system held as before.
    Network,
    /// No sandbox at all: writing outside the workspace or to a protected path, reading the
    /// home's secrets, the network.
    All,
}

impl Leave {
    /// How the question to the user and the record name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Leave::Network => "network",
            Leave::All => "all",
        }
    }
}

/// How one call of a tool stands to the sandbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Confinement {
    /// The tool runs no command: the sandbox has nothing to say about it.
    NotACommand,
    /// A command, held by the sandbox when there is one.
    Held,
    /// A command that asks to leave the sandbox for this call.
    Leaves(Leave),
}

impl Sandbox {
    /// Whether a mechanism holds commands to the policy (it may be unavailable here, or the
    /// policy `off`): only then may a preset's `sandboxed` permission stand for the tool's.
    pub fn holds(&self) -> bool {
        !matches!(self.mechanism, Mechanism::Unconfined(_))
    }

    /// Whether the policy already allows what a call asking to `leave` wants (the network, in a
    /// sandbox whose network is on): such a call is held like any other, and nobody is asked.
    pub fn allows(&self, leave: Leave) -> bool {
        match leave {
            Leave::Network => self.policy.network,
            Leave::All => !self.holds(),
        }
    }

    /// The sandbox one call's command runs in, once the user allowed it to `leave` this one:
    /// the same, with the network on, or none.
    pub fn for_call(self: &Arc<Sandbox>, leave: Option<Leave>) -> Option<Arc<Sandbox>> {
        match leave {
            None => Some(self.clone()),
            Some(Leave::Network) if self.policy.network => Some(self.clone()),
            Some(Leave::Network) => {
                let mut open = Sandbox::clone(self);
                open.policy.network = true;
                Some(Arc::new(open))
            }
            Some(Leave::All) => None,
        }
    }

    /// Why a call that asks to `leave` needs the user's approval, as the question shows it.
    pub fn leave_reason(&self, leave: Leave) -> String {
        let what = match leave {
            Leave::Network => "to run with the network on",
            Leave::All => {
                "to run outside the sandbox, with every right of the user (writing outside the workspace and to protected paths, reading the home's secrets, the network)"
            }
        };
        format!(
            "the command asks {what}; commands in this session are held to {}",
            self.summary()
        )
    }

    /// What the user must be told when a session starts: the preset asks for a sandbox that
    /// this machine cannot give, so its commands run with every right of the user (and are
    /// asked for as the tools' own permissions say). `None` when the sandbox holds, or the
    /// policy is `off`.
    pub fn unheld(&self, preset: &str) -> Option<String> {
        if self.policy.mode == Mode::Off || self.holds() {
            return None;
        }
        let Mechanism::Unconfined(why) = &self.mechanism else {
            return None;
        };
        Some(format!(
            "preset `{preset}` asks for a sandbox, but its commands run with every right of the user: {why}. Each command is asked for as the preset's `shell` permission says"
        ))
    }

    /// The policy in a few words: `workspace-write, no network, bubblewrap`.
    pub fn summary(&self) -> String {
        let mode = self.policy.mode.as_str();
        let network = if self.policy.network {
            "network on"
        } else {
            "no network"
        };
        format!("{mode}, {network}, {}", self.mechanism_name())
    }

    /// What a command that failed in this sandbox is told, when its output looks like the
    /// sandbox stopped it: which rule, and how to get past it. The model and the user read it;
    /// an ordinary failure (a compiler error) gets nothing.
    pub fn stopped(&self, output: &str) -> Option<String> {
        if !self.holds() {
            return None;
        }
        let wrote = [
            "Read-only file system",
            "Permission denied",
            "Operation not permitted",
        ]
        .iter()
        .any(|sign| output.contains(sign));
        let network = [
            "Network is unreachable",
            "Could not resolve host",
            "Temporary failure in name resolution",
            "Name or service not known",
            "Address family not supported",
            "Connection refused",
        ]
        .iter()
        .any(|sign| output.contains(sign));
        let mut rules = Vec::new();
        if wrote {
            let writable = match self.policy.mode {
                Mode::ReadOnly => {
                    "nothing but a private /tmp may be written (the policy is read-only)".to_owned()
                }
                _ => format!(
                    "only the workspace and a private /tmp may be written, and not its protected paths ({})",
                    super::PROTECTED_NAMES
                        .iter()
                        .map(|(name, _)| *name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            rules.push(format!(
                "{writable}; the home's secrets ({}) cannot be read",
                super::SECRETS.join(", ")
            ));
        }
        if network && !self.policy.network {
            rules.push("the network is off".to_owned());
        }
        if rules.is_empty() {
            return None;
        }
        let way_out = if network && !wrote && !self.policy.network {
            "`\"leave_sandbox\": \"network\"`"
        } else {
            "`\"leave_sandbox\": \"all\"` (or `\"network\"` for the network alone)"
        };
        Some(format!(
            "[sandbox: this command ran in the sandbox ({}), which may have stopped it: {}. If the task needs it, call `shell` again with {way_out}; the user is asked to allow that one command]",
            self.summary(),
            rules.join("; ")
        ))
    }

    /// The mechanism as the record names it.
    pub(super) fn mechanism_name(&self) -> String {
        match &self.mechanism {
            Mechanism::Bubblewrap(_) => "bubblewrap".to_owned(),
            Mechanism::Landlock { abi } => super::landlock::describe(*abi),
            Mechanism::Unconfined(why) => format!("none: {why}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::Policy;
    use std::path::Path;

    fn sandbox(network: bool) -> Sandbox {
        let mut sandbox = Sandbox::detect(
            Policy {
                mode: Mode::WorkspaceWrite,
                network,
                ..Policy::default()
            },
            Path::new("/w"),
        );
        sandbox.mechanism = Mechanism::Bubblewrap("/usr/bin/bwrap".into());
        sandbox
    }

    #[test]
    fn asking_for_what_the_policy_already_allows_is_no_leaving() {
        assert!(sandbox(true).allows(Leave::Network));
        assert!(!sandbox(false).allows(Leave::Network));
        assert!(!sandbox(true).allows(Leave::All));
    }
}
