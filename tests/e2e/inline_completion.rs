//! Inline completion through `agent-lsp serve`, with real pyright behind it and the loopback
//! endpoint's FIM route over real HTTP: the request carries the prefix, the suffix and the
//! signature pyright gives for a function of another file; the answer's range replaces what
//! the model repeated; a cancelled or superseded request drops its HTTP connection; typing
//! through a suggestion asks nothing; a failing endpoint gives an empty answer and no pop-up;
//! prompt documents get nothing; `agent-lsp completions stats` reads the completion log.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use agent_lsp::completion::log::CompletionLog;
use agent_lsp::session::store::Store;
use agent_tests::editor::{Editor, url};
use agent_tests::model_endpoint::{EndpointConfig, FimReply, ModelEndpoint};
use serde_json::{Value, json};

const GEOMETRY: &str = "def rectangle_area(width: float, height: float) -> float:\n    \"\"\"The area of a rectangle.\"\"\"\n    return width * height\n";
const APP: &str = "from geometry import rectangle_area\n\ntotal = rectangle_area()\nprint(total)\n";
/// Line 2, between the parentheses.
const CURSOR: (u32, u32) = (2, 23);

struct Workspace {
    _dir: tempfile::TempDir,
    root: PathBuf,
    state: tempfile::TempDir,
}

impl Workspace {
    fn new() -> Workspace {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("pyrightconfig.json"), "{}").unwrap();
        agent_tests::write_tree(
            &root,
            &[
                ("geometry.py", GEOMETRY),
                ("app.py", APP),
                ("notes.agent.md", "## you\n\nwrite a \n"),
            ],
        );
        Workspace {
            _dir: dir,
            root,
            state: tempfile::tempdir().unwrap(),
        }
    }

    fn app(&self) -> PathBuf {
        self.root.join("app.py")
    }

    /// `serve` with `[completion]` pointing at `endpoint`'s DeepSeek-style FIM route, plus
    /// `extra` lines of the table.
    fn serve(&self, endpoint: &ModelEndpoint, extra: &str) -> Editor {
        let config = self.state.path().join("config.toml");
        std::fs::write(
            &config,
            format!(
                "[completion]\nmodel = \"deepseek-v4-flash\"\nbase_url = \"{}/beta\"\napi_key_env = \"TEST_FIM_KEY\"\ndebounce_ms = 5\ngrounding_timeout_ms = 20000\n{extra}\n",
                endpoint.root_url()
            ),
        )
        .unwrap();
        let mut command = Command::new(agent_tests::workspace_bin("agent-lsp"));
        command
            .env("PATH", agent_tests::tools_path())
            .env("AGENT_LSP_STATE_DIR", self.state.path())
            .env("AGENT_LSP_CONFIG", &config)
            .env("TEST_FIM_KEY", "sk-fim")
            .env_remove("DEEPSEEK_API_KEY")
            .args(["--workspace", self.root.to_str().unwrap(), "serve"]);
        let mut editor = Editor::start(command);
        let result = editor.initialize(&self.root);
        assert_eq!(
            result["capabilities"]["inlineCompletionProvider"],
            json!({}),
            "{result}"
        );
        editor
    }

    /// Open app.py and wait until pyright has analysed it (its first diagnostics).
    fn open_app(&self, editor: &mut Editor) {
        let app = self.app();
        editor.open(&app, "python");
        editor.wait_for("pyright's diagnostics of app.py", |message| {
            message["method"] == "textDocument/publishDiagnostics"
                && message["params"]["uri"] == url(&app)
        });
    }

    fn log(&self) -> CompletionLog {
        let store = Store::for_workspace_in(self.state.path(), &self.root).unwrap();
        CompletionLog::in_dir(store.workspace_dir())
    }
}

fn inline_params(path: &std::path::Path, (line, character): (u32, u32)) -> Value {
    json!({
        "textDocument": {"uri": url(path)},
        "position": {"line": line, "character": character},
        "context": {"triggerKind": 2},
    })
}

fn inline(editor: &mut Editor, path: &std::path::Path, at: (u32, u32)) -> Value {
    let response = editor.request("textDocument/inlineCompletion", inline_params(path, at));
    assert!(response.get("error").is_none(), "{response}");
    response["result"].clone()
}

/// No `window/showMessage` reached the editor.
fn assert_no_pop_up(editor: &Editor) {
    let shown: Vec<&Value> = editor
        .backlog
        .iter()
        .filter(|message| message["method"] == "window/showMessage")
        .collect();
    assert!(shown.is_empty(), "{shown:?}");
}

fn wait_until(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn the_fim_request_is_grounded_in_pyright_and_the_edit_replaces_what_the_model_repeats() {
    let workspace = Workspace::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    // The model repeats the `)` after the cursor and goes on to the next line.
    endpoint.push_fim(FimReply::text("width=2.0, height=3.0)\nprint(total)\n"));
    let mut editor = workspace.serve(&endpoint, "");
    workspace.open_app(&mut editor);

    let result = inline(&mut editor, &workspace.app(), CURSOR);
    assert_eq!(
        result,
        json!({"items": [{
            "insertText": "width=2.0, height=3.0)",
            "range": {"start": {"line": 2, "character": 23}, "end": {"line": 2, "character": 24}},
        }]})
    );

    let calls = endpoint.fim_calls();
    assert_eq!(calls.len(), 1);
    let call = &calls[0];
    assert_eq!(call.path, "/beta/completions");
    assert_eq!(call.model, "deepseek-v4-flash");
    assert!(call.stream);
    assert!(
        call.prompt
            .ends_with("from geometry import rectangle_area\n\ntotal = rectangle_area("),
        "{}",
        call.prompt
    );
    assert_eq!(call.suffix, ")\nprint(total)\n");
    // The signature of the function defined in geometry.py, from pyright's hover, as a comment
    // in front of the buffer's text.
    let grounding = call.prompt.split("from geometry import").next().unwrap();
    assert!(
        grounding.contains("# (function) def rectangle_area(width: float, height: float) -> float"),
        "{}",
        call.prompt
    );
    assert!(
        grounding.contains("# The area of a rectangle."),
        "{}",
        call.prompt
    );
    let authorization = &endpoint.requests()[call.index].headers;
    assert!(
        authorization
            .iter()
            .any(|(name, value)| name == "authorization" && value == "Bearer sk-fim"),
        "{authorization:?}"
    );

    let records = workspace.log().read().unwrap();
    assert_eq!(records.len(), 1, "{records:?}");
    let record = &records[0];
    assert_eq!(record.document, "app.py");
    assert_eq!(record.result, "suggested");
    assert!(
        record
            .sources
            .contains(&"pyright hover rectangle_area".to_owned()),
        "{:?}",
        record.sources
    );
    assert!(record.grounding_chars > 0 && record.prompt_chars > record.grounding_chars);
    assert_no_pop_up(&editor);
    endpoint.assert_no_violations();
    editor.shutdown();
}

#[test]
fn five_keystrokes_typed_through_a_suggestion_send_no_new_request() {
    let workspace = Workspace::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_fim(FimReply::text("width=2.0, height=3.0)"));
    let mut editor = workspace.serve(&endpoint, "");
    workspace.open_app(&mut editor);
    let app = workspace.app();
    let first = inline(&mut editor, &app, CURSOR);
    assert_eq!(first["items"][0]["insertText"], "width=2.0, height=3.0)");

    let typed = "width";
    for count in 1..=typed.len() {
        let line = format!("total = rectangle_area({})", &typed[..count]);
        editor.change(&app, &APP.replace("total = rectangle_area()", &line));
        let at = (CURSOR.0, CURSOR.1 + count as u32);
        let result = inline(&mut editor, &app, at);
        assert_eq!(
            result,
            json!({"items": [{
                "insertText": &"width=2.0, height=3.0)"[count..],
                "range": {"start": {"line": 2, "character": at.1}, "end": {"line": 2, "character": at.1 + 1}},
            }]}),
            "after typing {:?}",
            &typed[..count]
        );
    }
    assert_eq!(
        endpoint.fim_calls().len(),
        1,
        "typing through asked the model"
    );

    let records = workspace.log().read().unwrap();
    assert_eq!(records.len(), 6);
    assert_eq!(records.iter().filter(|record| record.cache_hit).count(), 5);
    // The summary reads the same log.
    let output = Command::new(agent_tests::workspace_bin("agent-lsp"))
        .env("AGENT_LSP_STATE_DIR", workspace.state.path())
        .args(["--workspace", workspace.root.to_str().unwrap()])
        .args(["completions", "stats", "--json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stats: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(stats["count"], 6, "{stats}");
    assert_eq!(stats["suggested"], 6, "{stats}");
    assert!(
        (stats["cache_hit_share"].as_f64().unwrap() - 5.0 / 6.0).abs() < 1e-9,
        "{stats}"
    );
    assert_eq!(stats["cancelled_share"], 0.0, "{stats}");
    assert_no_pop_up(&editor);
    endpoint.assert_no_violations();
    editor.shutdown();
}

#[test]
fn a_cancelled_or_superseded_request_drops_its_http_connection() {
    let workspace = Workspace::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    // A slow model: a byte every 100 ms.
    let slow = || FimReply::slow_text("width=2.0, height=3.0)", 1, Duration::from_millis(100));
    endpoint.push_fim(slow());
    endpoint.push_fim(slow());
    endpoint.push_fim(FimReply::text("2.0, 3.0)"));
    let mut editor = workspace.serve(&endpoint, "");
    workspace.open_app(&mut editor);
    let app = workspace.app();

    // `$/cancelRequest`: the request is answered as cancelled and its connection dropped.
    let id = editor.request_async("textDocument/inlineCompletion", inline_params(&app, CURSOR));
    wait_until("the first FIM request", || endpoint.fim_calls().len() == 1);
    editor.notify("$/cancelRequest", json!({"id": id}));
    let response = editor.response(id);
    assert_eq!(response["error"]["code"], -32800, "{response}");
    wait_until("the first connection dropped", || {
        endpoint.fim_calls()[0].dropped
    });

    // The next request for the same document supersedes the one in flight.
    let superseded =
        editor.request_async("textDocument/inlineCompletion", inline_params(&app, CURSOR));
    wait_until("the second FIM request", || endpoint.fim_calls().len() == 2);
    let newest = inline(&mut editor, &app, (CURSOR.0, CURSOR.1 - 1));
    assert_eq!(editor.response(superseded)["result"], json!({"items": []}));
    assert_eq!(newest["items"][0]["insertText"], "2.0, 3.0)");
    wait_until("the second connection dropped", || {
        endpoint.fim_calls()[1].dropped
    });
    let calls = endpoint.fim_calls();
    assert!(!calls[0].finished && !calls[1].finished, "{calls:?}");

    let records = workspace.log().read().unwrap();
    let results: Vec<(&str, bool)> = records
        .iter()
        .map(|record| (record.result.as_str(), record.cancelled))
        .collect();
    assert_eq!(
        results,
        [
            ("cancelled", true),
            ("cancelled", true),
            ("suggested", false)
        ]
    );
    assert_no_pop_up(&editor);
    endpoint.assert_no_violations();
    editor.shutdown();
}

#[test]
fn a_failing_endpoint_gives_an_empty_answer_and_no_pop_up() {
    let workspace = Workspace::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_fim(FimReply::server_error());
    endpoint.push_fim(FimReply::garbage());
    endpoint.push_fim(FimReply::stall());
    let mut editor = workspace.serve(&endpoint, "timeout_ms = 1000");
    workspace.open_app(&mut editor);
    let app = workspace.app();
    for _ in 0..3 {
        assert_eq!(inline(&mut editor, &app, CURSOR), json!({"items": []}));
    }
    assert_eq!(endpoint.fim_calls().len(), 3);
    wait_until("the stalled connection dropped", || {
        endpoint.fim_calls()[2].dropped
    });

    // Nothing is suggested inside a prompt document, and the model is not asked.
    let notes = workspace.root.join("notes.agent.md");
    editor.open(&notes, "markdown");
    assert_eq!(inline(&mut editor, &notes, (2, 8)), json!({"items": []}));
    assert_eq!(endpoint.fim_calls().len(), 3);

    let records = workspace.log().read().unwrap();
    assert_eq!(records.len(), 3, "{records:?}");
    for record in &records {
        assert_eq!(record.result, "failed", "{record:?}");
        assert!(record.error.is_some(), "{record:?}");
    }
    assert!(
        records[0].error.as_ref().unwrap().contains("HTTP 500"),
        "{records:?}"
    );
    assert!(
        records[1].error.as_ref().unwrap().contains("malformed"),
        "{records:?}"
    );
    assert!(
        records[2]
            .error
            .as_ref()
            .unwrap()
            .contains("did not finish within 1000 ms"),
        "{records:?}"
    );
    // Give any pop-up time to arrive before looking.
    editor.closed_within(Duration::from_millis(300));
    assert_no_pop_up(&editor);
    endpoint.assert_no_violations();
    editor.shutdown();
}

/// A model that streams 5 MB on one line: the stream is not read to its end, and nothing that
/// size reaches the editor.
#[test]
fn a_suggestion_of_megabytes_is_neither_read_whole_nor_shown() {
    let workspace = Workspace::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_fim(FimReply::Text {
        text: "x".repeat(5 << 20),
        delta_bytes: 4096,
        chunk_delay: Duration::ZERO,
    });
    let mut editor = workspace.serve(&endpoint, "");
    workspace.open_app(&mut editor);
    assert_eq!(
        inline(&mut editor, &workspace.app(), CURSOR),
        json!({"items": []})
    );
    wait_until("the stream dropped", || endpoint.fim_calls()[0].dropped);
}

/// A server that is busy indexing (it holds every request for 8 s while it reports progress) is
/// not waited for: the suggestion comes while the server is still busy, although the grounding
/// timeout is 20 s, and the model is asked with the buffer alone.
#[test]
fn a_server_busy_indexing_is_not_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let file = root.join("a.fake");
    std::fs::write(&file, "alpha = beta(\n").unwrap();
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("config.toml");
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_fim(FimReply::text("1)"));
    std::fs::write(
        &config,
        format!(
            "{}\n[completion]\nmodel = \"deepseek-v4-flash\"\nbase_url = \"{}/beta\"\napi_key_env = \"TEST_FIM_KEY\"\ndebounce_ms = 5\ngrounding_timeout_ms = 20000\n",
            agent_tests::fake_lsp_config(&["busy", "8000"]),
            endpoint.root_url()
        ),
    )
    .unwrap();
    let mut command = Command::new(agent_tests::workspace_bin("agent-lsp"));
    command
        .env("PATH", agent_tests::tools_path())
        .env("AGENT_LSP_STATE_DIR", state.path())
        .env("AGENT_LSP_CONFIG", &config)
        .env("TEST_FIM_KEY", "sk-fim")
        .env_remove("DEEPSEEK_API_KEY")
        .args(["--workspace", root.to_str().unwrap(), "serve"]);
    let mut editor = Editor::start(command);
    editor.initialize(&root);
    editor.open(&file, "fake");
    editor.wait_for("the server's analysis begins", |message| {
        message["method"] == "$/progress" && message["params"]["value"]["kind"] == "begin"
    });
    let result = inline(&mut editor, &file, (0, 13));
    assert_eq!(result["items"][0]["insertText"], "1)", "{result}");
    let ended = editor.backlog.iter().any(|message| {
        message["method"] == "$/progress" && message["params"]["value"]["kind"] == "end"
    });
    assert!(!ended, "the suggestion waited for the busy server");
    let calls = endpoint.fim_calls();
    assert_eq!(calls.len(), 1);
    assert!(
        calls[0].prompt.starts_with("alpha = beta("),
        "no signature from a busy server: {}",
        calls[0].prompt
    );
    endpoint.assert_no_violations();
    editor.shutdown();
}
