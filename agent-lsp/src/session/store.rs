//! Where sessions live: one state directory per workspace, one JSONL file per session.
//!
//! The state root is `$AGENT_LSP_STATE_DIR` when set, else `agent-lsp/` under the user's data
//! directory (`~/.local/share` on Linux). Under it, each workspace gets
//! `workspaces/<folder name>-<hash of its canonical path>/sessions/`, so two checkouts with the
//! same folder name never share sessions, and the directory name still says whose it is.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use super::event::{EventBody, ParentLink, SCHEMA_VERSION, SessionHeader};
use super::log::{Durability, read_log};
use super::{History, Session};
use crate::canonical::sha256_hex;

/// What a new session's header keeps of its preset: the name, and the text a resumed session
/// is rebuilt from. The store takes this rather than a `Preset`, so sessions stay below presets
/// (a `&Preset` converts into it, see `preset.rs`).
#[derive(Clone, Copy, Debug)]
pub struct PresetRecord<'a> {
    /// The preset's name, as the session header records it.
    pub name: &'a str,
    /// The preset's full text, so a resume rebuilds the session's preset even after the file
    /// changed.
    pub text: &'a str,
}

/// Environment variable that replaces the user data directory as the state root.
pub const STATE_DIR_ENV: &str = "AGENT_LSP_STATE_DIR";

/// The state root: `$AGENT_LSP_STATE_DIR` when set, else `agent-lsp/` under the user's data
/// directory.
pub fn state_root() -> anyhow::Result<PathBuf> {
    Ok(match std::env::var_os(STATE_DIR_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => dirs::data_dir()
            .context("no user data directory is known here; set AGENT_LSP_STATE_DIR")?
            .join("agent-lsp"),
    })
}

/// Create `sessions_dir` and its ancestors up to `workspaces/` (the state root's folder of
/// workspaces) as the user's alone (0700): the sessions hold prompts, tool results and file
/// contents, and nothing under `workspaces/` is reachable by others. Folders an earlier version
/// made with the umask's 0755 are made private too. The state root itself is left as it is: it
/// may be a folder the user named (`AGENT_LSP_STATE_DIR`), not ours to change.
fn private_dirs(sessions_dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(sessions_dir)?;
    let workspace_dir = sessions_dir.parent();
    let workspaces = workspace_dir.and_then(Path::parent);
    for dir in [Some(sessions_dir), workspace_dir, workspaces]
        .into_iter()
        .flatten()
    {
        let mode = std::fs::metadata(dir)?.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode & 0o700))?;
        }
    }
    Ok(())
}

/// The state root that a workspace's state directory ([`Store::workspace_dir`]) lies under:
/// `<root>/workspaces/<name>-<hash>` is two levels down.
pub fn state_root_of(workspace_dir: &Path) -> Option<&Path> {
    workspace_dir.parent()?.parent()
}

/// The sessions of one workspace.
#[derive(Clone, Debug)]
pub struct Store {
    workspace: PathBuf,
    sessions_dir: PathBuf,
}

impl Store {
    /// The store of `workspace` (canonicalized), under the configured state root.
    pub fn for_workspace(workspace: &Path) -> anyhow::Result<Store> {
        Store::for_workspace_in(&state_root()?, workspace)
    }

    /// The store of `workspace` (canonicalized) under an explicit state root.
    pub fn for_workspace_in(root: &Path, workspace: &Path) -> anyhow::Result<Store> {
        let workspace = workspace
            .canonicalize()
            .with_context(|| format!("workspace {} does not exist", workspace.display()))?;
        let name = workspace
            .file_name()
            .map_or("root".into(), |name| name.to_string_lossy());
        let digest = sha256_hex(&workspace.to_string_lossy());
        let sessions_dir = root
            .join("workspaces")
            .join(format!("{name}-{}", &digest[..12]))
            .join("sessions");
        Ok(Store {
            workspace,
            sessions_dir,
        })
    }

    /// The workspace root the store keeps sessions for, canonical.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The folder of the workspace's session files (`<state dir>/sessions`).
    pub fn sessions_dir(&self) -> &Path {
        &self.sessions_dir
    }

    /// The workspace's state directory: its sessions, and what plugins keep per workspace
    /// (memories).
    pub fn workspace_dir(&self) -> &Path {
        self.sessions_dir.parent().unwrap_or(&self.sessions_dir)
    }

    /// Start a new session with the given preset.
    pub fn create_session<'a>(
        &self,
        preset: impl Into<PresetRecord<'a>>,
        durability: Durability,
    ) -> anyhow::Result<Session> {
        self.create_session_under(preset, durability, None)
    }

    /// Start a new session, a sub-agent's when `parent` says whose.
    pub fn create_session_under<'a>(
        &self,
        preset: impl Into<PresetRecord<'a>>,
        durability: Durability,
        parent: Option<ParentLink>,
    ) -> anyhow::Result<Session> {
        let preset = preset.into();
        // Ids carry 16 random bits per second: two sessions started in the same second (a
        // script running `agent-lsp tool` in a loop) can draw the same one, so a taken id is
        // drawn again; creating the file is exclusive, so no two processes get one id.
        let mut attempts = 0;
        loop {
            let id = new_session_id();
            match self.create_with(&id, &preset, durability, parent.clone()) {
                Err(_) if self.path_of(&id).exists() && attempts < 32 => attempts += 1,
                other => return other,
            }
        }
    }

    /// Start a new session under an id drawn earlier with [`new_session_id`]: an ACP client
    /// is given its session's id at `session/new`, and the log is made at its first prompt,
    /// once the preset (its mode) is settled. Fails if the id is taken.
    pub fn create_session_as<'a>(
        &self,
        id: &str,
        preset: impl Into<PresetRecord<'a>>,
        durability: Durability,
    ) -> anyhow::Result<Session> {
        anyhow::ensure!(valid_id(id), "`{id}` is not a session id");
        self.create_with(id, &preset.into(), durability, None)
    }

    fn create_with(
        &self,
        id: &str,
        preset: &PresetRecord<'_>,
        durability: Durability,
        parent: Option<ParentLink>,
    ) -> anyhow::Result<Session> {
        private_dirs(&self.sessions_dir)
            .with_context(|| format!("failed to create {}", self.sessions_dir.display()))?;
        let header = SessionHeader {
            schema: SCHEMA_VERSION,
            session_id: id.to_owned(),
            workspace: self.workspace.to_string_lossy().into_owned(),
            preset: preset.name.to_owned(),
            preset_text: Some(preset.text.to_owned()),
            agent_version: env!("CARGO_PKG_VERSION").to_owned(),
            parent,
        };
        Session::create(&self.path_of(id), header, durability)
    }

    /// The file of session `id` (`<sessions dir>/<id>.jsonl`), whether or not it exists.
    pub fn path_of(&self, id: &str) -> PathBuf {
        self.sessions_dir.join(format!("{id}.jsonl"))
    }

    /// Ids of all sessions, oldest first (ids sort by creation time, to the millisecond).
    pub fn ids(&self) -> anyhow::Result<Vec<String>> {
        let entries = match std::fs::read_dir(&self.sessions_dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => {
                return Err(error)
                    .with_context(|| format!("failed to list {}", self.sessions_dir.display()));
            }
        };
        let mut ids = entries
            .filter_map(Result::ok)
            .filter_map(|entry| {
                entry
                    .file_name()
                    .to_str()?
                    .strip_suffix(".jsonl")
                    .map(str::to_owned)
            })
            .collect::<Vec<_>>();
        ids.sort();
        // Ids name their second only: sessions of the same second are put in the order their
        // headers were written, so `last` is the one started last.
        let second = |id: &str| id.get(..15).unwrap_or(id).to_owned();
        let mut start = 0;
        while start < ids.len() {
            let end = start
                + ids[start..]
                    .iter()
                    .take_while(|id| second(id) == second(&ids[start]))
                    .count();
            if end - start > 1 {
                ids[start..end].sort_by_cached_key(|id| (self.started_at(id), id.clone()));
            }
            start = end;
        }
        Ok(ids)
    }

    /// The time a session's header was written (its first line's `ts`), or empty if unreadable.
    fn started_at(&self, id: &str) -> String {
        self.first_line(id)
            .and_then(|event| event["ts"].as_str().map(str::to_owned))
            .unwrap_or_default()
    }

    /// Whether a session is a sub-agent's (its header names a parent).
    pub fn is_child(&self, id: &str) -> bool {
        self.first_line(id)
            .is_some_and(|event| event["payload"]["parent"].is_object())
    }

    /// A session's first line, its header, as JSON.
    fn first_line(&self, id: &str) -> Option<serde_json::Value> {
        use std::io::{BufRead, Read};
        let file = std::fs::File::open(self.path_of(id)).ok()?;
        // The header is the first line; a bounded read keeps a broken file from costing much.
        let mut first = String::new();
        std::io::BufReader::new(file.take(1 << 20))
            .read_line(&mut first)
            .ok()?;
        serde_json::from_str(&first).ok()
    }

    /// Find a session by its full id, a unique prefix or a unique suffix, or `last` (the last
    /// session started by a person: sub-agents' sessions are reached through their parent's,
    /// or by id).
    pub fn resolve(&self, query: &str) -> anyhow::Result<String> {
        let ids = self.ids()?;
        if ids.is_empty() {
            bail!("no sessions yet for workspace {}", self.workspace.display());
        }
        if query == "last" {
            let last = ids.iter().rev().find(|id| !self.is_child(id));
            return Ok(last
                .unwrap_or_else(|| ids.last().expect("not empty"))
                .clone());
        }
        if ids.iter().any(|id| id == query) {
            return Ok(query.to_owned());
        }
        let matches = ids
            .iter()
            .filter(|id| !query.is_empty() && (id.starts_with(query) || id.ends_with(query)))
            .collect::<Vec<_>>();
        match matches.as_slice() {
            [one] => Ok((*one).clone()),
            [] => bail!(
                "no session `{query}` in workspace {} (see `agent-lsp session list`)",
                self.workspace.display()
            ),
            many => bail!(
                "`{query}` matches {} sessions: {}",
                many.len(),
                many.iter()
                    .map(|id| id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// Read a session without locking it (it may be live in another process).
    pub fn load(&self, query: &str) -> anyhow::Result<History> {
        let id = self.resolve(query)?;
        let path = self.path_of(&id);
        let read = read_log(&path)?;
        if read.torn_tail.is_some() {
            tracing::warn!(session = %id, "the last line is torn (being written, or a crash); it is ignored");
        }
        History::from_events(read.events).with_context(|| format!("session {id} is inconsistent"))
    }

    /// Open a session for appending.
    pub fn open(&self, query: &str, durability: Durability) -> anyhow::Result<Session> {
        let id = self.resolve(query)?;
        Session::open(&self.path_of(&id), durability)
    }
}

/// Whether `id` has the shape [`new_session_id`] draws, `YYYYMMDD-HHMMSS-xxxx`: what may name
/// a session file (no separator, no dot).
pub fn valid_id(id: &str) -> bool {
    let bytes = id.as_bytes();
    bytes.len() == 20
        && bytes.iter().enumerate().all(|(at, byte)| match at {
            8 | 15 => *byte == b'-',
            16.. => byte.is_ascii_hexdigit(),
            _ => byte.is_ascii_digit(),
        })
}

/// `YYYYMMDD-HHMMSS-xxxx`: sorts by creation time, and the random tail makes a short handle.
pub fn new_session_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    static DRAWS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(DRAWS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    hasher.write_u32(std::process::id());
    let now = chrono::Utc::now();
    format!(
        "{}-{:04x}",
        now.format("%Y%m%d-%H%M%S"),
        hasher.finish() & 0xffff
    )
}

/// A session's first user prompt, for listings.
pub fn first_prompt(history: &History) -> Option<&str> {
    history.events().iter().find_map(|event| match &event.body {
        EventBody::UserMessage(message) if message.origin == "prompt" => {
            Some(message.text.as_str())
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_root_is_two_levels_above_a_workspace_directory() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::for_workspace_in(dir.path(), dir.path()).unwrap();
        assert_eq!(state_root_of(store.workspace_dir()), Some(dir.path()));
    }

    #[test]
    fn sessions_created_in_one_burst_all_get_their_own_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::for_workspace_in(dir.path(), dir.path()).unwrap();
        let preset = PresetRecord {
            name: "minimal",
            text: "",
        };
        // 300 sessions within a second or two: far past the birthday bound of 16 random bits.
        let ids = (0..300)
            .map(|_| {
                store
                    .create_session(preset, Durability::Batched)
                    .unwrap()
                    .id()
                    .to_owned()
            })
            .collect::<std::collections::BTreeSet<_>>();
        assert_eq!(ids.len(), 300);
        assert_eq!(store.ids().unwrap().len(), 300);
    }

    #[test]
    fn ids_sort_by_time_and_resolve_by_prefix_suffix_or_last() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store {
            workspace: dir.path().into(),
            sessions_dir: dir.path().join("s"),
        };
        assert!(
            store
                .resolve("x")
                .unwrap_err()
                .to_string()
                .contains("no sessions yet")
        );
        std::fs::create_dir_all(store.sessions_dir()).unwrap();
        for id in [
            "20261129-100000-aaaa",
            "20261129-110000-bbbb",
            "20261130-090000-abcd",
        ] {
            std::fs::write(store.path_of(id), "").unwrap();
        }
        assert_eq!(store.resolve("last").unwrap(), "20261130-090000-abcd");
        assert_eq!(store.resolve("bbbb").unwrap(), "20261129-110000-bbbb");
        assert_eq!(store.resolve("20261130").unwrap(), "20261130-090000-abcd");
        let err = store.resolve("20261129").unwrap_err().to_string();
        assert!(err.contains("matches 2 sessions"), "{err}");
        let err = store.resolve("zzzz").unwrap_err().to_string();
        assert!(err.contains("no session `zzzz`"), "{err}");

        // Two sessions of the same second: the one whose header was written last is `last`,
        // whatever their random tails say.
        let header = |ts: &str| format!("{{\"seq\":1,\"ts\":\"{ts}\"}}\n");
        std::fs::write(
            store.path_of("20261130-090000-ffff"),
            header("2026-11-30T09:00:00.100Z"),
        )
        .unwrap();
        std::fs::write(
            store.path_of("20261130-090000-0000"),
            header("2026-11-30T09:00:00.900Z"),
        )
        .unwrap();
        std::fs::write(
            store.path_of("20261130-090000-abcd"),
            header("2026-11-30T09:00:00.500Z"),
        )
        .unwrap();
        assert_eq!(
            &store.ids().unwrap()[2..],
            [
                "20261130-090000-ffff",
                "20261130-090000-abcd",
                "20261130-090000-0000"
            ]
        );
        assert_eq!(store.resolve("last").unwrap(), "20261130-090000-0000");
    }
}
