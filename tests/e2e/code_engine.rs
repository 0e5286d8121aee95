//! `run_code`'s engine process through the real binary: a program stuck in a native loop the
//! interrupt handler never sees is killed at its deadline and leaves no process and no busy
//! core behind; what went wrong reads as what went wrong (the memory limit, a tool that does
//! not exist, a refused call, a huge thrown message); the call cap stops a program at once;
//! and the engine process does not outlive agent-lsp.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_lsp::session::History;
use agent_lsp::session::event::EventBody;
use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, ModelTurn, Reply};
use agent_tests::processes::descendants_running;
use serde_json::{Value, json};

use super::code_mode::{denied_write_preset, nested, project, session};

/// A program whose native loop never yields: `join` over 2^32-1 holes loops in C, where
/// QuickJS never polls its interrupt handler (in a thread it ran 16 s and then spun on for
/// minutes).
const NATIVE_LOOP: &str = "console.log('started');\nreturn new Array(2**32-1).join('').length;";

/// Each `run_code` result: its text, its `duration_ms`, and the time it was logged.
fn run_code_results(history: &History) -> Vec<(String, u64, f64)> {
    history
        .events()
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::ToolResult(result) if result.name == "run_code" => Some((
                result.text.clone(),
                result.meta["duration_ms"].as_u64().unwrap(),
                seconds_of(&event.ts),
            )),
            _ => None,
        })
        .collect()
}

/// An event's time as seconds since its day began (`2026-12-04T22:05:01.123Z`).
fn seconds_of(ts: &str) -> f64 {
    let time = &ts[ts.find('T').unwrap() + 1..].trim_end_matches('Z');
    let parts = time
        .split(':')
        .map(|part| part.parse::<f64>().unwrap())
        .collect::<Vec<_>>();
    parts[0] * 3600.0 + parts[1] * 60.0 + parts[2]
}

/// CPU time `pid` used so far, in clock ticks (utime + stime of `/proc/PID/stat`).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .collect::<Vec<_>>();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// What the agent looked like once the programs were over: its engine processes, and the CPU
/// ticks it used over the next second.
type Afterwards = (Vec<u32>, u64);

#[test]
fn a_program_in_a_native_loop_is_killed_at_its_deadline_and_leaves_nothing_running() {
    let fixture = project();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let programs = 3;
    let mut turn = ModelTurn::new().reasoning("Spin.");
    for _ in 0..programs {
        let arguments = json!({"code": NATIVE_LOOP, "timeout_secs": 1});
        turn = turn.tool_call("run_code", arguments.to_string());
    }
    endpoint.push(turn);
    // When the programs are over (the model is asked again), the agent still runs: look at it.
    let agent = Arc::new(AtomicU32::new(0));
    let afterwards = Arc::new(Mutex::new(None::<Afterwards>));
    {
        let (agent, afterwards) = (agent.clone(), afterwards.clone());
        endpoint.push(Reply::from_fn(move |_| {
            let pid = agent.load(Ordering::SeqCst);
            let engines = descendants_running(pid, "__run-code");
            let before = cpu_ticks(pid);
            std::thread::sleep(Duration::from_secs(1));
            let used = cpu_ticks(pid) - before;
            *afterwards.lock().unwrap() = Some((engines, used));
            Reply::text("Stopped.")
        }));
    }
    let child = fixture
        .command(&[
            "run",
            "--preset",
            "code",
            "--base-url",
            &endpoint.base_url(),
            "Spin",
        ])
        .env("PATH", agent_tests::tools_path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    agent.store(child.id(), Ordering::SeqCst);
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    endpoint.assert_no_violations();
    let results = run_code_results(&session(&fixture));
    assert_eq!(results.len(), programs);
    for (text, duration_ms, _) in &results {
        assert!(text.contains("ran past its 1 s"), "{text}");
        // What it printed before it was killed is kept.
        assert!(text.contains("started"), "{text}");
        // The answer comes at the deadline (1 s and the kill's grace), not 16 s later.
        assert!(*duration_ms < 3000, "{duration_ms} ms: {text}");
    }
    let (engines, used) = afterwards.lock().unwrap().clone().unwrap();
    assert_eq!(engines, Vec::<u32>::new(), "engine processes left running");
    // An idle agent: no core kept busy by a program that was given up on (a spinning engine
    // would use about 100 ticks a second each).
    assert!(
        used < 40,
        "the agent used {used} ticks in a second after the programs"
    );
}

#[test]
fn what_went_wrong_reads_as_what_went_wrong() {
    let fixture = project();
    let path = denied_write_preset(&fixture);
    let programs = [
        (
            // Small allocations until QuickJS cannot even make the error (it throws `null`).
            "memory",
            json!({"code": "const a = []; while (true) a.push([a.length]);"}),
            "used more than its 64 MiB of memory",
        ),
        (
            "missing tool",
            json!({"code": "await tools.frobnicate({});"}),
            "the program threw at line 1: TypeError: no tool named `frobnicate`; the tools are: ",
        ),
        (
            "refused",
            json!({"code": "await tools.write({path: 'x.txt', content: 'x'});"}),
            "the program threw at line 1: Error: the call to `write` was refused by the preset's permission policy",
        ),
        (
            "huge message",
            json!({"code": "throw new Error('x'.repeat(1 << 22));"}),
            "more bytes cut]",
        ),
    ];
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let mut turn = ModelTurn::new().reasoning("Try them.");
    for (_, arguments, _) in &programs {
        turn = turn.tool_call("run_code", arguments.to_string());
    }
    endpoint.push(turn);
    endpoint.push(Reply::text("Done."));
    let output = super::code_mode::run(&fixture, &endpoint, &path.display().to_string());
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    endpoint.assert_no_violations();
    let results = run_code_results(&session(&fixture));
    assert_eq!(results.len(), programs.len());
    // Every case is checked before failing, so a failure names all that read wrong.
    let mut wrong = Vec::new();
    for ((what, _, expected), (text, ..)) in programs.iter().zip(&results) {
        let reads_right = text.starts_with("error: ")
            && text.contains(expected)
            && !text.contains("uncaught null")
            && !text.contains("rror: error:");
        if !reads_right {
            wrong.push(format!("{what}: {}", &text[..text.len().min(300)]));
        }
    }
    if !results[1].0.contains("`grep`") {
        wrong.push(format!("the tools are not listed: {}", results[1].0));
    }
    // The 4 MiB message is cut to less than run_code's 64 KiB output cap.
    if results[3].0.len() >= 64 * 1024 {
        wrong.push(format!("the message is {} bytes", results[3].0.len()));
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn the_engine_process_dies_with_agent_lsp() {
    let fixture = project();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push(ModelTurn::thinking_call(
        "run_code",
        json!({"code": NATIVE_LOOP}),
    ));
    let mut agent = fixture
        .command(&[
            "run",
            "--preset",
            "code",
            "--base-url",
            &endpoint.base_url(),
            "Spin",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let engine = loop {
        if let Some(&engine) = descendants_running(agent.id(), "__run-code").first() {
            break engine;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no engine process started"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // agent-lsp is killed outright: nothing of it runs to kill its engine.
    agent.kill().unwrap();
    agent.wait().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while agent_tests::processes::alive(engine) {
        if std::time::Instant::now() > deadline {
            agent_tests::processes::kill_and_wait(engine);
            panic!("the engine process outlived agent-lsp");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_call_cap_stops_a_program_at_once_and_counts_the_calls_made() {
    let fixture = project();
    // It catches the refusal and goes on into a native loop: only a kill stops it now.
    let program = "try { for (let i = 0; i < 10000; i++) await tools.list({path: '.'}); } catch (e) { console.log('caught: ' + e.message); }\nreturn new Array(2**32-1).join('').length;";
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push(ModelTurn::thinking_call(
        "run_code",
        json!({"code": program}),
    ));
    endpoint.push(Reply::text("Capped."));
    let output = super::code_mode::run(&fixture, &endpoint, "code");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let history = session(&fixture);
    let results = run_code_results(&history);
    let (text, _, answered_at) = &results[0];
    assert!(
        text.contains("more than 200 tool calls") && text.contains("(after 200 tool calls)"),
        "{text}"
    );
    let meta: Vec<Value> = history
        .events()
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::ToolResult(result) if result.name == "run_code" => {
                Some(result.meta["run_code"].clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(meta[0]["calls"], 200);
    let (calls, nested_results) = nested(&history);
    assert_eq!(calls.len(), 200);
    assert_eq!(nested_results.len(), 200);
    // The answer came right after the 200th call, not after the native loop (16 s here).
    let last_call_at = history
        .events()
        .iter()
        .filter(|event| matches!(event.body, EventBody::SubtoolResult(_)))
        .map(|event| seconds_of(&event.ts))
        .next_back()
        .unwrap();
    let gap = (answered_at - last_call_at).rem_euclid(86_400.0);
    assert!(gap < 5.0, "answered {gap} s after the last call");
}
