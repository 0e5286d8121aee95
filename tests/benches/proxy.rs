//! Proxy overhead: the same definition, hover and completion requests sent by the same scripted
//! editor, in rounds that take turns, to `agent-lsp serve` (brokering pyright), straight to
//! pyright, and to pyright behind three relay baselines, each doing less than a broker:
//! `byte-relay` copies bytes as they come (the cost of one more process hop by itself),
//! `frame-relay` reads each message whole before writing it on (store and forward, as `serve`
//! does; no JSON),
//! `json-relay` also parses every message and maps ids (a broker's least per-message work).
//! A second pyright reached directly is the control: what it "adds" over the first tells how far
//! two identical setups differ in the same run, the resolution of every other figure. Each
//! setup's added latency is its p50 and p99 minus direct pyright's; besides the latency it
//! reports each process's CPU time per request, which the machine's noise disturbs much less.
//! Prints two Markdown tables for BENCHMARKS.md.
//!
//! Run: `bash .ci/tools.sh && cargo build --release -p agent-lsp -p agent-tests --bins && cargo bench -p agent-tests --bench proxy`
//! (the release binary is used when present, else the debug one). With `PROXY_BASELINE` naming
//! another `agent-lsp` binary (an earlier commit's build), that one runs as a seventh setup in
//! the same rounds, and a third table compares the two side by side.

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

/// The `p` quantile of sorted `samples`.
fn percentile(samples: &[Duration], p: f64) -> Duration {
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

/// One way of reaching pyright, with what its rounds measured for the current request.
struct Target {
    editor: Editor,
    samples: Vec<Duration>,
    /// CPU time of the process the editor started (not of its children).
    cpu: Duration,
}

impl Target {
    /// Time `PER_ROUND` requests, and the process's CPU time over them.
    fn round(&mut self, method: &str, params: &Value) {
        let before = cpu_time(self.editor.pid());
        for _ in 0..PER_ROUND {
            self.samples.push(time(&mut self.editor, method, params));
        }
        // A thread that ended meanwhile takes its time along; this undercounts only then.
        self.cpu += cpu_time(self.editor.pid()).saturating_sub(before);
    }

    /// p50 and p99 (of sorted samples).
    fn percentiles(&self) -> [Duration; 2] {
        [
            percentile(&self.samples, 0.5),
            percentile(&self.samples, 0.99),
        ]
    }

    fn cpu_per_request(&self) -> String {
        format!(
            "{:.0}",
            self.cpu.as_secs_f64() * 1e6 / self.samples.len() as f64
        )
    }
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

    let baseline_state = tempfile::tempdir().unwrap();
    let serve = |program: PathBuf, state: &Path| {
        let config = state.join("config.toml");
        std::fs::write(&config, "").unwrap();
        let mut command = Command::new(program);
        command
            .env("PATH", agent_tests::tools_path())
            .env("AGENT_LSP_STATE_DIR", state)
            .env("AGENT_LSP_CONFIG", &config)
            .args(["--workspace", root.to_str().unwrap(), "serve"]);
        command
    };
    let proxied = serve(built("agent-lsp"), state.path());
    let baseline = std::env::var_os("PROXY_BASELINE").map(PathBuf::from);
    let direct = || {
        let mut command = Command::new(pyright());
        command.arg("--stdio").current_dir(&root);
        command
    };
    // Pyright behind one of the relay baselines.
    let behind = |relay: &str| {
        let mut command = Command::new(built(relay));
        command.arg(pyright()).arg("--stdio").current_dir(&root);
        command
    };
    // In this order in every round; the table's ratios are each target's over `direct`'s.
    let mut commands = vec![
        proxied,
        direct(),
        behind("byte-relay"),
        behind("frame-relay"),
        behind("json-relay"),
        direct(),
    ];
    if let Some(baseline) = &baseline {
        commands.push(serve(baseline.clone(), baseline_state.path()));
    }
    let mut targets: Vec<Target> = commands
        .into_iter()
        .map(|command| {
            let mut editor = Editor::start(command);
            ready(&mut editor, &root, &main);
            editor.open(&stdlib, "python");
            // Analysed before any timing: six pyrights analysing the stubs at once on two cores
            // made the first round of whichever setup went first (`serve`) take 8-17 ms a
            // request, which was that setup's whole p99.
            editor.wait_for("the stubs' diagnostics", |message| {
                message["method"] == "textDocument/publishDiagnostics"
                    && message["params"]["uri"] == url(&stdlib)
            });
            Target {
                editor,
                samples: Vec::new(),
                cpu: Duration::ZERO,
            }
        })
        .collect();
    let [serve, straight, bytes, frames, parsing, control, before] = [0, 1, 2, 3, 4, 5, 6];

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
    let (mut proxy_rows, mut baseline_rows, mut before_rows) = (Vec::new(), Vec::new(), Vec::new());
    for (label, method, params) in &requests {
        for _ in 0..ROUNDS {
            for target in &mut targets {
                target.round(method, params);
            }
        }
        for target in &mut targets {
            target.samples.sort();
        }
        let [d50, d99] = targets[straight].percentiles();
        // "added p50 / p99 ms" of one target over direct pyright's (negative: faster).
        let added = |target: usize| {
            let [p50, p99] = targets[target].percentiles();
            let minus = |of: Duration, to: Duration| (of.as_secs_f64() - to.as_secs_f64()) * 1e3;
            format!("{:+.3} / {:+.3}", minus(p50, d50), minus(p99, d99))
        };
        proxy_rows.push(format!(
            "| {label} | {} / {} | {} | {} | {} | {} / {} / {} |",
            ms(d50),
            ms(d99),
            added(serve),
            added(parsing),
            added(control),
            targets[serve].cpu_per_request(),
            targets[parsing].cpu_per_request(),
            targets[straight].cpu_per_request(),
        ));
        baseline_rows.push(format!(
            "| {label} | {} | {} | {} / {} |",
            added(bytes),
            added(frames),
            targets[bytes].cpu_per_request(),
            targets[frames].cpu_per_request(),
        ));
        if baseline.is_some() {
            before_rows.push(format!(
                "| {label} | {} | {} | {} / {} |",
                added(serve),
                added(before),
                targets[serve].cpu_per_request(),
                targets[before].cpu_per_request(),
            ));
        }
        for target in &mut targets {
            target.samples.clear();
            target.cpu = Duration::ZERO;
        }
    }
    println!(
        "| request (pyright) | direct p50 / p99 ms | added by `agent-lsp serve` p50 / p99 ms | added by `json-relay` p50 / p99 ms | control: added by a second direct pyright p50 / p99 ms | CPU per request: serve / json-relay / pyright µs |"
    );
    println!("|---|---|---|---|---|---|");
    for row in &proxy_rows {
        println!("{row}");
    }
    println!();
    println!(
        "| request (pyright) | added by `byte-relay` p50 / p99 ms | added by `frame-relay` p50 / p99 ms | CPU per request: byte / frame relay µs |"
    );
    println!("|---|---|---|---|");
    for row in &baseline_rows {
        println!("{row}");
    }
    if let Some(baseline) = &baseline {
        println!();
        println!(
            "| request (pyright) | added by this `agent-lsp serve` p50 / p99 ms | added by `{}` p50 / p99 ms | CPU per request: this / baseline µs |",
            baseline.display()
        );
        println!("|---|---|---|---|");
        for row in &before_rows {
            println!("{row}");
        }
    }
    let serve_editor = targets.swap_remove(serve).editor;
    serve_editor.shutdown();
}
