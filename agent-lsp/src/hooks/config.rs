//! Where hooks are configured, and how each file is read.
//!
//! - **The config file's `[hooks]`**: the user's own, run without asking.
//! - **The workspace's `.agent-lsp/hooks.toml` or `.agent-lsp/hooks.json`**: commands a cloned
//!   repository brings, so they run only once the user approved the file's bytes in this
//!   workspace (`agent-lsp hooks approve`; `crate::approvals`, as for `.mcp.json`).
//! - **Claude Code `settings.json` files** the config file names (`[hooks] claude_settings`):
//!   their `hooks` section, read in Claude Code's dialect (`claude.rs`). One inside the
//!   workspace (`.claude/settings.json`) is the repository's and needs approving like the
//!   workspace file; one outside it (`~/.claude/settings.json`) is the user's.
//!
//! Every file has Claude Code's shape: events, each a list of groups with an optional
//! `matcher` and their `hooks` (`{type = "command", command, timeout}`); a group may give one
//! `command` (and `timeout`) itself instead. Our own files are read strictly (an unknown event
//! or key is an error); a Claude Code file is read as Claude Code reads it, and what we do not
//! run (its `Notification` hooks, a `prompt` hook) is listed as skipped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::HookEvent;
use crate::approvals;

/// The workspace's hooks files, relative to its root, in the order they are read.
pub const WORKSPACE_FILES: [&str; 2] = [".agent-lsp/hooks.toml", ".agent-lsp/hooks.json"];

/// Seconds a hook may run when it does not say (Claude Code's default too).
pub const DEFAULT_TIMEOUT_SECS: u64 = 60;
/// The most seconds a hook may be given.
pub const MAX_TIMEOUT_SECS: u64 = 600;

/// `[hooks]` in the config file.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct HooksOptions {
    /// Claude Code settings files whose `hooks` section is run too (`~` is the home folder; a
    /// relative path is the workspace's).
    #[serde(default)]
    pub claude_settings: Vec<String>,
    /// The hooks by event.
    #[serde(flatten)]
    pub events: Events,
}

/// A matcher and the commands it runs.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Group {
    /// A regular expression the whole tool name (`PreToolUse`, `PostToolUse`), trigger
    /// (`PreCompact`: `manual`, `auto`) or source (`SessionStart`: `startup`, `resume`) must
    /// match; none, `""` or `*`: every one.
    #[serde(default)]
    pub matcher: Option<String>,
    /// The commands.
    #[serde(default)]
    pub hooks: Vec<Command>,
    /// One command given in the group itself.
    #[serde(default)]
    pub command: Option<String>,
    /// The timeout of that command, in seconds.
    #[serde(default)]
    pub timeout: Option<u64>,
}

/// One command.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Command {
    /// `command`, the one kind run here.
    #[serde(rename = "type", default = "command_kind")]
    pub kind: String,
    /// The command line, run with `sh -c` in the workspace root.
    pub command: String,
    /// Seconds before it is killed (default 60, at most 600).
    #[serde(default)]
    pub timeout: Option<u64>,
}

fn command_kind() -> String {
    "command".into()
}

/// Hooks by event, as a file lists them.
pub type Events = BTreeMap<HookEvent, Vec<Group>>;

/// A workspace hooks file: `hooks` and nothing else.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkspaceFile {
    #[serde(default)]
    hooks: Events,
}

/// Whose a file is, and so whether it needs approving.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// The user's own (the config file, a settings file outside the workspace).
    Own,
    /// The workspace's, approved with these bytes.
    Approved,
    /// The workspace's, not approved with these bytes: its hooks do not run.
    Unapproved,
}

/// One place hooks were read from.
#[derive(Clone, Debug)]
pub struct Source {
    /// `config`, or the file's path.
    pub name: String,
    /// The file, when there is one (not for the config file's table).
    pub path: Option<PathBuf>,
    /// Whether the hooks see Claude Code's tool names and inputs.
    pub claude: bool,
    /// Whose it is and whether it may run.
    pub standing: Standing,
    /// The digest of the bytes read (what an approval records).
    pub digest: Option<String>,
    /// What of it was not read or will not run, and why.
    pub skipped: Vec<String>,
    /// Its hooks by event, as read.
    pub events: Events,
}

impl Source {
    /// Whether its hooks run.
    pub fn runs(&self) -> bool {
        self.standing != Standing::Unapproved
    }
}

/// Where the approvals of hooks files live under the state root.
fn approvals_dir(state_root: &Path) -> PathBuf {
    state_root.join("hooks").join("approvals")
}

fn approval_key(workspace: &Path, file: &Path, digest: &str) -> String {
    let relative = file.strip_prefix(workspace).unwrap_or(file);
    approvals::key(
        workspace,
        &format!("hooks_file_sha256:{}", relative.display()),
        digest,
    )
}

/// Record that the user approved `source` (a workspace file) in `workspace` with the bytes it
/// was read with.
pub fn approve(state_root: &Path, workspace: &Path, source: &Source) -> anyhow::Result<()> {
    let (Some(path), Some(digest)) = (&source.path, &source.digest) else {
        anyhow::bail!("{} needs no approval", source.name);
    };
    approvals::approve(
        &approvals_dir(state_root),
        &approval_key(workspace, path, digest),
        path,
        digest,
    )
}

/// Every source of hooks for `workspace`, in the order their hooks run: the config file's, the
/// Claude Code settings files it names, the workspace's files. A file that does not exist is
/// left out; one that cannot be read or parsed is a source whose `skipped` says why.
pub fn sources(options: &HooksOptions, workspace: &Path, state_root: Option<&Path>) -> Vec<Source> {
    let mut sources = Vec::new();
    if !options.events.is_empty() {
        sources.push(Source {
            name: "config".into(),
            path: None,
            claude: false,
            standing: Standing::Own,
            digest: None,
            skipped: Vec::new(),
            events: options.events.clone(),
        });
    }
    let standing = |path: &Path, digest: &str| {
        // Fails closed: a path that may be the workspace's is treated as the workspace's.
        let inside = path.starts_with(workspace)
            || std::fs::canonicalize(workspace).map_or(true, |root| path.starts_with(&root))
            || std::fs::canonicalize(path).is_ok_and(|real| real.starts_with(workspace));
        if !inside {
            return Standing::Own;
        }
        let approved = state_root.is_some_and(|root| {
            approvals::is_approved(&approvals_dir(root), &approval_key(workspace, path, digest))
        });
        if approved {
            Standing::Approved
        } else {
            Standing::Unapproved
        }
    };
    for named in &options.claude_settings {
        let path = expand(named, workspace);
        if let Some(source) = read_file(&path, true, &standing) {
            sources.push(source);
        }
    }
    for relative in WORKSPACE_FILES {
        if let Some(source) = read_file(&workspace.join(relative), false, &standing) {
            sources.push(source);
        }
    }
    sources
}

/// `~/x` under the home folder, a relative path under the workspace.
fn expand(named: &str, workspace: &Path) -> PathBuf {
    match named.strip_prefix("~/") {
        Some(rest) => dirs::home_dir().unwrap_or_default().join(rest),
        None if Path::new(named).is_absolute() => PathBuf::from(named),
        None => workspace.join(named),
    }
}

fn read_file(
    path: &Path,
    claude: bool,
    standing: &dyn Fn(&Path, &str) -> Standing,
) -> Option<Source> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
        Err(error) => {
            return Some(broken(path, claude, format!("could not be read: {error}")));
        }
    };
    let digest = approvals::digest_bytes(&bytes);
    let text = String::from_utf8_lossy(&bytes);
    let parsed = if claude {
        claude_events(&text)
    } else if path.extension().is_some_and(|ext| ext == "json") {
        serde_json::from_str::<WorkspaceFile>(&text)
            .map(|file| (file.hooks, Vec::new()))
            .map_err(|error| error.to_string())
    } else {
        toml::from_str::<WorkspaceFile>(&text)
            .map(|file| (file.hooks, Vec::new()))
            .map_err(|error| error.to_string())
    };
    let (events, skipped) = match parsed {
        Ok(parsed) => parsed,
        Err(error) => return Some(broken(path, claude, format!("is not valid: {error}"))),
    };
    Some(Source {
        name: path.display().to_string(),
        path: Some(path.to_owned()),
        claude,
        standing: standing(path, &digest),
        digest: Some(digest),
        skipped,
        events,
    })
}

fn broken(path: &Path, claude: bool, why: String) -> Source {
    Source {
        name: path.display().to_string(),
        path: Some(path.to_owned()),
        claude,
        standing: Standing::Own,
        digest: None,
        skipped: vec![format!("the file {why}; none of its hooks run")],
        events: BTreeMap::new(),
    }
}

/// The `hooks` section of a Claude Code settings file, read as Claude Code reads it, and what
/// of it we do not run.
fn claude_events(text: &str) -> Result<(Events, Vec<String>), String> {
    let settings: Value = serde_json::from_str(text).map_err(|error| error.to_string())?;
    let mut events = BTreeMap::new();
    let mut skipped = Vec::new();
    let Some(hooks) = settings.get("hooks").and_then(Value::as_object) else {
        return Ok((events, skipped));
    };
    for (name, groups) in hooks {
        let Some(event) = HookEvent::from_name(name) else {
            skipped.push(format!("{name}: an event agent-lsp does not have"));
            continue;
        };
        let mut read = Vec::new();
        for group in groups.as_array().into_iter().flatten() {
            let matcher = group
                .get("matcher")
                .and_then(Value::as_str)
                .map(str::to_owned);
            let mut commands = Vec::new();
            for hook in group
                .get("hooks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let kind = hook
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("command");
                let command = hook.get("command").and_then(Value::as_str);
                match (kind, command) {
                    ("command", Some(command)) => commands.push(Command {
                        kind: kind.into(),
                        command: command.into(),
                        timeout: hook.get("timeout").and_then(Value::as_u64),
                    }),
                    _ => skipped.push(format!(
                        "{name}: a `{kind}` hook (only `command` hooks run here)"
                    )),
                }
            }
            read.push(Group {
                matcher,
                hooks: commands,
                ..Group::default()
            });
        }
        events.insert(event, read);
    }
    Ok((events, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_table_is_strict_and_a_claude_file_is_read_as_claude_code_reads_it() {
        let options: HooksOptions = toml::from_str(
            "claude_settings = [\"~/.claude/settings.json\"]\n[[PostToolUse]]\nmatcher = \"edit|write\"\ncommand = \"fmt\"\n",
        )
        .unwrap();
        assert_eq!(
            options.events[&HookEvent::PostToolUse][0]
                .command
                .as_deref(),
            Some("fmt")
        );
        let error =
            toml::from_str::<HooksOptions>("[[Notification]]\ncommand = \"x\"\n").unwrap_err();
        assert!(
            error.to_string().contains("unknown variant `Notification`"),
            "{error}"
        );
        let error = toml::from_str::<HooksOptions>("[[Stop]]\ncommand = \"x\"\nmatch = \"y\"\n")
            .unwrap_err();
        assert!(
            error.to_string().contains("unknown field `match`"),
            "{error}"
        );

        let (events, skipped) = claude_events(
            r#"{"model": "x", "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "check", "timeout": 5}, {"type": "prompt", "prompt": "ok?"}]}], "Notification": [{"matcher": "", "hooks": [{"type": "command", "command": "notify-send hi"}]}]}}"#,
        )
        .unwrap();
        let group = &events[&HookEvent::PreToolUse][0];
        assert_eq!(
            (group.matcher.as_deref(), group.hooks.len()),
            (Some("Bash"), 1)
        );
        assert_eq!(group.hooks[0].timeout, Some(5));
        assert_eq!(skipped.len(), 2, "{skipped:?}");
    }

    #[test]
    fn workspace_files_need_their_bytes_approved_in_their_workspace() {
        let workspace = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = workspace.path();
        std::fs::create_dir(root.join(".agent-lsp")).unwrap();
        std::fs::write(
            root.join(WORKSPACE_FILES[0]),
            "[[hooks.Stop]]\ncommand = \"true\"\n",
        )
        .unwrap();
        let options = HooksOptions::default();
        let read = sources(&options, root, Some(state.path()));
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].standing, Standing::Unapproved);
        approve(state.path(), root, &read[0]).unwrap();
        assert_eq!(
            sources(&options, root, Some(state.path()))[0].standing,
            Standing::Approved
        );
        std::fs::write(
            root.join(WORKSPACE_FILES[0]),
            "[[hooks.Stop]]\ncommand = \"false\"\n",
        )
        .unwrap();
        assert_eq!(
            sources(&options, root, Some(state.path()))[0].standing,
            Standing::Unapproved
        );
        std::fs::write(
            root.join(WORKSPACE_FILES[0]),
            "[[hooks.Halt]]\ncommand = \"x\"\n",
        )
        .unwrap();
        let broken = &sources(&options, root, Some(state.path()))[0];
        assert!(
            broken.events.is_empty() && broken.skipped[0].contains("unknown variant"),
            "{:?}",
            broken.skipped
        );
    }
}
