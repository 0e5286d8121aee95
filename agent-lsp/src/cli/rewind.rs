//! `agent-lsp rewind`: take back what a session's turns did to the files and to the
//! conversation, or give the last rewind back (see `crate::rewind`).

use std::io::Write;
use std::process::ExitCode;

use clap::Args;

use crate::rewind::{Place, Report, Request};
use crate::session::event::RewindScope;
use crate::session::log::Durability;
use crate::session::store::Store;
use crate::snapshots::Snapshots;

/// Exit code when conflicts were kept: the user changed files the rewind would overwrite.
pub const EXIT_CONFLICTS_KEPT: u8 = 3;

#[derive(Debug, Args)]
pub struct RewindArgs {
    /// Session id, a unique prefix or suffix of one, or `last`.
    session: String,
    /// The first turn to take back; every later turn goes too.
    #[arg(long, value_name = "N", conflicts_with_all = ["last", "undo"])]
    turn: Option<u32>,
    /// The last turn not taken back yet (the default).
    #[arg(long)]
    last: bool,
    /// Only the files.
    #[arg(long, conflicts_with_all = ["context", "both"])]
    files: bool,
    /// Only the conversation.
    #[arg(long, conflicts_with = "both")]
    context: bool,
    /// The files and the conversation (the default).
    #[arg(long)]
    both: bool,
    /// Show what would change, with a diff of every conflict; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Overwrite files you changed after the turn too (their text is kept for `--undo`).
    #[arg(long)]
    force: bool,
    /// Give back what the last rewind took back.
    #[arg(long)]
    undo: bool,
    #[arg(long)]
    json: bool,
}

pub fn run(store: &Store, args: RewindArgs) -> anyhow::Result<ExitCode> {
    let id = store.resolve(&args.session)?;
    let mut session = store.open(&id, Durability::Sync).map_err(|error| {
        error.context(format!(
            "session {id} cannot be opened for writing; if an editor holds it, rewind from the editor (\"Agent: Rewind Last Turn…\", :AgentRewind)"
        ))
    })?;
    let snapshots = Snapshots::for_state_dir(
        store.workspace(),
        store.workspace_dir(),
        crate::config::Config::load()?.checkpoints,
    );
    let place = Place {
        snapshots: &snapshots,
        buffers: None,
    };
    let scope = match (args.files, args.context) {
        (true, _) => RewindScope::Files,
        (_, true) => RewindScope::Context,
        _ => RewindScope::Both,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(async {
        if args.undo {
            crate::rewind::undo(&mut session, place, args.dry_run).await
        } else {
            let request = Request {
                turn: args.turn,
                scope,
                dry_run: args.dry_run,
                force: args.force,
            };
            crate::rewind::rewind(&mut session, place, &request).await
        }
    })?;
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        print_report(&mut out, &report, &id, args.undo)?;
    }
    Ok(if report.kept_conflicts() {
        ExitCode::from(EXIT_CONFLICTS_KEPT)
    } else {
        ExitCode::SUCCESS
    })
}

fn print_report(
    out: &mut impl Write,
    report: &Report,
    session: &str,
    undo: bool,
) -> anyhow::Result<()> {
    let what = if undo {
        "undo of the rewind of"
    } else {
        "rewind of"
    };
    let turns = if report.turn == report.last_turn {
        format!("turn {}", report.turn)
    } else {
        format!("turns {}–{}", report.turn, report.last_turn)
    };
    match report.rewind_id.as_deref() {
        Some(id) => writeln!(out, "{id}: {what} {turns}: {}", report.outcome)?,
        None => writeln!(out, "dry run: {what} {turns}; nothing was changed")?,
    }
    let verb = if report.rewind_id.is_some() {
        "restored"
    } else {
        "would restore"
    };
    for (path, action) in &report.plan {
        let via = report
            .restored
            .iter()
            .find(|(restored, _)| restored == path)
            .map(|(_, via)| format!(" (through the {via})"))
            .unwrap_or_default();
        writeln!(out, "  {verb:>13} {path}: {action}{via}")?;
    }
    for conflict in &report.conflicts {
        writeln!(out, "  {:>13} {}: {}", "kept", conflict.path, conflict.why)?;
        if report.rewind_id.is_none() {
            for line in conflict.diff.lines() {
                writeln!(out, "      {line}")?;
            }
        }
    }
    for path in &report.yours {
        writeln!(out, "  {:>13} {path}: yours, untouched", "left")?;
    }
    if let Some(edit) = &report.context_edit {
        writeln!(out, "  conversation: {edit}")?;
    }
    if report.kept_conflicts() {
        writeln!(
            out,
            "kept {} path(s) you changed; `--dry-run` shows the diffs, `--force` overwrites them (and `--undo` brings them back)",
            report.conflicts.len()
        )?;
    } else if report.rewind_id.is_some() && !undo {
        writeln!(out, "`agent-lsp rewind {session} --undo` gives it back")?;
    }
    Ok(())
}
