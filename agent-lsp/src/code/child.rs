//! The engine process: `agent-lsp __run-code`, started by `run_code` for one program. It reads
//! the program from stdin, runs it with [`engine::run`], sends each printed line and each tool
//! call on stdout, reads each call's result from stdin, and sends how the program ended.
//!
//! It must not outlive `agent-lsp`: a watcher thread ends it as soon as its parent is gone
//! (`PR_SET_PDEATHSIG` would fire when the *thread* that spawned it ends, and `run_code` runs
//! on whichever runtime thread polls it, so the watcher asks for the parent process instead).
//! A closed stdin while it waits for a result ends it too.

use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context;

use super::engine::{self, Host};
use super::output::cut_line;
use super::wire::{FromEngine, ToEngine};

/// How often the watcher looks for the parent.
const WATCH_EVERY: Duration = Duration::from_millis(100);

/// The exit code when the parent went away (as if killed by SIGKILL).
const ORPHANED: i32 = 137;

/// Run the program the parent sends on stdin, and exit.
pub fn run() -> anyhow::Result<ExitCode> {
    let mut input = std::io::stdin().lock();
    let mut first = String::new();
    input
        .read_line(&mut first)
        .context("failed to read the program")?;
    let ToEngine::Start {
        program,
        tools,
        limits,
        parent,
    } = serde_json::from_str(&first).context("failed to parse the program")?
    else {
        anyhow::bail!("the first message was not the program");
    };
    watch_parent(parent);
    drop(input);
    // The engine's stack limit is 512 KiB of QuickJS frames; the Rust and C frames around
    // them get room of their own.
    let runner = std::thread::Builder::new()
        .name("run_code".into())
        .stack_size(16 * 1024 * 1024)
        .spawn(move || {
            // The parent counts the calls and stops the program at the one past its limit,
            // so the engine's own count never refuses first.
            let limits = engine::Limits {
                max_calls: u32::MAX,
                ..limits
            };
            let host = Box::new(Pipe {
                output_bytes: limits.output_bytes,
            });
            let peak_before = peak_memory();
            let ended = engine::run(
                &program,
                &tools,
                limits,
                host,
                Arc::new(AtomicBool::new(false)),
            );
            out_of_memory(ended, peak_before, limits.memory_bytes)
        })
        .context("failed to start the engine thread")?;
    let ended = runner
        .join()
        .map_err(|_| anyhow::anyhow!("the engine thread panicked"))?;
    send(&FromEngine::Ended(ended));
    Ok(ExitCode::SUCCESS)
}

/// A thrown `null` is QuickJS out of memory when this process's peak memory grew by half the
/// limit or more while the program ran (a program throwing `null` itself does not).
fn out_of_memory(
    mut ended: engine::Ended,
    peak_before: Option<u64>,
    limit: usize,
) -> engine::Ended {
    let grew = peak_memory()
        .zip(peak_before)
        .map_or(0, |(after, before)| after.saturating_sub(before));
    if ended.stop.as_ref().is_some_and(engine::threw_null) && grew >= limit as u64 / 2 {
        ended.stop = Some(engine::Stop::MemoryLimit);
    }
    ended
}

/// The most memory this process had resident so far, in bytes (`VmHWM`).
fn peak_memory() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kib = line.split_whitespace().nth(1)?.parse::<u64>().ok()?;
    Some(kib * 1024)
}

/// End this process once `parent` is no longer its parent (it died, and this one was
/// adopted by init or a subreaper).
fn watch_parent(parent: u32) {
    if std::os::unix::process::parent_id() != parent {
        std::process::exit(ORPHANED);
    }
    let watcher = std::thread::Builder::new()
        .name("run_code parent".into())
        .spawn(move || {
            loop {
                std::thread::sleep(WATCH_EVERY);
                if std::os::unix::process::parent_id() != parent {
                    std::process::exit(ORPHANED);
                }
            }
        });
    if watcher.is_err() {
        std::process::exit(ORPHANED);
    }
}

/// Write one message to the parent; a parent that stopped reading is gone, so exit.
fn send(message: &FromEngine) {
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_all(message.line().as_bytes())
        .and_then(|()| stdout.flush());
    if written.is_err() {
        std::process::exit(ORPHANED);
    }
}

/// The engine's host in this process: everything goes to the parent.
struct Pipe {
    output_bytes: usize,
}

impl Host for Pipe {
    fn print(&mut self, line: &str) {
        // A line longer than the parent keeps is cut here, not sent whole.
        let (kept, cut) = cut_line(line, self.output_bytes);
        send(&FromEngine::Print {
            line: kept.to_owned(),
            cut,
        });
    }

    fn call(&mut self, name: &str, arguments: String) -> Result<String, String> {
        send(&FromEngine::Call {
            name: name.to_owned(),
            arguments,
        });
        let mut answer = String::new();
        match std::io::stdin().lock().read_line(&mut answer) {
            Ok(0) | Err(_) => std::process::exit(ORPHANED),
            Ok(_) => {}
        }
        match serde_json::from_str(&answer) {
            Ok(ToEngine::Answer { result }) => result,
            _ => Err("run_code's answer to the call could not be read".into()),
        }
    }
}
