//! One lane per child: what a child sends reaches the editor in the child's order (its requests
//! included), a child that takes long to start holds up only its own messages, and a
//! cancellation reaches the child that holds the request whatever happened to its document.

use std::time::{Duration, Instant};

use agent_tests::editor::{Editor, url};
use serde_json::{Value, json};

/// A workspace with `files` (each holding `0`), and a state folder for the config and records.
struct Workspace {
    root: std::path::PathBuf,
    state: tempfile::TempDir,
    _dir: tempfile::TempDir,
}

impl Workspace {
    fn new(files: &[&str]) -> Workspace {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for file in files {
            std::fs::write(root.join(file), "0\n").unwrap();
        }
        Workspace {
            root,
            state: tempfile::tempdir().unwrap(),
            _dir: dir,
        }
    }

    /// `serve` with one fake server per `(name, args)`, for `*.name` files; each records what
    /// it receives in `name.jsonl`.
    fn serve(&self, servers: &[(&str, &[&str])]) -> Editor {
        let program = agent_tests::workspace_bin("fake-lsp").display().to_string();
        let mut config = String::new();
        for (name, args) in servers {
            let mut args: Vec<String> = args.iter().map(|arg| format!("{arg:?}")).collect();
            args.push("\"record\"".into());
            args.push(format!("{:?}", self.record(name).display().to_string()));
            config += &format!(
                "[server.{name}]\ncommand = {program:?}\nargs = [{}]\nlanguages = [{name:?}]\nfile_patterns = [\"*.{name}\"]\nrequest_timeout_secs = 30\n",
                args.join(", ")
            );
        }
        Editor::start(agent_tests::serve_command(
            &self.root,
            self.state.path(),
            &config,
        ))
    }

    fn record(&self, name: &str) -> std::path::PathBuf {
        self.state.path().join(format!("{name}.jsonl"))
    }
}

fn at(file: &std::path::Path, character: u64) -> Value {
    json!({"textDocument": {"uri": url(file)}, "position": {"line": 0, "character": character}})
}

/// rust-analyzer sends `window/workDoneProgress/create` and then `$/progress` begin without
/// waiting for the answer: the editor must see the create first, or it drops the progress.
#[test]
fn a_childs_requests_reach_the_editor_in_order_with_its_notifications() {
    const COUNT: u64 = 300;
    let workspace = Workspace::new(&["a.fake"]);
    let file = workspace.root.join("a.fake");
    let mut editor = workspace.serve(&[("fake", &[])]);
    editor.initialize(&workspace.root);
    editor.open(&file, "fake");
    editor.request("textDocument/hover", at(&file, 0));

    editor.notify("fake/progress", json!({"count": COUNT}));
    let last = format!("t{}", COUNT - 1);
    editor.wait_for("the last progress", |message| {
        message["method"] == "$/progress" && message["params"]["token"] == last.as_str()
    });
    let mut created = std::collections::HashSet::new();
    let mut begun = 0;
    for message in &editor.backlog {
        match message["method"].as_str() {
            Some("window/workDoneProgress/create") => {
                created.insert(message["params"]["token"].as_str().unwrap().to_owned());
            }
            Some("$/progress") => {
                let token = message["params"]["token"].as_str().unwrap();
                assert!(
                    created.contains(token),
                    "the editor got the progress of {token} before it was asked to create it"
                );
                begun += 1;
            }
            _ => {}
        }
    }
    // The last one was taken off the backlog by the wait.
    assert_eq!(begun + 1, COUNT, "progress lost");
    assert_eq!(created.len() as u64, COUNT, "create requests lost");
    // Each create was answered by the editor, and that answer reaches the child (through a
    // task each: a request the editor sends meanwhile may reach the child first).
    let answered = || {
        agent_tests::fake_lsp_record(&workspace.record("fake"))
            .iter()
            .filter(|message| {
                message.get("method").is_none()
                    && message["id"].as_i64().is_some_and(|id| id > 1000)
            })
            .count() as u64
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while answered() < COUNT && Instant::now() < deadline {
        editor.pump(Duration::from_millis(20));
    }
    assert_eq!(answered(), COUNT, "answers to the child's requests lost");
    editor.shutdown();
}

/// A child whose `initialize` takes 6 s holds up only its own lane: the warm child's requests
/// are answered meanwhile, each long before the slow child could answer anything.
#[test]
fn a_child_that_is_slow_to_start_holds_up_only_its_own_messages() {
    let workspace = Workspace::new(&["w.warm", "s.slow"]);
    let (warm, slow) = (workspace.root.join("w.warm"), workspace.root.join("s.slow"));
    let mut editor = workspace.serve(&[("warm", &[]), ("slow", &["slow", "initialize", "6000"])]);
    editor.initialize(&workspace.root);
    editor.open(&warm, "warm");
    editor.request("textDocument/hover", at(&warm, 0));

    let opened = Instant::now();
    editor.open(&slow, "slow");
    let slow_hover = editor.request_async("textDocument/hover", at(&slow, 0));
    let mut latencies = Vec::new();
    for n in 1..=20 {
        let sent = Instant::now();
        let answer = editor.request("textDocument/hover", at(&warm, n));
        latencies.push(sent.elapsed());
        assert_eq!(answer["result"]["echo"], "textDocument/hover", "{answer}");
        // A change to the warm document goes through the loop too.
        editor.change(&warm, &format!("{n}\n"));
    }
    let warm_done = opened.elapsed();
    let answer = editor.response(slow_hover);
    let slow_done = opened.elapsed();
    assert_eq!(answer["result"]["echo"], "textDocument/hover", "{answer}");
    eprintln!(
        "warm hovers while the slow child started: max {:?}; all done after {warm_done:?}; the slow child answered after {slow_done:?}",
        latencies.iter().max().unwrap()
    );
    // Causal, not a timing: every warm answer came while the slow child was still starting.
    assert!(
        slow_done >= Duration::from_secs(6),
        "the slow child answered after {slow_done:?}"
    );
    assert!(
        warm_done < Duration::from_secs(5),
        "the warm child's 20 hovers and changes took {warm_done:?} while the slow child started"
    );
    // Everything reached the warm child in order: the 20 changes.
    let changes: Vec<String> = agent_tests::fake_lsp_record(&workspace.record("warm"))
        .iter()
        .filter(|message| message["method"] == "textDocument/didChange")
        .map(|message| {
            message["params"]["contentChanges"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let expected: Vec<String> = (1..=20).map(|n| format!("{n}\n")).collect();
    assert_eq!(changes, expected);
    editor.shutdown();
}

/// A `$/cancelRequest` that comes after the document was closed still reaches the child that
/// holds the request, and the editor gets exactly one answer.
#[test]
fn a_cancel_after_the_document_closed_reaches_the_child_and_gets_one_answer() {
    let workspace = Workspace::new(&["a.fake"]);
    let file = workspace.root.join("a.fake");
    let mut editor = workspace.serve(&[("fake", &["slow", "textDocument/hover", "20000"])]);
    editor.initialize(&workspace.root);
    editor.open(&file, "fake");
    editor.request("textDocument/definition", at(&file, 0));

    let hover = editor.request_async("textDocument/hover", at(&file, 1));
    // The child holds it (a request cancelled while it still waits in its lane never reaches
    // the child, and is answered without it).
    let record = workspace.record("fake");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !agent_tests::fake_lsp_record(&record)
        .iter()
        .any(|message| message["method"] == "textDocument/hover")
    {
        assert!(Instant::now() < deadline, "the child never got the hover");
        std::thread::sleep(Duration::from_millis(10));
    }
    editor.notify(
        "textDocument/didClose",
        json!({"textDocument": {"uri": url(&file)}}),
    );
    editor.notify("$/cancelRequest", json!({"id": hover}));
    let answer = editor.response(hover);
    assert_eq!(answer["error"]["code"], -32800, "{answer}");
    // The child was told: its record has the cancellation (with the editor's id, since the
    // request was forwarded as it is).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let cancelled = agent_tests::fake_lsp_record(&record).iter().any(|message| {
            message["method"] == "$/cancelRequest" && message["params"]["id"] == hover
        });
        if cancelled {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the child never got the cancellation"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The child's own late answer (`RequestCancelled`) is not a second one: given time to
    // arrive, and a later request's answer after it, nothing else for the hover came.
    editor.pump(Duration::from_millis(300));
    editor.open(&file, "fake");
    editor.request("textDocument/definition", at(&file, 2));
    let second = editor
        .backlog
        .iter()
        .filter(|message| message.get("method").is_none() && message["id"] == hover)
        .count();
    assert_eq!(second, 0, "a second answer to the cancelled hover");
    editor.shutdown();
}

/// Answers the server reshapes (code actions followed by the agent's) reach the editor in the
/// child's order too, among its notifications: the reply is made where the answer is read.
#[test]
fn reshaped_answers_reach_the_editor_in_order_with_the_childs_notifications() {
    const COUNT: u64 = 150;
    let workspace = Workspace::new(&["a.fake"]);
    let file = workspace.root.join("a.fake");
    let mut editor = workspace.serve(&[("fake", &[])]);
    editor.initialize(&workspace.root);
    editor.open(&file, "fake");
    editor.request("textDocument/hover", at(&file, 0));
    // The child writes `fake/poked n`, then its answer to code action request n.
    let mut ids = Vec::new();
    for n in 1..=COUNT {
        editor.notify(
            "fake/poke",
            json!({"textDocument": {"uri": url(&file)}, "n": n}),
        );
        let range =
            json!({"start": {"line": 0, "character": n}, "end": {"line": 0, "character": n}});
        ids.push(editor.request_async(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": url(&file)}, "range": range, "context": {"diagnostics": []}}),
        ));
    }
    let last = *ids.last().unwrap();
    let answer = editor.response(last);
    assert!(answer["result"].is_array(), "{answer}");
    let mut order = Vec::new();
    for message in &editor.backlog {
        if message["method"] == "fake/poked" {
            order.push(("poked", message["params"]["n"].as_u64().unwrap()));
        } else if let Some(at) = message["id"]
            .as_i64()
            .and_then(|id| ids.iter().position(|&x| x == id))
        {
            assert!(message["result"].is_array(), "{message}");
            order.push(("answer", at as u64 + 1));
        }
    }
    order.push(("answer", COUNT));
    let expected: Vec<(&str, u64)> = (1..=COUNT)
        .flat_map(|n| [("poked", n), ("answer", n)])
        .collect();
    assert_eq!(order, expected);
    editor.shutdown();
}
