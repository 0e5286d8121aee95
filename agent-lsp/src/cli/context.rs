//! `agent-lsp context show|fold|pin|delete|replace|apply|rollback|history`: the context editor
//! from a terminal (see `crate::context_editor`).

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::json;

use crate::context_editor::ops::{
    BatchOptions, BatchReport, EditOp, NeedsConfirmation, apply_batch, edit_history, rollback,
    write_fold_summaries,
};
use crate::context_editor::{self, DEFAULT_PREVIEW_CHARS, Query};
use crate::session::log::Durability;
use crate::session::store::Store;

/// Exit code when a delete needs `--force` because later messages refer to what it removes.
pub const EXIT_NEEDS_CONFIRMATION: u8 = 4;

#[derive(Debug, Subcommand)]
pub enum ContextCommand {
    /// The current context as segments: id, role, source, tokens, preview, whether later
    /// messages refer to it, and totals by role.
    Show {
        /// Session id, a unique prefix or suffix of one, or `last`.
        session: String,
        #[arg(long)]
        json: bool,
        /// Only segments whose text or source contains this (case-insensitive).
        #[arg(long, value_name = "Q")]
        query: Option<String>,
        /// Only this role: user, assistant, tool, context, summary.
        #[arg(long, value_name = "R")]
        role: Option<String>,
        /// `tokens`: largest first (default: surface order).
        #[arg(long, value_name = "KEY", value_parser = ["tokens", "surface"])]
        sort: Option<String>,
        /// Characters of each preview.
        #[arg(long, value_name = "N", default_value_t = DEFAULT_PREVIEW_CHARS)]
        preview: usize,
    },
    /// Replace segments with a summary (given with --summary, else written by the session's
    /// model when one is configured, else mechanical). The original stays in the log.
    Fold {
        session: String,
        #[command(flatten)]
        target: Target,
        #[arg(long)]
        summary: Option<String>,
        #[command(flatten)]
        model: super::run::ModelArgs,
        #[arg(long)]
        json: bool,
    },
    /// Keep a key segment prominent: a verbatim copy is appended at the end of the context
    /// (the cached prompt prefix is untouched).
    Pin {
        session: String,
        id: u64,
        #[arg(long)]
        json: bool,
    },
    /// Take segments off the context. Refused without --force when later messages refer to them.
    Delete {
        session: String,
        #[command(flatten)]
        target: Target,
        #[arg(long)]
        force: bool,
        #[arg(long)]
        json: bool,
    },
    /// Put new text in the place of segments.
    Replace {
        session: String,
        #[command(flatten)]
        target: Target,
        #[arg(long)]
        text: String,
        #[arg(long)]
        json: bool,
    },
    /// Apply several ops as one batch: a JSON array like
    /// `[{"op":"fold","id":12,"end":14,"summary":"..."},{"op":"pin","id":3}]`.
    Apply {
        session: String,
        #[arg(long, value_name = "JSON")]
        ops: String,
        #[arg(long)]
        force: bool,
        #[arg(long)]
        json: bool,
    },
    /// Restore the context as it was at a snapshot (appended as a `restore`; nothing is lost,
    /// and the rollback itself can be rolled back).
    Rollback {
        session: String,
        snapshot: u64,
        #[arg(long)]
        json: bool,
    },
    /// The audit trail: every edit batch with its time, ops, targets, before/after, snapshot
    /// and result.
    History {
        session: String,
        #[arg(long)]
        json: bool,
    },
}

/// The segments an op targets: `ID`, or `ID --end ID` for a range.
#[derive(Debug, Args)]
pub struct Target {
    /// Segment id (as `context show` lists it).
    pub id: u64,
    /// Last segment of a range (inclusive).
    #[arg(long, value_name = "ID")]
    pub end: Option<u64>,
}

pub fn run(store: &Store, command: ContextCommand) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match command {
        ContextCommand::Show {
            session,
            json,
            query,
            role,
            sort,
            preview,
        } => {
            let history = store.load(&session)?;
            let query = Query {
                keyword: query,
                role,
                sort_by_tokens: sort.as_deref() == Some("tokens"),
                preview_chars: preview,
            };
            let view = context_editor::view(&history, &query)?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&view)?)?;
            } else {
                show_human(&view, &mut out)?;
            }
        }
        ContextCommand::Fold {
            session,
            target,
            summary,
            model,
            json,
        } => {
            let mut ops = vec![EditOp::Fold {
                id: target.id,
                end: target.end,
                summary,
            }];
            write_summaries(store, &session, &mut ops, &model)?;
            return edit(store, &session, &ops, false, json);
        }
        ContextCommand::Pin { session, id, json } => {
            return edit(store, &session, &[EditOp::Pin { id }], false, json);
        }
        ContextCommand::Delete {
            session,
            target,
            force,
            json,
        } => {
            let op = EditOp::Delete {
                id: target.id,
                end: target.end,
            };
            return edit(store, &session, &[op], force, json);
        }
        ContextCommand::Replace {
            session,
            target,
            text,
            json,
        } => {
            let op = EditOp::Replace {
                id: target.id,
                end: target.end,
                text,
            };
            return edit(store, &session, &[op], false, json);
        }
        ContextCommand::Apply {
            session,
            ops,
            force,
            json,
        } => {
            let mut ops: Vec<EditOp> = serde_json::from_str(&ops).context(
                "--ops must be a JSON array of {\"op\": fold|pin|delete|replace, \"id\": N, ...}",
            )?;
            write_summaries(store, &session, &mut ops, &super::run::ModelArgs::default())?;
            return edit(store, &session, &ops, force, json);
        }
        ContextCommand::Rollback {
            session,
            snapshot,
            json,
        } => {
            let mut opened = store.open(&session, Durability::Sync)?;
            let options = BatchOptions::between_turns(opened.history(), "cli", false);
            let report = rollback(&mut opened, snapshot, &options)?;
            print_report(&report, opened.id(), json, &mut out)?;
        }
        ContextCommand::History { session, json } => {
            let history = store.load(&session)?;
            let records = edit_history(&history);
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&records)?)?;
            } else if records.is_empty() {
                writeln!(out, "no context edits in this session")?;
            } else {
                for record in records {
                    writeln!(
                        out,
                        "{}  {}  by {}  snapshot {}  → {}{}",
                        record.ts,
                        record.edit_id,
                        record.actor,
                        record
                            .snapshot
                            .map_or("-".to_owned(), |snapshot| snapshot.to_string()),
                        record.outcome,
                        record
                            .reason
                            .as_deref()
                            .map(|reason| format!(": {reason}"))
                            .unwrap_or_default()
                    )?;
                    for (index, op) in record.ops.iter().enumerate() {
                        let target = op
                            .target
                            .iter()
                            .map(|seq| format!("#{seq}"))
                            .collect::<Vec<_>>()
                            .join(" ");
                        writeln!(out, "    {} {target}", op.op)?;
                        writeln!(out, "      before: {}", op.before)?;
                        if let Some(result) = record.results.get(index) {
                            writeln!(out, "      after:  #{} {}", result.seq, result.after)?;
                        }
                    }
                    if let (Some(before), Some(after)) = (record.tokens_before, record.tokens_after)
                    {
                        writeln!(out, "    tokens ~{before} → ~{after}")?;
                    }
                }
            }
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Have the session's model write the summaries of folds that have none, when a model is
/// configured; otherwise the fold gets a mechanical summary.
fn write_summaries(
    store: &Store,
    session: &str,
    ops: &mut [EditOp],
    model: &super::run::ModelArgs,
) -> anyhow::Result<()> {
    let missing = ops
        .iter()
        .any(|op| matches!(op, EditOp::Fold { summary: None, .. }));
    if !missing {
        return Ok(());
    }
    let config = crate::config::Config::load()?;
    let history = store.load(session)?;
    let Some(provider) = super::run::provider_config(&config, model, None)? else {
        tracing::info!("no model is configured: folds without --summary get a mechanical summary");
        return Ok(());
    };
    let provider = crate::llm::provider::Provider::new(provider)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let cancel = tokio_util::sync::CancellationToken::new();
    runtime.block_on(write_fold_summaries(&history, ops, &provider, &cancel))
}

/// Apply one batch and report it; a delete that needs confirmation exits with
/// [`EXIT_NEEDS_CONFIRMATION`].
fn edit(
    store: &Store,
    session: &str,
    ops: &[EditOp],
    force: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let mut opened = store.open(session, Durability::Sync)?;
    let options = BatchOptions::between_turns(opened.history(), "cli", force);
    let mut out = std::io::stdout().lock();
    match apply_batch(&mut opened, ops, &options) {
        Ok(report) => {
            print_report(&report, opened.id(), json, &mut out)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => match error.downcast_ref::<NeedsConfirmation>() {
            Some(question) => {
                if json {
                    writeln!(
                        out,
                        "{}",
                        json!({"needs_confirmation": true, "message": question.to_string(), "referenced": question.referenced})
                    )?;
                }
                eprintln!("agent-lsp: {question}");
                Ok(ExitCode::from(EXIT_NEEDS_CONFIRMATION))
            }
            None => Err(error),
        },
    }
}

fn print_report(
    report: &BatchReport,
    session: &str,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(report)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "{} applied: generation {} (snapshot {}), ~{} → ~{} tokens",
        report.edit_id,
        report.generation,
        report.snapshot,
        report.tokens_before,
        report.tokens_after
    )?;
    for result in &report.results {
        writeln!(out, "  {} → #{} {}", result.op, result.seq, result.after)?;
    }
    let short = &session[session.len().saturating_sub(4)..];
    writeln!(
        out,
        "undo with: agent-lsp context rollback {short} {}",
        report.snapshot
    )?;
    Ok(())
}

fn show_human(view: &context_editor::View, out: &mut impl Write) -> anyhow::Result<()> {
    let totals = &view.totals;
    let roles = totals
        .by_role
        .iter()
        .map(|(role, totals)| format!("{role} {} (~{})", totals.segments, totals.tokens))
        .collect::<Vec<_>>()
        .join(", ");
    writeln!(
        out,
        "generation {}: {} segments, ~{} tokens ({roles})",
        totals.generation, totals.segments, totals.tokens
    )?;
    writeln!(
        out,
        "{:>6}  {:<9} {:>7}  {:<3} {:<36} preview",
        "id", "role", "tokens", "ref", "source"
    )?;
    for segment in &view.segments {
        writeln!(
            out,
            "{:>6}  {:<9} {:>7}  {:<3} {:<36} {}",
            segment.id,
            segment.role,
            segment.tokens,
            if segment.referenced { "yes" } else { "" },
            context_editor::preview(&segment.source, 36),
            segment.preview
        )?;
    }
    Ok(())
}
