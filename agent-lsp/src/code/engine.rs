//! The JavaScript engine of `run_code`: QuickJS (through `rquickjs`), on a thread of its own
//! for each program, with nothing of the host in reach but two functions: `tools.NAME(args)`,
//! which blocks the program's thread until the tool's result is back (so `await` of it is
//! just a value, and a program runs the same with or without `await`), and `console.log`.
//!
//! What the program cannot do: no module loader (`require`, `import` fail), no `Date` or
//! `performance` (no clock), no `fetch`, file or process API (QuickJS has none of its own, and
//! the `std`/`os` modules of its command-line tool are not built in). Its limits: the runtime's
//! memory limit, a stack limit, a wall-time deadline checked by the interrupt handler (which
//! also stops it when the turn is cancelled), a number of tool calls, and an output buffer that
//! keeps the head and the tail. Each ends the program with a [`Stop`] saying which.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rquickjs::context::intrinsic;
use rquickjs::function::Func;
use rquickjs::{Context, Ctx, Exception, Persistent, Promise, Runtime, Value};

/// The name programs get in stack traces.
const FILE: &str = "run_code.js";

/// What one program may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub wall: Duration,
    pub memory_bytes: usize,
    pub max_calls: u32,
    pub output_bytes: usize,
}

/// Why a program stopped before it finished.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    /// The engine itself failed (it could not start).
    Engine(String),
}

/// How a program ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// What it printed, capped to its head and tail.
    pub output: String,
    /// Bytes of output cut from the middle.
    pub output_cut: usize,
    /// What it returned, as JSON, when it returned something.
    pub value: Option<String>,
    pub stop: Option<Stop>,
    /// Tool calls it made (refused ones included).
    pub calls: u32,
}

/// Runs a tool for the program: blocks until the result is back. `Ok` is the result's text,
/// `Err` the text of a failed call (the program gets it as an exception).
pub type CallTool = Box<dyn FnMut(&str, String) -> Result<String, String>>;

/// Run `program` with `tools` (the names `tools.NAME` has) until it ends, a limit or `stop`.
pub fn run(
    program: &str,
    tools: &[String],
    limits: Limits,
    call: CallTool,
    stop: Arc<AtomicBool>,
) -> Outcome {
    let state = Rc::new(RefCell::new(State {
        output: Output::new(limits.output_bytes),
        calls: 0,
        call,
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
                        Err(error) => Err(exception(&ctx, error)),
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
                    .transpose()?),
                Some(Err(error)) => Err(exception(&ctx, error)),
            })
        })?;
        Ok(value)
    })();
    let mut state = state.borrow_mut();
    let stop_reason = match result {
        Err(error) => Some(Stop::Engine(error.to_string())),
        Ok(Ok(_)) if state.limit.is_some() => state.limit.take(),
        Ok(Ok(value)) => {
            return Outcome {
                output: state.output.text(),
                output_cut: state.output.cut,
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
    Outcome {
        output: state.output.text(),
        output_cut: state.output.cut,
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
fn exception(ctx: &Ctx<'_>, error: rquickjs::Error) -> Stop {
    if !matches!(error, rquickjs::Error::Exception) {
        return Stop::Exception {
            message: error.to_string(),
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
        message,
        line: line_of(&stack),
    }
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
    output: Output,
    calls: u32,
    call: CallTool,
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
                state.borrow_mut().output.push(&line);
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
                    held.calls += 1;
                    if held.calls > held.max_calls {
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
                    // The call blocks this thread; nothing else of the program runs meanwhile.
                    let result = (held.call)(&name, args);
                    drop(held);
                    result.map_err(|text| Exception::throw_message(&ctx, &text))
                },
            ),
        )?;
    }
    let names = serde_json::to_string(tools).expect("names serialize");
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
  const tools = {{}};
  for (const name of {names}) tools[name] = (args = {{}}) => call(name, JSON.stringify(args));
  globalThis.tools = Object.freeze(tools);
}})();"#
    ))?;
    Ok(())
}

/// Printed lines, kept to `cap` bytes: the first half, and the last half as it moves.
struct Output {
    cap: usize,
    head: String,
    tail: std::collections::VecDeque<String>,
    tail_bytes: usize,
    cut: usize,
}

impl Output {
    fn new(cap: usize) -> Output {
        Output {
            cap,
            head: String::new(),
            tail: std::collections::VecDeque::new(),
            tail_bytes: 0,
            cut: 0,
        }
    }

    fn push(&mut self, line: &str) {
        let mut line = format!("{line}\n");
        // One line longer than half the buffer keeps its start.
        if line.len() > self.cap / 2 {
            let mut end = self.cap / 2;
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            self.cut += line.len() - end;
            line.truncate(end);
            line.push('\n');
        }
        if self.head.len() + line.len() <= self.cap / 2 && self.tail.is_empty() {
            self.head.push_str(&line);
            return;
        }
        self.tail_bytes += line.len();
        self.tail.push_back(line);
        while self.tail_bytes > self.cap / 2 && self.tail.len() > 1 {
            let dropped = self.tail.pop_front().expect("not empty");
            self.tail_bytes -= dropped.len();
            self.cut += dropped.len();
        }
    }

    fn text(&self) -> String {
        let tail = self.tail.iter().map(String::as_str).collect::<String>();
        if self.cut == 0 {
            return format!("{}{tail}", self.head);
        }
        format!(
            "{}[… {} bytes of output cut here …]\n{tail}",
            self.head, self.cut
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            wall: Duration::from_secs(5),
            memory_bytes: 32 * 1024 * 1024,
            max_calls: 20,
            output_bytes: 4096,
        }
    }

    /// A host whose only tool, `echo`, answers with its arguments, and `fail` with an error.
    fn run_with(program: &str, limits: Limits) -> Outcome {
        let call: CallTool = Box::new(|name: &str, args: String| match name {
            "echo" => Ok(args),
            _ => Err(format!("error: `{name}` refused")),
        });
        run(
            program,
            &["echo".into(), "fail".into()],
            limits,
            call,
            Arc::new(AtomicBool::new(false)),
        )
    }

    #[test]
    fn a_program_calls_tools_prints_and_returns() {
        let outcome = run_with(
            "const a = await tools.echo({n: 1});\nconsole.log('got', a, {k: [1, 2]});\nlet n = 0;\nfor (let i = 0; i < 3; i++) n += JSON.parse(tools.echo({n: i})).n;\nreturn {n};",
            limits(),
        );
        assert_eq!(outcome.stop, None, "{outcome:?}");
        assert_eq!(outcome.output, "got {\"n\":1} {\"k\":[1,2]}\n");
        assert_eq!(outcome.value.as_deref(), Some("{\"n\":3}"));
        assert_eq!(outcome.calls, 4);
    }

    #[test]
    fn errors_name_their_line_and_a_failed_call_throws() {
        let outcome = run_with("const x = 1;\n\nthrow new TypeError('bad ' + x);", limits());
        assert_eq!(
            outcome.stop,
            Some(Stop::Exception {
                message: "TypeError: bad 1".into(),
                line: Some(3)
            })
        );
        let outcome = run_with("await tools.fail({});", limits());
        match outcome.stop {
            Some(Stop::Exception { message, line }) => {
                assert!(message.contains("`fail` refused"), "{message}");
                assert_eq!(line, Some(1));
            }
            other => panic!("{other:?}"),
        }
        // A caught failure is the program's business.
        let outcome = run_with(
            "try { await tools.fail({}); } catch (e) { console.log('caught', e.message); }",
            limits(),
        );
        assert_eq!(outcome.stop, None);
        assert!(outcome.output.starts_with("caught error: `fail` refused"));
    }

    #[test]
    fn nothing_of_the_host_is_in_reach() {
        for (program, missing) in [
            ("require('fs')", "require"),
            ("await fetch('http://example.com')", "fetch"),
            ("Date.now()", "Date"),
            ("performance.now()", "performance"),
            ("std.open('/etc/passwd')", "std"),
            ("__call('echo', '{}')", "__call"),
        ] {
            let outcome = run_with(program, limits());
            match &outcome.stop {
                Some(Stop::Exception { message, .. }) => {
                    assert!(
                        message.starts_with("ReferenceError") && message.contains(missing),
                        "{program}: {message}"
                    );
                }
                other => panic!("{program}: {other:?}"),
            }
        }
        let outcome = run_with("await import('fs')", limits());
        assert!(outcome.stop.is_some(), "{outcome:?}");
    }

    #[test]
    fn each_limit_ends_the_program_and_says_which() {
        let short = Limits {
            wall: Duration::from_millis(300),
            ..limits()
        };
        let started = Instant::now();
        assert_eq!(
            run_with("while (true) {}", short).stop,
            Some(Stop::TimeLimit)
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(
            run_with(
                "const a = []; while (true) a.push('x'.repeat(1 << 20) + a.length);",
                limits()
            )
            .stop,
            Some(Stop::MemoryLimit)
        );
        let outcome = run_with(
            "for (let i = 0; i < 10000; i++) { try { await tools.echo({i}); } catch (e) {} }",
            limits(),
        );
        assert_eq!(outcome.stop, Some(Stop::CallLimit));
        // The 21st call is refused, and the program is ended at its next interrupt check
        // even though it catches the refusal.
        assert!(
            outcome.calls > 20 && outcome.calls < 10_000,
            "{}",
            outcome.calls
        );
        let outcome = run_with(
            "for (let i = 0; i < 10000; i++) console.log('line ' + i);",
            limits(),
        );
        assert_eq!(outcome.stop, None);
        assert!(outcome.output_cut > 0 && outcome.output.len() < 4096 + 100);
        assert!(outcome.output.starts_with("line 0\n") && outcome.output.ends_with("line 9999\n"));
        let outcome = run_with("function f() { return f() + 1; } f();", limits());
        assert!(
            matches!(&outcome.stop, Some(Stop::Exception { message, .. }) if message.contains("stack")),
            "{outcome:?}"
        );
    }

    #[test]
    fn the_stop_flag_cancels_a_running_program() {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            flag.store(true, Ordering::Relaxed);
        });
        let call: CallTool = Box::new(|_: &str, args: String| Ok(args));
        let outcome = run("while (true) {}", &[], limits(), call, stop);
        canceller.join().unwrap();
        assert_eq!(outcome.stop, Some(Stop::Cancelled));
    }
}
