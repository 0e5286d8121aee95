//! Terminal commands. Every subcommand works on the workspace of the current directory unless
//! `--workspace DIR` says otherwise.

mod session;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

use crate::session::store::Store;

#[derive(Debug, Parser)]
#[command(
    name = "agent-lsp",
    version,
    about = "A coding agent that lives inside the editor as a language server"
)]
pub struct Cli {
    /// Workspace root (default: the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    workspace: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Inspect and replay recorded sessions.
    #[command(subcommand)]
    Session(session::SessionCommand),
}

/// Parse the process arguments and run the command.
pub fn run() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    let workspace = match cli.workspace {
        Some(dir) => dir,
        None => std::env::current_dir().context("failed to read the current directory")?,
    };
    match cli.command {
        Command::Session(command) => session::run(&Store::for_workspace(&workspace)?, command),
    }
}
