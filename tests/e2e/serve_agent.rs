//! The agent inside `agent-lsp serve`, driven like an editor with pyright behind it and the
//! loopback model endpoint: "Fix with agent" edits the editor's buffer through
//! `workspace/applyEdit` and the diagnostic disappears; a prompt document completes `@path`
//! and gets its answer streamed in with cancellable progress; cancelling mid-turn leaves a
//! consistent session; a fix that leaves only hints says so; missing or unreachable models are
//! reported with `window/showMessage` while the server keeps serving; and a late server's
//! features are registered dynamically (`--listen` is in `listen_auth.rs`).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use agent_lsp::session::event::{EventBody, EventKind};
use agent_lsp::session::store::Store;
use agent_tests::editor::{Editor, url};
use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, ModelTurn, Reply};
use serde_json::{Value, json};

struct Workspace {
    _dir: tempfile::TempDir,
    root: PathBuf,
    state: tempfile::TempDir,
}

impl Workspace {
    fn new(files: &[(&str, &str)]) -> Workspace {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("pyrightconfig.json"), "{}").unwrap();
        agent_tests::write_tree(&root, files);
        Workspace {
            _dir: dir,
            root,
            state: tempfile::tempdir().unwrap(),
        }
    }

    fn command(&self) -> Command {
        let config = self.state.path().join("config.toml");
        std::fs::write(&config, "").unwrap();
        let mut command = Command::new(agent_tests::workspace_bin("agent-lsp"));
        command
            .env("PATH", agent_tests::tools_path())
            .env("AGENT_LSP_STATE_DIR", self.state.path())
            .env("AGENT_LSP_CONFIG", &config)
            .env_remove("DEEPSEEK_API_KEY")
            .args(["--workspace", self.root.to_str().unwrap(), "serve"]);
        command
    }

    /// A server whose model is `base_url` (through `initializationOptions`, as the VS Code
    /// extension passes it), or none.
    fn serve(&self, base_url: Option<&str>) -> Editor {
        let mut editor = Editor::start(self.command());
        let options = match base_url {
            Some(base_url) => {
                json!({"baseUrl": base_url, "apiKey": "sk-test", "model": "deepseek-v4-flash", "preset": "standard"})
            }
            None => Value::Null,
        };
        editor.initialize_with(&self.root, options);
        editor
    }

    fn store(&self) -> Store {
        Store::for_workspace_in(self.state.path(), &self.root).unwrap()
    }
}

fn errors_in(published: &Value) -> Vec<String> {
    published["params"]["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["severity"] == 1)
        .map(|d| d["message"].as_str().unwrap().to_owned())
        .collect()
}

/// Every user message of a request, joined: the prompt (with its references) and any
/// runtime context after it.
fn user_text(request: &agent_tests::model_endpoint::ChatRequest) -> String {
    request
        .messages
        .iter()
        .filter(|message| message.role == "user")
        .filter_map(|message| message.content.clone())
        .collect::<Vec<_>>()
        .join("\n")
}

fn command(editor: &mut Editor, command: &str, argument: Value) -> Value {
    editor.request(
        "workspace/executeCommand",
        json!({"command": command, "arguments": [argument]}),
    )
}

const APP: &str = "count = 1\nprint(cuont)\n";

/// Open `app` and wait for pyright's first error in it (the undefined name): that diagnostic.
fn open_with_an_error(editor: &mut Editor, app: &std::path::Path) -> Value {
    editor.open(app, "python");
    let published = editor.wait_for("the undefined-name error", |message| {
        message["method"] == "textDocument/publishDiagnostics"
            && message["params"]["uri"] == url(app)
            && !errors_in(message).is_empty()
    });
    published["params"]["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["severity"] == 1)
        .unwrap()
        .clone()
}

#[test]
fn fix_with_agent_edits_the_buffer_through_apply_edit_and_the_diagnostic_disappears() {
    let workspace = Workspace::new(&[("app.py", APP)]);
    let app = workspace.root.join("app.py");
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all([
        Reply::from_fn(|request| {
            let prompt = user_text(request);
            assert!(prompt.contains("\"cuont\" is not defined"), "{prompt}");
            assert!(prompt.contains("@app.py at line 2"), "{prompt}");
            assert!(prompt.contains("    2  print(cuont)"), "{prompt}");
            // `@app.py` became a reference for the model, not the file's content.
            assert!(prompt.contains("- `app.py` (file)"), "{prompt}");
            Reply::tool_call(
                "edit",
                r#"{"path":"app.py","old_string":"print(cuont)","new_string":"print(count)"}"#,
            )
        }),
        Reply::from_fn(|request| {
            let result = request.tool_result_text();
            assert!(
                result.contains("in the editor's buffer, unsaved"),
                "{result}"
            );
            assert!(result.contains("diagnostics of app.py"), "{result}");
            assert!(result.contains("(version 2, pyright): none"), "{result}");
            Reply::text("Fixed the typo: `cuont` → `count`.")
        }),
    ]);
    let mut editor = workspace.serve(Some(&endpoint.base_url()));
    let diagnostic = open_with_an_error(&mut editor, &app);

    // The code action is offered next to pyright's own.
    let actions = editor.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": url(&app)}, "range": diagnostic["range"],
               "context": {"diagnostics": [diagnostic], "only": ["quickfix"]}}),
    );
    let actions = actions["result"].as_array().unwrap().clone();
    let fix = actions
        .iter()
        .find(|action| action["command"]["command"] == "agent.fix")
        .unwrap_or_else(|| panic!("no Fix with agent in {actions:?}"));
    assert_eq!(fix["kind"], "quickfix.agent");
    assert!(fix["title"].as_str().unwrap().starts_with("Fix with agent"));

    let result = editor.request("workspace/executeCommand", fix["command"].clone());
    assert!(result.get("error").is_none(), "{result}");
    let result = &result["result"];
    assert_eq!(result["outcome"], "answered", "{result}");
    assert_eq!(result["fixed"], true, "{result}");
    assert_eq!(result["changed"], json!(["app.py"]));

    // The edit arrived as a WorkspaceEdit into the buffer; the disk is untouched (unsaved).
    let apply = editor
        .server_requests
        .iter()
        .find(|request| request["method"] == "workspace/applyEdit")
        .unwrap();
    // The smallest edit, against the version the agent read: `cuont` → `count` swaps "uo".
    assert_eq!(
        apply["params"]["edit"]["documentChanges"][0],
        json!({"textDocument": {"uri": url(&app), "version": 1},
               "edits": [{"range": {"start": {"line": 1, "character": 7}, "end": {"line": 1, "character": 9}}, "newText": "ou"}]})
    );
    assert_eq!(editor.buffer(&app), "count = 1\nprint(count)\n");
    assert_eq!(std::fs::read_to_string(&app).unwrap(), APP);
    let version = editor.buffers[&url(&app)].1;
    let clean = editor.wait_for("diagnostics of the fixed buffer", |message| {
        message["method"] == "textDocument/publishDiagnostics"
            && message["params"]["uri"] == url(&app)
            && message["params"]["version"] == version
    });
    assert!(errors_in(&clean).is_empty(), "{clean}");
    let note = editor.wait_for("the fix report", |message| {
        message["method"] == "window/showMessage"
            && message["params"]["message"]
                .as_str()
                .unwrap()
                .contains("fixed")
    });
    assert_eq!(note["params"]["type"], 3);
    endpoint.assert_no_violations();
    assert_eq!(endpoint.remaining_replies(), 0);

    // The turn is in the session log, with the edit's result.
    let store = workspace.store();
    let history = store.load("last").unwrap();
    assert!(history.events().iter().any(|event| matches!(
        &event.body,
        EventBody::ToolResult(result) if result.name == "edit" && result.meta["is_error"] == false
    )));
    editor.shutdown();
}

#[test]
fn a_fix_that_leaves_only_hints_says_no_errors_or_warnings_are_left() {
    // After the fix, pyright reports the two unused imports as hints ("is not accessed").
    let source = "import os\nimport sys\ncount = 1\nprint(cuont)\n";
    let workspace = Workspace::new(&[("app.py", source)]);
    let app = workspace.root.join("app.py");
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all([
        Reply::tool_call(
            "edit",
            r#"{"path":"app.py","old_string":"print(cuont)","new_string":"print(count)"}"#,
        ),
        Reply::text("Fixed the typo."),
    ]);
    let mut editor = workspace.serve(Some(&endpoint.base_url()));
    let diagnostic = open_with_an_error(&mut editor, &app);
    let result = command(
        &mut editor,
        "agent.fix",
        json!({"uri": url(&app), "diagnostic": diagnostic}),
    );
    assert_eq!(result["result"]["fixed"], true, "{result}");
    let left: Vec<&str> = result["result"]["diagnostics"]["app.py"]
        .as_array()
        .unwrap_or_else(|| panic!("{result}"))
        .iter()
        .map(|d| d["severity"].as_str().unwrap())
        .collect();
    assert_eq!(left, ["hint", "hint"], "{result}");
    let note = editor.wait_for("the fix report", |message| {
        message["method"] == "window/showMessage"
            && message["params"]["message"]
                .as_str()
                .unwrap()
                .contains("fixed")
    });
    assert_eq!(
        note["params"]["message"],
        "agent-lsp: fixed “\"cuont\" is not defined” in app.py; no errors or warnings left in the changed files; 2 hints or notes",
        "{note}"
    );
    endpoint.assert_no_violations();
    editor.shutdown();
}

#[test]
fn a_prompt_document_completes_paths_and_gets_its_answer_streamed_with_progress() {
    let workspace = Workspace::new(&[
        ("src/app.py", APP),
        ("src/apple_pie.py", "pie = 3\n"),
        ("docs/guide.md", "# guide\n"),
        ("notes.agent.md", "What does @src/ap"),
    ]);
    let notes = workspace.root.join("notes.agent.md");
    let endpoint = ModelEndpoint::start(EndpointConfig::default().delta_bytes(4)).unwrap();
    endpoint.push(Reply::from_fn(|request| {
        let prompt = user_text(request);
        assert!(prompt.contains("What does @src/app.py do?"), "{prompt}");
        assert!(prompt.contains("- `src/app.py` (file)"), "{prompt}");
        ModelTurn::new()
            .content("It prints the count.\nThat is all.")
            .chunk_delay(Duration::from_millis(30))
            .into()
    }));
    let mut editor = workspace.serve(Some(&endpoint.base_url()));
    editor.open(&notes, "markdown");

    // `@` completion: ranked workspace paths replacing the typed mention.
    let completion = editor.request(
        "textDocument/completion",
        json!({"textDocument": {"uri": url(&notes)}, "position": {"line": 0, "character": 17},
               "context": {"triggerKind": 1}}),
    );
    let items = completion["result"]["items"].as_array().unwrap();
    let labels: Vec<&str> = items
        .iter()
        .map(|item| item["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels.first(), Some(&"src/app.py"), "{labels:?}");
    assert!(labels.contains(&"src/apple_pie.py"), "{labels:?}");
    assert!(!labels.contains(&"docs/guide.md"), "{labels:?}");
    assert_eq!(
        items[0]["textEdit"],
        json!({"range": {"start": {"line": 0, "character": 10}, "end": {"line": 0, "character": 17}}, "newText": "@src/app.py"})
    );

    // A file created after the index was built is offered too (the editor's
    // didChangeWatchedFiles and the server's own watcher both report it).
    std::fs::write(workspace.root.join("src/zebra_stripes.py"), "z = 1\n").unwrap();
    editor.notify(
        "workspace/didChangeWatchedFiles",
        json!({"changes": [{"uri": url(&workspace.root.join("src/zebra_stripes.py")), "type": 1}]}),
    );
    editor.change(&notes, "See @zebra");
    let completion = editor.request(
        "textDocument/completion",
        json!({"textDocument": {"uri": url(&notes)}, "position": {"line": 0, "character": 10}}),
    );
    assert_eq!(
        completion["result"]["items"][0]["label"], "src/zebra_stripes.py",
        "{completion}"
    );

    editor.change(&notes, "What does @src/app.py do?\n");
    let actions = editor.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": url(&notes)}, "range": {"start": {"line": 0, "character": 3}, "end": {"line": 0, "character": 3}},
               "context": {"diagnostics": []}}),
    );
    let send = actions["result"]
        .as_array()
        .unwrap()
        .iter()
        .find(|action| action["command"]["command"] == "agent.send")
        .unwrap()
        .clone();
    let result = editor.request("workspace/executeCommand", send["command"].clone());
    assert_eq!(result["result"]["outcome"], "answered", "{result}");
    assert_eq!(
        editor.buffer(&notes),
        "What does @src/app.py do?\n\n## agent (turn 1)\nIt prints the count.\nThat is all.\n\n## you\n\n"
    );
    // Streamed: the answer arrived in several edits, not one.
    let edits = editor
        .server_requests
        .iter()
        .filter(|request| request["method"] == "workspace/applyEdit")
        .count();
    assert!(edits >= 3, "{edits} edits");
    // Progress: created, begun cancellable, reported, ended.
    assert!(
        editor
            .server_requests
            .iter()
            .any(|request| request["method"] == "window/workDoneProgress/create")
    );
    let begin = editor.wait_for("progress begin", |message| {
        message["method"] == "$/progress" && message["params"]["value"]["kind"] == "begin"
    });
    assert_eq!(begin["params"]["value"]["cancellable"], true);
    editor.wait_for("progress end", |message| {
        message["method"] == "$/progress" && message["params"]["value"]["kind"] == "end"
    });
    endpoint.assert_no_violations();
    editor.shutdown();
}

#[test]
fn a_new_sessions_answer_streams_under_its_own_heading_in_the_same_document() {
    let workspace = Workspace::new(&[("notes.agent.md", "First question?\n")]);
    let notes = workspace.root.join("notes.agent.md");
    let endpoint = ModelEndpoint::start(EndpointConfig::default().delta_bytes(3)).unwrap();
    for answer in ["The first answer.", "The second answer, in its own place."] {
        endpoint.push(
            ModelTurn::new()
                .content(answer)
                .chunk_delay(Duration::from_millis(20)),
        );
    }
    let mut editor = workspace.serve(Some(&endpoint.base_url()));
    editor.open(&notes, "markdown");
    let send = |editor: &mut Editor, line: u32| {
        command(
            editor,
            "agent.send",
            json!({"uri": url(&notes), "position": {"line": line, "character": 0}}),
        )
    };
    let first = send(&mut editor, 0);
    assert_eq!(first["result"]["outcome"], "answered", "{first}");
    assert_eq!(
        editor.buffer(&notes),
        "First question?\n\n## agent (turn 1)\nThe first answer.\n\n## you\n\n"
    );
    // A new session: its first turn is turn 1 again, and the heading is in the document twice.
    command(&mut editor, "agent.session.new", Value::Null);
    let text = format!("{}Second question?\n", editor.buffer(&notes));
    editor.change(&notes, &text);
    let second = send(&mut editor, 6);
    assert_eq!(second["result"]["outcome"], "answered", "{second}");
    assert_eq!(
        editor.buffer(&notes),
        "First question?\n\n## agent (turn 1)\nThe first answer.\n\n## you\n\nSecond question?\n\n## agent (turn 1)\nThe second answer, in its own place.\n\n## you\n\n"
    );
    endpoint.assert_no_violations();
    editor.shutdown();
}

#[test]
fn cancelling_mid_turn_stops_it_cleanly_and_the_session_continues() {
    let workspace = Workspace::new(&[("app.py", APP)]);
    let endpoint =
        ModelEndpoint::start(EndpointConfig::default().keep_alive(Duration::from_millis(100)))
            .unwrap();
    endpoint.push(Reply::hang());
    endpoint.push(Reply::text("Still here."));
    let mut editor = workspace.serve(Some(&endpoint.base_url()));

    let asked = editor.request_async(
        "workspace/executeCommand",
        json!({"command": "agent.ask", "arguments": [{"prompt": "Explain app.py"}]}),
    );
    let begin = editor.wait_for("progress begin", |message| {
        message["method"] == "$/progress" && message["params"]["value"]["kind"] == "begin"
    });
    // Once the model is busy with it, the editor's cancel button on the progress.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while endpoint.chat_requests().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the turn sent no request"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    editor.notify(
        "window/workDoneProgress/cancel",
        json!({"token": begin["params"]["token"]}),
    );
    let response = editor.response(asked);
    assert_eq!(response["result"]["outcome"], "cancelled", "{response}");

    // The chat document says so; the session is consistent and continues.
    let chat = workspace.root.join(".agent-lsp/chat.agent.md");
    let text = editor.buffer(&chat);
    assert!(text.contains("Explain app.py"), "{text}");
    assert!(text.contains("_(cancelled)_"), "{text}");
    let again = command(
        &mut editor,
        "agent.ask",
        json!({"prompt": "Are you there?"}),
    );
    assert_eq!(again["result"]["outcome"], "answered", "{again}");
    assert_eq!(again["result"]["text"], "Still here.");
    assert!(editor.buffer(&chat).contains("Still here."));
    endpoint.assert_no_violations();

    let store = workspace.store();
    let history = store.load("last").unwrap();
    let kinds: Vec<EventKind> = history.events().iter().map(|event| event.kind()).collect();
    assert_eq!(
        kinds
            .iter()
            .filter(|kind| **kind == EventKind::UserMessage)
            .count(),
        2
    );
    assert!(history.events().iter().any(|event| matches!(
        &event.body,
        EventBody::RequestError(error) if error.class == "cancelled"
    )));
    editor.shutdown();
}

#[test]
fn model_problems_are_shown_to_the_user_and_the_server_keeps_serving() {
    let workspace = Workspace::new(&[("app.py", APP)]);
    let app = workspace.root.join("app.py");

    // No model configured at all.
    let mut editor = workspace.serve(None);
    editor.open(&app, "python");
    let response = command(&mut editor, "agent.ask", json!({"prompt": "hello"}));
    let message = response["error"]["message"].as_str().unwrap();
    assert!(message.contains("no model is configured"), "{message}");
    assert!(message.contains("DEEPSEEK_API_KEY"), "{message}");
    // The failed command is what the editor shows; it is not shown a second time.
    assert!(
        !editor
            .backlog
            .iter()
            .any(|message| message["method"] == "window/showMessage"),
        "{:?}",
        editor.backlog
    );
    let hover = editor.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": url(&app)}, "position": {"line": 0, "character": 1}}),
    );
    assert!(hover["result"]["contents"].is_object(), "{hover}");
    editor.shutdown();

    // An endpoint that is down.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let config = workspace.state.path().join("config.toml");
    let mut down = workspace.command();
    down.env("AGENT_LSP_CONFIG", &config);
    std::fs::write(
        &config,
        "[provider]\nmax_retries = 0\nconnect_timeout_secs = 2\n",
    )
    .unwrap();
    let mut editor = Editor::start(down);
    editor.initialize_with(
        &workspace.root,
        json!({"baseUrl": format!("http://127.0.0.1:{port}/v1"), "apiKey": "sk-test"}),
    );
    let response = command(&mut editor, "agent.ask", json!({"prompt": "hello"}));
    let message = response["error"]["message"].as_str().unwrap();
    assert!(message.contains("cannot be reached"), "{message}");
    assert!(message.contains("base URL"), "{message}");
    // Still serving: the sessions of both servers (no turn ran in either) are listed.
    let list = command(&mut editor, "agent.session.list", Value::Null);
    assert_eq!(list["result"].as_array().unwrap().len(), 2, "{list}");
    let fresh = command(&mut editor, "agent.session.new", Value::Null);
    let id = fresh["result"]["session"].as_str().unwrap().to_owned();
    let list = command(&mut editor, "agent.session.list", Value::Null);
    assert_eq!(list["result"].as_array().unwrap().len(), 3, "{list}");
    assert!(list["result"].as_array().unwrap().contains(&json!(id)));
    editor.shutdown();
}

#[test]
fn a_server_that_starts_late_gets_its_features_registered_dynamically() {
    let workspace = Workspace::new(&[("app.py", APP)]);
    let mut editor = workspace.serve(None);
    // A C file appears after initialize: clangd starts on its first open and brings
    // formatting, which pyright does not offer.
    let source = workspace.root.join("tool.c");
    std::fs::write(&source, "int main(void) {\nreturn 0;\n}\n").unwrap();
    editor.open(&source, "c");
    let registration = editor.wait_for("client/registerCapability", |message| {
        message["method"] == "client/registerCapability"
    });
    let methods: Vec<&str> = registration["params"]["registrations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|registration| registration["method"].as_str().unwrap())
        .collect();
    assert!(methods.contains(&"textDocument/formatting"), "{methods:?}");
    assert!(
        !methods.contains(&"textDocument/hover"),
        "hover was announced already: {methods:?}"
    );
    // Its commands too, although `executeCommandProvider` (ours) was announced.
    let commands = registration["params"]["registrations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|registration| registration["method"] == "workspace/executeCommand")
        .map(|registration| registration["registerOptions"]["commands"].clone());
    assert!(
        commands
            .as_ref()
            .and_then(Value::as_array)
            .is_some_and(
                |commands| commands.iter().any(|name| name == "clangd.applyTweak")
                    && !commands.iter().any(|name| name == "agent.ask")
            ),
        "{registration}"
    );
    let formatted = editor.request(
        "textDocument/formatting",
        json!({"textDocument": {"uri": url(&source)}, "options": {"tabSize": 4, "insertSpaces": true}}),
    );
    assert!(
        formatted["result"]
            .as_array()
            .is_some_and(|edits| !edits.is_empty()),
        "{formatted}"
    );
    editor.shutdown();
}

#[test]
fn agent_compact_folds_older_turns_into_a_checkpoint() {
    let workspace = Workspace::new(&[("app.py", APP)]);
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let mut editor = workspace.serve(Some(&endpoint.base_url()));
    let long = "Background for later: ".to_owned() + &"the parser keeps state. ".repeat(150);
    // The first prompt is the session's goal, which every checkpoint carries verbatim: the long
    // ones come after it, and the last four turns (the preset's `keep_recent_steps`) stay.
    for turn in 0..7 {
        endpoint.push(Reply::text(format!("Answer {turn}.")));
        let prompt = if turn == 1 || turn == 2 {
            long.clone()
        } else {
            format!("Question {turn}?")
        };
        let answer = command(&mut editor, "agent.ask", json!({"prompt": prompt}));
        assert_eq!(answer["result"]["outcome"], "answered", "{answer}");
    }
    endpoint.push(Reply::from_fn(|request| {
        // The summary request replays the session's prefix and asks for the template last.
        let last = request.last_user_text().unwrap_or_default().to_owned();
        assert!(last.contains("Primary Request and Intent"), "{last}");
        Reply::text(
            "## Primary Request and Intent\nQuestions about the parser.\n## Key Technical Concepts\nstate\n\
             ## Files and Code\nnone\n## Errors and Fixes\nnone\n## Pending Tasks\nnone\n## Current Work\nanswering\n\
             ## Next Step\nwait\n## Critical Context\nnone",
        )
    }));
    let compacted = command(&mut editor, "agent.compact", Value::Null);
    assert_eq!(compacted["result"]["compacted"], true, "{compacted}");
    let shown = editor.wait_for("the compaction note", |message| {
        message["method"] == "window/showMessage"
            && message["params"]["message"]
                .as_str()
                .unwrap()
                .contains("compacted")
    });
    assert_eq!(shown["params"]["type"], 3);
    // The next turn's request carries the checkpoint instead of the long prompts.
    endpoint.push(Reply::from_fn(|request| {
        let all = user_text(request);
        assert!(all.contains("<compacted-summary"), "{all}");
        assert!(!all.contains("the parser keeps state. the parser"), "{all}");
        assert!(all.contains("<goal>\nQuestion 0?\n</goal>"), "{all}");
        Reply::text("Still with you.")
    }));
    let after = command(&mut editor, "agent.ask", json!({"prompt": "And now?"}));
    assert_eq!(after["result"]["text"], "Still with you.", "{after}");
    endpoint.assert_no_violations();
    editor.shutdown();
}

#[test]
fn agent_status_reports_the_last_requests_context_and_cache_figures() {
    let workspace = Workspace::new(&[("app.py", APP)]);
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let mut editor = workspace.serve(Some(&endpoint.base_url()));

    // Before any request: the session, no figures.
    let before = command(&mut editor, "agent.status", Value::Null);
    let before = &before["result"];
    assert_eq!(before["running"], false, "{before}");
    assert!(before["session"].is_string(), "{before}");
    assert!(before["context_tokens"].is_null(), "{before}");
    assert!(before["cache_hit_share"].is_null(), "{before}");

    // Two turns: the second request repeats the first one's prefix, so part of it is cached.
    let long = "Background: ".to_owned() + &"the parser keeps state. ".repeat(60);
    endpoint.push(Reply::text("First."));
    endpoint.push(Reply::text("Second."));
    for prompt in [long.as_str(), "And then?"] {
        let answer = command(&mut editor, "agent.ask", json!({"prompt": prompt}));
        assert_eq!(answer["result"]["outcome"], "answered", "{answer}");
    }
    let served = endpoint.chat_requests();
    let last = served.last().unwrap().usage.clone().unwrap();
    assert!(last.prompt_cache_hit_tokens > 0, "{last:?}");

    let status = command(&mut editor, "agent.status", Value::Null);
    let status = &status["result"];
    assert_eq!(status["session"], before["session"], "{status}");
    assert_eq!(
        status["context_tokens"],
        json!(last.prompt_tokens),
        "{status}"
    );
    let share = status["cache_hit_share"].as_f64().unwrap();
    let expected = last.prompt_cache_hit_tokens as f64 / last.prompt_tokens as f64;
    assert!((share - expected).abs() < 1e-9, "{share} vs {expected}");
    assert!(share > 0.0 && share < 1.0, "{share}");
    endpoint.assert_no_violations();
    editor.shutdown();
}

#[test]
fn a_server_that_fails_to_start_is_reported_and_the_others_keep_working() {
    let workspace = Workspace::new(&[("app.py", APP), ("data.brk", "x\n")]);
    let app = workspace.root.join("app.py");
    let mut command = workspace.command();
    let config = workspace.state.path().join("broken.toml");
    std::fs::write(
        &config,
        "[server.broken]\ncommand = \"false\"\nfile_patterns = [\"*.brk\"]\nstartup_timeout_secs = 5\n",
    )
    .unwrap();
    command.env("AGENT_LSP_CONFIG", &config);
    let mut editor = Editor::start(command);
    editor.initialize(&workspace.root);
    // The server starts (and fails) when a document of its opens.
    editor.open(&workspace.root.join("data.brk"), "plaintext");
    let shown = editor.wait_for("the failed start", |message| {
        message["method"] == "window/showMessage" && message["params"]["type"] == 1
    });
    let text = shown["params"]["message"].as_str().unwrap();
    assert!(
        text.contains("data.brk") && text.contains("failed to start"),
        "{text}"
    );
    editor.open(&app, "python");
    let hover = editor.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": url(&app)}, "position": {"line": 0, "character": 1}}),
    );
    assert!(hover["result"]["contents"].is_object(), "{hover}");
    editor.shutdown();
}
