//! Skills (`[plugins.skills]`): folders of instructions for one kind of task, which the model
//! loads when a task calls for one.
//!
//! A skill is a folder with a `SKILL.md` and, optionally, files of its own (scripts, templates,
//! references). `SKILL.md` starts with YAML front matter holding `name` and `description`; the
//! rest of it is the instructions. The layout is other agents' (Claude Code's, the Agent Skills
//! format), so their skill folders can be named in `extra_dirs` as they are: keys other than
//! `name` and `description` (`license`, `allowed-tools`, `metadata`) are accepted and ignored.
//!
//! Where skills are found, in precedence order (`discover.rs`):
//! 1. the user's, `skills/` beside the config file (`~/.config/agent-lsp/skills/`);
//! 2. the preset's `extra_dirs`, in the order given (`~` is the home directory);
//! 3. the workspace's `.agent-lsp/skills/`, read through the workspace's confinement.
//!
//! The first folder that has a name owns it: a later skill with that name is skipped and named
//! as shadowed, so a cloned repository can add skills but never redefine one of the user's (as
//! with presets). Two skills of one folder with the same name are both skipped, with both
//! paths: which one was meant cannot be known. A skill's `name` is 1 to 64 characters of `a-z`,
//! `0-9`, `-` and `_` (the preset names' rule); it usually equals the folder's name, but need
//! not, since other agents' folders do not always keep to that. A skill folder that is a link
//! leading out of its skills folder, and a `SKILL.md` that is a link out of its skill folder,
//! are skipped; a link to another skill of the same skills folder is that skill again. Every skip says why and names the file; the other skills still load, and
//! `agent-lsp skills list` shows both.
//!
//! The names and descriptions are one system-prompt section, sorted by name. Like the memory
//! section it is built once per session from what was found when the session started, which is
//! recorded in a `plugin/state` event (`plugin.rs`); later turns and a resumed session rebuild it
//! from that record, byte for byte, whatever the folders hold by then.
//!
//! The `skill` tool (`tool.rs`) returns one skill's instructions (its body, capped) as its
//! result, so they enter the session like any tool result, with the skill's folder and its files.
//! It grants that folder to the session for reading: `read` then opens the skill's files by
//! their absolute paths, confined to the folder (`workspace::read_roots`: a link leading out of
//! it is refused), while `write`, `edit`, `shell` and the searches gain nothing.

mod discover;
mod front_matter;
pub mod plugin;
#[cfg(test)]
mod tests;
mod tool;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::plugin::registry::{InvalidSetting, Parts, PluginHost, PluginTable};
use crate::preset::Preset;
pub use discover::{Roots, body_of, discover, files_of};

/// The plugin's name, in presets and in its `plugin/state` events.
pub const PLUGIN: &str = "skills";
/// Where the section goes among the system prompt's sections: after memory (120).
pub const SECTION_ORDER: i32 = 130;
/// Characters of a description (the Agent Skills format's limit).
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// A `SKILL.md` larger than this is not read.
pub const MAX_SKILL_FILE_BYTES: u64 = 1024 * 1024;
/// Files of a skill the `skill` result lists.
pub const MAX_LISTED_FILES: usize = 200;

/// `[plugins.skills]` of a preset.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillsSettings {
    pub enabled: bool,
    /// More folders of skills (other agents', like `~/.claude/skills`), after the user's.
    #[serde(default)]
    pub extra_dirs: Vec<String>,
    /// Skills in the section; the ones past it (in precedence order) are skipped (default 100).
    #[serde(default = "default_max_skills")]
    pub max_skills: usize,
    /// Bytes of a skill's instructions one `skill` call returns (default 32768).
    #[serde(default = "default_max_body_bytes")]
    pub max_body_bytes: usize,
}

fn default_max_skills() -> usize {
    100
}

fn default_max_body_bytes() -> usize {
    32 * 1024
}

impl SkillsSettings {
    /// The settings a preset without a `[plugins.skills]` table would have if it had one.
    pub fn defaults() -> SkillsSettings {
        SkillsSettings {
            enabled: true,
            extra_dirs: Vec::new(),
            max_skills: default_max_skills(),
            max_body_bytes: default_max_body_bytes(),
        }
    }

    /// `extra_dirs` with `~/` expanded to the home directory (those that need a home directory
    /// there is none of are left out).
    pub fn extra_paths(&self) -> Vec<PathBuf> {
        self.extra_dirs
            .iter()
            .filter_map(|dir| match dir.strip_prefix("~/") {
                Some(rest) => dirs::home_dir().map(|home| home.join(rest)),
                None if dir == "~" => dirs::home_dir(),
                None => Some(PathBuf::from(dir)),
            })
            .collect()
    }
}

impl crate::plugin::registry::PluginSettings for SkillsSettings {
    fn enabled(&self) -> bool {
        self.enabled
    }

    fn validate(&self) -> Result<(), InvalidSetting> {
        if let Some(dir) = self
            .extra_dirs
            .iter()
            .find(|dir| !(dir.starts_with('/') || dir.starts_with("~/") || *dir == "~"))
        {
            return Err(InvalidSetting {
                key: "extra_dirs",
                message: format!(
                    "`{dir}` is neither absolute nor under `~/`; a folder relative to wherever the agent starts would change with it"
                ),
            });
        }
        if self.max_skills == 0 {
            return Err(InvalidSetting {
                key: "max_skills",
                message: "must be at least 1".into(),
            });
        }
        if self.max_body_bytes < 1024 {
            return Err(InvalidSetting {
                key: "max_body_bytes",
                message: "must be at least 1024".into(),
            });
        }
        Ok(())
    }
}

/// The settings of `preset`'s `[plugins.skills]` table, `None` when it has none (or turns the
/// plugin off): what `agent-lsp skills list` looks with.
pub fn settings_of(preset: &Preset) -> anyhow::Result<Option<SkillsSettings>> {
    let Some(table) = preset
        .file
        .plugins
        .iter()
        .find(|table| table.name == PLUGIN)
    else {
        return Ok(None);
    };
    let settings = PluginTable::settings::<SkillsSettings>(table, &preset.origin)?;
    Ok(settings.enabled.then_some(settings))
}

/// Which folder a skill was found in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    User,
    Extra,
    Workspace,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::User => "user",
            Origin::Extra => "extra",
            Origin::Workspace => "workspace",
        }
    }
}

/// A skill that loads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skill {
    pub name: String,
    /// The front matter's description on one line.
    pub description: String,
    pub origin: Origin,
    /// The skill's folder, canonical: what the model passes to `read`, and what is granted.
    pub folder: PathBuf,
    /// Its `SKILL.md`.
    pub file: PathBuf,
}

/// A skill, or a folder of skills, that does not load, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// The file or folder the reason is about.
    pub path: PathBuf,
    pub origin: Origin,
    /// The whole message, naming the file (and the other file, for a duplicate name).
    pub reason: String,
}

/// What a look through the folders found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Found {
    /// The skills that load, sorted by name.
    pub skills: Vec<Skill>,
    /// The ones that do not, in the order they were met.
    pub skipped: Vec<Skipped>,
}

/// The system-prompt section listing `skills`, `None` without any.
pub fn render_section(skills: &[Skill]) -> Option<String> {
    if skills.is_empty() {
        return None;
    }
    let mut sorted = skills.iter().collect::<Vec<_>>();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut text = String::from(
        "# Skills\n\nA skill holds instructions (and sometimes files) for one kind of task. When a task matches a skill's description, call `skill` with its name before you start, and follow what it says; its files are then readable with `read` at the paths it gives.\n",
    );
    for skill in sorted {
        text.push_str(&format!("\n- {}: {}", skill.name, skill.description));
    }
    Some(text)
}

/// `path` shown in a message.
fn shown(path: &Path) -> String {
    path.display().to_string()
}

/// The registry entry of `[plugins.skills]`: the plugin and the `skill` tool, sharing what
/// each session recorded ([`plugin::Known`]); the user's skills are beside the config file.
/// It lives here, above both, so that neither the plugin nor the tool imports the other.
pub fn parts(settings: SkillsSettings, host: &PluginHost) -> anyhow::Result<Parts> {
    let user_dir = crate::config::Config::user_dir();
    let roots = Roots::new(&settings, &host.workspace, user_dir.as_deref());
    let known = plugin::Known::default();
    Ok(Parts {
        plugin: Some(Box::new(plugin::SkillsPlugin::new(
            roots.clone(),
            known.clone(),
        ))),
        tools: vec![Arc::new(tool::SkillTool::new(
            roots,
            known,
            settings.max_body_bytes,
        ))],
        shell: None,
    })
}
