//! `agent-lsp session list|show|replay|compact|trajectory|goal`.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;
use serde_json::{Value, json};

mod describe;
mod nest;
mod plan;

use crate::context::request::replay_request;
use crate::llm::wire;
use crate::session::History;
use crate::session::event::{Event, EventBody};
use crate::session::store::{Store, first_prompt};
use crate::tokens::estimate_message;
use describe::{describe, preview};

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
    /// tool, subtool) with raw tool payloads, results, and token and cache figures per request.
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
    use crate::compaction::{compact_session, describe_outcome};
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
            eprintln!("agent-lsp: {}", super::run::not_configured_message());
            eprintln!("agent-lsp: or compact without a model: --template");
            return Ok(ExitCode::from(super::run::EXIT_NOT_CONFIGURED));
        }
    };
    let summarizer = template.then(|| Arc::new(TemplateSummarizer) as Arc<dyn Summarizer>);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let cancel = tokio_util::sync::CancellationToken::new();
    let outcome = runtime.block_on(compact_session(
        &mut session,
        preset
            .plugin_settings::<crate::compaction::CompactionSettings>("compaction")?
            .unwrap_or_default(),
        preset.file.model.context_window,
        &provider,
        summarizer,
        &cancel,
    ))?;
    let committed = outcome.shrank();
    let line = describe_outcome(&outcome)
        .unwrap_or_else(|| "nothing to compact: the session is short enough".to_owned());
    writeln!(std::io::stdout().lock(), "{line}")?;
    Ok(if committed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// What `session list --json` prints: a summary per session, oldest first (also the MCP
/// server's `session_list`).
pub(crate) fn list_json(store: &Store) -> anyhow::Result<Vec<Value>> {
    let mut rows = Vec::new();
    for id in store.ids()? {
        match store.load(&id) {
            Ok(history) => rows.push(summary_json(&id, &history)),
            Err(error) => rows.push(json!({ "id": id, "error": format!("{error:#}") })),
        }
    }
    Ok(rows)
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

fn summary_json(id: &str, history: &History) -> Value {
    let header = history.header();
    json!({
        "id": id,
        "preset": header.map(|h| h.preset.as_str()),
        "workspace": header.map(|h| h.workspace.as_str()),
        "created": history.events().first().map(|event| event.ts.as_str()),
        "last_activity": history.events().last().map(|event| event.ts.as_str()),
        "events": history.events().len(),
        "requests": history.n_requests(),
        "first_prompt": first_prompt(history),
        "parent": header.and_then(|h| h.parent.as_ref()),
    })
}

/// Prompt and cache figures of every request that has a usage record.
fn requests_json(history: &History) -> Vec<Value> {
    let mut requests: BTreeMap<u64, serde_json::Map<String, Value>> = BTreeMap::new();
    for event in history.events() {
        match &event.body {
            EventBody::RequestHeader(header) => {
                let row = requests.entry(header.index).or_default();
                row.insert("index".into(), header.index.into());
                row.insert("model".into(), header.model.clone().into());
                row.insert("seq".into(), event.seq.into());
            }
            EventBody::RequestContext(context) => {
                let row = requests.entry(context.index).or_default();
                row.insert("generation".into(), context.generation.into());
                row.insert("estimated_tokens".into(), context.estimated_tokens.into());
            }
            EventBody::Usage(usage) => {
                let row = requests.entry(usage.index).or_default();
                row.insert("prompt_tokens".into(), usage.prompt_tokens.into());
                row.insert("completion_tokens".into(), usage.completion_tokens.into());
                row.insert("cache_read".into(), usage.cache_read.into());
            }
            _ => {}
        }
    }
    requests.into_values().map(Value::Object).collect()
}

pub(crate) fn show_json(history: &mut History, store: &Store) -> Value {
    let id = history
        .header()
        .map(|h| h.session_id.clone())
        .unwrap_or_default();
    let mut by_kind: BTreeMap<&str, u64> = BTreeMap::new();
    for event in history.events() {
        *by_kind.entry(event.kind().as_str()).or_default() += 1;
    }
    let timeline = nest::timeline(history, store, 0);
    let generation = history.generation();
    let surface_seqs = history
        .surface()
        .entries()
        .iter()
        .map(|entry| entry.seq)
        .collect::<Vec<_>>();
    let messages = history.derive_messages();
    let (n_messages, surface_tokens) = (
        messages.len(),
        messages.iter().map(estimate_message).sum::<u64>(),
    );
    json!({
        "summary": summary_json(&id, history),
        "by_kind": by_kind,
        "requests": requests_json(history),
        "surface": {
            "generation": generation,
            "messages": n_messages,
            "estimated_tokens": surface_tokens,
            "seqs": surface_seqs,
        },
        "plan": crate::plans::view(history),
        "timeline": timeline,
    })
}

pub(super) fn timeline_json(event: &Event) -> Value {
    let mut row = json!({
        "seq": event.seq,
        "kind": event.kind().as_str(),
        "turn": event.turn,
        "step": event.step,
        "ts": event.ts,
        "summary": describe(event),
    });
    if let Some(op) = &event.surface_op {
        row["surface_op"] = serde_json::to_value(op).unwrap_or(Value::Null);
    }
    row
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
