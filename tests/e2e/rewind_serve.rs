//! Rewind through `serve` and a scripted editor: the agent's edit of an open document is taken
//! back as a `workspace/applyEdit` (into the editor's undo history, the disk untouched), what
//! its command changed on disk is restored, the user's unsaved buffer of another file is never
//! touched, and an unsaved change of the user's to a file the agent changed is a conflict.

use std::process::Command;

use agent_tests::editor::{Editor, url};
use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, ModelTurn, Reply};
use serde_json::{Value, json};

fn command(editor: &mut Editor, command: &str, argument: Value) -> Value {
    let answer = editor.request(
        "workspace/executeCommand",
        json!({"command": command, "arguments": [argument]}),
    );
    assert!(answer.get("error").is_none(), "{command}: {answer}");
    answer["result"].clone()
}

fn apply_edits_for(editor: &Editor, path: &std::path::Path) -> usize {
    editor
        .server_requests
        .iter()
        .filter(|request| request["method"] == "workspace/applyEdit")
        .filter(|request| {
            request["params"]["edit"]
                .to_string()
                .contains(url(path).as_str())
        })
        .count()
}

#[test]
fn a_rewind_in_the_editor_changes_open_buffers_through_apply_edit_and_keeps_the_users_own() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let (notes, script, other) = (
        root.join("notes.txt"),
        root.join("script.txt"),
        root.join("other.txt"),
    );
    std::fs::write(&notes, "one\n").unwrap();
    std::fs::write(&script, "alpha\n").unwrap();
    std::fs::write(&other, "other\n").unwrap();
    let config = state.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let mut process = Command::new(agent_tests::workspace_bin("agent-lsp"));
    process
        .env("PATH", agent_tests::tools_path())
        .env("AGENT_LSP_STATE_DIR", state.path())
        .env("AGENT_LSP_CONFIG", &config)
        .env_remove("DEEPSEEK_API_KEY")
        .args(["--workspace", root.to_str().unwrap(), "serve"]);
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all::<Reply>([
        ModelTurn::thinking_call(
            "edit",
            json!({"path": "notes.txt", "old_string": "one", "new_string": "ONE"}),
        )
        .into(),
        ModelTurn::thinking_call("shell", json!({"command": "echo beta > script.txt"})).into(),
        ModelTurn::new().reasoning("Done.").content("Done.").into(),
    ]);
    let mut editor = Editor::start(process);
    editor.initialize_with(
        &root,
        json!({"baseUrl": endpoint.base_url(), "apiKey": "sk-test", "model": "deepseek-v4-flash", "preset": "standard"}),
    );
    editor.open(&notes, "plaintext");
    editor.open(&other, "plaintext");
    editor.change(&other, "other, unsaved\n");

    let answer = command(
        &mut editor,
        "agent.ask",
        json!({"prompt": "Change the notes"}),
    );
    assert_eq!(answer["outcome"], "answered", "{answer}");
    assert_eq!(editor.buffer(&notes), "ONE\n");
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "one\n",
        "the edit is unsaved"
    );
    assert_eq!(std::fs::read_to_string(&script).unwrap(), "beta\n");

    // The answer's heading in the chat document offers the rewind as a code action.
    let chat = root.join(".agent-lsp/chat.agent.md");
    let text = match editor.buffers.get(&url(&chat)) {
        Some((text, _)) => text.clone(),
        None => std::fs::read_to_string(&chat).unwrap(),
    };
    let line = text
        .lines()
        .position(|line| line == "## agent (turn 1)")
        .unwrap_or_else(|| panic!("no answer heading in {text}"));
    if !editor.buffers.contains_key(&url(&chat)) {
        editor.open(&chat, "markdown");
    }
    let actions = editor.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": url(&chat)},
               "range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 0}},
               "context": {"diagnostics": []}}),
    );
    let rewind_action = actions["result"]
        .as_array()
        .unwrap()
        .iter()
        .find(|action| action["kind"] == "agent.rewind")
        .unwrap_or_else(|| panic!("no rewind action in {actions}"))
        .clone();
    assert_eq!(rewind_action["title"], "Rewind to before turn 1");
    assert_eq!(
        rewind_action["command"],
        json!({"title": "Rewind to before turn 1", "command": "agent.rewind", "arguments": [{"turn": 1}]})
    );

    let turns = command(&mut editor, "agent.rewind.turns", json!({}));
    assert_eq!(
        turns["turns"][0]["files"],
        json!([["notes.txt", "edit"], ["script.txt", "command"]]),
        "{turns}"
    );

    let report = command(&mut editor, "agent.rewind", json!({"scope": "files"}));
    assert_eq!(report["outcome"], "applied", "{report}");
    assert_eq!(
        report["restored"],
        json!([["notes.txt", "editor"], ["script.txt", "disk"]])
    );
    assert_eq!(
        editor.buffer(&notes),
        "one\n",
        "the buffer went back through the editor"
    );
    assert_eq!(
        apply_edits_for(&editor, &notes),
        2,
        "the agent's edit, then the rewind's"
    );
    assert_eq!(std::fs::read_to_string(&script).unwrap(), "alpha\n");
    assert_eq!(editor.buffer(&other), "other, unsaved\n");
    assert_eq!(
        apply_edits_for(&editor, &other),
        0,
        "the user's buffer is never touched"
    );
    let turns = command(&mut editor, "agent.rewind.turns", json!({}));
    assert_eq!(turns["turns"][0]["rewound"], true, "{turns}");

    // Undone, the agent's text is back in the buffer; then the user types in it, and a new
    // rewind keeps the unsaved change as a conflict.
    let undone = command(&mut editor, "agent.rewind.undo", json!({}));
    assert_eq!(undone["outcome"], "applied", "{undone}");
    assert_eq!(editor.buffer(&notes), "ONE\n");
    assert_eq!(std::fs::read_to_string(&script).unwrap(), "beta\n");
    editor.change(&notes, "ONE and mine\n");
    let planned = command(
        &mut editor,
        "agent.rewind",
        json!({"scope": "files", "dryRun": true}),
    );
    assert_eq!(planned["outcome"], "planned");
    assert_eq!(planned["conflicts"][0]["path"], "notes.txt", "{planned}");
    assert_eq!(
        planned["conflicts"][0]["why"],
        "unsaved changes in the editor"
    );
    assert!(
        planned["conflicts"][0]["diff"]
            .as_str()
            .unwrap()
            .contains("-ONE and mine"),
        "{planned}"
    );
    let report = command(&mut editor, "agent.rewind", json!({"scope": "files"}));
    assert_eq!(report["outcome"], "partial", "{report}");
    assert_eq!(editor.buffer(&notes), "ONE and mine\n");
    assert_eq!(std::fs::read_to_string(&script).unwrap(), "alpha\n");
    endpoint.assert_no_violations();
    editor.shutdown();
}
