//! `agent-lsp session list|show|replay|compact|trajectory|goal`.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;

mod nest;
mod plan;

use crate::context::request::replay_request;
use crate::llm::wire;
use crate::session::History;
use crate::session::store::Store;
use crate::session_report::{list_json, preview, show_json};

#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// List the workspace's sessions, oldest first.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Show one session: header, counts, requests, surface and timeline.
    Show {
        /// Session id, a unique prefix or suffix of one, or `last`.
        session: String,
        #[arg(long)]
        json: bool,
    },
    /// Print the exact body of the N-th model request (1-based), rebuilt from the log alone.
    Replay {
        session: String,
        #[arg(long, value_name = "N")]
        request: u64,
    },
    /// Export the session as a trajectory: cells (system, user, context, compacted, message,
    /// tool, subtool, files, rewind) with raw tool payloads, results, and token and cache
    /// figures per request; the prompts of turns a rewind took back say so.
    Trajectory {
        session: String,
        #[arg(long, value_parser = ["json", "html"], default_value = "html")]
        format: String,
        /// Write here instead of stdout.
        #[arg(short = 'o', long, value_name = "FILE")]
        output: Option<std::path::PathBuf>,
    },
    /// Print the session's goal (its first prompt, or the one set last), or set it: the model
    /// sees a goal set here with its plan, and every compaction keeps the goal verbatim.
    Goal {
        session: String,
        /// The new goal; without it, the current one is printed.
        text: Option<String>,
    },
    /// Fold the session's older history into a checkpoint now (a model call that replays the
    /// session's cached prompt prefix; the log keeps every original event).
    Compact {
        session: String,
        #[command(flatten)]
        model: super::run::ModelArgs,
        /// Summarize without a model: the template filled mechanically from the folded messages.
        #[arg(long)]
        template: bool,
    },
}

pub fn run(store: &Store, command: SessionCommand) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match command {
        SessionCommand::List { json } => list(store, json, &mut out)?,
        SessionCommand::Show { session, json } => {
            let mut history = store.load(&session)?;
            if json {
                writeln!(
                    out,
                    "{}",
                    serde_json::to_string_pretty(&show_json(&mut history, store))?
                )?;
            } else {
                show_human(&mut history, store, &mut out)?;
            }
        }
        SessionCommand::Replay { session, request } => {
            let history = store.load(&session)?;
            let request = replay_request(&history, request)?;
            out.write_all(wire::chat_completions_body(&request).as_bytes())?;
        }
        SessionCommand::Compact {
            session,
            model,
            template,
        } => return compact(store, &session, &model, template),
        SessionCommand::Goal { session, text } => {
            plan::goal(store, &session, text.as_deref(), &mut out)?
        }
        SessionCommand::Trajectory {
            session,
            format,
            output,
        } => {
            let history = store.load(&session)?;
            let trajectory = crate::trajectory::build_with(&history, &|id| store.load(id).ok());
            let text = match format.as_str() {
                "json" => serde_json::to_string_pretty(&trajectory)? + "\n",
                _ => crate::trajectory::to_html(&trajectory)?,
            };
            match output {
                Some(path) => std::fs::write(&path, text)
                    .with_context(|| format!("failed to write {}", path.display()))?,
                None => out.write_all(text.as_bytes())?,
            }
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Open the session `query` for appending, with the preset it keeps (the text its header
/// recorded).
fn open_with_preset(
    store: &Store,
    query: &str,
) -> anyhow::Result<(crate::session::Session, crate::preset::Preset)> {
    let session = store.open(query, crate::session::log::Durability::Sync)?;
    let header = session
        .history()
        .header()
        .context("the session has no header")?;
    let preset = crate::preset::Preset::of_session(header)?;
    Ok((session, preset))
}

/// `agent-lsp session compact`: see [`crate::compaction::compact_session`].
fn compact(
    store: &Store,
    query: &str,
    model: &super::run::ModelArgs,
    template: bool,
) -> anyhow::Result<ExitCode> {
    use std::sync::Arc;

    use crate::compaction::summary::{Summarizer, TemplateSummarizer};
    use crate::llm::provider::{Provider, ProviderConfig};

    let config = crate::config::Config::load()?;
    let (mut session, preset) = open_with_preset(store, query)?;
    let provider_config =
        super::run::provider_config(&config, model, preset.file.model.name.as_deref())?;
    let provider = match provider_config {
        Some(provider_config) => Provider::new(provider_config)?,
        // The template summarizer makes no call; the provider only fills the context.
        None if template => Provider::new(ProviderConfig::default())?,
        None => {
            eprintln!(
                "agent-lsp: {}",
                crate::config::Config::not_configured_message()
            );
            eprintln!("agent-lsp: or compact without a model: --template");
            return Ok(ExitCode::from(super::run::EXIT_NOT_CONFIGURED));
        }
    };
    let summarizer = template.then(|| Arc::new(TemplateSummarizer) as Arc<dyn Summarizer>);
    let sandbox = crate::sandbox::Sandbox::detect(preset.file.sandbox.clone(), store.workspace());
    let hooks = crate::host::load_hooks(&config.hooks, store.workspace(), Arc::new(sandbox));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let cancel = tokio_util::sync::CancellationToken::new();
    let crate::host::Compacted {
        shrank: committed,
        message: line,
    } = runtime.block_on(crate::host::compact_now(
        &mut session,
        &preset,
        &provider,
        summarizer,
        hooks.as_deref(),
        &cancel,
    ))?;
    writeln!(std::io::stdout().lock(), "{line}")?;
    Ok(if committed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn list(store: &Store, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let rows = list_json(store)?;
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(());
    }
    if rows.is_empty() {
        writeln!(
            out,
            "no sessions yet for workspace {}",
            store.workspace().display()
        )?;
        return Ok(());
    }
    writeln!(
        out,
        "{:<22} {:<10} {:>7} {:>8}  first prompt",
        "session", "preset", "events", "requests"
    )?;
    for row in rows {
        if let Some(error) = row["error"].as_str() {
            writeln!(
                out,
                "{:<22} unreadable: {error}",
                row["id"].as_str().unwrap_or_default()
            )?;
            continue;
        }
        // A sub-agent's session says whose it is: `↳ …9f3a` (the end of its parent's id).
        let prompt = preview(row["first_prompt"].as_str().unwrap_or(""), 60);
        let prompt = match row["parent"]["session_id"].as_str() {
            Some(parent) => format!("↳ {} {prompt}", &parent[parent.len().saturating_sub(4)..]),
            None => prompt,
        };
        writeln!(
            out,
            "{:<22} {:<10} {:>7} {:>8}  {prompt}",
            row["id"].as_str().unwrap_or_default(),
            row["preset"].as_str().unwrap_or_default(),
            row["events"],
            row["requests"],
        )?;
    }
    Ok(())
}

fn show_human(history: &mut History, store: &Store, out: &mut impl Write) -> anyhow::Result<()> {
    let value = show_json(history, store);
    let summary = &value["summary"];
    writeln!(
        out,
        "session    {}",
        summary["id"].as_str().unwrap_or_default()
    )?;
    writeln!(
        out,
        "workspace  {}",
        summary["workspace"].as_str().unwrap_or_default()
    )?;
    writeln!(
        out,
        "preset     {}",
        summary["preset"].as_str().unwrap_or_default()
    )?;
    writeln!(
        out,
        "created    {}",
        summary["created"].as_str().unwrap_or_default()
    )?;
    let kinds = value["by_kind"]
        .as_object()
        .map(|kinds| {
            kinds
                .iter()
                .map(|(kind, n)| format!("{kind} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    writeln!(out, "events     {} ({kinds})", summary["events"])?;
    let requests = value["requests"].as_array().cloned().unwrap_or_default();
    let prompt: u64 = requests
        .iter()
        .filter_map(|r| r["prompt_tokens"].as_u64())
        .sum();
    let cached: u64 = requests
        .iter()
        .filter_map(|r| r["cache_read"].as_u64())
        .sum();
    let share = if prompt > 0 {
        format!(", {:.1}% from cache", 100.0 * cached as f64 / prompt as f64)
    } else {
        String::new()
    };
    writeln!(
        out,
        "requests   {} ({prompt} prompt tokens reported{share})",
        requests.len()
    )?;
    let surface = &value["surface"];
    writeln!(
        out,
        "surface    generation {}, {} messages, ~{} tokens",
        surface["generation"], surface["messages"], surface["estimated_tokens"]
    )?;
    plan::show(history, out)?;
    writeln!(out)?;
    writeln!(
        out,
        "{:>6}  {:>9}  {:<18} summary",
        "seq", "turn.step", "kind"
    )?;
    for row in value["timeline"].as_array().into_iter().flatten() {
        let seq = row["seq"].as_u64().unwrap_or(0);
        let shadowed = history
            .event(seq)
            .is_some_and(|event| event.kind().carries_content())
            && !history.surface().contains(seq);
        let on_surface = if shadowed { "  (off the surface)" } else { "" };
        let op = row
            .get("surface_op")
            .and_then(|op| op["op"].as_str())
            .map(|op| format!("[{op}] "))
            .unwrap_or_default();
        writeln!(
            out,
            "{:>6}  {:>9}  {:<18} {op}{}{on_surface}",
            seq,
            format!("{}.{}", row["turn"], row["step"]),
            row["kind"].as_str().unwrap_or_default(),
            row["summary"].as_str().unwrap_or_default(),
        )?;
        nest::show_child(row, out, 1)?;
    }
    Ok(())
}
