//! `*/resolve` goes to the child that produced the item: with two languages open side by side,
//! each served by a child that resolves completion items, items of both resolved interleaved
//! each reach their own child, with their own `data`.

use agent_tests::editor::{Editor, url};
use serde_json::{Value, json};

#[test]
fn completion_items_of_two_children_are_resolved_by_the_child_that_made_them() {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let program = agent_tests::workspace_bin("fake-lsp").display().to_string();
    let mut config = String::new();
    for name in ["one", "two"] {
        let record = state.path().join(format!("{name}.jsonl"));
        config += &format!(
            "[server.{name}]\ncommand = {program:?}\nargs = [\"items\", {name:?}, \"record\", {:?}]\nlanguages = [{name:?}]\nfile_patterns = [\"*.{name}\"]\n",
            record.display().to_string()
        );
    }
    let command = agent_tests::serve_command(&root, state.path(), &config);
    let mut editor = Editor::start(command);
    editor.initialize(&root);
    let files = [root.join("a.one"), root.join("b.two")];
    for (file, language) in files.iter().zip(["one", "two"]) {
        std::fs::write(file, "x\n").unwrap();
        editor.open(file, language);
    }
    let complete = |editor: &mut Editor, file: &std::path::Path| {
        let answer = editor.request(
            "textDocument/completion",
            json!({"textDocument": {"uri": url(file)}, "position": {"line": 0, "character": 0}}),
        );
        answer["result"]["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    // Both children answer (the second starts when its document opens).
    let mut items = Vec::new();
    for _ in 0..2 {
        for file in &files {
            items.extend(complete(&mut editor, file));
        }
    }
    assert_eq!(items.len(), 12, "{items:?}");
    // Resolved interleaved: one, two, one, two, ... (by the order they came in).
    for (at, item) in items.iter().enumerate() {
        let resolved = editor.request("completionItem/resolve", item.clone());
        let echoed = &resolved["result"]["params"];
        let label = item["label"].as_str().unwrap();
        let from = label.split('-').next().unwrap();
        assert_eq!(
            echoed["data"]["from"], from,
            "item {at} ({label}) was resolved by the wrong child: {resolved}"
        );
        // The child gets its item as it made it.
        assert_eq!(
            echoed["data"],
            json!({"from": from, "n": echoed["data"]["n"]}),
            "{resolved}"
        );
    }
    // And each child saw only its own.
    for name in ["one", "two"] {
        let record = state.path().join(format!("{name}.jsonl"));
        let resolves: Vec<Value> = agent_tests::fake_lsp_record(&record)
            .into_iter()
            .filter(|message| message["method"] == "completionItem/resolve")
            .collect();
        assert_eq!(resolves.len(), 6, "{name}: {resolves:?}");
        assert!(
            resolves
                .iter()
                .all(|message| message["params"]["data"]["from"] == name)
        );
    }
    editor.shutdown();
}
