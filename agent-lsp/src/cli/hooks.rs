//! `agent-lsp hooks …`: the user's hooks (see `crate::hooks`). `list` shows every hook, where
//! it is configured and whether it runs; `approve` lets the workspace's hooks files (its
//! `.agent-lsp/hooks.toml` or `.json`, a Claude Code settings file inside it), as they are now,
//! run in this workspace.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;
use serde_json::json;

use crate::config::Config;
use crate::hooks::Hooks;
use crate::hooks::config::{Source, Standing};

#[derive(Debug, Subcommand)]
pub enum HooksCommand {
    /// Every hook (the config file's, the Claude Code settings files it names, the
    /// workspace's), where it comes from, and whether it runs.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Let the workspace's hooks files, with their current contents, run in this workspace:
    /// shows their commands and asks, unless --yes. A changed file needs approving again.
    Approve {
        /// Approve without asking.
        #[arg(long)]
        yes: bool,
    },
}

pub fn run(workspace: &Path, command: HooksCommand) -> anyhow::Result<ExitCode> {
    let config = Config::load()?;
    let state_root = crate::session::store::state_root()?;
    let hooks = Hooks::load(&config.hooks, workspace, Some(&state_root), None);
    match command {
        HooksCommand::List { json } => list(&hooks, json),
        HooksCommand::Approve { yes } => approve(&hooks, &state_root, yes),
    }
}

fn standing(source: &Source) -> &'static str {
    match source.standing {
        Standing::Own => "runs",
        Standing::Approved => "runs (approved)",
        Standing::Unapproved => "does not run: not approved (agent-lsp hooks approve)",
    }
}

fn list(hooks: &Hooks, as_json: bool) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    if as_json {
        let sources: Vec<_> = hooks
            .sources()
            .iter()
            .map(|source| {
                let listed: Vec<_> = hooks
                    .of(source)
                    .map(|hook| {
                        json!({
                            "event": hook.event.name(),
                            "matcher": hook.matcher,
                            "command": hook.command,
                            "timeout_secs": hook.timeout.as_secs(),
                        })
                    })
                    .collect();
                json!({
                    "source": source.name,
                    "dialect": if source.claude { "claude-code" } else { "agent-lsp" },
                    "runs": source.runs(),
                    "approved": match source.standing {
                        Standing::Own => serde_json::Value::Null,
                        Standing::Approved => true.into(),
                        Standing::Unapproved => false.into(),
                    },
                    "sha256": source.digest,
                    "hooks": listed,
                    "skipped": source.skipped,
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&sources)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if hooks.sources().is_empty() {
        writeln!(
            out,
            "no hooks: add [[hooks.EVENT]] tables to {}, name Claude Code settings files in [hooks] claude_settings, or write .agent-lsp/hooks.toml in the workspace",
            Config::path_for_messages()
        )?;
    }
    for source in hooks.sources() {
        let dialect = if source.claude {
            ", Claude Code names"
        } else {
            ""
        };
        writeln!(out, "{}  ({}{dialect})", source.name, standing(source))?;
        for hook in hooks.of(source) {
            let matcher = hook
                .matcher
                .as_deref()
                .filter(|matcher| !matcher.is_empty())
                .map(|matcher| format!(" [{matcher}]"))
                .unwrap_or_default();
            writeln!(
                out,
                "  {}{matcher}: {}  (timeout {} s)",
                hook.event.name(),
                hook.command,
                hook.timeout.as_secs()
            )?;
        }
        for skipped in &source.skipped {
            writeln!(out, "  skipped: {skipped}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn approve(hooks: &Hooks, state_root: &Path, yes: bool) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    let Some(question) = hooks.question() else {
        let approved = hooks
            .sources()
            .iter()
            .any(|source| source.standing == Standing::Approved);
        writeln!(
            out,
            "{}",
            if approved {
                "the workspace's hooks files are already approved"
            } else {
                "the workspace has no hooks file to approve"
            }
        )?;
        return Ok(ExitCode::SUCCESS);
    };
    writeln!(out, "{}", question.describe())?;
    if !yes && !super::mcp::let_them_run(&mut out, "agent-lsp hooks approve --yes")? {
        return Ok(ExitCode::from(1));
    }
    question.approve(state_root)?;
    for (source, _) in &question.files {
        writeln!(
            out,
            "approved {} (sha256 {})",
            source.name,
            source.digest.as_deref().unwrap_or_default()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
