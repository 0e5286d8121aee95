//! The `run_code` tool: a program on an engine thread of its own, its tool calls answered
//! here, on the session's runtime, one at a time.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::engine::{self, Limits, Outcome, Stop};
use super::{CodeModeSettings, TOOL};
use crate::llm::ToolDef;
use crate::tools::{Tool, ToolContext, ToolOutput, parse_args};

/// Time beyond the program's own deadline for its last call to end and its result to be made.
const GRACE: Duration = Duration::from_secs(15);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    code: String,
    #[serde(default)]
    timeout_secs: Option<u64>,
}

/// A tool call the program asks for, and where its result goes.
type Request = (String, String, oneshot::Sender<Result<String, String>>);

pub struct RunCode {
    settings: CodeModeSettings,
}

impl RunCode {
    pub fn new(settings: CodeModeSettings) -> RunCode {
        RunCode { settings }
    }

    fn limits(&self, timeout_secs: Option<u64>) -> Limits {
        let wall = timeout_secs
            .unwrap_or(self.settings.wall_secs)
            .clamp(1, self.settings.wall_secs);
        Limits {
            wall: Duration::from_secs(wall),
            memory_bytes: (self.settings.memory_mb * 1024 * 1024) as usize,
            max_calls: self.settings.max_calls,
            output_bytes: self.settings.output_bytes,
        }
    }
}

impl Tool for RunCode {
    fn def(&self) -> ToolDef {
        let s = &self.settings;
        ToolDef {
            name: TOOL.into(),
            description: format!(
                "Run a JavaScript program that calls this session's tools itself, and get what it prints and returns. Use it for work of many lookups (a loop over search hits, a join of several answers): only the program's output enters the conversation. `await tools.NAME({{...}})` calls a tool with the arguments its schema names and gives its result text; a failed call throws an Error with the tool's message. `console.log(...)` prints; a returned value is shown as JSON. There is no require/import, no fetch, no file, process or clock access except through tools. Limits: {} s, {} MiB, {} tool calls, {} bytes of output (head and tail kept).",
                s.wall_secs, s.memory_mb, s.max_calls, s.output_bytes
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "code": {"type": "string", "description": "The program: the body of an async function (top-level `await` and `return` work)."},
                    "timeout_secs": {"type": "integer", "minimum": 1, "description": "Less wall time than the default."}
                },
                "required": ["code"],
                "additionalProperties": false
            }),
        }
    }

    fn read_only(&self) -> bool {
        // Its calls may write; each is guarded on its own.
        false
    }

    fn calls_tools(&self) -> bool {
        true
    }

    fn timeout(&self, args: &Value) -> Option<Duration> {
        let asked = args.get("timeout_secs").and_then(Value::as_u64);
        Some(self.limits(asked).wall + GRACE)
    }

    fn run(&self, ctx: ToolContext, args: Value) -> BoxFuture<'static, ToolOutput> {
        let args = match parse_args::<Args>(TOOL, args) {
            Ok(args) => args,
            Err(output) => return Box::pin(async move { output }),
        };
        let limits = self.limits(args.timeout_secs);
        Box::pin(async move {
            let Some(calls) = ctx.calls.clone() else {
                return ToolOutput::error(
                    "`run_code` needs the session's tools, and has none here",
                );
            };
            let names = calls
                .catalog()
                .into_iter()
                .map(|def| def.name)
                .collect::<Vec<_>>();
            let stop = Arc::new(AtomicBool::new(false));
            let (requests, mut asked) = mpsc::channel::<Request>(1);
            let (done, outcome) = oneshot::channel::<Outcome>();
            let program = args.code;
            let thread_stop = stop.clone();
            let started = std::thread::Builder::new()
                .name("run_code".into())
                .stack_size(16 * 1024 * 1024)
                .spawn(move || {
                    let call: engine::CallTool = Box::new(move |name: &str, arguments: String| {
                        let (reply, result) = oneshot::channel();
                        if requests
                            .blocking_send((name.to_owned(), arguments, reply))
                            .is_err()
                        {
                            return Err("the program was stopped".into());
                        }
                        result
                            .blocking_recv()
                            .unwrap_or_else(|_| Err("the program was stopped".into()))
                    });
                    let _ = done.send(engine::run(&program, &names, limits, call, thread_stop));
                });
            if let Err(error) = started {
                return ToolOutput::error(format!("the program could not start: {error}"));
            }
            // Answer the program's calls until it ends; at its deadline or when the turn is
            // cancelled, stop it (a call running then is cancelled through the call's token,
            // so it still gets its `subtool/result`).
            let deadline = tokio::time::Instant::now() + limits.wall;
            let mut ended_by: Option<Stop> = None;
            loop {
                tokio::select! {
                    request = asked.recv() => {
                        let Some((name, arguments, reply)) = request else { break };
                        if ended_by.is_some() {
                            let _ = reply.send(Err("the program was stopped".into()));
                            continue;
                        }
                        let output = calls.call(&name, arguments).await;
                        let _ = reply.send(if output.is_error { Err(output.text) } else { Ok(output.text) });
                    }
                    () = tokio::time::sleep_until(deadline), if ended_by.is_none() => {
                        ended_by = Some(Stop::TimeLimit);
                        stop.store(true, Ordering::Relaxed);
                        ctx.cancel.cancel();
                    }
                    () = ctx.cancel.cancelled(), if ended_by.is_none() => {
                        ended_by = Some(Stop::Cancelled);
                        stop.store(true, Ordering::Relaxed);
                    }
                }
            }
            let mut outcome = outcome.await.unwrap_or_else(|_| Outcome {
                output: String::new(),
                output_cut: 0,
                value: None,
                stop: Some(Stop::Engine(
                    "the engine thread ended without a result".into(),
                )),
                calls: 0,
            });
            if let (Some(reason), Some(_)) = (ended_by, &outcome.stop) {
                outcome.stop = Some(reason);
            }
            render(outcome, limits)
        })
    }
}

/// The call's result: the output and the returned value, or what stopped the program and
/// what it printed until then.
fn render(outcome: Outcome, limits: Limits) -> ToolOutput {
    let mut text = outcome.output.clone();
    if let Some(value) = &outcome.value {
        text.push_str(&format!("→ returned {value}\n"));
    }
    if text.is_empty() && outcome.stop.is_none() {
        text.push_str("(the program printed nothing and returned nothing)\n");
    }
    if outcome.output_cut > 0 {
        text.push_str(&format!(
            "(the output was over {} bytes: {} bytes were cut from its middle)\n",
            limits.output_bytes, outcome.output_cut
        ));
    }
    let meta = json!({"calls": outcome.calls, "output_cut": outcome.output_cut});
    let Some(stop) = outcome.stop else {
        return ToolOutput::ok(text).with_meta("run_code", meta);
    };
    let (kind, why) = match &stop {
        Stop::Exception { message, line } => (
            "exception",
            match line {
                Some(line) => format!("the program threw at line {line}: {message}"),
                None => format!("the program threw: {message}"),
            },
        ),
        Stop::TimeLimit => (
            "time_limit",
            format!(
                "the program ran past its {} s and was stopped",
                limits.wall.as_secs()
            ),
        ),
        Stop::MemoryLimit => (
            "memory_limit",
            format!(
                "the program used more than its {} MiB of memory and was stopped",
                limits.memory_bytes / (1024 * 1024)
            ),
        ),
        Stop::CallLimit => (
            "call_limit",
            format!(
                "the program made more than {} tool calls and was stopped",
                limits.max_calls
            ),
        ),
        Stop::Cancelled => (
            "cancelled",
            "the turn was cancelled; the program was stopped".into(),
        ),
        Stop::Engine(error) => ("engine", format!("the JavaScript engine failed: {error}")),
    };
    let printed = if text.is_empty() {
        String::new()
    } else {
        format!("\n\nWhat it printed until then:\n{text}")
    };
    ToolOutput::error(format!(
        "{why} (after {} tool calls){printed}",
        outcome.calls
    ))
    .with_meta("run_code", meta)
    .with_meta("stopped", kind)
}
