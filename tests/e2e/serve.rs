//! `agent-lsp serve` driven like an editor, with real child servers behind it: proxied answers
//! equal the child's direct answers, diagnostics are forwarded, the agent's tools see the
//! editor's unsaved buffer, custom methods and `$/cancelRequest` reach the child, child → editor
//! requests come back with mapped ids, and garbage input is survived.

use std::path::Path;
use std::time::Duration;

use agent_tests::editor::{Editor, url};
use agent_tests::serve_command;
use lsp_bridge::position::PositionEncoding;
use serde_json::{Value, json};

fn serve(workspace: &Path, state: &Path, config: Option<&str>) -> Editor {
    Editor::start(serve_command(workspace, state, config.unwrap_or("")))
}

/// The same request answered by pyright directly (through the bridge's plain child client).
async fn direct_answers(root: &Path, file: &Path, requests: &[(&str, Value)]) -> Vec<Value> {
    let mut config = agent_tests::bridge_config();
    config.servers.retain(|server| server.name == "pyright");
    config.servers[0].position_encodings = vec![PositionEncoding::Utf16];
    let bridge = lsp_bridge::Bridge::new(config, vec![root.to_owned()]);
    let child = bridge.child_for(file).await.unwrap();
    let text = std::fs::read_to_string(file).unwrap();
    child
        .notify("textDocument/didOpen", json!({"textDocument": {"uri": url(file), "languageId": "python", "version": 1, "text": text}}))
        .await
        .unwrap();
    let uri = lsp_bridge::lsp_types::Url::from_file_path(file).unwrap();
    let mut changes = child.diagnostics().subscribe();
    while child.diagnostics().get(&uri).is_none() {
        tokio::time::timeout(Duration::from_secs(30), changes.changed())
            .await
            .unwrap()
            .unwrap();
    }
    let mut answers = Vec::new();
    for (method, params) in requests {
        answers.push(child.request(method, params.clone()).await.unwrap());
    }
    bridge.shutdown_all().await;
    answers
}

#[test]
fn proxied_answers_equal_the_direct_ones_and_diagnostics_are_forwarded() {
    let workspace = agent_tests::fixture("python");
    let root = workspace.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let main = root.join("main.py");
    let mut editor = serve(&root, state.path(), None);
    let init = editor.initialize(&root);
    let caps = &init["capabilities"];
    assert_eq!(caps["positionEncoding"], "utf-16");
    assert_eq!(caps["textDocumentSync"]["change"], 1);
    // No child runs yet (pyright starts when main.py is opened, and registers its features
    // with editors that take dynamic registrations): completion is announced up front.
    assert_eq!(caps["completionProvider"]["resolveProvider"], true);
    assert!(caps.get("definitionProvider").is_none(), "{caps}");
    assert!(
        caps["executeCommandProvider"]["commands"]
            .as_array()
            .unwrap()
            .contains(&json!("agent.tool"))
    );

    editor.open(&main, "python");
    let published = editor.wait_for("diagnostics of main.py", |message| {
        message["method"] == "textDocument/publishDiagnostics"
            && message["params"]["uri"] == url(&main)
    });
    assert_eq!(published["params"]["version"], 1);

    // `Fläche` on line 3 (0-based 2) after "café ☕ 😀": UTF-16 offset 28.
    let at = |line: u32, character: u32| json!({"textDocument": {"uri": url(&main)}, "position": {"line": line, "character": character}});
    let mut references = at(2, 28);
    references["context"] = json!({"includeDeclaration": true});
    let requests = [
        ("textDocument/definition", at(2, 28)),
        ("textDocument/hover", at(4, 14)),
        ("textDocument/references", references),
    ];
    let proxied = requests
        .iter()
        .map(|(method, params)| {
            let response = editor.request(method, params.clone());
            assert!(response.get("error").is_none(), "{method}: {response}");
            response["result"].clone()
        })
        .collect::<Vec<_>>();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let direct = runtime.block_on(direct_answers(&root, &main, &requests));
    assert_eq!(proxied, direct);
    assert_eq!(
        proxied[0][0]["range"]["start"],
        json!({"line": 3, "character": 6}),
        "{}",
        proxied[0]
    );

    // An edit that breaks the code: the child's new diagnostics reach the editor.
    let text = std::fs::read_to_string(&main).unwrap() + "print(nicht_definiert)\n";
    editor.notify("textDocument/didChange", json!({"textDocument": {"uri": url(&main), "version": 2}, "contentChanges": [{"text": text}]}));
    let published = editor.wait_for("diagnostics of version 2", |message| {
        message["method"] == "textDocument/publishDiagnostics" && message["params"]["version"] == 2
    });
    let messages = published["params"]["diagnostics"].as_array().unwrap();
    assert!(
        messages
            .iter()
            .any(|d| d["message"].as_str().unwrap().contains("nicht_definiert")),
        "{published}"
    );
    editor.shutdown();
}

#[test]
fn the_agents_tools_see_the_editors_unsaved_buffer() {
    let workspace = agent_tests::fixture("python");
    let root = workspace.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let main = root.join("main.py");
    let mut editor = serve(&root, state.path(), None);
    editor.initialize(&root);
    editor.open(&main, "python");
    let text =
        std::fs::read_to_string(&main).unwrap() + "\ndef nur_im_puffer() -> int:\n    return 1\n";
    editor.notify("textDocument/didChange", json!({"textDocument": {"uri": url(&main), "version": 2}, "contentChanges": [{"text": text}]}));

    let run = |editor: &mut Editor, name: &str, arguments: Value| {
        let response = editor.request(
            "workspace/executeCommand",
            json!({"command": "agent.tool", "arguments": [{"name": name, "arguments": arguments}]}),
        );
        assert!(response.get("error").is_none(), "{response}");
        response["result"].clone()
    };
    let outline = run(
        &mut editor,
        "lsp_document_symbols",
        json!({"path": "main.py"}),
    );
    assert_eq!(outline["is_error"], false, "{outline}");
    assert!(
        outline["text"]
            .as_str()
            .unwrap()
            .contains("function nur_im_puffer (7:5)"),
        "{outline}"
    );
    assert!(
        outline["text"]
            .as_str()
            .unwrap()
            .contains("computed on main.py v2"),
        "{outline}"
    );
    assert!(
        !std::fs::read_to_string(&main)
            .unwrap()
            .contains("nur_im_puffer"),
        "the buffer was never saved"
    );
    let hover = run(
        &mut editor,
        "lsp_hover",
        json!({"path": "main.py", "line": 7, "symbol": "nur_im_puffer"}),
    );
    assert!(
        hover["text"]
            .as_str()
            .unwrap()
            .contains("def nur_im_puffer() -> int"),
        "{hover}"
    );
    // The call is recorded in the server's session like any tool call.
    let sessions = editor.request(
        "workspace/executeCommand",
        json!({"command": "agent.session.list"}),
    );
    assert_eq!(
        sessions["result"].as_array().unwrap().len(),
        1,
        "{sessions}"
    );
    editor.shutdown();
}

#[test]
fn custom_methods_cancellation_and_child_requests_cross_the_proxy() {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    std::fs::write(root.join("a.fake"), "grüße\n").unwrap();
    let state = tempfile::tempdir().unwrap();
    let record = state.path().join("received.jsonl");
    let config = agent_tests::fake_lsp_config(&[
        "slow",
        "textDocument/hover",
        "20000",
        "record",
        record.to_str().unwrap(),
    ]);
    let mut editor = serve(&root, state.path(), Some(&config));
    editor.initialize(&root);
    let file = root.join("a.fake");
    editor.open(&file, "fake");

    // A method no one here knows, about a document: it goes to the child and its answer back.
    let response = editor.request(
        "fake/custom",
        json!({"textDocument": {"uri": url(&file)}, "x": "ü"}),
    );
    assert_eq!(response["result"]["echo"], "fake/custom", "{response}");
    assert_eq!(response["result"]["params"]["x"], "ü");

    // The child's own requests reach the editor with fresh ids, and the answers go back.
    for method in [
        "workspace/configuration",
        "client/registerCapability",
        "window/workDoneProgress/create",
        "workspace/applyEdit",
    ] {
        editor.notify(
            "fake/ask",
            json!({"method": method, "params": {"items": [{"section": "fake"}]}}),
        );
        let request = editor.wait_for(&format!("{method} from the child"), |message| {
            message["method"] == method && message.get("id").is_some()
        });
        assert!(request["id"].is_i64(), "{request}");
    }

    // Cancel a slow request: the editor gets RequestCancelled, the child gets $/cancelRequest.
    let id = editor.request_async(
        "textDocument/hover",
        json!({"textDocument": {"uri": url(&file)}, "position": {"line": 0, "character": 1}}),
    );
    std::thread::sleep(Duration::from_millis(300));
    editor.notify("$/cancelRequest", json!({"id": id}));
    let response = editor.response(id);
    assert_eq!(response["error"]["code"], -32800, "{response}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let received = std::fs::read_to_string(&record).unwrap_or_default();
        if received
            .lines()
            .any(|line| line.contains("$/cancelRequest"))
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the child never received $/cancelRequest:\n{received}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    editor.shutdown();
}

fn frame(message: &Value) -> Vec<u8> {
    let body = message.to_string();
    format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
}

/// A workspace with one `a.fake` file, whose fake child records what it receives.
struct FakeWorkspace {
    file: std::path::PathBuf,
    record: std::path::PathBuf,
    _workspace: tempfile::TempDir,
    _state: tempfile::TempDir,
}

impl FakeWorkspace {
    /// Serve it with the fake child scripted by `args`: the editor is initialized and has
    /// `a.fake` (holding `text`) open.
    fn serve(text: &str, args: &[&str]) -> (Editor, FakeWorkspace) {
        FakeWorkspace::serve_configured(text, args, "", None)
    }

    /// [`FakeWorkspace::serve`] with `config` added to the configuration file (after the
    /// fake server's table, so a bare key lands in it), for an editor that calls itself
    /// `client` in `initialize`.
    fn serve_configured(
        text: &str,
        args: &[&str],
        config: &str,
        client: Option<&str>,
    ) -> (Editor, FakeWorkspace) {
        let workspace = tempfile::tempdir().unwrap();
        let root = workspace.path().canonicalize().unwrap();
        let file = root.join("a.fake");
        std::fs::write(&file, text).unwrap();
        let state = tempfile::tempdir().unwrap();
        let record = state.path().join("received.jsonl");
        let mut args = args.to_vec();
        args.extend(["record", record.to_str().unwrap()]);
        let config = format!("{}{config}", agent_tests::fake_lsp_config(&args));
        let mut editor = Editor::start(serve_command(&root, state.path(), &config));
        editor.client_name = client.map(str::to_owned);
        editor.initialize(&root);
        editor.open(&file, "fake");
        let fake = FakeWorkspace {
            file,
            record,
            _workspace: workspace,
            _state: state,
        };
        (editor, fake)
    }

    /// Params naming the start of `a.fake`.
    fn at_start(&self) -> Value {
        json!({"textDocument": {"uri": url(&self.file)}, "position": {"line": 0, "character": 0}})
    }

    /// What the child has received so far.
    fn received(&self) -> Vec<Value> {
        agent_tests::fake_lsp_record(&self.record)
    }
}

#[test]
fn requests_reach_the_child_with_the_editors_ids_and_never_overtake_a_change() {
    let (mut editor, fake) = FakeWorkspace::serve("one\n", &[]);
    let (file, params) = (fake.file.clone(), fake.at_start());
    // The first request finds the document's child (on the loop); it and the ones after it
    // (by the thread that reads the editor) are forwarded as they are, with the editor's ids.
    let first = editor.request_async("fake/custom", params.clone());
    editor.response(first);
    let mut forwarded = vec![first];
    for _ in 0..5 {
        let id = editor.request_async("fake/custom", params.clone());
        assert_eq!(editor.response(id)["result"]["echo"], "fake/custom");
        forwarded.push(id);
    }
    // Resolving a completion item (no document named) goes to the child that produced it, as
    // it is too.
    editor.request("textDocument/completion", params.clone());
    let resolve = editor.request_async("completionItem/resolve", json!({"label": "grüße"}));
    assert_eq!(
        editor.response(resolve)["result"]["echo"],
        "completionItem/resolve"
    );
    // A document change and a request in one write, many times over: each request must reach
    // the child after the change sent before it, whichever path it takes.
    let mut burst = Vec::new();
    let changes = 2..42;
    for version in changes.clone() {
        burst.extend(frame(
            &json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
                "textDocument": {"uri": url(&file), "version": version},
                "contentChanges": [{"text": format!("version {version}\n")}],
            }}),
        ));
        burst.extend(frame(&json!({"jsonrpc": "2.0", "id": 10_000 + version, "method": "fake/custom", "params": params})));
    }
    editor.send_raw(&burst);
    for version in changes.clone() {
        let answer = editor.wait_for("the answer after a change", |message| {
            message["id"] == 10_000 + version
        });
        assert_eq!(answer["result"]["echo"], "fake/custom", "{answer}");
    }
    // Ids that are not plain numbers take the loop's path, with ids of the bridge's own.
    editor.send(
        &json!({"jsonrpc": "2.0", "id": "text id", "method": "fake/custom", "params": params}),
    );
    let answer = editor.wait_for("the answer to a text id", |message| {
        message["id"] == "text id"
    });
    assert_eq!(answer["result"]["echo"], "fake/custom", "{answer}");

    let received = fake.received();
    let ids = received
        .iter()
        .filter(|message| message["method"] == "fake/custom")
        .map(|message| message["id"].as_i64().unwrap())
        .collect::<Vec<_>>();
    for id in &forwarded {
        assert!(
            ids.contains(id),
            "request {id} was not forwarded as it is: {ids:?}"
        );
    }
    assert!(
        received.iter().any(
            |message| message["method"] == "completionItem/resolve" && message["id"] == resolve
        ),
        "the resolve was not forwarded as it is"
    );
    assert_eq!(
        ids.iter()
            .filter(|id| **id >= lsp_bridge::FIRST_OWN_ID)
            .count(),
        1,
        "only the text id goes with an id of the bridge: {ids:?}"
    );
    let position =
        |predicate: &dyn Fn(&Value) -> bool| received.iter().position(predicate).unwrap();
    for version in changes {
        let change = position(&|message| {
            message["method"] == "textDocument/didChange"
                && message["params"]["textDocument"]["version"] == version
        });
        // The request after the change: by the editor's id, or (taken by the loop) by its place
        // among the requests the child got.
        let request = received
            .iter()
            .enumerate()
            .skip(change)
            .find(|(_, message)| message["method"] == "fake/custom")
            .map(|(at, _)| at)
            .expect("a request after the change");
        assert!(change < request);
        if let Some(direct) = received
            .iter()
            .position(|message| message["id"] == 10_000 + version)
        {
            assert!(change < direct, "request {version} overtook its change");
        }
    }
    editor.shutdown();
}

#[test]
fn a_cancel_queued_behind_a_change_still_cancels_a_forwarded_request() {
    let (mut editor, fake) =
        FakeWorkspace::serve("one\n", &["slow", "textDocument/hover", "60000"]);
    let (file, params) = (fake.file.clone(), fake.at_start());
    editor.request("fake/custom", params.clone());
    // Forwarded as it is (nothing queued), and slow.
    let id = editor.request_async("textDocument/hover", params);
    std::thread::sleep(Duration::from_millis(300));
    // The user types, and the editor cancels the hover: the changes go to the loop, and the
    // cancellation queues behind them (the loop takes longer over a change than the intake).
    let mut burst = Vec::new();
    for version in 2..102 {
        burst.extend(frame(
            &json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
                "textDocument": {"uri": url(&file), "version": version},
                "contentChanges": [{"text": format!("version {version}\n").repeat(500)}],
            }}),
        ));
    }
    burst.extend(frame(
        &json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": id}}),
    ));
    editor.send_raw(&burst);
    let response = editor.response(id);
    assert_eq!(response["error"]["code"], -32800, "{response}");
    let received = fake.received();
    assert!(
        received
            .iter()
            .any(|message| message["method"] == "textDocument/hover" && message["id"] == id),
        "the hover was forwarded with the editor's id"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !fake
        .received()
        .iter()
        .any(|message| message["method"] == "$/cancelRequest" && message["params"]["id"] == id)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the child never got $/cancelRequest for {id}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    editor.shutdown();
}

#[test]
fn a_restarted_child_is_given_the_editors_unsaved_buffer_again() {
    let (mut editor, fake) = FakeWorkspace::serve("on disk\n", &["crash-on", "fake/crash"]);
    editor.change(&fake.file, "unsaved\n");
    let params = fake.at_start();
    assert_eq!(
        editor.request("fake/custom", params.clone())["result"]["echo"],
        "fake/custom"
    );

    // The child dies on this request: the editor hears why.
    let crashed = editor.request("fake/crash", params.clone());
    assert!(crashed["error"]["message"].as_str().is_some(), "{crashed}");
    // The next request starts it again, and the new instance must first get the buffer as the
    // editor has it (the editor will not open it again).
    let answer = editor.request("fake/custom", params);
    assert_eq!(answer["result"]["echo"], "fake/custom", "{answer}");

    let received = fake.received();
    let restart = received
        .iter()
        .rposition(|message| message["method"] == "initialize")
        .unwrap();
    assert!(restart > 0, "the child was restarted: {received:#?}");
    let after = &received[restart..];
    let open = after
        .iter()
        .position(|message| message["method"] == "textDocument/didOpen")
        .unwrap_or_else(|| panic!("no didOpen after the restart: {after:#?}"));
    assert_eq!(after[open]["params"]["textDocument"]["text"], "unsaved\n");
    assert_eq!(after[open]["params"]["textDocument"]["version"], 2);
    let request = after
        .iter()
        .position(|message| message["method"] == "fake/custom")
        .unwrap();
    assert!(open < request, "{after:#?}");
    editor.shutdown();
}

/// VS Code and Neovim (libuv) give a server socket pairs, not pipes, for its stdio.
#[test]
fn an_editor_that_gives_socket_pairs_for_stdio_is_served_and_large_answers_arrive_whole() {
    use std::io::Write;
    use std::os::unix::net::UnixStream;
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    let file = root.join("a.fake");
    std::fs::write(&file, "one\n").unwrap();
    let state = tempfile::tempdir().unwrap();
    let (mut to_server, server_in) = UnixStream::pair().unwrap();
    let (from_server, server_out) = UnixStream::pair().unwrap();
    let mut server = serve_command(&root, state.path(), &agent_tests::fake_lsp_config(&[]))
        .stdin(std::process::Stdio::from(std::os::fd::OwnedFd::from(
            server_in,
        )))
        .stdout(std::process::Stdio::from(std::os::fd::OwnedFd::from(
            server_out,
        )))
        .spawn()
        .unwrap();
    from_server
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut from_server = std::io::BufReader::new(from_server);
    let mut send = |message: Value| to_server.write_all(&frame(&message)).unwrap();
    let mut answer = |id: i64| loop {
        let body = lsp_bridge::framing::read_frame_blocking(&mut from_server)
            .unwrap()
            .expect("the server is still there");
        let message: Value = serde_json::from_slice(&body).unwrap();
        if message["id"] == id && message.get("method").is_none() {
            return message;
        }
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "processId": null, "rootUri": url(&root), "capabilities": {},
        }}),
    );
    assert!(answer(1)["result"]["capabilities"].is_object());
    send(json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
    send(
        json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": url(&file), "languageId": "fake", "version": 1, "text": "one\n",
        }}}),
    );
    // Answers far larger than a socket's buffer, on both paths (the first request goes through
    // the loop, the others are forwarded): each arrives whole.
    let large = "grüße ".repeat(200_000);
    for id in 2..5 {
        send(
            json!({"jsonrpc": "2.0", "id": id, "method": "fake/custom", "params": {
                "textDocument": {"uri": url(&file)}, "large": large,
            }}),
        );
        let echoed = answer(id);
        assert_eq!(
            echoed["result"]["params"]["large"],
            large.as_str(),
            "answer {id}"
        );
    }
    send(json!({"jsonrpc": "2.0", "id": 5, "method": "shutdown"}));
    assert_eq!(answer(5)["result"], Value::Null);
    send(json!({"jsonrpc": "2.0", "method": "exit"}));
    assert!(server.wait().unwrap().success());
}

/// An editor that dies with answers unread resets its socket: the server's next read fails
/// once (`ECONNRESET`), then reads the end of input. The failure is what gets reported.
#[test]
fn an_editor_socket_reset_is_reported_as_a_read_failure_not_a_clean_end() {
    use std::io::Write;
    use std::os::unix::net::UnixStream;
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    // One socket for stdin and stdout, so the server's answers wait unread on our side.
    let (mut editor, server_end) = UnixStream::pair().unwrap();
    let server_out = server_end.try_clone().unwrap();
    let server = serve_command(&root, state.path(), "")
        .stdin(std::process::Stdio::from(std::os::fd::OwnedFd::from(
            server_end,
        )))
        .stdout(std::process::Stdio::from(std::os::fd::OwnedFd::from(
            server_out,
        )))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    editor
        .write_all(&frame(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "processId": null, "rootUri": url(&root), "capabilities": {},
            }}),
        ))
        .unwrap();
    // Wait (bounded) until the answer is here, and leave all of it but its first byte unread.
    editor
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut first = [0u8; 1];
    std::io::Read::read_exact(&mut editor, &mut first).unwrap();
    assert_eq!(&first, b"C", "a frame header began");
    drop(editor);
    let output = server.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("failed to read from the editor"),
        "{stderr}"
    );
}

#[test]
fn garbage_from_the_editor_gets_errors_and_the_server_keeps_serving() {
    let workspace = agent_tests::fixture("python");
    let root = workspace.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut editor = serve(&root, state.path(), None);

    // Before initialize.
    let response = editor.request("textDocument/hover", json!({}));
    assert_eq!(response["error"]["code"], -32002, "{response}");
    editor.initialize(&root);

    // Invalid JSON in a well-framed body.
    editor.send_raw(b"Content-Length: 9\r\n\r\n{not json");
    let error = editor.wait_for("a parse error", |message| {
        message["error"]["code"] == -32700
    });
    assert_eq!(error["id"], Value::Null);
    // Not an object; a bad id; neither method nor id.
    editor.send(&json!([1, 2, 3]));
    editor.send(&json!({"jsonrpc": "2.0", "id": {"nested": true}, "method": "textDocument/hover"}));
    editor.send(&json!({"jsonrpc": "2.0"}));
    for _ in 0..3 {
        editor.wait_for("an invalid-request error", |message| {
            message["error"]["code"] == -32600
        });
    }
    // A response to a request that was never sent is ignored.
    editor.send(&json!({"jsonrpc": "2.0", "id": 424242, "result": null}));
    // Missing params, unknown method without a document.
    let response = editor.request("textDocument/definition", json!({}));
    assert_eq!(response["error"]["code"], -32602, "{response}");
    let response = editor.request("nobody/knows", json!({}));
    assert_eq!(response["error"]["code"], -32601, "{response}");
    // Stray line breaks between messages, then a good message. (Broken framing ends the
    // connection: tests/e2e/hardening.rs.)
    editor.send_raw(b"\r\n\r\n");
    let main = root.join("main.py");
    editor.open(&main, "python");
    let response = editor.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": url(&main)}, "position": {"line": 4, "character": 14}}),
    );
    assert!(response["result"]["contents"].is_object(), "{response}");
    editor.shutdown();
}

#[test]
fn content_modified_reaches_the_editor_and_its_request_is_sent_once() {
    // The child answers the first three hovers with ContentModified.
    let (mut editor, fake) =
        FakeWorkspace::serve("one\n", &["content-modified", "textDocument/hover", "3"]);
    let params = fake.at_start();
    // The first goes through the loop (it finds the document's child), the second is
    // forwarded by the intake, the third, behind a change, through the loop again.
    for _ in 0..2 {
        let answer = editor.request("textDocument/hover", params.clone());
        assert_eq!(answer["error"]["code"], -32801, "{answer}");
    }
    editor.change(&fake.file, "two\n");
    let answer = editor.request("textDocument/hover", params.clone());
    assert_eq!(answer["error"]["code"], -32801, "{answer}");
    // Each was asked once: the editor, which knows its positions, decides what to ask again.
    let hovers = fake
        .received()
        .into_iter()
        .filter(|message| message["method"] == "textDocument/hover")
        .count();
    assert_eq!(hovers, 3);
    let answer = editor.request("textDocument/hover", params);
    assert_eq!(answer["result"]["echo"], "textDocument/hover", "{answer}");
    editor.shutdown();
}
