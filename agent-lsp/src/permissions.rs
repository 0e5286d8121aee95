//! Permissions: what a tool call may do without asking (`allow`, `ask`, `deny`), per tool, as a
//! preset's `[permissions]` table says. Its own module, below both the tools that enforce it and
//! the presets that name it, so neither imports the other.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// What a call to a tool may do without asking, from least to most strict (the order `Ord`
/// compares by).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    /// The call runs.
    Allow,
    /// The call runs only once the user approves it (the terminal or the editor asks);
    /// otherwise it is refused with a result saying so.
    Ask,
    /// The call is refused with a result saying so.
    Deny,
}

impl Permission {
    /// The name presets and messages use.
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Allow => "allow",
            Permission::Ask => "ask",
            Permission::Deny => "deny",
        }
    }
}

/// Tool name → permission, with a default for the tools not named.
#[derive(Clone, Debug, PartialEq)]
pub struct PermissionPolicy {
    /// What a tool not named in `tools` may do (MCP tools aside: see `mcp`).
    pub default: Permission,
    /// The preset's permission per tool name.
    pub tools: BTreeMap<String, Permission>,
    /// What a writing tool needs for a protected path (`tools::protected`), when stricter than
    /// its own permission: the preset's `protected_paths`, `ask` when it says nothing.
    pub protected_paths: Permission,
    /// What an MCP server's tool (`mcp__SERVER__TOOL`) not named in the table may do: the
    /// preset's `mcp`, `ask` when it says nothing. A server's tools are whatever its author
    /// made them, so they are asked for unless the preset says otherwise, whatever `default`.
    pub mcp: Permission,
    /// What a command the sandbox holds may do (`shell`, `job_kill`), in place of its tool's
    /// permission: the preset's `sandboxed`. Only where a mechanism really holds the command
    /// (`crate::sandbox::Sandbox::holds`); otherwise, and when the preset says nothing, the
    /// tool's own permission stands.
    pub sandboxed: Option<Permission>,
}

/// The preset keys of `[permissions]` that are not tool names.
pub const POLICY_KEYS: [&str; 4] = ["default", "protected_paths", "mcp", "sandboxed"];

/// How the catalog names an MCP server's tools: `mcp__SERVER__TOOL` (`crate::mcp`). Such names
/// may be given permissions without being in `tools.enabled`, which they never are.
pub const MCP_TOOL_PREFIX: &str = "mcp__";

impl Default for PermissionPolicy {
    /// The `standard` preset's policy: everything allowed, the shell (and killing the jobs it
    /// started) asked for unless a sandbox holds the command.
    fn default() -> PermissionPolicy {
        PermissionPolicy {
            sandboxed: Some(Permission::Allow),
            ..PermissionPolicy::new(Permission::Allow)
                .with("shell", Permission::Ask)
                .with("job_kill", Permission::Ask)
        }
    }
}

impl PermissionPolicy {
    /// A policy with `default` for every tool, and `ask` for protected paths and MCP tools.
    pub fn new(default: Permission) -> PermissionPolicy {
        PermissionPolicy {
            default,
            tools: BTreeMap::new(),
            protected_paths: Permission::Ask,
            mcp: Permission::Ask,
            sandboxed: None,
        }
    }

    /// The policy with `tool` given `permission`.
    pub fn with(mut self, tool: &str, permission: Permission) -> PermissionPolicy {
        self.tools.insert(tool.to_owned(), permission);
        self
    }

    /// The policy of a preset's `[permissions]` table: `default` (allow when absent),
    /// `protected_paths`, and one entry per tool.
    pub fn from_table(table: &BTreeMap<String, Permission>) -> PermissionPolicy {
        let mut policy =
            PermissionPolicy::new(table.get("default").copied().unwrap_or(Permission::Allow));
        if let Some(protected) = table.get("protected_paths") {
            policy.protected_paths = *protected;
        }
        if let Some(mcp) = table.get("mcp") {
            policy.mcp = *mcp;
        }
        policy.sandboxed = table.get("sandboxed").copied();
        for (tool, setting) in table {
            if !POLICY_KEYS.contains(&tool.as_str()) {
                policy.tools.insert(tool.clone(), *setting);
            }
        }
        policy
    }

    /// What a call to `tool` may do: its own entry, else `mcp` for an MCP tool, else `default`.
    /// A writing tool's protected-path rule is applied on top by the runtime.
    pub fn permission(&self, tool: &str) -> Permission {
        match self.tools.get(tool) {
            Some(permission) => *permission,
            None if tool.starts_with(MCP_TOOL_PREFIX) => self.mcp,
            None => self.default,
        }
    }
}

/// A `[permissions]` table no looser than `parent`'s for any of `tools`: each entry the
/// stricter of the two. A sub-agent's preset is named by the model (and may come from the
/// workspace), so what it may do without asking is bounded by what its parent may.
pub fn at_most(
    table: &BTreeMap<String, Permission>,
    parent: &BTreeMap<String, Permission>,
    tools: &[String],
) -> BTreeMap<String, Permission> {
    let (own, theirs) = (
        PermissionPolicy::from_table(table),
        PermissionPolicy::from_table(parent),
    );
    let mut narrowed = BTreeMap::from([
        ("default".to_owned(), own.default.max(theirs.default)),
        (
            "protected_paths".to_owned(),
            own.protected_paths.max(theirs.protected_paths),
        ),
        ("mcp".to_owned(), own.mcp.max(theirs.mcp)),
    ]);
    // Without the key a command gets its tool's permission, already bounded below; with it in
    // both, the stricter.
    if let (Some(own), Some(theirs)) = (own.sandboxed, theirs.sandboxed) {
        narrowed.insert("sandboxed".to_owned(), own.max(theirs));
    }
    // A tool the parent's table names for itself (an MCP tool allowed by name) is bounded by
    // name too, though it is in no `tools.enabled`.
    for tool in own.tools.keys().chain(theirs.tools.keys()) {
        if tool.starts_with(MCP_TOOL_PREFIX) {
            narrowed.insert(
                tool.clone(),
                own.permission(tool).max(theirs.permission(tool)),
            );
        }
    }
    for tool in tools {
        narrowed.insert(
            tool.clone(),
            own.permission(tool).max(theirs.permission(tool)),
        );
    }
    narrowed
}

/// What a preset lets a session do, as far as telling whether another preset allows more goes
/// (`preset_write` asks the user before it saves such a preset): the tools it enables, its
/// permission policy and whether it starts MCP servers.
#[derive(Clone, Debug, PartialEq)]
pub struct Rights {
    pub enabled: BTreeSet<String>,
    pub policy: PermissionPolicy,
    /// Whether `[plugins.mcp]` is on: its servers start (to list their tools) whatever their
    /// tools' permissions.
    pub mcp_servers: bool,
    /// What its commands may touch (`[sandbox]`).
    pub sandbox: crate::sandbox::Policy,
}

impl Rights {
    /// What a call to `tool` gets: its permission, or `deny` for a tool the preset lacks.
    pub fn permission(&self, tool: &str) -> Permission {
        let present = if tool.starts_with(MCP_TOOL_PREFIX) {
            self.mcp_servers
        } else {
            self.enabled.contains(tool)
        };
        if present {
            self.policy.permission(tool)
        } else {
            Permission::Deny
        }
    }

    /// `mcp`, the permission of MCP tools not named, or `deny` without MCP servers.
    fn mcp(&self) -> Permission {
        if self.mcp_servers {
            self.policy.mcp
        } else {
            Permission::Deny
        }
    }

    /// Each way these rights let a session do more without asking than `other` does, as a
    /// phrase (`` `shell`: allow (ask there) ``); empty when they allow nothing more. Every
    /// step from `deny` (or a missing tool) towards `allow` counts, `ask` included: `--yes`
    /// answers every question.
    pub fn beyond(&self, other: &Rights) -> Vec<String> {
        let was = |permission: Permission, present: bool| {
            if present {
                permission.as_str().to_owned()
            } else {
                "not enabled".to_owned()
            }
        };
        let mut more = Vec::new();
        let named_mcp = self
            .policy
            .tools
            .keys()
            .filter(|tool| tool.starts_with(MCP_TOOL_PREFIX));
        for tool in self.enabled.iter().chain(named_mcp) {
            let (mine, theirs) = (self.permission(tool), other.permission(tool));
            if mine < theirs {
                let present = if tool.starts_with(MCP_TOOL_PREFIX) {
                    other.mcp_servers
                } else {
                    other.enabled.contains(tool)
                };
                more.push(format!(
                    "`{tool}`: {} ({} there)",
                    mine.as_str(),
                    was(theirs, present)
                ));
            }
        }
        if self.mcp_servers && !other.mcp_servers {
            more.push("MCP servers start (`[plugins.mcp]`; not there)".to_owned());
        }
        if self.mcp() < other.mcp() {
            more.push(format!(
                "MCP tools (`mcp`): {} ({} there)",
                self.mcp().as_str(),
                was(other.mcp(), other.mcp_servers)
            ));
        }
        if self.policy.protected_paths < other.policy.protected_paths {
            more.push(format!(
                "`protected_paths`: {} ({} there)",
                self.policy.protected_paths.as_str(),
                other.policy.protected_paths.as_str()
            ));
        }
        // A command the sandbox holds gets `sandboxed`, else the shell's permission (whose own
        // line above already says when it is looser).
        let held = |rights: &Rights| {
            (rights.policy.sandboxed)
                .filter(|_| rights.enabled.contains("shell"))
                .unwrap_or_else(|| rights.permission("shell"))
        };
        if self.policy.sandboxed.is_some()
            && held(self) < held(other)
            && held(self) < self.permission("shell")
        {
            more.push(format!(
                "commands the sandbox holds (`sandboxed`): {} ({} there)",
                held(self).as_str(),
                held(other).as_str()
            ));
        }
        if let Some(looser) = self.sandbox.looser_than(&other.sandbox) {
            more.push(format!("`[sandbox]`: {looser}"));
        }
        more
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_table_is_never_looser_than_its_parents() {
        let table = |entries: &[(&str, Permission)]| {
            entries
                .iter()
                .map(|(key, permission)| ((*key).to_owned(), *permission))
                .collect::<BTreeMap<_, _>>()
        };
        let child = table(&[("default", Permission::Allow), ("shell", Permission::Allow)]);
        let parent = table(&[
            ("default", Permission::Allow),
            ("shell", Permission::Ask),
            ("write", Permission::Deny),
            ("protected_paths", Permission::Deny),
        ]);
        let tools = ["shell", "write", "read"].map(str::to_owned);
        let policy = PermissionPolicy::from_table(&at_most(&child, &parent, &tools));
        assert_eq!(policy.permission("shell"), Permission::Ask);
        assert_eq!(policy.permission("write"), Permission::Deny);
        assert_eq!(policy.permission("read"), Permission::Allow);
        assert_eq!(policy.protected_paths, Permission::Deny);
        // MCP tools: `ask` unless a table says otherwise, by name or with `mcp`.
        assert_eq!(policy.permission("mcp__fs__read"), Permission::Ask);
        let loose = table(&[
            ("default", Permission::Allow),
            ("mcp", Permission::Allow),
            ("mcp__fs__write", Permission::Deny),
        ]);
        let policy = PermissionPolicy::from_table(&loose);
        assert_eq!(policy.permission("mcp__fs__read"), Permission::Allow);
        assert_eq!(policy.permission("mcp__fs__write"), Permission::Deny);
        let child = PermissionPolicy::from_table(&at_most(&loose, &parent, &tools));
        assert_eq!(child.permission("mcp__fs__read"), Permission::Ask);
        assert_eq!(child.permission("mcp__fs__write"), Permission::Deny);
        // A stricter child stays as strict.
        let strict = table(&[("default", Permission::Deny)]);
        let policy = PermissionPolicy::from_table(&at_most(&strict, &parent, &tools));
        assert_eq!(policy.permission("read"), Permission::Deny);
    }

    #[test]
    fn rights_beyond_name_every_loosening_and_nothing_else() {
        let rights = |enabled: &[&str], policy: PermissionPolicy, mcp_servers| Rights {
            enabled: enabled.iter().map(|tool| (*tool).to_owned()).collect(),
            policy,
            mcp_servers,
            sandbox: crate::sandbox::Policy::default(),
        };
        let creative = rights(
            &["read", "grep", "preset_write"],
            PermissionPolicy::new(Permission::Deny)
                .with("read", Permission::Allow)
                .with("grep", Permission::Allow)
                .with("preset_write", Permission::Allow),
            false,
        );
        let narrower = rights(
            &["read", "grep"],
            PermissionPolicy::new(Permission::Allow).with("grep", Permission::Ask),
            false,
        );
        assert_eq!(narrower.beyond(&creative), Vec::<String>::new());
        let standard = rights(
            &["read", "edit", "shell"],
            PermissionPolicy::default().with("mcp__fs__read", Permission::Allow),
            true,
        );
        assert_eq!(
            standard.beyond(&creative),
            [
                "`edit`: allow (not enabled there)",
                "`shell`: ask (not enabled there)",
                "`mcp__fs__read`: allow (not enabled there)",
                "MCP servers start (`[plugins.mcp]`; not there)",
                "MCP tools (`mcp`): ask (not enabled there)",
                "commands the sandbox holds (`sandboxed`): allow (deny there)",
            ]
        );
        // The same rights with a looser sandbox: named.
        let mut held = standard.clone();
        held.sandbox.mode = crate::sandbox::Mode::WorkspaceWrite;
        held.sandbox.network = false;
        assert_eq!(held.beyond(&standard), Vec::<String>::new());
        assert_eq!(
            standard.beyond(&held),
            ["`[sandbox]`: mode off (workspace-write there), network on (off there)"]
        );
        let mut loosest = rights(
            &["read", "edit", "shell"],
            PermissionPolicy::new(Permission::Allow).with("mcp__fs__read", Permission::Allow),
            true,
        );
        loosest.policy.protected_paths = Permission::Allow;
        assert_eq!(
            loosest.beyond(&standard),
            [
                "`shell`: allow (ask there)",
                "`protected_paths`: allow (ask there)"
            ]
        );
        assert_eq!(standard.beyond(&loosest), Vec::<String>::new());
    }
}
