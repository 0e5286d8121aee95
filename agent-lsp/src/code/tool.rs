//! The `run_code` tool: a program in an engine process of its own (`process.rs`), its tool
//! calls answered here, on the session's runtime, one at a time.

use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::Deserialize;
use serde_json::json;

use super::engine::{Limits, Stop};
use super::process::{self, Outcome};
use super::{CodeModeSettings, TOOL};
use crate::plugin::outcomes::ToolOutput;
use crate::plugin::tool::ToolContext;
use crate::plugin::typed::TypedTool;

/// Time beyond the program's own deadline for a call running then to end once cancelled; the
/// program itself is killed [`process::KILL_GRACE`] after its deadline.
const GRACE: Duration = Duration::from_secs(5);

/// The arguments of `run_code`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunCodeArgs {
    /// The program: the body of an async function (top-level `await` and `return` work).
    code: String,
    /// Less wall time than the default.
    #[serde(default)]
    #[schemars(range(min = 1))]
    timeout_secs: Option<u64>,
}

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

impl TypedTool for RunCode {
    type Args = RunCodeArgs;

    fn name(&self) -> &str {
        TOOL
    }

    fn description(&self) -> String {
        let s = &self.settings;
        format!(
            "Run a JavaScript program that calls this session's tools itself, and get what it prints and returns. Use it for work of many lookups (a loop over search hits, a join of several answers): only the program's output enters the conversation. `await tools.NAME({{...}})` calls a tool with the arguments its schema names and gives its result text; a failed call throws an Error with the tool's message. `console.log(...)` prints; a returned value is shown as JSON. There is no require/import, no fetch, no file, process or clock access except through tools. Limits: {} s, {} MiB, {} tool calls, {} bytes of output (head and tail kept).",
            s.wall_secs, s.memory_mb, s.max_calls, s.output_bytes
        )
    }

    fn read_only(&self) -> bool {
        // Its calls may write; each is guarded on its own.
        false
    }

    fn calls_tools(&self) -> bool {
        true
    }

    fn timeout(&self, args: &RunCodeArgs) -> Option<Duration> {
        Some(self.limits(args.timeout_secs).wall + GRACE)
    }

    fn run(&self, ctx: ToolContext, args: RunCodeArgs) -> BoxFuture<'static, ToolOutput> {
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
            let outcome = process::run(args.code, names, limits, calls, ctx.cancel).await;
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
                "the program asked for more than {} tool calls, run_code's limit, and was stopped at once",
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
