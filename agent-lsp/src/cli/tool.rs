//! `agent-lsp tool`: run one tool without a model (recorded in a session), or print the
//! catalog of a preset.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Args;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::activity::Activity;
use crate::config::Config;
use crate::host::{Host, Start, ToolHost};
use crate::preset::DEFAULT_PRESET;
use crate::session::store::Store;
use crate::tools::HeadlessAsker;

#[derive(Debug, Args)]
pub struct ToolArgs {
    /// The tool to run (see --list).
    pub name: Option<String>,
    /// The tool's arguments as JSON, exactly as a model would send them.
    #[arg(long, value_name = "JSON", default_value = "{}")]
    pub args: String,
    /// Print the tool catalog of the preset instead of running a tool.
    #[arg(long)]
    pub list: bool,
    /// With --list: names and JSON schemas as JSON. With a tool: the result and its meta as JSON.
    #[arg(long)]
    pub json: bool,
    /// Preset whose tools and permissions apply (default: the configured one, else standard).
    #[arg(long)]
    pub preset: Option<String>,
    /// Record the run in this session instead of a new one.
    #[arg(long)]
    pub session: Option<String>,
    /// Approve the call if its permission is `ask`.
    #[arg(long)]
    pub yes: bool,
}

pub fn run(store: &Store, args: ToolArgs) -> anyhow::Result<ExitCode> {
    let config = Config::load()?;
    let preset_name = args
        .preset
        .as_deref()
        .or(config.preset.as_deref())
        .unwrap_or(DEFAULT_PRESET);
    let host = Host::new(
        store.clone(),
        Arc::new(Activity::default()),
        ToolHost::owned(
            store,
            &config,
            Arc::new(HeadlessAsker { yes: args.yes }),
            "tool",
        )?,
    );
    let preset = host.preset(preset_name)?;
    let runtime = host.parts(&preset)?.tools;
    let mut out = std::io::stdout().lock();

    if args.list {
        let catalog = runtime.catalog();
        if args.json {
            writeln!(out, "{}", serde_json::to_string_pretty(&catalog)?)?;
        } else {
            for tool in catalog {
                let summary = tool.description.lines().next().unwrap_or_default();
                let permission = runtime.policy().permission(&tool.name).as_str();
                writeln!(out, "{:<8} {:<6} {summary}", tool.name, permission)?;
            }
        }
        return Ok(ExitCode::SUCCESS);
    }

    let Some(name) = args.name else {
        bail!(
            "name a tool to run (`agent-lsp tool --list` shows them), e.g. agent-lsp tool read --args '{{\"path\":\"README.md\"}}'"
        );
    };
    if runtime.registry().get(&name).is_none() {
        bail!(
            "preset `{}` has no tool `{name}`; its tools are {}",
            preset.name,
            runtime.registry().names().collect::<Vec<_>>().join(", ")
        );
    }
    let start = match &args.session {
        Some(session) => host.choose(Start::Record { session, preset })?,
        None => host.choose(Start::New(preset))?,
    };
    let mut conversation = host.open(start, None, None)?;
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let cancel = CancellationToken::new();
    let outcome = tokio
        .block_on(async {
            let outcome = conversation.call(&name, &args.args, &cancel).await;
            host.shutdown().await;
            outcome
        })
        .with_context(|| format!("failed to record the `{name}` call"))?;
    let session = &mut conversation.session;
    session.flush()?;
    if args.json {
        let value = json!({
            "session": session.id(),
            "tool": name,
            "is_error": outcome.output.is_error,
            "text": outcome.output.text,
            "meta": outcome.output.meta,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&value)?)?;
    } else {
        writeln!(out, "{}", outcome.output.text.trim_end())?;
        let id = session.id();
        eprintln!(
            "recorded in session {id} (agent-lsp session show {})",
            &id[id.len().saturating_sub(4)..]
        );
    }
    Ok(if outcome.output.is_error {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
