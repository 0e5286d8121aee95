//! The parent's side of the engine process: start `agent-lsp __run-code` for one program,
//! answer its tool calls on the session's runtime, keep what it prints, and kill it when it
//! must stop: at its deadline plus [`KILL_GRACE`], when the turn is cancelled, and at its call
//! past the limit. Killing is the only stop that always works: QuickJS polls its interrupt
//! handler in the bytecode loop only, so a native loop such as `Array.prototype.join` over
//! 2^32-1 holes runs on past any flag, and a thread cannot be killed.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::engine::{Limits, Stop};
use super::output::Output;
use super::wire::{FromEngine, ToEngine};
use crate::plugin::outcomes::ToolOutput;
use crate::plugin::tool::NestedCalls;

/// The hidden subcommand that runs an engine process.
pub const SUBCOMMAND: &str = "__run-code";

/// Time past the deadline for the engine's interrupt handler to end the program itself (and
/// report what it returned), before the process is killed.
pub const KILL_GRACE: Duration = Duration::from_millis(300);

/// The stderr of an engine process kept for the error when it dies without a result.
const STDERR_BYTES: usize = 2048;

/// How a program ended: what it printed (kept here, so a killed program's lines survive),
/// what it returned, and why it stopped.
#[derive(Debug)]
pub struct Outcome {
    pub output: String,
    pub output_cut: usize,
    pub value: Option<String>,
    pub stop: Option<Stop>,
    pub calls: u32,
}

/// Run `program` in an engine process of its own, its calls made through `calls`, until it
/// ends or is stopped; `cancel` is the `run_code` call's token (the nested calls' too).
pub async fn run(
    program: String,
    tools: Vec<String>,
    limits: Limits,
    calls: Arc<dyn NestedCalls>,
    cancel: CancellationToken,
) -> Outcome {
    let mut output = Output::new(limits.output_bytes);
    let deadline = Instant::now() + limits.wall;
    let mut engine = match Engine::start(program, tools, limits, deadline).await {
        Ok(engine) => engine,
        Err(error) => {
            return Outcome {
                output: String::new(),
                output_cut: 0,
                value: None,
                stop: Some(Stop::Engine(format!("{error:#}"))),
                calls: 0,
            };
        }
    };
    let mut made = 0u32;
    // Why the program is being stopped from here, once it is.
    let mut stopping: Option<Stop> = None;
    let mut kill_at: Option<Instant> = None;
    let mut pending: Option<BoxFuture<'static, ToolOutput>> = None;
    let ended = loop {
        tokio::select! {
            answered = async { pending.as_mut().expect("guarded").await }, if pending.is_some() => {
                pending = None;
                if stopping.is_some() {
                    break None;
                }
                // A failed call's text is `error: …`; the program's Error says `Error: …`
                // already.
                let result = if answered.is_error {
                    Err(answered.text.strip_prefix("error: ").unwrap_or(&answered.text).to_owned())
                } else {
                    Ok(answered.text)
                };
                if engine.send(&ToEngine::Answer { result }).await.is_err() {
                    // It died meanwhile; its stdout's end says so next.
                    continue;
                }
            }
            line = engine.lines.next_line(), if pending.is_none() => {
                let Ok(Some(line)) = line else { break None };
                match serde_json::from_str::<FromEngine>(&line) {
                    Ok(FromEngine::Print { line, cut }) => output.push(&line, cut),
                    Ok(FromEngine::Call { .. }) if stopping.is_some() => break None,
                    Ok(FromEngine::Call { .. }) if made >= limits.max_calls => {
                        stopping = Some(Stop::CallLimit);
                        break None;
                    }
                    Ok(FromEngine::Call { name, arguments }) => {
                        made += 1;
                        pending = Some(calls.call(&name, arguments));
                    }
                    Ok(FromEngine::Ended(ended)) => break Some(ended),
                    Err(error) => {
                        let why = format!("the engine process sent a line that is not a message: {error}");
                        stopping.get_or_insert(Stop::Engine(why));
                        break None;
                    }
                }
            }
            () = tokio::time::sleep_until(deadline), if stopping.is_none() => {
                stopping = Some(Stop::TimeLimit);
                kill_at = Some(deadline + KILL_GRACE);
                // A call running now is cancelled through its token, so it still gets its
                // `subtool/result`.
                cancel.cancel();
            }
            () = tokio::time::sleep_until(kill_at.unwrap_or(deadline)),
                if kill_at.is_some() && pending.is_none() =>
            {
                break None;
            }
            () = cancel.cancelled(), if stopping.is_none() => {
                stopping = Some(Stop::Cancelled);
                if pending.is_none() {
                    break None;
                }
            }
        }
    };
    let status = engine.kill().await;
    let stop = match (
        ended.as_ref().and_then(|ended| ended.stop.clone()),
        stopping,
    ) {
        // The program ended on its own, or its interrupt handler ended it for the reason
        // it is being stopped from here.
        (None, _) if ended.is_some() => None,
        (Some(_), Some(reason)) => Some(reason),
        (Some(own), None) => Some(own),
        (None, Some(reason)) => Some(reason),
        (None, None) => Some(Stop::Engine(format!(
            "the engine process ended without a result ({status}){}",
            engine.stderr().await
        ))),
    };
    Outcome {
        output: output.text(),
        output_cut: output.cut,
        value: ended.and_then(|ended| ended.value),
        stop,
        calls: made,
    }
}

/// One running engine process.
struct Engine {
    child: Child,
    stdin: ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    stderr: tokio::task::JoinHandle<String>,
}

impl Engine {
    async fn start(
        program: String,
        tools: Vec<String>,
        limits: Limits,
        deadline: Instant,
    ) -> anyhow::Result<Engine> {
        let mut child = Command::new(executable()?)
            .arg(SUBCOMMAND)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| anyhow::anyhow!("failed to start the engine process: {error}"))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        // Its stderr is read all along (so it never blocks on a full pipe) and its end kept.
        let stderr = tokio::spawn(async move {
            let mut kept = Vec::new();
            let mut buffer = [0u8; 4096];
            while let Ok(read @ 1..) = stderr.read(&mut buffer).await {
                kept.extend_from_slice(&buffer[..read]);
                if kept.len() > STDERR_BYTES {
                    kept.drain(..kept.len() - STDERR_BYTES);
                }
            }
            String::from_utf8_lossy(&kept).trim().to_owned()
        });
        let mut engine = Engine {
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
            stderr,
        };
        let limits = Limits {
            // Its clock starts when it reads this; the wall time counts from here.
            wall: deadline.saturating_duration_since(Instant::now()),
            ..limits
        };
        let start = ToEngine::Start {
            program,
            tools,
            limits,
            parent: std::process::id(),
        };
        engine
            .send(&start)
            .await
            .map_err(|error| anyhow::anyhow!("failed to send the program: {error}"))?;
        Ok(engine)
    }

    async fn send(&mut self, message: &ToEngine) -> std::io::Result<()> {
        self.stdin.write_all(message.line().as_bytes()).await?;
        self.stdin.flush().await
    }

    /// Kill it (whether or not it already ended) and reap it.
    async fn kill(&mut self) -> String {
        let _ = self.child.start_kill();
        match self.child.wait().await {
            Ok(status) => status.to_string(),
            Err(error) => format!("its status is unknown: {error}"),
        }
    }

    /// What it wrote on stderr, as the end of an error message.
    async fn stderr(&mut self) -> String {
        let text = tokio::time::timeout(Duration::from_secs(1), &mut self.stderr)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        if text.is_empty() {
            String::new()
        } else {
            format!(": {text}")
        }
    }
}

/// This binary: `/proc/self/exe` runs it even after it was replaced on disk (an upgrade while
/// `serve` runs), where the path `current_exe` gives would run the new one or nothing.
fn executable() -> anyhow::Result<PathBuf> {
    let this = PathBuf::from("/proc/self/exe");
    if this.exists() {
        return Ok(this);
    }
    std::env::current_exe()
        .map_err(|error| anyhow::anyhow!("failed to find agent-lsp's own binary: {error}"))
}
