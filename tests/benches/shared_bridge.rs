//! The shared bridge: the time to the first `lsp_definition` answer from a terminal
//! `agent-lsp tool` call, cold (nobody owns the workspace's bridge, so the call starts its own
//! server) against attached (an editor's `serve` holds a warm one), for pyright and clangd on
//! the fixture projects.
//!
//! Each call is a new process, as a terminal call is. Two figures per call: the wall time from
//! spawning `agent-lsp tool` to its exit (what the user waits for; a cold call also shuts its
//! server down), and the call's own time as its session records it (`duration_ms`: from the
//! tool's start to its answer, the server's start included when cold).
//!
//! Run: `bash .ci/tools.sh && cargo build --workspace --bins && cargo bench -p agent-tests
//! --bench shared_bridge --profile dev` (the release binary is used when present).

#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent_tests::editor::{Editor, url};
use serde_json::{Value, json};

const RUNS: usize = 7;

fn binary() -> PathBuf {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    let release = target.join("release/agent-lsp");
    if release.exists() {
        release
    } else {
        target.join("debug/agent-lsp")
    }
}

struct Case {
    server: &'static str,
    fixture: &'static str,
    /// The file the editor opens.
    open: &'static str,
    language: &'static str,
    arguments: Value,
    /// What the answer must contain.
    expect: &'static str,
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

struct World {
    _workspace: tempfile::TempDir,
    root: PathBuf,
    state: tempfile::TempDir,
}

impl World {
    fn new(case: &Case) -> World {
        let workspace = tempfile::tempdir().unwrap();
        let root = workspace.path().canonicalize().unwrap();
        copy_tree(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fixtures")
                .join(case.fixture),
            &root,
        );
        let state = tempfile::tempdir().unwrap();
        std::fs::write(state.path().join("config.toml"), "").unwrap();
        World {
            _workspace: workspace,
            root,
            state,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(binary());
        command
            .env("AGENT_LSP_STATE_DIR", self.state.path())
            .env("AGENT_LSP_CONFIG", self.state.path().join("config.toml"))
            .env("PATH", agent_tests::tools_path())
            .arg("--workspace")
            .arg(&self.root)
            .args(args)
            .stdin(Stdio::null());
        command
    }

    /// One terminal call: its wall time and its recorded duration.
    fn call(&self, case: &Case) -> (Duration, Duration, Value) {
        let started = Instant::now();
        let output = self
            .command(&[
                "tool",
                "lsp_definition",
                "--json",
                "--args",
                &case.arguments.to_string(),
            ])
            .stderr(Stdio::null())
            .output()
            .unwrap();
        let wall = started.elapsed();
        let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert!(
            answer["text"].as_str().unwrap().contains(case.expect),
            "{}: {answer}",
            case.server
        );
        let recorded = Duration::from_millis(answer["meta"]["duration_ms"].as_u64().unwrap());
        (wall, recorded, answer)
    }
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn ms(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1e3)
}

fn main() {
    let cases = [
        Case {
            server: "pyright",
            fixture: "python",
            open: "main.py",
            language: "python",
            arguments: json!({"path": "main.py", "line": 5, "symbol": "größe_von"}),
            expect: "geometry.py",
        },
        Case {
            server: "clangd",
            fixture: "c",
            open: "main.c",
            language: "c",
            arguments: json!({"path": "main.c", "line": 5, "symbol": "rect_area"}),
            expect: "shapes.",
        },
    ];
    println!("binary: {}", binary().display());
    println!(
        "| server | cold: wall (p50) | cold: call (p50) | attached: wall (p50) | attached: call (p50) | attached: call (max) |"
    );
    println!("|---|---|---|---|---|---|");
    for case in &cases {
        // Cold: a fresh state directory each time, so nobody owns the bridge.
        let (mut cold_wall, mut cold_call) = (Vec::new(), Vec::new());
        for _ in 0..RUNS {
            let world = World::new(case);
            let (wall, call, answer) = world.call(case);
            assert!(answer["meta"].get("bridge").is_none(), "{answer}");
            cold_wall.push(wall);
            cold_call.push(call);
        }

        // Attached: an editor's `serve` has the file open and its server warm.
        let world = World::new(case);
        let mut editor = Editor::start(world.command(&["serve"]));
        editor.initialize(&world.root);
        let opened = world.root.join(case.open);
        editor.open(&opened, case.language);
        editor.wait_for("the opened file's diagnostics", |message| {
            message["method"] == "textDocument/publishDiagnostics"
                && message["params"]["uri"] == url(&opened)
        });
        // One call to warm what the first query of a server warms (its index of the file).
        editor.pump(Duration::from_millis(200));
        let (_, _, answer) = world.call(case);
        assert_eq!(answer["meta"]["bridge"]["owner"], "serve", "{answer}");
        let (mut attached_wall, mut attached_call) = (Vec::new(), Vec::new());
        for _ in 0..RUNS {
            editor.pump(Duration::from_millis(50));
            let (wall, call, answer) = world.call(case);
            assert_eq!(answer["meta"]["bridge"]["owner"], "serve", "{answer}");
            attached_wall.push(wall);
            attached_call.push(call);
        }
        editor.shutdown();
        let max = attached_call.iter().max().copied().unwrap();
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            case.server,
            ms(median(cold_wall)),
            ms(median(cold_call)),
            ms(median(attached_wall)),
            ms(median(attached_call)),
            ms(max),
        );
    }
}
