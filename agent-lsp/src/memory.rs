//! Memory across sessions: short notes the agent (through the `memory` tool), the programmer
//! (`agent-lsp memory …`) or the editor (`agent.memory.*`) keeps for later sessions, per
//! workspace and per user.
//!
//! A session's history ends with the session; what was learned in it (how the tests are run,
//! which directory is generated, what the programmer prefers) is lost unless it is written
//! somewhere later sessions read. Memories are that place, and since they reach every later
//! request they are kept small and auditable:
//!
//! - Each scope is one append-only file (`store`): the workspace's under its state directory
//!   (`<state root>/workspaces/<name>-<hash>/memory.jsonl`), the user's at
//!   `<state root>/memory.jsonl`. A record never changes; `forget` and `edit` are new records.
//! - Every memory carries its provenance: the session and the event seq of the `tool/call` it
//!   came from (or `editor`, `cli`), and the time.
//! - Caps ([`Caps`]) bound the count, the length of one memory and the rendered size of a scope,
//!   so the system-prompt section stays small; a full scope is an error saying what to forget.
//! - Text that looks like a secret is refused with the reason (`secrets`): memories are plain
//!   text sent with every request.
//!
//! A session sees the memories as they were when it started, as one system-prompt section
//! ([`render_section`]); what changes later reaches new sessions only, so a running session's
//! prompt prefix stays cached.

pub(crate) mod plugin;
pub(crate) mod secrets;
pub(crate) mod store;
pub mod tool;

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail};
use serde::{Deserialize, Serialize};

use crate::session::store::{Store, state_root_of};
use store::{MemoryFile, Replayed};

/// The name of a memory file, in the workspace's state directory and in the state root.
pub const FILE_NAME: &str = "memory.jsonl";

/// The provenance `session` of a memory made in the editor outside any session.
pub const EDITOR: &str = "editor";
/// The provenance `session` of a change made with `agent-lsp memory`.
pub const CLI: &str = "cli";

/// Whose a memory is: this workspace's, or the user's in every workspace.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// This workspace's: kept in the workspace's state directory, given to sessions there only.
    #[default]
    Workspace,
    /// The user's: kept in the state root, given to sessions in every workspace.
    User,
}

impl Scope {
    /// Both scopes, in the order the system prompt lists them.
    pub const ALL: [Scope; 2] = [Scope::Workspace, Scope::User];

    /// The name in files, tool arguments and the prompt (`workspace`, `user`).
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Workspace => "workspace",
            Scope::User => "user",
        }
    }

    /// The first letter of its ids: `w1`, `u3`.
    fn prefix(self) -> char {
        match self {
            Scope::Workspace => 'w',
            Scope::User => 'u',
        }
    }

    /// The scope an id belongs to.
    pub fn of_id(id: &str) -> Option<Scope> {
        Scope::ALL
            .into_iter()
            .find(|scope| id_number(id, *scope).is_some())
    }
}

/// The number of `id` in `scope` (`w12` → 12), or `None` when it is no id of that scope.
fn id_number(id: &str, scope: Scope) -> Option<u64> {
    let digits = id.strip_prefix(scope.prefix())?;
    if digits.is_empty() || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Where a memory, or a change to it, came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// The session id, or [`EDITOR`] / [`CLI`].
    pub session: String,
    /// The seq of the session's `tool/call` event that made it, when a tool call made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// When, in UTC (RFC 3339, seconds).
    pub time: String,
}

impl Provenance {
    /// A provenance dated now.
    pub fn now(session: impl Into<String>, seq: Option<u64>) -> Provenance {
        Provenance {
            session: session.into(),
            seq,
            time: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        }
    }

    /// One line for people and the model: `session ID event N, TIME`.
    pub fn describe(&self) -> String {
        let from = match self.seq {
            Some(seq) => format!("session {} event {seq}", self.session),
            None if self.session == EDITOR || self.session == CLI => self.session.clone(),
            None => format!("session {}", self.session),
        };
        format!("{from}, {}", self.time)
    }
}

/// A memory in force.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Memory {
    /// `w<n>` for the workspace's, `u<n>` for the user's; never given twice in one file.
    pub id: String,
    /// Whose memory it is; decides the file it lives in.
    pub scope: Scope,
    /// What the model reads, as remembered or last edited.
    pub text: String,
    /// Where it was first remembered.
    pub provenance: Provenance,
    /// Where its text was last edited, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edited: Option<Provenance>,
}

impl Memory {
    /// `w1 (workspace; session … event 12, …): text`, continuation lines indented.
    pub fn render(&self) -> String {
        let mut origin = self.provenance.describe();
        if let Some(edited) = &self.edited {
            origin.push_str(&format!("; edited: {}", edited.describe()));
        }
        format!(
            "{} ({}; {origin}): {}",
            self.id,
            self.scope.as_str(),
            self.text.replace('\n', "\n  ")
        )
    }
}

/// One line of a memory file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Record {
    /// A new memory in force.
    Remember {
        /// The new memory's id (`w<n>` or `u<n>`), one past the highest the file ever gave.
        id: String,
        /// The scope of the file the record is in.
        scope: Scope,
        /// The memory's text.
        text: String,
        /// Where it was remembered.
        provenance: Provenance,
    },
    /// The memory's text is replaced; it keeps its id and first provenance.
    Edit {
        /// The memory edited.
        id: String,
        /// The new text.
        text: String,
        /// Where the edit was made.
        provenance: Provenance,
    },
    /// The memory is no longer in force; its id is never given again.
    Forget {
        /// The memory forgotten.
        id: String,
        /// Where it was forgotten, for the audit trail.
        provenance: Provenance,
    },
}

/// How much memory a scope may hold. Every memory is in every later request, so these are
/// small by default; a preset's `[plugins.memory]` may change them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Caps {
    /// Memories in force per scope.
    pub max_per_scope: usize,
    /// Characters of one memory.
    pub max_chars: usize,
    /// Bytes of a scope's memories as rendered in the system prompt (ids and provenance
    /// included); two scopes make a section of at most twice this.
    pub max_scope_bytes: usize,
}

impl Default for Caps {
    fn default() -> Caps {
        Caps {
            max_per_scope: 100,
            max_chars: 1000,
            max_scope_bytes: 8 * 1024,
        }
    }
}

/// The two memory files of a workspace and its user.
#[derive(Clone, Debug)]
pub struct Memories {
    workspace: MemoryFile,
    user: MemoryFile,
    caps: Caps,
}

impl Memories {
    /// The memories in `workspace_file` and `user_file`, with the default [`Caps`].
    pub fn new(workspace_file: PathBuf, user_file: PathBuf) -> Memories {
        Memories {
            workspace: MemoryFile::new(workspace_file, Scope::Workspace),
            user: MemoryFile::new(user_file, Scope::User),
            caps: Caps::default(),
        }
    }

    /// The memories of the workspace of `store`, and of its state root's user.
    pub fn for_store(store: &Store) -> Memories {
        Memories::for_workspace_dir(store.workspace_dir())
    }

    /// The memories of the workspace whose state directory is `dir` (`<state root>/workspaces/
    /// <name>-<hash>`), and of the user of that state root.
    pub fn for_workspace_dir(dir: &Path) -> Memories {
        let root = state_root_of(dir).unwrap_or(dir);
        Memories::new(dir.join(FILE_NAME), root.join(FILE_NAME))
    }

    /// Hold the memories to `caps` instead of the defaults (a preset's `[plugins.memory]`).
    pub fn with_caps(mut self, caps: Caps) -> Memories {
        self.caps = caps;
        self
    }

    /// The caps every change is checked against.
    pub fn caps(&self) -> Caps {
        self.caps
    }

    /// The file that holds `scope`'s memories.
    pub fn file(&self, scope: Scope) -> &MemoryFile {
        match scope {
            Scope::Workspace => &self.workspace,
            Scope::User => &self.user,
        }
    }

    /// Every memory in force: the workspace's, then the user's, each in the order remembered.
    pub fn list(&self) -> anyhow::Result<Vec<Memory>> {
        let mut memories = self.workspace.read()?.memories;
        memories.extend(self.user.read()?.memories);
        Ok(memories)
    }

    /// The memory with this id.
    pub fn get(&self, id: &str) -> anyhow::Result<Memory> {
        let file = self.file(scope_of(id)?);
        file.read()?
            .memories
            .into_iter()
            .find(|memory| memory.id == id)
            .ok_or_else(|| not_found(id))
    }

    /// Keep a new memory; refused when the text is empty, too long, looks like a secret, or the
    /// scope is full.
    pub fn remember(
        &self,
        scope: Scope,
        text: &str,
        provenance: Provenance,
    ) -> anyhow::Result<Memory> {
        let text = self.checked_text(text)?;
        let caps = self.caps;
        self.file(scope).change(|replayed| {
            if replayed.memories.len() >= caps.max_per_scope {
                bail!(
                    "the {} memory is full ({} memories, the most it keeps); forget some first (`memory` with action `list` shows them, `forget` takes an id)",
                    scope.as_str(),
                    caps.max_per_scope
                );
            }
            let memory = Memory {
                id: format!("{}{}", scope.prefix(), replayed.last_number + 1),
                scope,
                text,
                provenance: provenance.clone(),
                edited: None,
            };
            check_room(replayed, &memory, None, caps)?;
            let record = Record::Remember {
                id: memory.id.clone(),
                scope,
                text: memory.text.clone(),
                provenance,
            };
            Ok((record, memory))
        })
    }

    /// Replace a memory's text (same checks as [`Memories::remember`]).
    pub fn edit(&self, id: &str, text: &str, provenance: Provenance) -> anyhow::Result<Memory> {
        let text = self.checked_text(text)?;
        let caps = self.caps;
        self.file(scope_of(id)?).change(|replayed| {
            let mut memory = find(replayed, id)?.clone();
            memory.text = text;
            memory.edited = Some(provenance.clone());
            check_room(replayed, &memory, Some(id), caps)?;
            let record = Record::Edit {
                id: id.to_owned(),
                text: memory.text.clone(),
                provenance,
            };
            Ok((record, memory))
        })
    }

    /// Forget a memory; returns what it was.
    pub fn forget(&self, id: &str, provenance: Provenance) -> anyhow::Result<Memory> {
        self.file(scope_of(id)?).change(|replayed| {
            let memory = find(replayed, id)?.clone();
            let record = Record::Forget {
                id: id.to_owned(),
                provenance,
            };
            Ok((record, memory))
        })
    }

    fn checked_text(&self, text: &str) -> anyhow::Result<String> {
        let text = text.trim();
        if text.is_empty() {
            bail!("the memory is empty; give the text to remember");
        }
        let chars = text.chars().count();
        if chars > self.caps.max_chars {
            bail!(
                "the memory is {chars} characters long and one may have at most {}; say it shorter, or split it into several",
                self.caps.max_chars
            );
        }
        if let Some(control) = text
            .chars()
            .find(|c| c.is_control() && *c != '\n' && *c != '\t')
        {
            bail!(
                "the memory contains the control character {:?}; write plain text",
                control
            );
        }
        if let Some(reason) = secrets::secret_reason(text) {
            bail!(
                "refused: {reason}. Memories are stored in plain text and sent with every later request, so they must not hold secrets; remember where the secret is kept instead (e.g. \"the key is in $API_KEY\")"
            );
        }
        Ok(text.to_owned())
    }
}

fn scope_of(id: &str) -> anyhow::Result<Scope> {
    Scope::of_id(id).ok_or_else(|| {
        anyhow!("`{id}` is not a memory id; ids are `w<n>` (workspace) or `u<n>` (user), as the memory list shows them")
    })
}

fn not_found(id: &str) -> anyhow::Error {
    anyhow!(
        "there is no memory `{id}` (it was forgotten, or never made); the memory list shows the ids in force"
    )
}

fn find<'a>(replayed: &'a Replayed, id: &str) -> anyhow::Result<&'a Memory> {
    replayed
        .memories
        .iter()
        .find(|memory| memory.id == id)
        .ok_or_else(|| not_found(id))
}

/// Refuse a change that would make the scope's rendered memories larger than the cap.
fn check_room(
    replayed: &Replayed,
    memory: &Memory,
    replacing: Option<&str>,
    caps: Caps,
) -> anyhow::Result<()> {
    let others = replayed
        .memories
        .iter()
        .filter(|other| Some(other.id.as_str()) != replacing)
        .map(|other| other.render().len() + 1)
        .sum::<usize>();
    let total = others + memory.render().len() + 1;
    if total > caps.max_scope_bytes {
        bail!(
            "the {} memory would take {total} bytes in the system prompt and may take at most {}; forget or shorten some memories first",
            memory.scope.as_str(),
            caps.max_scope_bytes
        );
    }
    Ok(())
}

/// The system-prompt section of `memories` (`None` when there are none).
pub fn render_section(memories: &[Memory]) -> Option<String> {
    if memories.is_empty() {
        return None;
    }
    let mut text = String::from(
        "# Memory\n\
         Notes kept across sessions by you (the `memory` tool), the programmer and the editor, as they were when this session started; each names where it came from. \
         They were true when written: check one before relying on it, and `forget` one that is wrong or stale. \
         Changes reach new sessions, not this one.\n",
    );
    for memory in memories {
        text.push_str("- ");
        text.push_str(&memory.render());
        text.push('\n');
    }
    Some(text.trim_end().to_owned())
}

#[cfg(test)]
mod tests;
