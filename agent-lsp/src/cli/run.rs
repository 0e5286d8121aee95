//! `agent-lsp run "prompt"`: one agent turn from the terminal, and `agent-lsp models`.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use futures_util::future::BoxFuture;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::agent::{TurnOutcome, TurnUi};
use crate::config::Config;
use crate::host::{Host, Start, ToolHost};
use crate::llm::provider::{Provider, ProviderConfig, ProviderError};
use crate::preset::DEFAULT_PRESET;
use crate::session::Session;
use crate::session::event::ToolCallRef;
use crate::session::store::Store;
use crate::tools::{Asker, HeadlessAsker};

/// Exit code when no model endpoint is configured.
mod progress;
use progress::{ActivityOut, JsonUi, TextUi};

pub const EXIT_NOT_CONFIGURED: u8 = 2;

/// Exit code of a turn that answered while items of its plan (`todo`) were still open.
pub const EXIT_PLAN_OPEN: u8 = 4;

/// Model endpoint flags shared by `run` and `models`.
#[derive(Debug, Default, Args)]
pub struct ModelArgs {
    /// OpenAI-compatible base URL (default https://api.deepseek.com).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Model name (default deepseek-v4-flash, or the preset's).
    #[arg(long)]
    pub model: Option<String>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// What to ask the agent.
    pub prompt: String,
    /// Preset for a new session: a name (a user, built-in or workspace preset; see `agent-lsp
    /// preset list`) or a .toml path.
    #[arg(long)]
    pub preset: Option<String>,
    /// Continue this session (id, unique prefix or suffix, or `last`) instead of starting one.
    #[arg(long)]
    pub session: Option<String>,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Print JSON lines (deltas, tool calls, results, outcome) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Approve tool calls whose permission is `ask` (headless `ask` otherwise means deny).
    #[arg(long)]
    pub yes: bool,
}

/// Resolve the provider from flags, the config file and the preset, in that order of priority
/// (`Config::provider_config`). `None` when nothing says where a model is.
pub fn provider_config(
    config: &Config,
    args: &ModelArgs,
    preset_model: Option<&str>,
) -> anyhow::Result<Option<ProviderConfig>> {
    config.provider_config(args.base_url.clone(), args.model.clone(), preset_model)
}

pub fn run(store: &Store, args: RunArgs) -> anyhow::Result<ExitCode> {
    let config = Config::load()?;
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let asker: Arc<dyn Asker> = if interactive && !args.yes {
        Arc::new(TerminalAsker)
    } else {
        Arc::new(HeadlessAsker { yes: args.yes })
    };
    let activity = Arc::new(crate::activity::Activity::default());
    let host = Host::new(
        store.clone(),
        activity.clone(),
        ToolHost::owned(store, &config, asker, "run")?,
    );
    let start = match &args.session {
        Some(session) => Start::Continue {
            session,
            preset: args.preset.as_deref(),
        },
        None => Start::New(
            host.preset(
                args.preset
                    .as_deref()
                    .or(config.preset.as_deref())
                    .unwrap_or(DEFAULT_PRESET),
            )?,
        ),
    };
    let opening = host.choose(start)?;
    let Some(provider_config) = provider_config(
        &config,
        &args.model,
        opening.preset().file.model.name.as_deref(),
    )?
    else {
        eprintln!("agent-lsp: {}", Config::not_configured_message());
        return Ok(ExitCode::from(EXIT_NOT_CONFIGURED));
    };
    let provider = Provider::new(provider_config)?;
    let mut conversation = host.open(opening, Some(provider), Some(&args.prompt))?;
    // Progress shows the plan when it changes, so it starts from the one the session has.
    let plan = crate::plans::Watch::new(conversation.session.history());
    let (mut ui, activity_out): (Box<dyn TurnUi>, _) = if args.json {
        (Box::new(JsonUi::new(plan)), ActivityOut::Json)
    } else {
        let ui = TextUi::new(std::io::stderr().is_terminal(), plan);
        let out = ui.activity_out();
        (Box::new(ui), out)
    };

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let cancel = CancellationToken::new();
    let outcome = runtime.block_on(async {
        let interrupt = cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                interrupt.cancel();
            }
        });
        let shown = tokio::spawn(progress::show_activity(activity, activity_out));
        let outcome = conversation
            .submit(&args.prompt, &cancel, ui.as_mut())
            .await;
        shown.abort();
        host.shutdown().await;
        outcome
    });
    finish(&conversation.session, outcome, args.json)
}

/// Print how the turn ended and pick the exit code. A turn that answered with items of its plan
/// still open exits [`EXIT_PLAN_OPEN`]; after a step limit or a cancellation the open items are
/// named too, and the exit code stays theirs.
fn finish(
    session: &Session,
    outcome: anyhow::Result<TurnOutcome>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let id = session.id();
    let short = &id[id.len().saturating_sub(4)..];
    let plan = crate::plans::current(session.history())
        .map(|(_, plan)| plan)
        .unwrap_or_default();
    let open = plan.open().cloned().collect::<Vec<_>>();
    let open_line = (!open.is_empty()).then(|| {
        format!(
            "{} plan item{} still open: {}",
            open.len(),
            if open.len() == 1 { " is" } else { "s are" },
            plan.open_line()
        )
    });
    let (code, value, line) = match &outcome {
        Ok(TurnOutcome::Answered { steps, .. }) if open_line.is_some() => (
            EXIT_PLAN_OPEN,
            json!({"outcome": "answered", "steps": steps}),
            None,
        ),
        Ok(TurnOutcome::Answered { steps, .. }) => {
            (0, json!({"outcome": "answered", "steps": steps}), None)
        }
        Ok(TurnOutcome::StepLimit { steps }) => (
            3,
            json!({"outcome": "step_limit", "steps": steps}),
            Some(format!(
                "stopped after {steps} steps (the preset's max_steps); continue with --session {short}"
            )),
        ),
        Ok(TurnOutcome::Cancelled { steps }) => (
            130,
            json!({"outcome": "cancelled", "steps": steps}),
            Some("cancelled; the session is consistent".into()),
        ),
        Err(error) => {
            let provider = error.downcast_ref::<ProviderError>();
            let class = provider.map_or("error", crate::agent::error_class);
            (
                1,
                json!({"outcome": "error", "class": class, "message": format!("{error:#}")}),
                Some(format!("{error:#}")),
            )
        }
    };
    if json {
        let mut value = value;
        value["type"] = "end".into();
        value["session"] = id.into();
        if outcome.is_ok() {
            value["open_items"] = json!(open);
        }
        println_json(&value);
    } else {
        if let Some(line) = line {
            eprintln!("agent-lsp: {line}");
        }
        if let (Ok(_), Some(open_line)) = (&outcome, &open_line) {
            eprintln!("agent-lsp: {open_line}");
        }
        eprintln!("session {id} (agent-lsp session show {short})");
    }
    Ok(ExitCode::from(code))
}

#[allow(clippy::print_stdout)]
pub(super) fn println_json(value: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{value}");
    let _ = out.flush();
}

/// Asks the person at the terminal before a tool call whose permission is `ask`.
struct TerminalAsker;

impl Asker for TerminalAsker {
    fn ask(&self, call: &ToolCallRef) -> BoxFuture<'static, bool> {
        TerminalAsker::question(format!(
            "agent-lsp: allow `{}` {}? [y/N] ",
            call.name, call.arguments
        ))
    }

    fn ask_because(&self, call: &ToolCallRef, reason: &str) -> BoxFuture<'static, bool> {
        TerminalAsker::question(format!(
            "agent-lsp: `{}` {}\nneeds your approval because {reason}.\nAllow it? [y/N] ",
            call.name, call.arguments
        ))
    }
}

impl TerminalAsker {
    /// Show `question` on stderr and read the answer from stdin.
    fn question(question: String) -> BoxFuture<'static, bool> {
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                eprint!("{question}");
                let mut answer = String::new();
                std::io::stdin().read_line(&mut answer).is_ok()
                    && matches!(answer.trim(), "y" | "Y" | "yes")
            })
            .await
            .unwrap_or(false)
        })
    }
}

/// `agent-lsp models`: what the endpoint's `GET /models` offers.
pub fn models(args: &ModelArgs, json: bool) -> anyhow::Result<ExitCode> {
    let config = Config::load()?;
    let Some(provider_config) = provider_config(&config, args, None)? else {
        eprintln!("agent-lsp: {}", Config::not_configured_message());
        return Ok(ExitCode::from(EXIT_NOT_CONFIGURED));
    };
    let provider = Provider::new(provider_config)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let models = runtime.block_on(provider.list_models(&CancellationToken::new()))?;
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&models)?)?;
    } else {
        for model in models {
            writeln!(out, "{model}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
