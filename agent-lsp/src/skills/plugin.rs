//! The `skills` plugin: the section of a session's skills, recorded once per session, and the
//! skills the `skill` tool may load in it.
//!
//! The first time the plugin contributes to a session it looks through the folders and records
//! what it found, with the section's text and digest, in a `plugin/state` event; every later
//! turn, and a process that resumes the session, takes the section from that event alone (as
//! the memory plugin does), so the system prompt stays byte-stable whatever the folders hold by
//! then. The skills of the record are also what the session's `skill` calls load from: a skill
//! added to a folder mid-session reaches new sessions only, like its line in the section.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::{Found, PLUGIN, Roots, SECTION_ORDER, Skill, Skipped};
use crate::canonical::sha256_hex;
use crate::context::system_prompt::SystemPrompt;
use crate::plugin::Plugin;
use crate::plugin::state::{self as plugin_state, SectionCache};
use crate::session::Session;

/// Sessions whose skills a host remembers for the `skill` tool; older ones are looked up again.
const KNOWN_SESSIONS: usize = 64;

/// What a session's `plugin/state` event records.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedSkills {
    pub skills: Vec<Skill>,
    /// What was skipped and why, for `session show` and whoever wonders why a skill is missing.
    pub skipped: Vec<Skipped>,
    /// The section's text (`None` without skills), taken verbatim on every later turn.
    pub section: Option<String>,
    /// sha256 of `section`.
    pub digest: Option<String>,
}

/// The skills of the sessions the plugin contributed to, shared with the `skill` tool.
#[derive(Clone, Debug, Default)]
pub struct Known(Arc<Mutex<Vec<SessionSkills>>>);

/// A session's id and the skills it recorded.
type SessionSkills = (String, Vec<Skill>);

impl Known {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<SessionSkills>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn set(&self, session: &str, skills: Vec<Skill>) {
        let mut known = self.lock();
        known.retain(|(id, _)| id != session);
        if known.len() >= KNOWN_SESSIONS {
            known.remove(0);
        }
        known.push((session.to_owned(), skills));
    }

    /// The skills recorded for `session`, if the plugin contributed to it in this process.
    pub fn get(&self, session: &str) -> Option<Vec<Skill>> {
        let known = self.lock();
        let (_, skills) = known.iter().find(|(id, _)| id == session)?;
        Some(skills.clone())
    }
}

/// Gives every session the skills found when it started (see the module doc).
pub struct SkillsPlugin {
    roots: Roots,
    known: Known,
    /// The section of the session it last contributed to: its id and the section.
    current: SectionCache,
}

impl SkillsPlugin {
    pub fn new(roots: Roots, known: Known) -> SkillsPlugin {
        SkillsPlugin {
            roots,
            known,
            current: SectionCache::default(),
        }
    }
}

/// What `session` recorded, or what is found now in `roots`, recorded.
fn recorded(roots: &Roots, session: &mut Session, turn: u32) -> anyhow::Result<RecordedSkills> {
    plugin_state::recorded_or(session, turn, PLUGIN, "skills", || {
        let Found { skills, skipped } = super::discover(roots);
        for skip in &skipped {
            tracing::warn!(reason = %skip.reason, "skill skipped");
        }
        let section = super::render_section(&skills);
        Ok(RecordedSkills {
            digest: section.as_deref().map(sha256_hex),
            skills,
            skipped,
            section,
        })
    })
}

impl Plugin for SkillsPlugin {
    fn name(&self) -> &'static str {
        PLUGIN
    }

    fn contribute(
        &mut self,
        prompt: &mut SystemPrompt,
        session: &mut Session,
        turn: u32,
    ) -> anyhow::Result<()> {
        let (roots, known) = (&self.roots, &self.known);
        let section = self.current.section(session, |session| {
            let recorded = recorded(roots, session, turn)?;
            known.set(session.id(), recorded.skills);
            Ok(recorded.section)
        })?;
        if let Some(text) = section {
            prompt.sourced_section(PLUGIN, SECTION_ORDER, &text, PLUGIN);
        }
        Ok(())
    }
}
