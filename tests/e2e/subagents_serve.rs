//! Sub-agents inside `agent-lsp serve`: a child started by the editor's agent shares the
//! editor's connection, so it reads the editor's unsaved buffers and asks the same warm
//! language server (pyright) about them, and its calls stay in its own session; each child is a
//! cancellable `$/progress` of its own, and cancelling it, `agent.cancel` or `$/cancelRequest`
//! of the turn's command leaves every log consistent.

use std::process::Command;

use agent_lsp::session::event::EventBody;
use agent_lsp::session::store::Store;
use agent_tests::editor::Editor;
use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, ModelTurn, Reply, Route};
use serde_json::{Value, json};

#[test]
fn a_sub_agent_reads_the_editors_unsaved_buffer_through_the_shared_bridge() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("pyrightconfig.json"), "{}").unwrap();
    std::fs::write(root.join("app.py"), "def disk_fn():\n    return 1\n").unwrap();
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let mut command = Command::new(agent_tests::workspace_bin("agent-lsp"));
    command
        .env("PATH", agent_tests::tools_path())
        .env("AGENT_LSP_STATE_DIR", state.path())
        .env("AGENT_LSP_CONFIG", &config)
        .env_remove("DEEPSEEK_API_KEY")
        .args(["--workspace", root.to_str().unwrap(), "serve"]);

    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let route: Route = std::sync::Arc::new(|request| {
        let child = request
            .system_text()
            .is_some_and(|text| text.contains("You are a sub-agent"));
        let call = |name: &str, arguments: Value| -> Reply {
            ModelTurn::new()
                .reasoning("Next.")
                .tool_call(name, arguments.to_string())
                .into()
        };
        match (child, request.answers()) {
            (false, 0) => call("task", json!({"prompt": "What is defined in app.py?"})),
            (false, _) => Reply::text(request.tool_result_text()),
            (true, 0) => call("read", json!({"path": "app.py"})),
            (true, 1) => call("lsp_document_symbols", json!({"path": "app.py"})),
            (true, _) => {
                let symbols = request.tool_result_text();
                Reply::text(format!("symbols: {symbols}"))
            }
        }
    });
    endpoint.route(16, route);
    let mut editor = Editor::start(command);
    editor.initialize_with(
        &root,
        json!({"baseUrl": endpoint.base_url(), "apiKey": "sk-test", "model": "deepseek-v4-flash", "preset": "standard"}),
    );
    let app = root.join("app.py");
    editor.open(&app, "python");
    editor.change(&app, "def buffer_fn():\n    return 2\n");
    let answer = editor.request(
        "workspace/executeCommand",
        json!({"command": "agent.ask", "arguments": [{"prompt": "What is in app.py?"}]}),
    );
    assert_eq!(answer["result"]["outcome"], "answered", "{answer}");
    endpoint.assert_no_violations();

    let store = Store::for_workspace_in(state.path(), &root).unwrap();
    let children = store
        .ids()
        .unwrap()
        .into_iter()
        .map(|id| store.load(&id).unwrap())
        .filter(|history| history.header().unwrap().parent.is_some())
        .collect::<Vec<_>>();
    assert_eq!(children.len(), 1);
    let result = |name: &str| {
        children[0]
            .events()
            .iter()
            .find_map(|event| match &event.body {
                EventBody::ToolResult(result) if result.name == name => Some(result.text.clone()),
                _ => None,
            })
            .unwrap()
    };
    // The child read the editor's buffer, not the disk, and the language server it asked
    // had that buffer too.
    let read = result("read");
    assert!(
        read.contains("buffer_fn") && !read.contains("disk_fn"),
        "{read}"
    );
    let symbols = result("lsp_document_symbols");
    assert!(
        symbols.contains("buffer_fn") && !symbols.contains("disk_fn"),
        "{symbols}"
    );
    editor.shutdown();
}

/// `serve` for `root` with the model at `endpoint` (standard preset), state in `state`.
fn serve(root: &std::path::Path, state: &std::path::Path, endpoint: &ModelEndpoint) -> Editor {
    let config = state.join("config.toml");
    std::fs::write(&config, "").unwrap();
    let mut editor = Editor::start(agent_tests::agent_lsp_command(
        state,
        &config,
        root,
        &["serve"],
    ));
    editor.initialize_with(
        root,
        json!({"baseUrl": endpoint.base_url(), "apiKey": "sk-test", "model": "deepseek-v4-flash", "preset": "standard"}),
    );
    editor
}

/// The `begin` of the sub-agent progress whose title names `mark`.
fn subagent_begin(editor: &mut Editor, mark: &str) -> Value {
    editor.wait_for(&format!("the progress of sub-agent {mark}"), |message| {
        message["method"] == "$/progress"
            && message["params"]["value"]["kind"] == "begin"
            && message["params"]["value"]["title"]
                .as_str()
                .is_some_and(|title| {
                    title.starts_with("sub-agent: explore: ") && title.contains(mark)
                })
    })
}

fn progress_end(editor: &mut Editor, token: &Value) -> Value {
    editor.wait_for("a progress end", |message| {
        message["method"] == "$/progress"
            && message["params"]["token"] == *token
            && message["params"]["value"]["kind"] == "end"
    })
}

#[test]
fn the_editor_cancels_one_sub_agent_or_the_whole_turn_and_every_log_stays_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let route: Route = std::sync::Arc::new(|request| {
        let child = request
            .system_text()
            .is_some_and(|text| text.contains("You are a sub-agent"));
        let asks = |mark: &str| {
            request
                .first_user_text()
                .is_some_and(|text| text.contains(mark))
        };
        let task = |mark: &str| {
            json!({"prompt": format!("{mark}: look"), "description": mark}).to_string()
        };
        match (child, request.answers()) {
            (false, 0) => ModelTurn::new()
                .reasoning("Two.")
                .tool_call("task", task("STOPME"))
                .tool_call("task", task("FINE"))
                .into(),
            (false, 1) => Reply::text("One was stopped; the other answered."),
            (false, 2) => ModelTurn::new()
                .reasoning("One more.")
                .tool_call("task", task("HANG"))
                .into(),
            (false, 3) => ModelTurn::new()
                .reasoning("And another.")
                .tool_call("task", task("AGAIN"))
                .into(),
            (false, _) => Reply::text("unexpected"),
            (true, _) if asks("FINE") => ModelTurn::new()
                .content("fine")
                .first_byte_delay(std::time::Duration::from_millis(1500))
                .into(),
            (true, _) => Reply::hang(),
        }
    });
    endpoint.route(16, route);
    let mut editor = serve(&root, state.path(), &endpoint);

    // One sub-agent cancelled from its own progress: the turn goes on with the other's answer.
    let ask = editor.request_async(
        "workspace/executeCommand",
        json!({"command": "agent.ask", "arguments": [{"prompt": "First"}]}),
    );
    let stop = subagent_begin(&mut editor, "STOPME");
    assert_eq!(stop["params"]["value"]["cancellable"], true, "{stop}");
    let token = stop["params"]["token"].clone();
    editor.notify("window/workDoneProgress/cancel", json!({"token": token}));
    let end = progress_end(&mut editor, &token);
    assert_eq!(end["params"]["value"]["message"], "cancelled", "{end}");
    let answer = editor.response(ask);
    assert_eq!(answer["result"]["outcome"], "answered", "{answer}");

    // `agent.cancel` mid-turn cancels the sub-agent with it.
    let ask = editor.request_async(
        "workspace/executeCommand",
        json!({"command": "agent.ask", "arguments": [{"prompt": "Second"}]}),
    );
    let hang = subagent_begin(&mut editor, "HANG");
    editor.request(
        "workspace/executeCommand",
        json!({"command": "agent.cancel", "arguments": []}),
    );
    let answer = editor.response(ask);
    assert_eq!(answer["result"]["outcome"], "cancelled", "{answer}");
    let end = progress_end(&mut editor, &hang["params"]["token"]);
    assert_eq!(end["params"]["value"]["message"], "cancelled", "{end}");

    // So does `$/cancelRequest` of the command that runs the turn.
    let ask = editor.request_async(
        "workspace/executeCommand",
        json!({"command": "agent.ask", "arguments": [{"prompt": "Third"}]}),
    );
    let again = subagent_begin(&mut editor, "AGAIN");
    editor.notify("$/cancelRequest", json!({"id": ask}));
    let answer = editor.response(ask);
    assert!(
        answer["result"]["outcome"] == "cancelled" || answer["error"]["code"] == -32800,
        "{answer}"
    );
    let end = progress_end(&mut editor, &again["params"]["token"]);
    assert_eq!(end["params"]["value"]["message"], "cancelled", "{end}");
    endpoint.assert_no_violations();
    editor.shutdown();

    let store = Store::for_workspace_in(state.path(), &root).unwrap();
    let mut outcomes = Vec::new();
    for id in store.ids().unwrap() {
        let history = store.load(&id).unwrap();
        assert_eq!(history.surface().pending_calls().count(), 0, "{id}");
        for event in history.events() {
            if let EventBody::SubagentEnd(end) = &event.body {
                outcomes.push(end.outcome.clone());
            }
        }
    }
    assert_eq!(
        outcomes,
        ["cancelled", "answered", "cancelled", "cancelled"]
    );
}
