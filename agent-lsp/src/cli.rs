//! Terminal commands. Every subcommand works on the workspace of the current directory unless
//! `--workspace DIR` says otherwise.

mod completions;
mod context;
mod files;
mod hooks;
mod mcp;
mod mcp_serve;
mod memory;
mod preset;
mod rewind;
pub(crate) mod run;
mod servers;
pub(crate) mod session;
mod skills;
mod tool;

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
struct Cli {
    /// Workspace root (default: the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    workspace: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve an editor as a language server (what editors start): over stdio, or with
    /// --listen on a socket editors attach to.
    Serve {
        /// Listen instead of using stdio, and serve every editor that connects, each on its
        /// own: `127.0.0.1:PORT` for TCP (port 0 picks one; the address is printed on stderr,
        /// with the path of the token file editors read their token from), or `unix:PATH` for
        /// a Unix socket only you can connect to (no token).
        #[arg(long, value_name = "ADDR", conflicts_with = "stdio")]
        listen: Option<String>,
        /// With a TCP --listen: take the token editors must send (as
        /// initializationOptions.token) from this file, which must be yours and closed to
        /// group and others (chmod 600), instead of writing a fresh one.
        #[arg(long, value_name = "PATH", requires = "listen")]
        token_file: Option<PathBuf>,
        /// Serve over stdin and stdout, the default. Accepted because language clients add it
        /// (vscode-languageclient's `TransportKind.stdio` appends `--stdio`, as every Node-based
        /// server expects); it changes nothing.
        #[arg(long)]
        stdio: bool,
    },
    /// Serve the Agent Client Protocol on stdio (Zed, JetBrains, Neovim and Emacs agent
    /// panels): sessions in the workspace each `session/new` names as its `cwd`.
    Acp {
        /// Preset new sessions start in (a session's mode; the config file's or `standard`
        /// otherwise).
        #[arg(long)]
        preset: Option<String>,
        #[command(flatten)]
        model: run::ModelArgs,
    },
    /// Run one agent turn: the answer streams to stdout, progress to stderr.
    Run(run::RunArgs),
    /// Run one tool without a model (recorded in a session), or list a preset's tools.
    Tool(tool::ToolArgs),
    /// List the models the configured endpoint offers (`GET /models`).
    Models {
        #[command(flatten)]
        model: run::ModelArgs,
        #[arg(long)]
        json: bool,
    },
    /// The language servers the workspace uses: on PATH or not, and with --start their health.
    Servers {
        /// Start each server the workspace has files for and report its state.
        #[arg(long)]
        start: bool,
        #[arg(long)]
        json: bool,
    },
    /// Rank the workspace's paths for a fuzzy query, as `@path` completion does.
    Files(files::FilesArgs),
    /// Inspect and replay recorded sessions.
    #[command(subcommand)]
    Session(session::SessionCommand),
    /// See and edit what the model sees: segments, fold, pin, delete, replace, rollback.
    #[command(subcommand)]
    Context(context::ContextCommand),
    /// Take back what a session's turns did: the files they changed (edits, writes and what
    /// commands changed), the conversation, or both; and give it back with --undo.
    Rewind(rewind::RewindArgs),
    /// List presets, print one, or copy one under a new name to change it.
    #[command(subcommand)]
    Preset(preset::PresetCommand),
    /// The memories new sessions get (the workspace's and the user's): list, show, forget, edit.
    #[command(subcommand)]
    Memory(memory::MemoryCommand),
    /// The skills new sessions get (the user's, extra folders', the workspace's), and the ones
    /// skipped with why.
    #[command(subcommand)]
    Skills(skills::SkillsCommand),
    /// The Model Context Protocol: the MCP servers sessions use (the config file's, the
    /// workspace's .mcp.json), listed and approved; and this workspace's tools served to other
    /// agents (`mcp serve`).
    #[command(subcommand)]
    Mcp(mcp::McpCommand),
    /// The user's hooks: commands on the agent's events (the config file's, Claude Code
    /// settings files it names, the workspace's .agent-lsp/hooks.toml), listed and approved.
    #[command(subcommand)]
    Hooks(hooks::HooksCommand),
    /// The inline completions `serve` answered in this workspace (its completion log).
    #[command(subcommand)]
    Completions(completions::CompletionsCommand),
    /// Run one `run_code` program's engine: started by `run_code` itself, which talks to it
    /// over stdin and stdout (`code/wire.rs`); not for people, so not in `--help`.
    #[command(name = crate::code::ENGINE_SUBCOMMAND, hide = true)]
    RunCodeEngine,
}

/// Parse the process arguments and run the command.
pub fn run() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    let explicit_workspace = cli.workspace.clone();
    let workspace = match cli.workspace {
        Some(dir) => dir,
        None => std::env::current_dir().context("failed to read the current directory")?,
    };
    match cli.command {
        Command::Acp { preset, model } => {
            crate::acp::serve(crate::acp::AcpOptions {
                preset,
                base_url: model.base_url,
                model: model.model,
            })?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(args) => run::run(&Store::for_workspace(&workspace)?, args),
        Command::Tool(args) => tool::run(&Store::for_workspace(&workspace)?, args),
        Command::Models { model, json } => run::models(&model, json),
        Command::Serve {
            listen,
            token_file,
            stdio: _,
        } => {
            match listen {
                Some(address) => {
                    crate::server::run_listen(&address, token_file, explicit_workspace)?
                }
                None => {
                    let ending = crate::server::run_stdio(explicit_workspace)?;
                    if ending
                        == (crate::server::Ending::Exit {
                            after_shutdown: false,
                        })
                    {
                        return Ok(ExitCode::from(1));
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Servers { start, json } => {
            servers::run(&Store::for_workspace(&workspace)?, start, json)
        }
        Command::Session(command) => session::run(&Store::for_workspace(&workspace)?, command),
        Command::Files(args) => files::run(&workspace, args),
        Command::Context(command) => context::run(&Store::for_workspace(&workspace)?, command),
        Command::Preset(command) => preset::run(&workspace, command),
        Command::Rewind(args) => rewind::run(&Store::for_workspace(&workspace)?, args),
        Command::Memory(command) => memory::run(&Store::for_workspace(&workspace)?, command),
        Command::Skills(command) => skills::run(&workspace, command),
        Command::Mcp(command) => mcp::run(&workspace, command),
        Command::Hooks(command) => hooks::run(&workspace, command),
        Command::Completions(command) => {
            completions::run(&Store::for_workspace(&workspace)?, command)
        }
        Command::RunCodeEngine => crate::code::run_engine_process(),
    }
}
