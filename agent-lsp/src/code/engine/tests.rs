//! The engine on its own, in this process: what a program reaches, how each limit ends it.

use super::*;

fn limits() -> Limits {
    Limits {
        wall: Duration::from_secs(5),
        memory_bytes: 32 * 1024 * 1024,
        max_calls: 20,
        output_bytes: 4096,
    }
}

/// A host whose only tool, `echo`, answers with its arguments, and `fail` with an error;
/// what the program prints goes to `lines`.
struct TestHost {
    lines: Rc<RefCell<Vec<String>>>,
}

impl Host for TestHost {
    fn print(&mut self, line: &str) {
        self.lines.borrow_mut().push(line.to_owned());
    }

    fn call(&mut self, name: &str, arguments: String) -> Result<String, String> {
        match name {
            "echo" => Ok(arguments),
            _ => Err(format!("`{name}` refused")),
        }
    }
}

/// How the program ended, and what it printed.
fn run_with(program: &str, limits: Limits) -> (Ended, Vec<String>) {
    let lines = Rc::new(RefCell::new(Vec::new()));
    let host = Box::new(TestHost {
        lines: lines.clone(),
    });
    let ended = run(
        program,
        &["echo".into(), "fail".into()],
        limits,
        host,
        Arc::new(AtomicBool::new(false)),
    );
    let printed = lines.borrow().clone();
    (ended, printed)
}

fn message(ended: &Ended) -> &str {
    match &ended.stop {
        Some(Stop::Exception { message, .. }) => message,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_program_calls_tools_prints_and_returns() {
    let (ended, printed) = run_with(
        "const a = await tools.echo({n: 1});\nconsole.log('got', a, {k: [1, 2]});\nlet n = 0;\nfor (let i = 0; i < 3; i++) n += JSON.parse(tools.echo({n: i})).n;\nreturn {n};",
        limits(),
    );
    assert_eq!(ended.stop, None, "{ended:?}");
    assert_eq!(printed, ["got {\"n\":1} {\"k\":[1,2]}"]);
    assert_eq!(ended.value.as_deref(), Some("{\"n\":3}"));
    assert_eq!(ended.calls, 4);
}

#[test]
fn errors_name_their_line_and_a_failed_call_throws() {
    let (ended, _) = run_with("const x = 1;\n\nthrow new TypeError('bad ' + x);", limits());
    assert_eq!(
        ended.stop,
        Some(Stop::Exception {
            message: "TypeError: bad 1".into(),
            line: Some(3)
        })
    );
    let (ended, _) = run_with("await tools.fail({});", limits());
    assert_eq!(
        ended.stop,
        Some(Stop::Exception {
            message: "Error: `fail` refused".into(),
            line: Some(1)
        })
    );
    // A caught failure is the program's business.
    let (ended, printed) = run_with(
        "try { await tools.fail({}); } catch (e) { console.log('caught', e.message); }",
        limits(),
    );
    assert_eq!(ended.stop, None);
    assert_eq!(printed, ["caught `fail` refused"]);
}

#[test]
fn a_tool_that_does_not_exist_is_named_with_the_ones_that_do() {
    let (ended, _) = run_with("await tools.frobnicate({});", limits());
    assert_eq!(
        message(&ended),
        "TypeError: no tool named `frobnicate`; the tools are: `echo`, `fail`"
    );
    // `tools` still reads as an object: `in`, printing it, awaiting it.
    let (ended, printed) = run_with(
        "console.log('echo' in tools, 'nope' in tools, typeof tools.echo, Object.keys(tools).join(','));\nawait tools;\nreturn tools;",
        limits(),
    );
    assert_eq!(ended.stop, None, "{ended:?}");
    assert_eq!(printed, ["true false function echo,fail"]);
    assert_eq!(ended.value.as_deref(), Some("{}"));
}

#[test]
fn a_huge_message_or_value_is_cut() {
    let (ended, _) = run_with("throw new Error('x'.repeat(1 << 20));", limits());
    let text = message(&ended);
    assert!(text.len() < 4096 / 4 + 100, "{}", text.len());
    assert!(text.starts_with("Error: xxx") && text.ends_with("more bytes cut]"));
    let (ended, _) = run_with("return 'y'.repeat(1 << 20);", limits());
    let value = ended.value.unwrap();
    assert!(value.len() < 4096 / 2 + 100, "{}", value.len());
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
        let (ended, _) = run_with(program, limits());
        let text = message(&ended);
        assert!(
            text.starts_with("ReferenceError") && text.contains(missing),
            "{program}: {text}"
        );
    }
    let (ended, _) = run_with("await import('fs')", limits());
    assert!(ended.stop.is_some(), "{ended:?}");
}

#[test]
fn each_limit_ends_the_program_and_says_which() {
    let short = Limits {
        wall: Duration::from_millis(300),
        ..limits()
    };
    let started = Instant::now();
    assert_eq!(
        run_with("while (true) {}", short).0.stop,
        Some(Stop::TimeLimit)
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        run_with(
            "const a = []; while (true) a.push('x'.repeat(1 << 20) + a.length);",
            limits()
        )
        .0
        .stop,
        Some(Stop::MemoryLimit)
    );
    // Small allocations until not even the error fits: QuickJS throws `null` then, which
    // only the engine's process tells apart from a program's own (`child.rs`).
    let (ended, _) = run_with("const a = []; while (true) a.push([a.length]);", limits());
    assert!(threw_null(ended.stop.as_ref().unwrap()), "{ended:?}");
    assert!(threw_null(
        run_with("throw null;", limits()).0.stop.as_ref().unwrap()
    ));
    // The 21st call is refused and not counted, and the program is ended at its next
    // interrupt check even though it catches the refusal.
    let (ended, _) = run_with(
        "for (let i = 0; i < 10000; i++) { try { await tools.echo({i}); } catch (e) {} }",
        limits(),
    );
    assert_eq!(ended.stop, Some(Stop::CallLimit));
    assert_eq!(ended.calls, 20);
    let (ended, _) = run_with("function f() { return f() + 1; } f();", limits());
    assert!(message(&ended).contains("stack"), "{ended:?}");
}

#[test]
fn the_stop_flag_cancels_a_running_program() {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        flag.store(true, Ordering::Relaxed);
    });
    let host = Box::new(TestHost {
        lines: Rc::default(),
    });
    let ended = run("while (true) {}", &[], limits(), host, stop);
    canceller.join().unwrap();
    assert_eq!(ended.stop, Some(Stop::Cancelled));
}
