//! What `agent-lsp serve` answers about documents no child serves (a README, a prompt document,
//! a JSON file), and the `--stdio` flag language clients add: an editor that opens such a file
//! must not be shown an error for every feature it asks about.

use std::path::Path;
use std::process::Command;

use agent_tests::editor::{Editor, url};
use serde_json::{Value, json};

/// `agent-lsp serve` plus `extra` arguments, with pyright on PATH and no config file.
fn serve_command(workspace: &Path, state: &Path, extra: &[&str]) -> Command {
    let config = state.join("config.toml");
    std::fs::write(&config, "").unwrap();
    let mut command = Command::new(agent_tests::workspace_bin("agent-lsp"));
    command
        .env("PATH", agent_tests::tools_path())
        .env("AGENT_LSP_STATE_DIR", state)
        .env("AGENT_LSP_CONFIG", &config)
        .args(["--workspace", workspace.to_str().unwrap(), "serve"])
        .args(extra);
    command
}

#[test]
fn requests_about_documents_no_server_handles_get_empty_results_not_errors() {
    let workspace = agent_tests::fixture("python");
    let root = workspace.path().canonicalize().unwrap();
    std::fs::write(root.join("README.md"), "# Geometrie\n\nSiehe `Fläche`.\n").unwrap();
    std::fs::write(root.join("notes.agent.md"), "What does @main.py do?\n").unwrap();
    std::fs::write(root.join("pyrightconfig.json"), "{\"strict\": []}\n").unwrap();
    let state = tempfile::tempdir().unwrap();
    // `--stdio`, as vscode-languageclient's `TransportKind.stdio` appends it.
    let mut editor = Editor::start(serve_command(&root, state.path(), &["--stdio"]));
    editor.initialize(&root);

    let documents = [
        ("README.md", "markdown"),
        ("notes.agent.md", "agent-prompt"),
        ("pyrightconfig.json", "json"),
    ];
    for (name, language) in documents {
        let path = root.join(name);
        editor.open(&path, language);
        let document = json!({"uri": url(&path)});
        let at = json!({"textDocument": document, "position": {"line": 0, "character": 3}});
        let range =
            json!({"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}});
        let requests = [
            (
                "textDocument/documentSymbol",
                json!({"textDocument": document}),
                Value::Null,
            ),
            ("textDocument/definition", at.clone(), Value::Null),
            ("textDocument/hover", at.clone(), Value::Null),
            (
                "textDocument/references",
                json!({"textDocument": document, "position": at["position"], "context": {"includeDeclaration": true}}),
                Value::Null,
            ),
            (
                "textDocument/foldingRange",
                json!({"textDocument": document}),
                Value::Null,
            ),
            (
                "textDocument/documentLink",
                json!({"textDocument": document}),
                Value::Null,
            ),
            (
                "textDocument/documentColor",
                json!({"textDocument": document}),
                json!([]),
            ),
            (
                "textDocument/diagnostic",
                json!({"textDocument": document}),
                json!({"kind": "full", "items": []}),
            ),
            (
                "textDocument/semanticTokens/full",
                json!({"textDocument": document}),
                Value::Null,
            ),
            (
                "textDocument/inlayHint",
                json!({"textDocument": document, "range": range}),
                Value::Null,
            ),
        ];
        for (method, params, empty) in requests {
            let response = editor.request(method, params);
            assert!(
                response.get("error").is_none(),
                "{method} on {name}: {response}"
            );
            assert_eq!(response["result"], empty, "{method} on {name}: {response}");
        }
    }

    // A document a child serves is still answered by it.
    let main = root.join("main.py");
    editor.open(&main, "python");
    let symbols = editor.request(
        "textDocument/documentSymbol",
        json!({"textDocument": {"uri": url(&main)}}),
    );
    assert!(
        symbols["result"]
            .as_array()
            .is_some_and(|symbols| !symbols.is_empty()),
        "{symbols}"
    );
    // A method without a document that no child offers is still MethodNotFound.
    let unknown = editor.request("custom/nobodyHasThis", json!({}));
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    editor.shutdown();
}

#[test]
fn serve_accepts_stdio_and_refuses_it_with_listen() {
    let state = tempfile::tempdir().unwrap();
    let output = serve_command(
        state.path(),
        state.path(),
        &["--stdio", "--listen", "127.0.0.1:0"],
    )
    .output()
    .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--stdio") && stderr.contains("--listen"),
        "{stderr}"
    );
    let help = serve_command(state.path(), state.path(), &["--help"])
        .output()
        .unwrap();
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("--stdio"));
}
