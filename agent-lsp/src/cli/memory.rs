//! `agent-lsp memory list|show|forget|edit`: the programmer's view of the memories new sessions
//! get, with where each came from, and the changes a person makes to them (recorded as `cli`).

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Subcommand;

use crate::memory::plugin::caps_of;
use crate::memory::{CLI, Memories, Memory, Provenance, Scope};
use crate::preset::{DEFAULT_PRESET, Preset};
use crate::session::store::Store;

#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// List the memories in force: the workspace's, then the user's.
    List {
        /// Only this scope's.
        #[arg(long, value_parser = ["workspace", "user"])]
        scope: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Show one memory with its provenance.
    Show {
        /// Its id (`w3`, `u1`), as `memory list` shows it.
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Forget a memory: new sessions no longer get it (the file keeps the record of it).
    Forget { id: String },
    /// Replace a memory's text: with TEXT, or in $VISUAL / $EDITOR when it is left out.
    Edit { id: String, text: Option<String> },
}

pub fn run(store: &Store, command: MemoryCommand) -> anyhow::Result<ExitCode> {
    // Changes are held to the caps of the preset new sessions use, as the agent's are.
    let config = crate::config::Config::load()?;
    let preset = Preset::load(
        config.preset.as_deref().unwrap_or(DEFAULT_PRESET),
        &crate::preset::PresetDirs::for_workspace(store.workspace()),
    )?;
    let memories = Memories::for_store(store).with_caps(caps_of(&preset)?);
    let mut out = std::io::stdout().lock();
    match command {
        MemoryCommand::List { scope, json } => {
            let scope = scope.as_deref().map(|scope| match scope {
                "user" => Scope::User,
                _ => Scope::Workspace,
            });
            let shown = memories
                .list()?
                .into_iter()
                .filter(|memory| scope.is_none_or(|scope| memory.scope == scope))
                .collect::<Vec<_>>();
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&shown)?)?;
            } else if shown.is_empty() {
                writeln!(out, "no memories yet")?;
            } else {
                for memory in &shown {
                    writeln!(out, "{}", memory.render())?;
                }
            }
        }
        MemoryCommand::Show { id, json } => {
            let memory = memories.get(&id)?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&memory)?)?;
            } else {
                show(&memory, &mut out)?;
            }
        }
        MemoryCommand::Forget { id } => {
            let memory = memories.forget(&id, Provenance::now(CLI, None))?;
            writeln!(
                out,
                "forgot {}: {}; new sessions will not get it",
                memory.id, memory.text
            )?;
        }
        MemoryCommand::Edit { id, text } => {
            let memory = memories.get(&id)?;
            let text = match text {
                Some(text) => text,
                None => edit_in_editor(&memory)?,
            };
            if text.trim() == memory.text {
                writeln!(out, "{} is unchanged", memory.id)?;
            } else {
                let memory = memories.edit(&id, &text, Provenance::now(CLI, None))?;
                writeln!(out, "edited {}: {}", memory.id, memory.text)?;
            }
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn show(memory: &Memory, out: &mut impl Write) -> anyhow::Result<()> {
    writeln!(out, "id:      {}", memory.id)?;
    writeln!(out, "scope:   {}", memory.scope.as_str())?;
    writeln!(out, "from:    {}", memory.provenance.describe())?;
    if let Some(edited) = &memory.edited {
        writeln!(out, "edited:  {}", edited.describe())?;
    }
    writeln!(out)?;
    writeln!(out, "{}", memory.text)?;
    Ok(())
}

/// The memory's text after the programmer's editor changed it, as `git commit` does it: the
/// text in a temporary file, `$VISUAL` or `$EDITOR` (else `vi`) run on it through the shell (so
/// `EDITOR="code --wait"` works), and the file read back. An empty file changes nothing.
fn edit_in_editor(memory: &Memory) -> anyhow::Result<String> {
    let editor = ["VISUAL", "EDITOR"]
        .into_iter()
        .filter_map(|name| std::env::var(name).ok())
        .find(|value| !value.trim().is_empty())
        .unwrap_or_else(|| "vi".to_owned());
    let mut file = tempfile::Builder::new()
        .prefix(&format!("agent-lsp-memory-{}-", memory.id))
        .suffix(".md")
        .tempfile()
        .context("failed to make a temporary file to edit the memory in")?;
    writeln!(file, "{}", memory.text).context("failed to write the temporary file")?;
    file.flush()?;
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$@\""))
        .arg(&editor)
        .arg(file.path())
        .status()
        .with_context(|| format!("failed to start the editor `{editor}`"))?;
    if !status.success() {
        bail!("the editor `{editor}` ended with {status}; the memory is unchanged");
    }
    let text =
        std::fs::read_to_string(file.path()).context("failed to read the edited memory back")?;
    if text.trim().is_empty() {
        bail!(
            "the edited text is empty, so {} is unchanged; `agent-lsp memory forget {}` drops it",
            memory.id,
            memory.id
        );
    }
    Ok(text)
}
