//! Project instructions: the `AGENTS.md` files every agent a user may come from reads.
//!
//! The workspace root's `AGENTS.md` and the user's own (beside the config file,
//! `~/.config/agent-lsp/AGENTS.md`) become system-prompt sections with their path; each
//! request's `request/header` records their digests. What they said when the session started is
//! recorded in the session (`plugin/state`), and every later turn, a resumed session included,
//! builds its sections from that record: the system prompt of a running session never changes,
//! so the provider's cached prefix survives. A file that changes, appears or disappears
//! mid-session is announced instead, once, through the runtime context with its new text.
//!
//! An `AGENTS.md` in a subfolder applies to its subtree. It is brought in the first time the
//! agent names a path below it in a tool call (reads, edits, lists), as a runtime-context
//! message of its own, so it enters through the session log and never as a silent prompt change;
//! a compaction that folds it away brings it back. Which file names count is the preset's
//! `file_names` (default `AGENTS.md`; users coming from other agents add `CLAUDE.md`).
//!
//! A workspace file is read through the workspace's confinement: an `AGENTS.md` that is a link
//! out of the workspace (to a key file, say) is not read.

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::canonical::sha256_hex;
use crate::context::runtime::RuntimeContextProjection;
use crate::context::system_prompt::SystemPrompt;
use crate::plugin::registry::{InvalidSetting, Parts, PluginHost, PluginSettings};
use crate::plugin::state as plugin_state;
use crate::plugin::{Plugin, RuntimeContribution};
use crate::session::event::EventBody;
use crate::session::{History, Session};
use crate::workspace::Workspace;

/// The plugin's name, in presets and in `plugin/state` events.
pub const PLUGIN: &str = "project_instructions";

/// `[plugins.project_instructions]` of a preset.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstructionsSettings {
    pub enabled: bool,
    /// The file names that hold instructions, looked for in every folder.
    #[serde(default = "default_file_names")]
    pub file_names: Vec<String>,
    /// Bytes of one file that are used; the rest is cut with a note saying so.
    #[serde(default = "default_max_bytes")]
    pub max_bytes: usize,
}

fn default_file_names() -> Vec<String> {
    vec!["AGENTS.md".to_owned()]
}

fn default_max_bytes() -> usize {
    32 * 1024
}

impl PluginSettings for InstructionsSettings {
    fn enabled(&self) -> bool {
        self.enabled
    }

    fn validate(&self) -> Result<(), InvalidSetting> {
        let plain = |name: &String| {
            !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\'])
        };
        if self.file_names.is_empty() || !self.file_names.iter().all(plain) {
            return Err(InvalidSetting {
                key: "file_names",
                message: "must list plain file names (like \"AGENTS.md\"), not paths".into(),
            });
        }
        Ok(())
    }
}

/// Whose file it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Scope {
    User,
    Workspace,
}

/// One file as the session's system prompt used it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Recorded {
    scope: Scope,
    name: String,
    /// Absolute for the user's file, relative to the workspace root for the workspace's.
    path: String,
    digest: String,
    text: String,
}

/// The `plugin/state` payload: the files the system prompt was built from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct State {
    files: Vec<Recorded>,
}

/// The plugin: sections at session start, announcements of changes and of nested files.
pub struct ProjectInstructions {
    settings: InstructionsSettings,
    workspace: Option<Workspace>,
    user_dir: Option<PathBuf>,
    /// The session the fields below are about.
    session: String,
    recorded: Vec<Recorded>,
    /// Tool calls up to this seq have been read for paths.
    scanned_through: u64,
    /// Nested instruction files (relative paths) the agent's tool calls reached.
    nested: BTreeSet<String>,
}

impl ProjectInstructions {
    pub fn new(
        settings: InstructionsSettings,
        workspace: &Path,
        user_dir: Option<PathBuf>,
    ) -> ProjectInstructions {
        ProjectInstructions {
            settings,
            workspace: Workspace::new(workspace).ok(),
            user_dir,
            session: String::new(),
            recorded: Vec::new(),
            scanned_through: 0,
            nested: BTreeSet::new(),
        }
    }

    /// The registry entry of `[plugins.project_instructions]`.
    pub fn parts(settings: InstructionsSettings, host: &PluginHost) -> anyhow::Result<Parts> {
        Ok(Parts {
            plugin: Some(Box::new(ProjectInstructions::new(
                settings,
                &host.workspace,
                crate::config::Config::user_dir(),
            ))),
            tools: Vec::new(),
            shell: None,
        })
    }

    /// The top-level files as they are now: the user's, then the workspace root's.
    fn read_top_level(&self) -> Vec<Recorded> {
        let mut files = Vec::new();
        for name in &self.settings.file_names {
            if let Some(dir) = &self.user_dir {
                let path = dir.join(name);
                if let Some(text) = read_capped(&path, self.settings.max_bytes) {
                    files.push(Recorded {
                        scope: Scope::User,
                        name: name.clone(),
                        path: path.display().to_string(),
                        digest: sha256_hex(&text),
                        text,
                    });
                }
            }
        }
        for name in &self.settings.file_names {
            if let Some(text) = self.read_workspace_file(name) {
                files.push(Recorded {
                    scope: Scope::Workspace,
                    name: name.clone(),
                    path: name.clone(),
                    digest: sha256_hex(&text),
                    text,
                });
            }
        }
        files
    }

    /// A workspace file's text, read only if it resolves inside the workspace.
    fn read_workspace_file(&self, relative: &str) -> Option<String> {
        let path = self.workspace.as_ref()?.resolve(relative).ok()?;
        read_capped(&path, self.settings.max_bytes)
    }

    /// Start over when the agent moves to another session.
    fn enter(&mut self, history: &History, session: &str) {
        if self.session != session {
            self.session = session.to_owned();
            self.recorded = recorded_state(history)
                .map(|state| state.files)
                .unwrap_or_default();
            self.scanned_through = 0;
            self.nested.clear();
        }
    }

    /// Note the nested instruction files below the paths of tool calls made since the last look.
    fn scan_tool_calls(&mut self, history: &History) {
        let Some(workspace) = &self.workspace else {
            return;
        };
        let events = history.events();
        let from = events.partition_point(|event| event.seq <= self.scanned_through);
        for event in &events[from..] {
            self.scanned_through = event.seq;
            let EventBody::ToolCall(call) = &event.body else {
                continue;
            };
            let Some(path) = serde_json::from_str::<serde_json::Value>(&call.arguments)
                .ok()
                .and_then(|args| args.get("path")?.as_str().map(str::to_owned))
            else {
                continue;
            };
            let Ok(resolved) = workspace.resolve(&path) else {
                continue;
            };
            let start = if resolved.is_dir() {
                resolved.as_path()
            } else {
                resolved.parent().unwrap_or(workspace.root())
            };
            for dir in start.ancestors() {
                if dir == workspace.root() || !dir.starts_with(workspace.root()) {
                    break;
                }
                for name in &self.settings.file_names {
                    if dir.join(name).is_file() {
                        self.nested.insert(workspace.display(&dir.join(name)));
                    }
                }
            }
        }
    }

    /// The announcement of a top-level file that differs from what the system prompt holds, or
    /// that is back to it after an announced change.
    fn top_level_change(
        &self,
        history: &History,
        was: Option<&Recorded>,
        now: Option<&Recorded>,
    ) -> Option<RuntimeContribution> {
        let (scope, name, path) = match (was, now) {
            (Some(file), _) | (None, Some(file)) => (file.scope, &file.name, &file.path),
            (None, None) => return None,
        };
        let scope_name = match scope {
            Scope::User => "user",
            Scope::Workspace => "workspace",
        };
        let source = format!("{PLUGIN}:{scope_name}:{path}");
        let digest = now.map_or("removed", |file| file.digest.as_str());
        let unchanged =
            was.map(|file| file.digest.as_str()) == now.map(|file| file.digest.as_str());
        let announced = RuntimeContextProjection::last_visible_from(history, Some(&source));
        if unchanged && announced.is_none() {
            return None;
        }
        let whose = match scope {
            Scope::User => format!("The user's {name} ({path})"),
            Scope::Workspace => format!("The workspace's {path}"),
        };
        let body = match (unchanged, now) {
            (true, _) => {
                format!("{whose} is back to the text in the system prompt; follow that text again.")
            }
            (false, Some(file)) if was.is_none() => format!(
                "{whose} was created during this session. Its instructions apply from now on:\n\n{}",
                file.text
            ),
            (false, Some(file)) => format!(
                "{whose} changed during this session. Its current text replaces the one in the system prompt:\n\n{}",
                file.text
            ),
            (false, None) => format!(
                "{whose} was removed during this session; its instructions in the system prompt no longer apply."
            ),
        };
        Some(contribution(source, path, digest, body))
    }
}

impl Plugin for ProjectInstructions {
    fn name(&self) -> &'static str {
        PLUGIN
    }

    fn contribute(
        &mut self,
        prompt: &mut SystemPrompt,
        session: &mut Session,
        turn: u32,
    ) -> anyhow::Result<()> {
        let id = session.id().to_owned();
        self.enter(session.history(), &id);
        if recorded_state(session.history()).is_none() {
            let state = State {
                files: self.read_top_level(),
            };
            plugin_state::record(session, turn, PLUGIN, serde_json::to_value(&state)?)?;
            self.recorded = state.files;
        }
        for file in &self.recorded {
            let (id, order, heading) = match file.scope {
                Scope::User => (
                    format!("instructions.user.{}", file.name),
                    100,
                    format!("# The user's instructions ({})", file.path),
                ),
                Scope::Workspace => (
                    format!("instructions.workspace.{}", file.name),
                    110,
                    format!(
                        "# Project instructions ({} at the workspace root; a subfolder's own {} adds to them for its files)",
                        file.path, file.name
                    ),
                ),
            };
            prompt.sourced_section(
                &id,
                order,
                &format!("{heading}\n\n{}", file.text),
                &file.path,
            );
        }
        Ok(())
    }

    fn runtime_contexts(&mut self, history: &History) -> anyhow::Result<Vec<RuntimeContribution>> {
        let Some(session) = history.header().map(|header| header.session_id.clone()) else {
            return Ok(Vec::new());
        };
        self.enter(history, &session);
        let mut contributions = Vec::new();
        let now = self.read_top_level();
        let mut keys = BTreeSet::new();
        for file in self.recorded.iter().chain(&now) {
            keys.insert((file.scope, file.name.clone(), file.path.clone()));
        }
        for (scope, name, path) in keys {
            let find = |files: &[Recorded]| {
                files
                    .iter()
                    .find(|file| file.scope == scope && file.name == name && file.path == path)
                    .cloned()
            };
            let (was, is) = (find(&self.recorded), find(&now));
            contributions.extend(self.top_level_change(history, was.as_ref(), is.as_ref()));
        }

        self.scan_tool_calls(history);
        for path in &self.nested {
            let source = format!("{PLUGIN}:{path}");
            let folder = Path::new(path)
                .parent()
                .map_or(String::new(), |dir| dir.to_string_lossy().into_owned());
            let (digest, body) = match self.read_workspace_file(path) {
                Some(text) => (
                    sha256_hex(&text),
                    format!(
                        "Instructions for the files under {folder}/ (from {path}); they add to the project's instructions there:\n\n{text}"
                    ),
                ),
                None => (
                    "removed".to_owned(),
                    format!("{path} was removed; its instructions no longer apply."),
                ),
            };
            contributions.push(contribution(source, path, &digest, body));
        }
        Ok(contributions)
    }
}

/// A runtime-context message about the file at `path`.
fn contribution(source: String, path: &str, digest: &str, body: String) -> RuntimeContribution {
    let facts = BTreeMap::from([
        ("path".to_owned(), path.to_owned()),
        ("digest".to_owned(), digest.to_owned()),
    ]);
    RuntimeContribution {
        source: Some(source),
        text: format!(
            "<project-instructions path=\"{path}\">\n{}\n</project-instructions>",
            body.trim_end()
        ),
        facts,
    }
}

/// What the session recorded when its system prompt was first built.
fn recorded_state(history: &History) -> Option<State> {
    let (_, data) = plugin_state::records(history, PLUGIN).next()?;
    serde_json::from_value(data.clone()).ok()
}

/// A file's text, at most `max_bytes` of it (cut at a character boundary, with a note), or
/// `None` when it is not a readable file.
fn read_capped(path: &Path, max_bytes: usize) -> Option<String> {
    // Only a regular file, and never more of it than is kept (a repository can bring a link to
    // `/dev/zero` or a FIFO under this name).
    let (bytes, size) = match crate::workspace::read_regular(path, max_bytes as u64) {
        Ok(read) => read?,
        Err(error) => {
            tracing::warn!(path = %path.display(), "not read: {error}");
            return None;
        }
    };
    let text = String::from_utf8_lossy(&bytes);
    if size <= max_bytes as u64 {
        return Some(text.into_owned());
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Some(format!(
        "{}\n[… cut: the file has {} bytes and only the first {max_bytes} are used]",
        &text[..end],
        size
    ))
}
