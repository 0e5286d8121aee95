//! Inline completion through `agent-lsp serve` with pyright and the loopback FIM endpoint:
//! the server's own overhead per request (everything but the model's time and the debounce),
//! with and without grounding; the prompt's size with and without the servers' signatures; and
//! the share of requests answered from the cache while a line is typed.
//!
//! Overhead comes two ways: as the server records it in the completion log (arrival to answer,
//! minus the model request and the debounce), and as the editor sees it (request written to
//! answer read, minus the same two), which adds the JSON-RPC hops. The model is the loopback
//! endpoint answering at once, so its time is a local HTTP round trip, and it is subtracted.
//!
//! Run: `bash .ci/tools.sh && cargo build -p agent-lsp && cargo bench -p agent-tests --bench
//! inline_completion --profile dev` (the release binary is used when present, else the debug
//! one; `INLINE_BENCH_BIN=PATH` times another build).

#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use agent_lsp::completion::log::{CompletionLog, Record, percentile};
use agent_lsp::session::store::Store;
use agent_tests::editor::{Editor, url};
use agent_tests::model_endpoint::{EndpointConfig, FimReply, ModelEndpoint};
use serde_json::json;

const REQUESTS: usize = 60;
const GEOMETRY: &str = "import math\n\n\ndef rectangle_area(width: float, height: float) -> float:\n    \"\"\"The area of a rectangle.\"\"\"\n    return width * height\n\n\ndef circle_area(radius: float) -> float:\n    \"\"\"The area of a circle.\"\"\"\n    return math.pi * radius * radius\n\n\nclass Shape:\n    \"\"\"A named shape.\"\"\"\n\n    def __init__(self, name: str, sides: int) -> None:\n        self.name = name\n        self.sides = sides\n";
const APP: &str = "from geometry import Shape, circle_area, rectangle_area\n\nsquare = Shape(\"square\", 4)\nround_one = circle_area(2.0)\n# line 4\ntotal = rectangle_area()\nprint(total, square.name, round_one)\n";
/// The line typed in the cache run, at the end of app.py.
const TYPED: &str = "both = rectangle_area(width=2.0, height=3.0) + circle_area(radius=1.5)";

fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("INLINE_BENCH_BIN") {
        return PathBuf::from(path);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let release = target.join("release/agent-lsp");
    if release.exists() {
        release
    } else {
        target.join("debug/agent-lsp")
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    root: PathBuf,
    state: tempfile::TempDir,
    editor: Editor,
}

impl Setup {
    fn start(endpoint: &ModelEndpoint, extra: &str) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("pyrightconfig.json"), "{}").unwrap();
        agent_tests::write_tree(&root, &[("geometry.py", GEOMETRY), ("app.py", APP)]);
        let state = tempfile::tempdir().unwrap();
        let config = state.path().join("config.toml");
        std::fs::write(
            &config,
            format!(
                "[completion]\nmodel = \"deepseek-v4-flash\"\nbase_url = \"{}/beta\"\n{extra}\n",
                endpoint.root_url()
            ),
        )
        .unwrap();
        let mut command = Command::new(binary());
        command
            .env("PATH", agent_tests::tools_path())
            .env("AGENT_LSP_STATE_DIR", state.path())
            .env("AGENT_LSP_CONFIG", &config)
            .env_remove("DEEPSEEK_API_KEY")
            .args(["--workspace", root.to_str().unwrap(), "serve"]);
        let mut editor = Editor::start(command);
        editor.initialize(&root);
        let app = root.join("app.py");
        editor.open(&app, "python");
        editor.wait_for("pyright's diagnostics", |message| {
            message["method"] == "textDocument/publishDiagnostics"
                && message["params"]["uri"] == url(&app)
        });
        Setup {
            _dir: dir,
            root,
            state,
            editor,
        }
    }

    fn app(&self) -> PathBuf {
        self.root.join("app.py")
    }

    /// One request at `line`:`character`; the editor-side round trip in ms.
    fn request(&mut self, line: u32, character: u32) -> f64 {
        let params = json!({"textDocument": {"uri": url(&self.app())},
                            "position": {"line": line, "character": character},
                            "context": {"triggerKind": 1}});
        let started = Instant::now();
        let response = self.editor.request("textDocument/inlineCompletion", params);
        let elapsed = started.elapsed().as_secs_f64() * 1e3;
        assert!(response.get("error").is_none(), "{response}");
        elapsed
    }

    fn records(&self) -> Vec<Record> {
        let store = Store::for_workspace_in(self.state.path(), &self.root).unwrap();
        CompletionLog::in_dir(store.workspace_dir()).read().unwrap()
    }
}

/// The overhead runs measure the lookups whole: no debounce, and a deadline no lookup reaches.
const MEASURING: &str = "debounce_ms = 0\ngrounding_timeout_ms = 5000\n";

struct Figures {
    log_overhead: Vec<f64>,
    editor_overhead: Vec<f64>,
    grounding: Vec<f64>,
    prompt_chars: Vec<f64>,
    grounding_chars: Vec<f64>,
}

/// `REQUESTS` requests at the same place, each after a change above the cursor (so none is
/// answered from the cache), after three warm-up requests.
fn overhead(endpoint: &ModelEndpoint, extra: &str) -> Figures {
    let mut setup = Setup::start(endpoint, &format!("{MEASURING}{extra}"));
    let app = setup.app();
    let mut round_trips = Vec::new();
    for run in 0..REQUESTS + 3 {
        let text = APP.replace("# line 4", &format!("# run {run}"));
        setup.editor.change(&app, &text);
        round_trips.push(setup.request(5, 23));
    }
    let records = setup.records();
    assert_eq!(records.len(), REQUESTS + 3);
    let measured = &records[3..];
    assert!(
        measured
            .iter()
            .all(|record| !record.cache_hit && record.error.is_none())
    );
    let figures = Figures {
        log_overhead: measured.iter().map(|record| record.overhead_ms).collect(),
        editor_overhead: measured
            .iter()
            .zip(&round_trips[3..])
            .map(|(record, trip)| trip - record.model_ms - record.debounce_ms)
            .collect(),
        grounding: measured.iter().map(|record| record.grounding_ms).collect(),
        prompt_chars: measured
            .iter()
            .map(|record| record.prompt_chars as f64)
            .collect(),
        grounding_chars: measured
            .iter()
            .map(|record| record.grounding_chars as f64)
            .collect(),
    };
    setup.editor.shutdown();
    figures
}

/// Type `TYPED` a character at a time on a new last line, asking after every keystroke; the
/// model suggests the rest of the line up to its next `(`, `,` or `)` (a FIM model's typical
/// span), so the cache answers until the typing passes the suggestion's end.
fn typing(endpoint: &ModelEndpoint) -> (usize, usize, usize) {
    let mut setup = Setup::start(endpoint, MEASURING);
    let app = setup.app();
    let before_calls = endpoint.fim_calls().len();
    for typed in 0..=TYPED.len() {
        let text = format!("{APP}{}", &TYPED[..typed]);
        setup.editor.change(&app, &text);
        setup.request(7, typed as u32);
    }
    let records = setup.records();
    let hits = records.iter().filter(|record| record.cache_hit).count();
    let calls = endpoint.fim_calls().len() - before_calls;
    setup.editor.shutdown();
    (records.len(), hits, calls)
}

/// What the person waits for with the default settings (debounce, grounding deadline),
/// model time excluded: `REQUESTS` requests each after a change above the cursor, after three
/// warm-up ones; the editor's round trip minus the model request.
fn felt(endpoint: &ModelEndpoint, extra: &str) -> Vec<f64> {
    let mut setup = Setup::start(endpoint, extra);
    let app = setup.app();
    let mut round_trips = Vec::new();
    for run in 0..REQUESTS + 3 {
        let text = APP.replace("# line 4", &format!("# run {run}"));
        setup.editor.change(&app, &text);
        round_trips.push(setup.request(5, 23));
    }
    let records = setup.records();
    setup.editor.shutdown();
    records[3..]
        .iter()
        .zip(&round_trips[3..])
        .map(|(record, trip)| trip - record.model_ms)
        .collect()
}

/// The same with `fake-lsp` run with `fake` (a server busy indexing, a slow one) behind a
/// document of its own, and `extra` lines of `[completion]`.
fn felt_fake(endpoint: &ModelEndpoint, fake: &[&str], extra: &str) -> Vec<f64> {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let file = root.join("a.fake");
    let text = |run: usize| format!("# run {run}\ntotal = rectangle_area(\n");
    std::fs::write(&file, text(0)).unwrap();
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "{}\n[completion]\nmodel = \"deepseek-v4-flash\"\nbase_url = \"{}/beta\"\n{extra}\n",
            agent_tests::fake_lsp_config(fake),
            endpoint.root_url()
        ),
    )
    .unwrap();
    let mut command = Command::new(binary());
    command
        .env("PATH", agent_tests::tools_path())
        .env("AGENT_LSP_STATE_DIR", state.path())
        .env("AGENT_LSP_CONFIG", &config)
        .env_remove("DEEPSEEK_API_KEY")
        .args(["--workspace", root.to_str().unwrap(), "serve"]);
    let mut editor = Editor::start(command);
    editor.initialize(&root);
    editor.open(&file, "fake");
    // A first request starts the server; the timed ones find it running.
    editor.request(
        "textDocument/inlineCompletion",
        json!({"textDocument": {"uri": url(&file)}, "position": {"line": 1, "character": 23},
               "context": {"triggerKind": 1}}),
    );
    let mut felt = Vec::new();
    for run in 1..=REQUESTS {
        editor.change(&file, &text(run));
        let params = json!({"textDocument": {"uri": url(&file)},
                            "position": {"line": 1, "character": 23},
                            "context": {"triggerKind": 1}});
        let started = Instant::now();
        let response = editor.request("textDocument/inlineCompletion", params);
        felt.push(started.elapsed().as_secs_f64() * 1e3);
        assert!(response.get("error").is_none(), "{response}");
    }
    let store = Store::for_workspace_in(state.path(), &root).unwrap();
    let records = CompletionLog::in_dir(store.workspace_dir()).read().unwrap();
    editor.shutdown();
    felt.iter()
        .zip(&records[1..])
        .map(|(trip, record)| trip - record.model_ms)
        .collect()
}

fn p(values: &[f64], rank: f64) -> String {
    format!("{:.2}", percentile(values, rank))
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len().max(1) as f64
}

fn main() {
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    // The rest of `TYPED` from what the last prompt line holds, up to the next delimiter; a
    // fixed answer for the overhead runs' cursor.
    endpoint.fim_responder(Arc::new(|call| {
        let line = call.prompt.rsplit('\n').next().unwrap_or("");
        match TYPED.strip_prefix(line) {
            Some(rest) if !rest.is_empty() => {
                let end = rest
                    .char_indices()
                    .skip(1)
                    .find(|(_, ch)| matches!(ch, '(' | ',' | ')'))
                    .map_or(rest.len(), |(at, _)| at + 1);
                FimReply::text(&rest[..end])
            }
            _ => FimReply::text("width=2.0, height=3.0)\nprint(total)\n"),
        }
    }));
    let asked = overhead(&endpoint, "signature_ttl_ms = 0");
    let grounded = overhead(&endpoint, "");
    let plain = overhead(&endpoint, "context_tokens = 0");
    let (requests, hits, calls) = typing(&endpoint);
    let felt_reused = felt(&endpoint, "");
    let felt_asked = felt(&endpoint, "signature_ttl_ms = 0");
    let felt_busy = felt_fake(&endpoint, &["busy", "60000"], "");
    let felt_slow = felt_fake(
        &endpoint,
        &["slow", "textDocument/hover", "300", "diagnose"],
        "signature_ttl_ms = 0",
    );
    endpoint.assert_no_violations();

    println!(
        "`{}`, {REQUESTS} requests per row after 3 warm-up ones:",
        binary().display()
    );
    println!();
    println!(
        "| grounding | server overhead (log) p50 / p95 ms | overhead seen by the editor p50 / p95 ms | of it, the servers' lookups p50 / p95 ms | prompt chars (mean) | of it, signatures |"
    );
    println!("|---|---|---|---|---|---|");
    for (name, figures) in [
        (
            "on, every signature asked of pyright (`signature_ttl_ms = 0`)",
            &asked,
        ),
        ("on, signatures reused (the default 10 s)", &grounded),
        ("off (`context_tokens = 0`)", &plain),
    ] {
        println!(
            "| {name} | {} / {} | {} / {} | {} / {} | {:.0} | {:.0} |",
            p(&figures.log_overhead, 0.5),
            p(&figures.log_overhead, 0.95),
            p(&figures.editor_overhead, 0.5),
            p(&figures.editor_overhead, 0.95),
            p(&figures.grounding, 0.5),
            p(&figures.grounding, 0.95),
            mean(&figures.prompt_chars),
            mean(&figures.grounding_chars),
        );
    }
    println!();
    println!(
        "Typing `{TYPED}` ({} keystrokes, a request after each and one before): {requests} requests, {hits} answered from the cache ({:.0}%), {calls} FIM requests sent.",
        TYPED.len(),
        hits as f64 * 100.0 / requests as f64
    );
    println!();
    println!(
        "What the editor waits for with the default settings (25 ms debounce, 50 ms grounding deadline), model time excluded, {REQUESTS} requests each after a change:"
    );
    println!();
    println!("| case | p50 / p95 ms |");
    println!("|---|---|");
    for (name, felt) in [
        ("pyright warm, signatures reused", &felt_reused),
        (
            "pyright warm, every signature asked (`signature_ttl_ms = 0`)",
            &felt_asked,
        ),
        (
            "the document's server busy indexing (fake-lsp `busy`)",
            &felt_busy,
        ),
        (
            "a slow server: each hover takes 300 ms (fake-lsp `slow`), every signature asked",
            &felt_slow,
        ),
    ] {
        println!("| {name} | {} / {} |", p(felt, 0.5), p(felt, 0.95));
    }
}
