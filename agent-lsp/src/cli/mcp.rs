//! `agent-lsp mcp …`: the MCP servers sessions use. `list` shows every declared server (the
//! config file's and the workspace's `.mcp.json`), its state and its tools; `approve` lets the
//! servers of the workspace's `.mcp.json`, as it is now, run in this workspace (see
//! `crate::mcp`).

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;

use crate::config::Config;
use crate::session::store::state_root;

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Every MCP server (the config file's, the workspace's .mcp.json), its state and tools:
    /// each usable server is started to list them.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Let the servers of the workspace's .mcp.json, with its current contents, run in this
    /// workspace: shows them (relative paths of workspace files resolved) and asks, unless
    /// --yes. A changed file, or the same file in another workspace, needs approving again.
    Approve {
        /// Approve without asking.
        #[arg(long)]
        yes: bool,
    },
    /// Serve the lsp_* tools, `files`, read/list/glob/grep and the session views over MCP on
    /// stdio (or streamable HTTP with --http), for other agents; every call is recorded in a
    /// session of its own.
    Serve(super::mcp_serve::McpServeArgs),
}

pub fn run(workspace: &Path, command: McpCommand) -> anyhow::Result<ExitCode> {
    match command {
        McpCommand::List { json } => list(workspace, json),
        McpCommand::Approve { yes } => approve(workspace, yes),
        McpCommand::Serve(args) => super::mcp_serve::run(
            &crate::session::store::Store::for_workspace(workspace)?,
            args,
        ),
    }
}

fn list(workspace: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let config = Config::load()?;
    let root = state_root()?;
    let reports = crate::mcp::report(&config.mcp, workspace, Some(&root))?;
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&reports)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if reports.is_empty() {
        writeln!(
            out,
            "no MCP servers: add [mcp.servers.NAME] to {} or a .mcp.json to the workspace",
            Config::path_for_messages()
        )?;
    }
    for report in reports {
        let origin = report.file.as_deref().unwrap_or("config file");
        writeln!(out, "{}  {}  ({origin})", report.name, report.source)?;
        if let Some(transport) = &report.transport {
            writeln!(out, "  {transport}")?;
        }
        writeln!(out, "  {}", report.state)?;
        for tool in &report.tools {
            writeln!(out, "  - {tool}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn approve(workspace: &Path, yes: bool) -> anyhow::Result<ExitCode> {
    use crate::mcp::approval::{Standing, no_file, standing};
    let root = state_root()?;
    let mut out = std::io::stdout().lock();
    let question = match standing(workspace, &root)? {
        Standing::NoFile => return Err(no_file()),
        Standing::Approved { file, .. } => {
            writeln!(out, "{} is already approved", file.display())?;
            return Ok(ExitCode::SUCCESS);
        }
        Standing::Unapproved(question) => question,
    };
    writeln!(out, "{}", question.describe())?;
    if !yes && !let_them_run(&mut out, "agent-lsp mcp approve --yes")? {
        return Ok(ExitCode::from(1));
    }
    question.approve(&root)?;
    writeln!(out, "approved (sha256 {})", question.digest)?;
    Ok(ExitCode::SUCCESS)
}

/// Ask on the terminal whether the commands just shown may run: `false` (and "not approved"
/// said) unless the answer is yes; an error naming `with_yes` when there is no terminal to
/// ask. The one question of every `approve` command.
pub(super) fn let_them_run(out: &mut impl Write, with_yes: &str) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        anyhow::bail!("nobody to ask here: run `{with_yes}` to approve");
    }
    write!(out, "Let them run? [y/N] ")?;
    out.flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    let yes = matches!(answer.trim(), "y" | "Y" | "yes");
    if !yes {
        writeln!(out, "not approved")?;
    }
    Ok(yes)
}
