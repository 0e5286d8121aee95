//! Sub-agents inside `agent-lsp serve`: a child started by the editor's agent shares the
//! editor's connection, so it reads the editor's unsaved buffers and asks the same warm
//! language server (pyright) about them, and its calls stay in its own session.

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
