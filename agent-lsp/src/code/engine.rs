//! The JavaScript engine of `run_code`: QuickJS (through `rquickjs`), one runtime for each
//! program, with nothing of the host in reach but two functions: `tools.NAME(args)`, which
//! blocks the program until the tool's result is back (so `await` of it is just a value, and a
//! program runs the same with or without `await`), and `console.log`. Both go to a [`Host`]:
//! in `agent-lsp`, the engine process's (`child.rs`), which asks the process that started it.
//!
//! What the program cannot do: no module loader (`require`, `import` fail), no `Date` or
//! `performance` (no clock), no `fetch`, file or process API (QuickJS has none of its own, and
//! the `std`/`os` modules of its command-line tool are not built in). Its limits: the runtime's
//! memory limit, a stack limit, a wall-time deadline checked by the interrupt handler (which
//! also stops it when `stop` is set), and a number of tool calls. Each ends the program with a
//! [`Stop`] saying which. The interrupt handler is polled by QuickJS's bytecode loop only, so a
//! native loop (`new Array(2**32-1).join('')`) runs past it: that is why `run_code` runs the
//! engine in a process of its own and kills it at the deadline (docs/decisions/0006).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rquickjs::context::intrinsic;
use rquickjs::function::Func;
use rquickjs::{Context, Ctx, Exception, Persistent, Promise, Runtime, Value};
use serde::{Deserialize, Serialize};

/// The name programs get in stack traces.
const FILE: &str = "run_code.js";

/// What one program may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    pub wall: Duration,
    pub memory_bytes: usize,
    pub max_calls: u32,
    /// What the program's output keeps; a thrown message keeps a quarter of it (at most
    /// [`MAX_MESSAGE_BYTES`]) and a returned value half, so neither can outgrow the output.
    pub output_bytes: usize,
}

impl Limits {
    /// The bytes a thrown message keeps.
    fn message_bytes(&self) -> usize {
        (self.output_bytes / 4).min(MAX_MESSAGE_BYTES)
    }
}

/// The most of a thrown message a program's result shows.
pub const MAX_MESSAGE_BYTES: usize = 4096;

/// Why a program stopped before it finished.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Stop {
    /// It threw (or a promise it awaited rejected): the message and the line in the program.
    Exception {
        message: String,
        line: Option<u32>,
    },
    TimeLimit,
    MemoryLimit,
    CallLimit,
    Cancelled,
    /// The engine itself failed (it could not start, or its process died).
    Engine(String),
}

/// How a program ended (what it printed went to the [`Host`] as it printed it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ended {
    /// What it returned, as JSON, when it returned something (capped to half the output).
    pub value: Option<String>,
    pub stop: Option<Stop>,
    /// Tool calls it made (failed ones included, the one refused by the limit not).
    pub calls: u32,
}

/// The program's side of the world: where its lines go and who runs its tool calls.
pub trait Host {
    /// A line the program printed.
    fn print(&mut self, line: &str);

    /// Run a tool for the program: blocks until the result is back. `Ok` is the result's
    /// text, `Err` the message of a failed call (the program gets it as an exception).
    fn call(&mut self, name: &str, arguments: String) -> Result<String, String>;
}

/// Run `program` with `tools` (the names `tools.NAME` has) until it ends, a limit or `stop`.
pub fn run(
    program: &str,
    tools: &[String],
    limits: Limits,
    host: Box<dyn Host>,
    stop: Arc<AtomicBool>,
) -> Ended {
    let state = Rc::new(RefCell::new(State {
        host,
        calls: 0,
        limit: None,
        halted: Rc::new(AtomicBool::new(false)),
        max_calls: limits.max_calls,
    }));
    let deadline = Instant::now() + limits.wall;
    let timed_out = Rc::new(AtomicBool::new(false));
    let halted = state.borrow().halted.clone();
    let result = (|| -> rquickjs::Result<Result<Option<String>, Stop>> {
        let runtime = Runtime::new()?;
        runtime.set_memory_limit(limits.memory_bytes);
        runtime.set_max_stack_size(512 * 1024);
        {
            let (stop, timed_out) = (stop.clone(), timed_out.clone());
            runtime.set_interrupt_handler(Some(Box::new(move || {
                if Instant::now() >= deadline {
                    timed_out.store(true, Ordering::Relaxed);
                }
                stop.load(Ordering::Relaxed)
                    || timed_out.load(Ordering::Relaxed)
                    || halted.load(Ordering::Relaxed)
            })));
        }
        // No `Date` and no `Performance`: a program has no clock of its own.
        let context = Context::custom::<(
            intrinsic::Eval,
            intrinsic::RegExpCompiler,
            intrinsic::RegExp,
            intrinsic::Json,
            intrinsic::Proxy,
            intrinsic::MapSet,
            intrinsic::TypedArrays,
            intrinsic::Promise,
            intrinsic::WeakRef,
        )>(&runtime)?;
        let started = context.with(
            |ctx| -> rquickjs::Result<Result<Persistent<Promise<'static>>, Stop>> {
                install(&ctx, tools, &state)?;
                // The program's first line is line 1 of the file: the wrapper opens on it.
                let source = format!("(async () => {{{program}\n}})()");
                let mut options = rquickjs::context::EvalOptions::default();
                options.filename = Some(FILE.into());
                options.strict = false;
                Ok(
                    match ctx.eval_with_options::<Promise<'_>, _>(source, options) {
                        Ok(promise) => Ok(Persistent::save(&ctx, promise)),
                        Err(error) => Err(exception(&ctx, error, limits)),
                    },
                )
            },
        )?;
        let promise = match started {
            Ok(promise) => promise,
            Err(stop) => return Ok(Err(stop)),
        };
        // The program's `await`s are jobs; a job that throws rejects the program's promise.
        while let Ok(true) = runtime.execute_pending_job() {}
        let value = context.with(|ctx| -> rquickjs::Result<Result<Option<String>, Stop>> {
            let promise = promise.restore(&ctx)?;
            Ok(match promise.result::<Value<'_>>() {
                None => Err(Stop::Exception {
                    message: "the program waited for something that never came (a promise that never settles)".into(),
                    line: None,
                }),
                Some(Ok(value)) if value.is_undefined() => Ok(None),
                Some(Ok(value)) => Ok(ctx
                    .json_stringify(value)?
                    .map(|text| text.to_string())
                    .transpose()?
                    .map(|text| cap(&text, limits.output_bytes / 2))),
                Some(Err(error)) => Err(exception(&ctx, error, limits)),
            })
        })?;
        Ok(value)
    })();
    let mut state = state.borrow_mut();
    let stop_reason = match result {
        Err(rquickjs::Error::Allocation) => Some(Stop::MemoryLimit),
        Err(error) => Some(Stop::Engine(error.to_string())),
        Ok(Ok(_)) if state.limit.is_some() => state.limit.take(),
        Ok(Ok(value)) => {
            return Ended {
                value,
                stop: None,
                calls: state.calls,
            };
        }
        Ok(Err(stop_error)) => Some(classify(
            stop_error,
            state.limit.take(),
            timed_out.load(Ordering::Relaxed),
            stop.load(Ordering::Relaxed),
        )),
    };
    Ended {
        value: None,
        stop: stop_reason,
        calls: state.calls,
    }
}

/// What ended a program that threw: a limit it hit (its exception is how QuickJS stops it)
/// or its own error.
fn classify(error: Stop, limit: Option<Stop>, timed_out: bool, cancelled: bool) -> Stop {
    if let Some(limit) = limit {
        return limit;
    }
    if cancelled {
        return Stop::Cancelled;
    }
    if timed_out {
        return Stop::TimeLimit;
    }
    match &error {
        Stop::Exception { message, .. } if message.contains("out of memory") => Stop::MemoryLimit,
        _ => error,
    }
}

/// The thrown value as a message and a line of the program.
fn exception(ctx: &Ctx<'_>, error: rquickjs::Error, limits: Limits) -> Stop {
    if !matches!(error, rquickjs::Error::Exception) {
        return Stop::Exception {
            message: cap(&error.to_string(), limits.message_bytes()),
            line: None,
        };
    }
    let thrown = ctx.catch();
    let (message, stack) = match thrown.as_exception() {
        Some(exception) => {
            let name = exception
                .get::<_, Option<String>>("name")
                .ok()
                .flatten()
                .unwrap_or_else(|| "Error".into());
            (
                format!("{name}: {}", exception.message().unwrap_or_default()),
                exception.stack().unwrap_or_default(),
            )
        }
        None => (
            format!(
                "uncaught {}",
                ctx.json_stringify(thrown)
                    .ok()
                    .flatten()
                    .and_then(|text| text.to_string().ok())
                    .unwrap_or_else(|| "value".into())
            ),
            String::new(),
        ),
    };
    Stop::Exception {
        message: cap(&message, limits.message_bytes()),
        line: line_of(&stack),
    }
}

/// What QuickJS throws when it cannot allocate even the error saying it is out of memory
/// (`JS_ThrowError2` throws `null` then), as `exception` words it. The runtime's memory is
/// freed again by the time the program's promise rejects, so only its process can tell this
/// apart from a program throwing `null` itself: by its peak memory (`child.rs`).
pub fn threw_null(stop: &Stop) -> bool {
    matches!(stop, Stop::Exception { message, line: None } if message == "uncaught null")
}

/// `text` kept to its first `max` bytes, saying how many were cut.
pub fn cap(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}[… {} more bytes cut]", &text[..end], text.len() - end)
}

/// The first line of the program a stack trace names (`run_code.js:7:12`).
fn line_of(stack: &str) -> Option<u32> {
    let at = stack.find(&format!("{FILE}:"))? + FILE.len() + 1;
    let digits = stack[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>();
    digits.parse().ok()
}

/// The program's side of the host.
struct State {
    host: Box<dyn Host>,
    calls: u32,
    /// A limit the program hit, kept even if it catches the exception that says so.
    limit: Option<Stop>,
    /// Set with `limit`: the interrupt handler then ends the program, caught or not.
    halted: Rc<AtomicBool>,
    max_calls: u32,
}

/// `tools` and `console`, and nothing else of the host.
fn install(ctx: &Ctx<'_>, tools: &[String], state: &Rc<RefCell<State>>) -> rquickjs::Result<()> {
    let globals = ctx.globals();
    {
        let state = state.clone();
        globals.set(
            "__print",
            Func::from(move |line: String| {
                state.borrow_mut().host.print(&line);
            }),
        )?;
    }
    {
        let state = state.clone();
        globals.set(
            "__call",
            Func::from(
                move |ctx: Ctx<'_>, name: String, args: String| -> rquickjs::Result<String> {
                    let mut held = state.borrow_mut();
                    if held.calls >= held.max_calls {
                        held.limit.get_or_insert(Stop::CallLimit);
                        held.halted.store(true, Ordering::Relaxed);
                        let max = held.max_calls;
                        drop(held);
                        return Err(Exception::throw_message(
                            &ctx,
                            &format!(
                                "the program made more than {max} tool calls, run_code's limit"
                            ),
                        ));
                    }
                    held.calls += 1;
                    // The call blocks this thread; nothing else of the program runs meanwhile.
                    let result = held.host.call(&name, args);
                    drop(held);
                    result.map_err(|text| Exception::throw_message(&ctx, &text))
                },
            ),
        )?;
    }
    let names = serde_json::to_string(tools).expect("names serialize");
    // `tools` is a Proxy so that a name it lacks says so and lists the ones it has, where a
    // plain object would give `undefined` and then "not a function" without the name.
    // `then` and `toJSON` stay undefined: `await tools` and printing `tools` look them up.
    ctx.eval::<(), _>(format!(
        r#""use strict";
(() => {{
  const call = globalThis.__call, print = globalThis.__print;
  delete globalThis.__call; delete globalThis.__print;
  const show = (v) => {{
    if (typeof v === "string") return v;
    try {{ const s = JSON.stringify(v); return s === undefined ? String(v) : s; }}
    catch (e) {{ return String(v); }}
  }};
  const log = (...values) => print(values.map(show).join(" "));
  globalThis.console = Object.freeze({{ log, info: log, warn: log, error: log, debug: log }});
  const names = {names};
  const tools = {{}};
  for (const name of names) tools[name] = (args = {{}}) => call(name, JSON.stringify(args));
  Object.freeze(tools);
  const available = names.length ? names.map((n) => "`" + n + "`").join(", ") : "none";
  globalThis.tools = new Proxy(tools, {{
    get(target, key) {{
      if (typeof key === "symbol" || key in target || key === "then" || key === "toJSON") return target[key];
      throw new TypeError("no tool named `" + key + "`; the tools are: " + available);
    }},
  }});
}})();"#
    ))?;
    Ok(())
}

#[cfg(test)]
mod tests;
