//! The editor's `textDocument` client capabilities reach the children `serve` starts (under the
//! bridge's own, which the agent relies on), so a server shapes its answers for the editor as it
//! would if the editor had started it: snippets for an editor that takes them, none for one
//! that does not.

use std::path::Path;

use agent_tests::editor::{Editor, url};
use serde_json::{Value, json};

/// `initialize` as the test editor sends it, with `text_document` as its `textDocument`
/// capabilities.
fn initialize(editor: &mut Editor, root: &Path, text_document: Value) {
    let mut params = editor.initialize_params(root, Value::Null);
    params["capabilities"]["textDocument"] = text_document;
    let answer = editor.request("initialize", params);
    assert!(answer.get("result").is_some(), "{answer}");
    editor.notify("initialized", json!({}));
}

#[test]
fn the_child_is_offered_the_editors_capabilities_under_the_bridges() {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let record = state.path().join("received.jsonl");
    let file = root.join("a.fake");
    std::fs::write(&file, "one\n").unwrap();
    let config = agent_tests::fake_lsp_config(&["record", record.to_str().unwrap()]);
    let mut editor = Editor::start(agent_tests::serve_command(&root, state.path(), &config));
    initialize(
        &mut editor,
        &root,
        json!({
            "completion": {"dynamicRegistration": true,
                           "completionItem": {"snippetSupport": true, "labelDetailsSupport": true}},
            "codeAction": {"codeActionLiteralSupport": {"codeActionKind": {"valueSet": ["quickfix", "refactor"]}}},
            "foldingRange": {"lineFoldingOnly": true},
            "documentSymbol": {"hierarchicalDocumentSymbolSupport": false},
        }),
    );
    editor.open(&file, "fake");
    editor.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": url(&file)}, "position": {"line": 0, "character": 0}}),
    );
    let received = agent_tests::fake_lsp_record(&record);
    let initialize = received
        .iter()
        .find(|message| message["method"] == "initialize")
        .expect("the child was initialized");
    let offered = &initialize["params"]["capabilities"]["textDocument"];
    let completion = &offered["completion"];
    assert_eq!(
        completion["completionItem"]["snippetSupport"], true,
        "{offered}"
    );
    assert_eq!(
        completion["completionItem"]["labelDetailsSupport"], true,
        "{offered}"
    );
    assert_eq!(
        offered["codeAction"]["codeActionLiteralSupport"]["codeActionKind"]["valueSet"],
        json!(["quickfix", "refactor"])
    );
    assert_eq!(
        offered["foldingRange"]["lineFoldingOnly"], true,
        "{offered}"
    );
    // The bridge registers for the editor itself, and the agent reads symbols as a tree.
    assert!(completion.get("dynamicRegistration").is_none(), "{offered}");
    assert_eq!(
        offered["documentSymbol"]["hierarchicalDocumentSymbolSupport"], true,
        "{offered}"
    );
    editor.shutdown();
}

/// clangd's completion of a function through `serve`, for an editor with or without snippets.
fn clangd_completion(snippets: bool) -> Value {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let source = root.join("main.c");
    let text = "int area_of(int width, int height) { return width * height; }\nint main(void) { return area_\n";
    agent_tests::write_tree(
        &root,
        &[("main.c", text), ("compile_flags.txt", "-std=c11\n")],
    );
    let mut editor = Editor::start(agent_tests::serve_command(&root, state.path(), ""));
    initialize(
        &mut editor,
        &root,
        json!({"completion": {"completionItem": {"snippetSupport": snippets}}}),
    );
    editor.open(&source, "c");
    // Completion before the file is parsed gives plain words (kind Text) whatever the editor.
    editor.wait_for("clangd's diagnostics", |message| {
        message["method"] == "textDocument/publishDiagnostics"
    });
    let answer = editor.request(
        "textDocument/completion",
        json!({"textDocument": {"uri": url(&source)}, "position": {"line": 1, "character": 29}}),
    );
    editor.shutdown();
    let items = answer["result"]["items"]
        .as_array()
        .or_else(|| answer["result"].as_array())
        .unwrap_or_else(|| panic!("no completion items: {answer}"))
        .clone();
    items
        .into_iter()
        .find(|item| item["label"].as_str().unwrap_or("").contains("area_of"))
        .unwrap_or_else(|| panic!("no `area_of` item: {answer}"))
}

#[test]
fn clangd_completes_with_snippets_only_for_an_editor_that_takes_them() {
    let with = clangd_completion(true);
    let text = |item: &Value| {
        item["textEdit"]["newText"]
            .as_str()
            .or_else(|| item["insertText"].as_str())
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(with["insertTextFormat"], 2, "{with}");
    assert!(text(&with).contains("${1:"), "{with}");
    let without = clangd_completion(false);
    assert_ne!(without["insertTextFormat"], 2, "{without}");
    assert!(!text(&without).contains("${"), "{without}");
}
