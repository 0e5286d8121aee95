//! Proxy overhead: the same definition, hover and completion requests sent by the same scripted
//! editor to `agent-lsp serve` (brokering pyright), straight to pyright, to pyright behind
//! `byte-relay` (a process that only copies bytes: the cost of one more process hop by itself),
//! and behind `json-relay` (the per-message work of a broker, parse and map ids, on blocking
//! threads), in alternating rounds. Besides the latency it reports each process's CPU time per request,
//! which the machine's noise disturbs much less. Prints a Markdown table for BENCHMARKS.md.
//!
//! Run: `bash .ci/tools.sh && cargo build --release -p agent-lsp -p agent-tests --bins && cargo bench -p agent-tests --bench proxy`
//! (the release binary is used when present, else the debug one).

#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use agent_tests::editor::{Editor, url};
use serde_json::{Value, json};

const ROUNDS: usize = 30;
const PER_ROUND: usize = 20;

/// A workspace binary: the release build when present, else the debug one.
fn built(name: &str) -> PathBuf {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    let release = target.join("release").join(name);
    if release.exists() {
        release
    } else {
        target.join("debug").join(name)
    }
}

fn pyright() -> PathBuf {
    std::env::split_paths(&agent_tests::tools_path())
        .map(|dir| dir.join("pyright-langserver"))
        .find(|path| path.is_file())
        .expect("pyright is not installed: run `bash .ci/tools.sh`")
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(duration: Duration) -> String {
    format!("{:.2}", duration.as_secs_f64() * 1e3)
}

fn ready(editor: &mut Editor, root: &Path, main: &Path) {
    editor.initialize(root);
    editor.open(main, "python");
    editor.wait_for("first diagnostics", |message| {
        message["method"] == "textDocument/publishDiagnostics"
            && message["params"]["uri"] == url(main)
    });
}

/// CPU time the live threads of process `pid` (not its children) have used so far: the sum of
/// `/proc/PID/task/*/schedstat`'s on-CPU nanoseconds (`/proc/PID/stat` also counts ended
/// threads, but in 10 ms ticks, too coarse for 20 requests).
fn cpu_time(pid: u32) -> Duration {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the process is running");
    let nanos = tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(nanos)
}

/// Time `PER_ROUND` requests; adds the process's CPU time over them to `cpu`.
fn round(
    editor: &mut Editor,
    method: &str,
    params: &Value,
    samples: &mut Vec<Duration>,
    cpu: &mut Duration,
) {
    let before = cpu_time(editor.pid());
    for _ in 0..PER_ROUND {
        samples.push(time(editor, method, params));
    }
    // A thread that ended meanwhile takes its time along; this undercounts only then.
    *cpu += cpu_time(editor.pid()).saturating_sub(before);
}

fn time(editor: &mut Editor, method: &str, params: &Value) -> Duration {
    let start = Instant::now();
    let response = editor.request(method, params.clone());
    let elapsed = start.elapsed();
    assert!(response.get("error").is_none(), "{method}: {response}");
    elapsed
}

const STDLIB_USE: &str = "import asyncio\nimport json\nimport os.path\nimport pathlib\n\n\
def load(path: pathlib.Path) -> dict:\n    with path.open() as handle:\n        return json.load(handle)\n\n\
asyncio.\nos.path.\n";

fn main() {
    let workspace = agent_tests::fixture("python");
    let root = workspace.path().canonicalize().unwrap();
    let main = root.join("main.py");
    // Requests into the standard library's stubs, which pyright answers in milliseconds, as
    // it does in real projects (the fixture's own symbols answer in a fraction of one).
    let stdlib = root.join("stdlib_use.py");
    std::fs::write(&stdlib, STDLIB_USE).unwrap();
    let state = tempfile::tempdir().unwrap();

    let mut proxied = {
        let mut command = Command::new(built("agent-lsp"));
        command
            .env("PATH", agent_tests::tools_path())
            .env("AGENT_LSP_STATE_DIR", state.path())
            .env("AGENT_LSP_CONFIG", state.path().join("none.toml"))
            .args(["--workspace", root.to_str().unwrap(), "serve"]);
        Editor::start(command)
    };
    ready(&mut proxied, &root, &main);
    proxied.open(&stdlib, "python");
    let mut direct = {
        let mut command = Command::new(pyright());
        command.arg("--stdio").current_dir(&root);
        Editor::start(command)
    };
    ready(&mut direct, &root, &main);
    direct.open(&stdlib, "python");

    // Pyright behind one of the relay baselines.
    let behind = |relay: &str| {
        let mut command = Command::new(built(relay));
        command.arg(pyright()).arg("--stdio").current_dir(&root);
        let mut editor = Editor::start(command);
        ready(&mut editor, &root, &main);
        editor.open(&stdlib, "python");
        editor
    };
    let mut relayed = behind("byte-relay");
    let mut json_relayed = behind("json-relay");

    let at = |line: u32, character: u32| json!({"textDocument": {"uri": url(&main)}, "position": {"line": line, "character": character}});
    let std_at = |line: u32, character: u32| json!({"textDocument": {"uri": url(&stdlib)}, "position": {"line": line, "character": character}});
    let requests = [
        ("definition", "textDocument/definition", at(2, 28)),
        ("hover", "textDocument/hover", at(4, 14)),
        // After `eins.` on line 4 (0-based 3): member completion.
        ("completion", "textDocument/completion", at(3, 12)),
        (
            "definition (stdlib `json.load`)",
            "textDocument/definition",
            std_at(7, 21),
        ),
        (
            "hover (stdlib `json.load`)",
            "textDocument/hover",
            std_at(7, 21),
        ),
        (
            "completion (`asyncio.`)",
            "textDocument/completion",
            std_at(9, 8),
        ),
        (
            "completion (`os.path.`)",
            "textDocument/completion",
            std_at(10, 8),
        ),
    ];
    println!(
        "| request (pyright) | through `agent-lsp serve` p50 / p95 ms | direct p50 / p95 ms | ratio p50 | ratio p95 | through `byte-relay` p50 / p95 ms | relay ratio p50 / p95 | through `json-relay` p50 / p95 ms | json-relay ratio p50 / p95 | CPU per request: agent-lsp / byte-relay / json-relay / pyright direct µs |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (label, method, params) in &requests {
        let (mut through, mut straight, mut relay) = (Vec::new(), Vec::new(), Vec::new());
        let (mut through_cpu, mut straight_cpu, mut relay_cpu) = Default::default();
        let (mut parsing, mut parsing_cpu) = (Vec::new(), Duration::ZERO);
        for _ in 0..ROUNDS {
            round(&mut proxied, method, params, &mut through, &mut through_cpu);
            round(
                &mut direct,
                method,
                params,
                &mut straight,
                &mut straight_cpu,
            );
            round(&mut relayed, method, params, &mut relay, &mut relay_cpu);
            round(
                &mut json_relayed,
                method,
                params,
                &mut parsing,
                &mut parsing_cpu,
            );
        }
        let (j50, j95) = (
            percentile(&mut parsing, 0.5),
            percentile(&mut parsing, 0.95),
        );
        let per_request = |cpu: Duration| {
            format!(
                "{:.0}",
                cpu.as_secs_f64() * 1e6 / (ROUNDS * PER_ROUND) as f64
            )
        };
        let (r50, r95) = (percentile(&mut relay, 0.5), percentile(&mut relay, 0.95));
        let (t50, t95) = (
            percentile(&mut through, 0.5),
            percentile(&mut through, 0.95),
        );
        let (d50, d95) = (
            percentile(&mut straight, 0.5),
            percentile(&mut straight, 0.95),
        );
        println!(
            "| {} | {} / {} | {} / {} | {:.2} | {:.2} | {} / {} | {:.2} / {:.2} | {} / {} | {:.2} / {:.2} | {} / {} / {} / {} |",
            label,
            ms(t50),
            ms(t95),
            ms(d50),
            ms(d95),
            t50.as_secs_f64() / d50.as_secs_f64(),
            t95.as_secs_f64() / d95.as_secs_f64(),
            ms(r50),
            ms(r95),
            r50.as_secs_f64() / d50.as_secs_f64(),
            r95.as_secs_f64() / d95.as_secs_f64(),
            ms(j50),
            ms(j95),
            j50.as_secs_f64() / d50.as_secs_f64(),
            j95.as_secs_f64() / d95.as_secs_f64(),
            per_request(through_cpu),
            per_request(relay_cpu),
            per_request(parsing_cpu),
            per_request(straight_cpu),
        );
    }
    proxied.shutdown();
}
