//! `agent-lsp completions stats`: the summary of the workspace's completion log (inline
//! completions under `serve`, `crate::completion::log`): how many, how fast, how many were
//! cancelled and how many came from the cache.

use std::io::Write;
use std::process::ExitCode;

use clap::Subcommand;

use crate::completion::log::{CompletionLog, Stats};
use crate::session::store::Store;

#[derive(Debug, Subcommand)]
pub enum CompletionsCommand {
    /// Count, p50/p95 latency and server overhead, cancelled and cache-hit shares.
    Stats {
        #[arg(long)]
        json: bool,
    },
}

pub fn run(store: &Store, command: CompletionsCommand) -> anyhow::Result<ExitCode> {
    let CompletionsCommand::Stats { json } = command;
    let log = CompletionLog::in_dir(store.workspace_dir());
    let stats = Stats::of(&log.read()?);
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&stats)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if stats.count == 0 {
        writeln!(
            out,
            "no inline completions recorded for {} ({})",
            store.workspace().display(),
            log.path().display()
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let percent = |share: f64| format!("{:.1}%", share * 100.0);
    writeln!(out, "completions       {}", stats.count)?;
    writeln!(out, "suggested         {}", stats.suggested)?;
    writeln!(out, "failed            {}", stats.failed)?;
    writeln!(
        out,
        "latency           p50 {:.1} ms, p95 {:.1} ms",
        stats.latency_p50_ms, stats.latency_p95_ms
    )?;
    writeln!(
        out,
        "server overhead   p50 {:.1} ms, p95 {:.1} ms (model time and debounce excluded)",
        stats.overhead_p50_ms, stats.overhead_p95_ms
    )?;
    writeln!(out, "cancelled         {}", percent(stats.cancelled_share))?;
    writeln!(out, "from the cache    {}", percent(stats.cache_hit_share))?;
    writeln!(out, "log               {}", log.path().display())?;
    Ok(ExitCode::SUCCESS)
}
