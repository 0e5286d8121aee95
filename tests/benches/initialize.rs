//! `initialize` on a big tree: the time from the editor's `initialize` request to `serve`'s
//! answer, on a generated tree of about 100,000 files (`bench/files/gen.py`, with C, Python,
//! Rust, Go and TypeScript files), with the built-in servers on PATH (`.ci/tools`). Each run is
//! a new `serve` process; the answer must not wait for a walk of the tree or for children.
//! Then, the time until the first C file opened has clangd's diagnostics (children start
//! when a document they serve is opened), and how many child processes run then.
//!
//! Run: `bash .ci/tools.sh && cargo bench -p agent-tests --bench initialize --profile dev`
//! (the release binary is used when present, else the debug one; `INIT_BENCH_BIN=PATH` times
//! another build, e.g. an older commit's; `INIT_BENCH_TREE=DIR` picks the tree, made once by
//! gen.py).

#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use agent_tests::editor::{Editor, url};

const RUNS: usize = 5;

fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("INIT_BENCH_BIN") {
        return PathBuf::from(path);
    }
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    let release = target.join("release/agent-lsp");
    if release.exists() {
        release
    } else {
        target.join("debug/agent-lsp")
    }
}

/// The tree, generated once; a `compile_flags.txt` at its root so clangd has a project.
fn tree() -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let tree = std::env::var_os("INIT_BENCH_TREE")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("target/bench-files-tree"));
    if !tree.join(".git").exists() {
        let status = Command::new("python3")
            .arg(repo.join("bench/files/gen.py"))
            .arg(&tree)
            .status()
            .expect("run bench/files/gen.py");
        assert!(status.success(), "gen.py failed");
    }
    std::fs::write(tree.join("compile_flags.txt"), "-std=c11\n").unwrap();
    tree
}

fn first_c_file(tree: &Path) -> PathBuf {
    ignore::WalkBuilder::new(tree)
        .build()
        .filter_map(Result::ok)
        .map(|entry| entry.into_path())
        .find(|path| path.extension().is_some_and(|extension| extension == "c"))
        .expect("a .c file in the tree")
}

fn ms(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1e3)
}

fn main() {
    let tree = tree();
    let files = ignore::WalkBuilder::new(&tree)
        .build()
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_some_and(|kind| kind.is_file()))
        .count();
    let c_file = first_c_file(&tree);
    let state = tempfile::tempdir().unwrap();
    std::fs::write(state.path().join("config.toml"), "").unwrap();
    let bin = binary();
    let mut initialize = Vec::new();
    let mut to_diagnostics = Vec::new();
    let mut children = Vec::new();
    for _ in 0..RUNS {
        let mut command = Command::new(&bin);
        command
            .env("PATH", agent_tests::tools_path())
            .env("AGENT_LSP_STATE_DIR", state.path())
            .env("AGENT_LSP_CONFIG", state.path().join("config.toml"))
            .args(["--workspace", tree.to_str().unwrap(), "serve"]);
        let mut editor = Editor::start(command);
        let started = Instant::now();
        editor.initialize(&tree);
        initialize.push(started.elapsed());
        let opened = Instant::now();
        editor.open(&c_file, "c");
        editor.wait_for("clangd's diagnostics", |message| {
            message["method"] == "textDocument/publishDiagnostics"
                && message["params"]["uri"] == url(&c_file)
        });
        to_diagnostics.push(opened.elapsed());
        children.push(agent_tests::processes::descendants(editor.pid()).len());
        editor.shutdown();
    }
    initialize.sort();
    to_diagnostics.sort();
    println!(
        "`{}` on {} ({files} files visible), {RUNS} runs:",
        bin.display(),
        tree.display()
    );
    println!();
    println!("| measure | median | min | max |");
    println!("|---|---|---|---|");
    for (what, samples) in [
        ("`initialize` answered", &initialize),
        (
            "first C file opened → clangd's diagnostics",
            &to_diagnostics,
        ),
    ] {
        println!(
            "| {what} | {} | {} | {} |",
            ms(samples[RUNS / 2]),
            ms(samples[0]),
            ms(samples[RUNS - 1])
        );
    }
    println!(
        "| child processes once the C file has diagnostics | {:?} | | |",
        children
    );
}
