//! What `agent-lsp serve` announces at `initialize` to an editor that cannot take a feature by
//! dynamic registration (Helix and eglot take none), against the scripted `fake-lsp` child,
//! which offers hover, definition and completion and echoes any other request: a feature the
//! child lacks gets the method's empty result, while an editor that takes the feature's
//! registration gets the child's own answer, as before. The real editors are in `helix.rs` and
//! `eglot.rs`.
//!
//! FIXME: a request routed while the child of a server never seen here (not in the built-in
//! table, nothing recorded) still starts reaches the child whatever it supports, since nothing
//! is known of it yet; a real server then answers "method not found".

use agent_tests::editor::{Editor, url};
use serde_json::{Value, json};

/// `initialize` with `capabilities` as the editor's; returns the announced capabilities.
fn initialize(editor: &mut Editor, root: &std::path::Path, capabilities: Value) -> Value {
    let mut params = editor.initialize_params(root, Value::Null);
    params["capabilities"] = capabilities;
    let response = editor.request("initialize", params);
    assert!(response.get("error").is_none(), "{response}");
    editor.notify("initialized", json!({}));
    response["result"]["capabilities"].clone()
}

#[test]
fn a_feature_the_child_lacks_is_answered_empty_only_where_it_was_announced_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    agent_tests::write_tree(&root, &[("a.fake", "alpha beta\n")]);
    let config = agent_tests::fake_lsp_config(&[]);
    let registering = json!({"textDocument": {
        "references": {"dynamicRegistration": true},
        "hover": {"dynamicRegistration": true},
    }});
    let up_front_state = tempfile::tempdir().unwrap();
    let registering_state = tempfile::tempdir().unwrap();
    for (editor_kind, capabilities, state) in [
        ("up front", json!({}), &up_front_state),
        ("registering", registering, &registering_state),
    ] {
        let mut editor = Editor::start(agent_tests::serve_command(&root, state.path(), &config));
        let announced = initialize(&mut editor, &root, capabilities);
        // pyright, on PATH, provides references: announced to the editor that cannot register.
        assert_eq!(
            announced.get("referencesProvider").is_some(),
            editor_kind == "up front",
            "{editor_kind}: {announced}"
        );
        let file = root.join("a.fake");
        editor.open(&file, "fake");
        let at =
            json!({"textDocument": {"uri": url(&file)}, "position": {"line": 0, "character": 1}});
        // Hover, which it announces: its own answer (an echo) for both. Answered once the child
        // runs, so that what the child lacks is known below.
        let answer = editor.request("textDocument/hover", at.clone());
        assert_eq!(
            answer["result"]["echo"], "textDocument/hover",
            "{editor_kind}: {answer}"
        );
        let mut references = at;
        references["context"] = json!({"includeDeclaration": true});
        let answer = editor.request("textDocument/references", references);
        assert!(answer.get("error").is_none(), "{editor_kind}: {answer}");
        if editor_kind == "up front" {
            // fake-lsp announces no references: the empty result, not its echo.
            assert_eq!(answer["result"], Value::Null, "{answer}");
        } else {
            assert_eq!(
                answer["result"]["echo"], "textDocument/references",
                "{answer}"
            );
        }
        // Its capabilities are kept for the next `initialize` (it sends no version).
        let recorded = state.path().join("servers/fake/unknown.json");
        let recorded: Value = serde_json::from_slice(&std::fs::read(&recorded).unwrap()).unwrap();
        assert_eq!(
            recorded["capabilities"]["hoverProvider"], true,
            "{recorded}"
        );
        assert_eq!(recorded["server"], "fake", "{recorded}");
    }

    // The next `serve` knows fake-lsp from its record: a request routed while the child still
    // starts (it takes a second to initialize) is answered from the record, without waiting.
    let slow = agent_tests::fake_lsp_config(&["slow", "initialize", "1000"]);
    let mut editor = Editor::start(agent_tests::serve_command(
        &root,
        up_front_state.path(),
        &slow,
    ));
    initialize(&mut editor, &root, json!({}));
    let file = root.join("a.fake");
    editor.open(&file, "fake");
    let answer = editor.request(
        "textDocument/references",
        json!({"textDocument": {"uri": url(&file)}, "position": {"line": 0, "character": 1},
               "context": {"includeDeclaration": true}}),
    );
    assert_eq!(answer["result"], Value::Null, "{answer}");
    assert!(answer.get("error").is_none(), "{answer}");
}
