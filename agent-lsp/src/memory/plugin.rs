//! The `memory` plugin (`[plugins.memory]`): brings the `memory` tool, and gives each session
//! the memories in force when it started as one system-prompt section.
//!
//! The section must stay byte-identical for the session's whole life, or every later request
//! would miss the provider's cached prefix; memories change under a running session (its own
//! `remember`, another session, the editor). So the first time the plugin contributes to a
//! session it reads the memories and records them, with the section's text and digest, in a
//! `plugin/state` event; every later turn, and any process that resumes the session, rebuilds
//! the section from that event alone. A session that started without memories records that too,
//! and stays without a section.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::tool::MemoryTool;
use super::{Caps, Memories, Memory, render_section};
use crate::canonical::sha256_hex;
use crate::context::system_prompt::SystemPrompt;
use crate::plugin::Plugin;
use crate::plugin::registry::{InvalidSetting, Parts, PluginHost, PluginSettings};
use crate::plugin::state::{self as plugin_state, SectionCache};
use crate::preset::Preset;
use crate::session::Session;

/// The plugin's name, in presets and in its `plugin/state` events.
pub const NAME: &str = "memory";
/// Where the section goes among the system prompt's sections: after the agent's own (0) and the
/// project instructions (100, 110).
pub const SECTION_ORDER: i32 = 120;

/// `[plugins.memory]` of a preset.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySettings {
    pub enabled: bool,
    /// Memories in force per scope (default 100).
    #[serde(default = "default_max_per_scope")]
    pub max_per_scope: usize,
    /// Characters of one memory (default 1000).
    #[serde(default = "default_max_chars")]
    pub max_chars: usize,
    /// Bytes of one scope's memories as rendered in the system prompt (default 8192).
    #[serde(default = "default_max_scope_bytes")]
    pub max_scope_bytes: usize,
}

fn default_max_per_scope() -> usize {
    Caps::default().max_per_scope
}

fn default_max_chars() -> usize {
    Caps::default().max_chars
}

fn default_max_scope_bytes() -> usize {
    Caps::default().max_scope_bytes
}

impl MemorySettings {
    pub fn caps(&self) -> Caps {
        Caps {
            max_per_scope: self.max_per_scope,
            max_chars: self.max_chars,
            max_scope_bytes: self.max_scope_bytes,
        }
    }
}

impl PluginSettings for MemorySettings {
    fn enabled(&self) -> bool {
        self.enabled
    }

    fn validate(&self) -> Result<(), InvalidSetting> {
        for (key, value) in [
            ("max_per_scope", self.max_per_scope),
            ("max_chars", self.max_chars),
            ("max_scope_bytes", self.max_scope_bytes),
        ] {
            if value == 0 {
                return Err(InvalidSetting {
                    key,
                    message: "must be at least 1".into(),
                });
            }
        }
        if self.max_chars > self.max_scope_bytes {
            return Err(InvalidSetting {
                key: "max_chars",
                message: format!(
                    "is more than max_scope_bytes ({}), so a memory that long could never be kept",
                    self.max_scope_bytes
                ),
            });
        }
        Ok(())
    }
}

/// The caps `preset` gives memories: its `[plugins.memory]` table's, else the defaults. What
/// `agent-lsp memory` and the editor's commands check changes against.
pub fn caps_of(preset: &Preset) -> anyhow::Result<Caps> {
    match preset.file.plugins.iter().find(|table| table.name == NAME) {
        Some(table) => Ok(table.settings::<MemorySettings>(&preset.origin)?.caps()),
        None => Ok(Caps::default()),
    }
}

/// What a session's `plugin/state` event records: the memories it started with, and the
/// section built from them exactly as it went into the prompt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedMemories {
    pub memories: Vec<Memory>,
    /// The section's text (`None` without memories), taken verbatim on every later turn.
    pub section: Option<String>,
    /// sha256 of `section`.
    pub digest: Option<String>,
}

/// Gives every session the memories it started with (see the module doc).
pub struct MemoryPlugin {
    memories: Memories,
    /// The section of the session it last contributed to: its id and the section.
    current: SectionCache,
}

impl MemoryPlugin {
    /// The registry entry's constructor: the tool always (so the catalog is the same whatever
    /// the host), the plugin where there is a state directory to keep memories in.
    pub fn parts(settings: MemorySettings, host: &PluginHost) -> anyhow::Result<Parts> {
        let memories = host
            .state_dir
            .as_deref()
            .map(|dir| Memories::for_workspace_dir(dir).with_caps(settings.caps()));
        Ok(Parts {
            plugin: memories.clone().map(|memories| {
                Box::new(MemoryPlugin {
                    memories,
                    current: SectionCache::default(),
                }) as Box<dyn Plugin>
            }),
            tools: vec![Arc::new(MemoryTool::new(memories, settings.caps()))],
            shell: None,
        })
    }
}

/// The section of `session`: from its `plugin/state` event, or read now and recorded.
fn section_of(
    memories: &Memories,
    session: &mut Session,
    turn: u32,
) -> anyhow::Result<Option<String>> {
    let recorded = plugin_state::recorded_or(session, turn, NAME, "memories", || {
        let memories = memories.list()?;
        let section = render_section(&memories);
        Ok(RecordedMemories {
            digest: section.as_deref().map(sha256_hex),
            memories,
            section,
        })
    })?;
    Ok(recorded.section)
}

impl Plugin for MemoryPlugin {
    fn name(&self) -> &'static str {
        NAME
    }

    fn contribute(
        &mut self,
        prompt: &mut SystemPrompt,
        session: &mut Session,
        turn: u32,
    ) -> anyhow::Result<()> {
        let memories = &self.memories;
        let section = self
            .current
            .section(session, |session| section_of(memories, session, turn))?;
        if let Some(text) = section {
            prompt.sourced_section(NAME, SECTION_ORDER, &text, NAME);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{Provenance, Scope};
    use crate::session::event::SessionHeader;
    use crate::session::log::Durability;

    /// A plugin over the memories of a workspace directory inside `dir`.
    fn plugin(dir: &std::path::Path) -> MemoryPlugin {
        MemoryPlugin {
            memories: Memories::for_workspace_dir(&dir.join("workspaces/ws-0123")),
            current: SectionCache::default(),
        }
    }

    #[test]
    fn parts_bring_the_tool_always_and_the_plugin_with_a_state_directory() {
        let settings = MemorySettings {
            enabled: true,
            max_per_scope: 100,
            max_chars: 1000,
            max_scope_bytes: 8192,
        };
        let mut host = PluginHost {
            state_dir: Some("/state/workspaces/w-0123".into()),
            ..PluginHost::detached("/w", "standard", 1000)
        };
        let parts = MemoryPlugin::parts(settings.clone(), &host).unwrap();
        assert_eq!(parts.plugin.unwrap().name(), NAME);
        assert_eq!(parts.tools[0].def().name, "memory");
        host.state_dir = None;
        let parts = MemoryPlugin::parts(settings, &host).unwrap();
        assert!(parts.plugin.is_none());
        assert_eq!(parts.tools.len(), 1);
    }

    fn system(plugin: &mut MemoryPlugin, session: &mut Session, turn: u32) -> String {
        let mut prompt = SystemPrompt::default();
        prompt.section("base", 0, "Base.");
        plugin.contribute(&mut prompt, session, turn).unwrap();
        prompt.assemble().unwrap().system
    }

    fn states(session: &Session) -> usize {
        plugin_state::records(session.history(), NAME).count()
    }

    #[test]
    fn a_session_keeps_the_memories_it_started_with_also_when_resumed() {
        let dir = tempfile::tempdir().unwrap();
        let mut plugin = plugin(dir.path());
        let from = Provenance {
            session: "earlier".into(),
            seq: Some(4),
            time: "2026-11-29T10:00:00Z".into(),
        };
        plugin
            .memories
            .remember(Scope::Workspace, "Use {{braces}} literally.", from.clone())
            .unwrap();
        let path = dir.path().join("s.jsonl");
        let header = SessionHeader::for_test("s1", "standard");
        let mut session = Session::create(&path, header, Durability::Sync).unwrap();

        let first = system(&mut plugin, &mut session, 1);
        assert!(
            first.ends_with(
                "- w1 (workspace; session earlier event 4, 2026-11-29T10:00:00Z): Use {{braces}} literally."
            ),
            "{first}"
        );
        // New memories reach new sessions only: later turns, and a resumed session, keep the text.
        plugin
            .memories
            .remember(Scope::User, "Added later.", from.clone())
            .unwrap();
        assert_eq!(system(&mut plugin, &mut session, 2), first);
        drop(session);
        let mut resumed = Session::open(&path, Durability::Sync).unwrap();
        let mut fresh = self::plugin(dir.path());
        assert_eq!(system(&mut fresh, &mut resumed, 3), first);
        assert_eq!(states(&resumed), 1, "recorded once");

        let (_, recorded) = plugin_state::records(resumed.history(), NAME)
            .next()
            .unwrap();
        let recorded = recorded.clone();
        let recorded: RecordedMemories = serde_json::from_value(recorded).unwrap();
        assert_eq!(recorded.memories.len(), 1);
        assert_eq!(recorded.memories[0].provenance, from);
        let section = recorded.section.unwrap();
        assert_eq!(recorded.digest.unwrap(), sha256_hex(&section));

        // The next session gets both.
        let mut next = Session::create(
            &dir.path().join("s2.jsonl"),
            SessionHeader::for_test("s2", "standard"),
            Durability::Sync,
        )
        .unwrap();
        assert!(system(&mut fresh, &mut next, 1).contains("u1 (user; "));
    }

    #[test]
    fn a_session_that_started_without_memories_stays_without_a_section() {
        let dir = tempfile::tempdir().unwrap();
        let mut plugin = plugin(dir.path());
        let mut session = Session::create(
            &dir.path().join("s.jsonl"),
            SessionHeader::for_test("s1", "standard"),
            Durability::Sync,
        )
        .unwrap();
        assert_eq!(system(&mut plugin, &mut session, 1), "Base.");
        plugin
            .memories
            .remember(Scope::Workspace, "Later.", Provenance::now("s1", Some(9)))
            .unwrap();
        let mut fresh = self::plugin(dir.path());
        assert_eq!(system(&mut fresh, &mut session, 2), "Base.");
        assert_eq!(states(&session), 1);
    }

    #[test]
    fn settings_refuse_caps_that_cannot_hold_a_memory() {
        let table = |text: &str| crate::plugin::registry::PluginTable {
            name: NAME.into(),
            line: 3,
            key_lines: Default::default(),
            table: toml::from_str(text).unwrap(),
        };
        let error = |text: &str| {
            table(text)
                .settings::<MemorySettings>("p.toml")
                .unwrap_err()
                .to_string()
        };
        assert!(error("enabled = true\nmax_chars = 0").contains("`max_chars`: must be at least 1"));
        assert!(
            error("enabled = true\nmax_chars = 9000")
                .contains("is more than max_scope_bytes (8192)")
        );
        assert!(error("enabled = true\nmax = 1").contains("unknown field `max`"));
        let defaults = table("enabled = true")
            .settings::<MemorySettings>("p.toml")
            .unwrap();
        assert_eq!(defaults.caps(), Caps::default());
    }
}
