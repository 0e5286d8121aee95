//! `agent-lsp preset list|show|new`: the presets found by name, their text, and new presets
//! copied from existing ones (see `preset::catalog` for where they live and which one a name
//! finds).

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Subcommand;
use serde_json::json;

use crate::preset::catalog::{self, Listed, PresetDirs, Scope, Source};

#[derive(Debug, Subcommand)]
pub enum PresetCommand {
    /// The presets found by name (user, built-in, workspace), and which shadows which.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Print a preset's text (a name, or a path to a .toml file).
    Show { name: String },
    /// Copy a preset under a new name, to change it: into the user's presets folder, or the
    /// workspace's .agent-lsp/presets/ with --scope workspace. Prints the new file's path.
    New {
        name: String,
        /// The preset to copy (a name, or a path to a .toml file).
        #[arg(long, value_name = "BASE")]
        from: String,
        #[arg(long, value_enum, default_value = "user")]
        scope: Scope,
    },
}

pub fn run(workspace: &Path, command: PresetCommand) -> anyhow::Result<ExitCode> {
    let dirs = PresetDirs::for_workspace(workspace);
    match command {
        PresetCommand::List { json } => list(workspace, &dirs, json),
        PresetCommand::Show { name } => show(&dirs, &name),
        PresetCommand::New { name, from, scope } => new(workspace, &dirs, &name, &from, scope),
    }
}

/// A listed preset's description, or why it does not load.
fn description(workspace: &Path, listed: &Listed) -> Result<String, String> {
    let found = &listed.found;
    crate::host::assembly::parse_preset(workspace, &found.name, &found.origin(), &found.text)
        .map(|preset| preset.file.description)
        .map_err(|error| format!("{error:#}"))
}

fn list(workspace: &Path, dirs: &PresetDirs, json: bool) -> anyhow::Result<ExitCode> {
    let listed = catalog::list(dirs)?;
    let mut out = std::io::stdout().lock();
    if json {
        let rows: Vec<_> = listed
            .iter()
            .map(|listed| {
                let description = description(workspace, listed);
                json!({
                    "name": listed.name(),
                    "source": listed.found.source,
                    "path": listed.found.path,
                    "description": description.as_ref().ok(),
                    "error": description.as_ref().err(),
                    "shadowed_by": listed.shadowed_by,
                    "shadows": listed.shadows,
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let width = listed
        .iter()
        .map(|listed| listed.name().len())
        .max()
        .unwrap_or(0);
    for listed in &listed {
        let text = match description(workspace, listed) {
            Ok(description) => description,
            Err(error) => format!("invalid: {}", one_line(&error)),
        };
        let note = match (listed.shadowed_by, listed.shadows.as_slice()) {
            (Some(by), _) => format!(" (shadowed by the {} preset)", by.as_str()),
            (None, []) => String::new(),
            (None, shadows) => format!(
                " (shadows the {} preset{})",
                shadows
                    .iter()
                    .map(|source| source.as_str())
                    .collect::<Vec<_>>()
                    .join(" and "),
                if shadows.len() > 1 { "s" } else { "" }
            ),
        };
        let source = listed.found.source.as_str();
        writeln!(out, "{:<width$}  {source:<9}  {text}{note}", listed.name())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A parse error in one line: its first line (the file, line and column) and its last (what is
/// wrong), without the excerpt of the file between them.
fn one_line(error: &str) -> String {
    let mut lines = error.lines().map(str::trim).filter(|line| !line.is_empty());
    let first = lines.next().unwrap_or_default();
    match lines.next_back() {
        Some(last) => format!("{first}: {last}"),
        None => first.to_owned(),
    }
}

/// `name_or_path`'s name, how errors name it, and its text.
fn text_of(dirs: &PresetDirs, name_or_path: &str) -> anyhow::Result<(String, String, String)> {
    if catalog::is_path(name_or_path) {
        let path = Path::new(name_or_path);
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("failed to read preset file {}", path.display()))?;
        let name = path.file_stem().map_or(name_or_path.into(), |stem| {
            stem.to_string_lossy().into_owned()
        });
        return Ok((name, path.display().to_string(), text));
    }
    let found = catalog::find(name_or_path, dirs)?;
    Ok((found.name.clone(), found.origin(), found.text))
}

fn show(dirs: &PresetDirs, name: &str) -> anyhow::Result<ExitCode> {
    let (_, _, text) = text_of(dirs, name)?;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn new(
    workspace: &Path,
    dirs: &PresetDirs,
    name: &str,
    from: &str,
    scope: Scope,
) -> anyhow::Result<ExitCode> {
    catalog::check_name(name)?;
    let (base, origin, text) = text_of(dirs, from)?;
    crate::host::assembly::parse_preset(workspace, &base, &origin, &text)
        .with_context(|| format!("preset `{from}` cannot be copied: it is not valid"))?;
    if scope == Scope::Workspace
        && let Some(hiding) = catalog::candidates(name, dirs)?
            .iter()
            .find(|found| found.source != Source::Workspace)
    {
        bail!(
            "a {} preset named `{name}` exists, and a workspace preset never replaces it; choose another name",
            hiding.source.as_str()
        );
    }
    let path = catalog::save(dirs.dir(scope)?, name, &text, false, None)?;
    writeln!(std::io::stdout().lock(), "{}", path.display())?;
    eprintln!(
        "agent-lsp: copied `{from}` to preset `{name}`; change it, then: agent-lsp run --preset {name}"
    );
    Ok(ExitCode::SUCCESS)
}
