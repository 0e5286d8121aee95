//! JSON-RPC and LSP conformance of `serve` towards the editor: every request gets an answer
//! (also one that is not UTF-8, holds a lone surrogate or comes in a batch, whose every request
//! gets an error of its own), the messages the server reads itself are refused when malformed
//! instead of read with defaults, the file system root and the home directory are not taken as
//! a workspace, and `exit` without `shutdown` exits 1.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agent_tests::editor::{Editor, url};
use serde_json::{Value, json};

/// `serve` for `root`, with `config` as its config file's text and `home` as `$HOME`.
fn serve(root: &Path, state: &Path, config: &str, home: Option<&Path>) -> Editor {
    let config_path = state.join("config.toml");
    std::fs::write(&config_path, config).unwrap();
    let mut command = agent_tests::agent_lsp_command(state, &config_path, root, &["serve"]);
    if let Some(home) = home {
        command.env("HOME", home);
    }
    Editor::start(command)
}

/// `serve` on a fresh workspace, initialized; the folders live as long as the returned pair.
fn initialized() -> (Editor, PathBuf, [tempfile::TempDir; 2]) {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut editor = serve(&root, state.path(), "", None);
    editor.initialize(&root);
    (editor, root, [workspace, state])
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut framed = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    framed.extend_from_slice(body);
    framed
}

fn initialize_params(root: &Path) -> Value {
    json!({"processId": null, "rootUri": url(root), "capabilities": {},
           "workspaceFolders": [{"uri": url(root), "name": "w"}]})
}

/// The first message the server writes that `predicate` accepts.
fn wait(editor: &mut Editor, what: &str, predicate: impl Fn(&Value) -> bool) -> Value {
    editor.wait_for(what, predicate)
}

fn read(editor: &mut Editor, path: &Path) -> String {
    let answer = editor.request(
        "workspace/executeCommand",
        json!({"command": "agent.tool", "arguments": [{"name": "read", "arguments": {"path": path}}]}),
    );
    answer.to_string()
}

#[test]
fn every_request_is_answered_even_unreadable_ones() {
    let (mut editor, _, _dirs) = initialized();

    // Invalid UTF-8 in the params: a parse error, to the request's own id.
    editor.send_raw(&frame(
        b"{\"jsonrpc\":\"2.0\",\"id\":101,\"method\":\"nobody/knows\",\"params\":{\"a\":\"\xff\xfe\"}}",
    ));
    let answer = wait(&mut editor, "the answer to 101", |message| {
        message["id"] == 101
    });
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not valid UTF-8"),
        "{answer}"
    );

    // A lone surrogate is read (as U+FFFD): the request gets its ordinary answer.
    editor.send_raw(&frame(
        br#"{"jsonrpc":"2.0","id":102,"method":"nobody/knows","params":{"a":"\ud800"}}"#,
    ));
    let answer = wait(&mut editor, "the answer to 102", |message| {
        message["id"] == 102
    });
    assert_eq!(answer["error"]["code"], -32601, "{answer}");

    // A batch: no array, but an answer of its own to each request in it, as an LSP client
    // reads them (one message per frame, matched by id); and the server reads on.
    editor.send_raw(&frame(
        br#"[{"jsonrpc":"2.0","id":103,"method":"shutdown"},{"jsonrpc":"2.0","method":"x"},{"jsonrpc":"2.0","id":"104","method":"y"}]"#,
    ));
    for id in [json!(103), json!("104")] {
        let answer = wait(&mut editor, &format!("the answer to {id}"), |message| {
            message.is_object() && message["id"] == id
        });
        assert_eq!(answer["error"]["code"], -32600, "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("batch requests are not supported"),
            "{answer}"
        );
    }
    // A batch of many requests: every one of them answered by its id.
    let many = (0..50)
        .map(|n| json!({"jsonrpc": "2.0", "id": 200 + n, "method": "textDocument/hover"}))
        .collect::<Vec<_>>();
    editor.send_raw(&frame(&serde_json::to_vec(&many).unwrap()));
    for n in 0..50 {
        let answer = wait(
            &mut editor,
            &format!("the answer to {}", 200 + n),
            |message| message["id"] == 200 + n,
        );
        assert_eq!(answer["error"]["code"], -32600, "{answer}");
    }

    // The batch's `shutdown` was not run: the server still serves.
    let answer = editor.request("nobody/knows", json!({}));
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    editor.shutdown();
}

#[test]
fn a_lone_surrogate_in_a_document_keeps_every_position() {
    let (mut editor, root, _dirs) = initialized();
    let file = root.join("notes.txt");
    std::fs::write(&file, "on disk\n").unwrap();
    // What VS Code writes for a buffer holding half a surrogate pair.
    let open = format!(
        r#"{{"jsonrpc":"2.0","method":"textDocument/didOpen","params":{{"textDocument":{{"uri":"{}","languageId":"plaintext","version":1,"text":"half \ud83d pair\nnext line\n"}}}}}}"#,
        url(&file)
    );
    editor.send_raw(&frame(open.as_bytes()));
    let text = read(&mut editor, &file);
    assert!(text.contains("half \u{fffd} pair"), "{text}");
    assert!(text.contains("next line"), "{text}");
    editor.shutdown();
}

#[test]
fn malformed_initialize_params_are_refused_and_the_server_stays() {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut editor = serve(&root, state.path(), "", None);
    let garbage = [
        json!({"processId": "x", "rootUri": url(&root), "capabilities": {}}),
        json!({"processId": null, "rootUri": 5, "capabilities": {}}),
        json!({"processId": null, "rootUri": "not a uri", "capabilities": {}}),
        json!({"processId": null, "rootUri": url(&root), "capabilities": []}),
        json!({"processId": null, "workspaceFolders": [url(&root)], "capabilities": {}}),
        json!(["not", "an", "object"]),
    ];
    for params in garbage {
        let answer = editor.request("initialize", params.clone());
        assert_eq!(answer["error"]["code"], -32602, "{params} → {answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("malformed"),
            "{answer}"
        );
    }
    // Nothing was taken from them: a good `initialize` is the first one.
    let answer = editor.request("initialize", initialize_params(&root));
    assert!(answer["result"]["capabilities"].is_object(), "{answer}");
    editor.notify("initialized", json!({}));
    editor.shutdown();
}

#[test]
fn the_root_and_the_home_directory_are_not_a_workspace_unless_allowed() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    for broad in [Path::new("/"), home.as_path()] {
        let mut editor = serve(&home, state.path(), "", Some(&home));
        let answer = editor.request("initialize", initialize_params(broad));
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("refusing") && message.contains("allow_broad_workspace"),
            "{message}"
        );
    }
    // Through a link to it, too.
    let link_dir = tempfile::tempdir().unwrap();
    let link = link_dir.path().join("home");
    std::os::unix::fs::symlink(&home, &link).unwrap();
    let mut editor = serve(&home, state.path(), "", Some(&home));
    let answer = editor.request("initialize", initialize_params(&link));
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    drop(editor);

    // Allowed in the user's config: served.
    let mut editor = serve(
        &home,
        state.path(),
        "[editor]\nallow_broad_workspace = true\n",
        Some(&home),
    );
    let answer = editor.request("initialize", initialize_params(&home));
    assert!(answer["result"]["capabilities"].is_object(), "{answer}");
    editor.notify("initialized", json!({}));
    editor.shutdown();
}

#[test]
fn a_did_open_without_text_is_refused_and_the_buffer_is_kept() {
    let (mut editor, root, _dirs) = initialized();
    let file = root.join("notes.txt");
    std::fs::write(&file, "on disk\n").unwrap();
    editor.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": url(&file), "languageId": "plaintext", "version": 1, "text": "unsaved text\n"}}),
    );
    editor.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": url(&file), "languageId": "plaintext", "version": 2}}),
    );
    editor.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": url(&file), "version": "three"}, "contentChanges": [{"text": ""}]}),
    );
    for method in ["textDocument/didOpen", "textDocument/didChange"] {
        let shown = wait(&mut editor, "the refusal shown", |message| {
            message["method"] == "window/showMessage"
                && message["params"]["message"]
                    .as_str()
                    .is_some_and(|text| text.contains(method) && text.contains("malformed"))
        });
        assert_eq!(shown["params"]["type"], 1, "{shown}");
    }
    let text = read(&mut editor, &file);
    assert!(text.contains("unsaved text"), "{text}");
    editor.shutdown();
}

#[test]
fn exit_without_shutdown_exits_1() {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let mut server = agent_tests::agent_lsp_command(state.path(), &config, &root, &["serve"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write;
    let mut stdin = server.stdin.take().unwrap();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize_params(&root)});
    let exit = json!({"jsonrpc": "2.0", "method": "exit"});
    for message in [initialize, exit] {
        stdin
            .write_all(&frame(message.to_string().as_bytes()))
            .unwrap();
    }
    stdin.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = server.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "serve did not exit after `exit`");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(1), "{status}");
}
