//! `agent-lsp skills list`: the skills a new session would get, where each was found, and the
//! ones that are skipped, with why (see `crate::skills` for the folders and the rules).

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;
use serde_json::json;

use crate::config::Config;
use crate::preset::{DEFAULT_PRESET, Preset, PresetDirs};
use crate::skills::{self, Roots, SkillsSettings};

#[derive(Debug, Subcommand)]
pub enum SkillsCommand {
    /// The skills found (user, extra folders, workspace), and the ones skipped with why.
    List {
        /// Whose `[plugins.skills]` settings apply (default: the configured preset, else
        /// standard).
        #[arg(long)]
        preset: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

pub fn run(workspace: &Path, command: SkillsCommand) -> anyhow::Result<ExitCode> {
    match command {
        SkillsCommand::List { preset, json } => list(workspace, preset.as_deref(), json),
    }
}

fn list(workspace: &Path, preset: Option<&str>, json: bool) -> anyhow::Result<ExitCode> {
    let config = Config::load()?;
    let name = preset
        .or(config.preset.as_deref())
        .unwrap_or(DEFAULT_PRESET);
    let preset = Preset::load(name, &PresetDirs::for_workspace(workspace))?;
    let settings = skills::settings_of(&preset)?;
    if settings.is_none() {
        eprintln!(
            "note: the preset `{}` has no enabled [plugins.skills]: its sessions get no skills (the folders are looked through with the default settings)",
            preset.name
        );
    }
    let enabled = settings.is_some();
    let settings = settings.unwrap_or_else(SkillsSettings::defaults);
    let user_dir = Config::user_dir();
    let found = skills::discover(&Roots::new(&settings, workspace, user_dir.as_deref()));

    let mut out = std::io::stdout().lock();
    if json {
        let value = json!({
            "preset": preset.name,
            "enabled": enabled,
            "skills": found.skills,
            "skipped": found.skipped,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&value)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if found.skills.is_empty() {
        writeln!(out, "no skills")?;
    }
    let width = found
        .skills
        .iter()
        .map(|skill| skill.name.len())
        .max()
        .unwrap_or(0);
    for skill in &found.skills {
        writeln!(
            out,
            "{:<width$}  {:<9}  {}\n{:<width$}  {:<9}  {}",
            skill.name,
            skill.origin.as_str(),
            skill.description,
            "",
            "",
            skill.file.display()
        )?;
    }
    if !found.skipped.is_empty() {
        writeln!(out, "\nskipped:")?;
        for skip in &found.skipped {
            writeln!(out, "  {:<9}  {}", skip.origin.as_str(), skip.reason)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
