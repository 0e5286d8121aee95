//! A child that dies between requests is restarted and the request that found it dead is
//! answered by the new instance, not failed: real pyright killed with SIGKILL, asked through
//! the agent's tools and through `serve` by a scripted editor, and (for the moment between a
//! child's death and the end of its output, which a real server gives on no cue) `fake-lsp`
//! closing its input.

use std::process::Command;

use agent_lsp::preset::Preset;
use agent_lsp::session::Session;
use agent_lsp::session::event::{SCHEMA_VERSION, SessionHeader};
use agent_lsp::session::log::Durability;
use agent_tests::editor::{Editor, url};
use agent_tests::processes::{descendants_running, kill_and_wait};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// `größe_von` on line 5 of the Python fixture's main.py is defined in pkg/geometry.py.
const DEFINITION: &str = "pkg/geometry.py\n  14:5  def größe_von(fläche: Fläche) -> float:";

#[tokio::test]
async fn the_agents_query_after_its_server_was_killed_is_answered_by_a_restarted_one() {
    let workspace = agent_tests::fixture("python");
    let state = tempfile::tempdir().unwrap();
    let preset = Preset::builtin("standard").unwrap();
    let (runtime, bridge) =
        agent_tests::tool_runtime(&preset, workspace.path(), agent_tests::bridge_config());
    let header = SessionHeader {
        schema: SCHEMA_VERSION,
        session_id: "restart".into(),
        workspace: workspace.path().display().to_string(),
        preset: "standard".into(),
        preset_text: None,
        agent_version: "test".into(),
        parent: None,
    };
    let mut session =
        Session::create(&state.path().join("s.jsonl"), header, Durability::Batched).unwrap();
    let args = json!({"path": "main.py", "line": 5, "symbol": "größe_von"}).to_string();
    let cancel = CancellationToken::new();
    let first = runtime
        .run_one(&mut session, "lsp_definition", &args, &cancel)
        .await
        .unwrap()
        .output;
    assert!(first.text.contains(DEFINITION), "{}", first.text);

    let running = bridge.running();
    let [pyright] = running.as_slice() else {
        panic!("{running:?}")
    };
    let pid = pyright.pid().unwrap();
    // Killed while the bridge is not looking: the runtime does not run until the next call,
    // so that call is the first to find the server dead.
    kill_and_wait(pid);

    let second = runtime
        .run_one(&mut session, "lsp_definition", &args, &cancel)
        .await
        .unwrap()
        .output;
    assert!(!second.is_error, "{}", second.text);
    assert!(second.text.contains(DEFINITION), "{}", second.text);
    let running = bridge.running();
    assert_eq!(running.len(), 1);
    assert_ne!(running[0].pid(), Some(pid), "a new instance answered");
    assert_eq!(bridge.health()[0].restarts, 1);
    bridge.shutdown_all().await;
}

#[test]
fn an_editor_request_after_its_child_was_killed_is_answered_by_a_restarted_one() {
    let workspace = agent_tests::fixture("python");
    let root = workspace.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    std::fs::write(state.path().join("config.toml"), "").unwrap();
    let mut command = Command::new(agent_tests::workspace_bin("agent-lsp"));
    command
        .env("PATH", agent_tests::tools_path())
        .env("AGENT_LSP_STATE_DIR", state.path())
        .env("AGENT_LSP_CONFIG", state.path().join("config.toml"))
        .args(["--workspace", root.to_str().unwrap(), "serve"]);
    let mut editor = Editor::start(command);
    editor.initialize(&root);
    let main = root.join("main.py");
    editor.open(&main, "python");
    editor.wait_for("diagnostics of main.py", |message| {
        message["method"] == "textDocument/publishDiagnostics"
            && message["params"]["uri"] == url(&main)
    });
    // `größe_von` on line 5 (0-based 4), character 13.
    let definition =
        json!({"textDocument": {"uri": url(&main)}, "position": {"line": 4, "character": 14}});
    let expected = {
        let answer = editor.request("textDocument/definition", definition.clone());
        assert!(answer["result"][0]["uri"].is_string(), "{answer}");
        answer["result"].clone()
    };

    for round in 0..2 {
        let pids = descendants_running(editor.pid(), "pyright");
        let [pid] = pids.as_slice() else {
            panic!("round {round}: {pids:?}")
        };
        kill_and_wait(*pid);
        // The first request after the death: sent to no dead child, it reaches the new one.
        let answer = editor.request("textDocument/definition", definition.clone());
        assert_eq!(answer["result"], expected, "round {round}: {answer}");
        let now = descendants_running(editor.pid(), "pyright");
        assert_eq!(now.len(), 1, "round {round}: {now:?}");
        assert_ne!(now[0], *pid, "round {round}");
    }
    editor.shutdown();
}

/// A workspace holding `a.fake`, and `serve` for it with `config`, initialized, `a.fake` open.
struct OnAFake {
    editor: Editor,
    file: std::path::PathBuf,
    state: tempfile::TempDir,
    _workspace: tempfile::TempDir,
}

impl OnAFake {
    fn serve(config: impl FnOnce(&std::path::Path) -> String) -> OnAFake {
        let workspace = tempfile::tempdir().unwrap();
        let root = workspace.path().canonicalize().unwrap();
        let file = root.join("a.fake");
        std::fs::write(&file, "text\n").unwrap();
        let state = tempfile::tempdir().unwrap();
        let config = config(state.path());
        let mut editor = Editor::start(agent_tests::serve_command(&root, state.path(), &config));
        editor.initialize(&root);
        editor.open(&file, "fake");
        OnAFake {
            editor,
            file,
            state,
            _workspace: workspace,
        }
    }

    /// A position in `a.fake`.
    fn at(&self, character: u64) -> serde_json::Value {
        json!({"textDocument": {"uri": url(&self.file)}, "position": {"line": 0, "character": character}})
    }
}

/// `serve` forwards an editor request to a child whose input is already closed (it is dying;
/// its output has not ended yet): the request never reached it, so it goes to a restarted
/// child, which answers. A delivery retry: nothing the dead child saw is asked again.
#[test]
fn an_editor_request_that_never_reached_its_dying_child_is_sent_to_a_restarted_one() {
    let fake = OnAFake::serve(|_| agent_tests::fake_lsp_config(&["deaf-on", "fake/deafen"]));
    let params = fake.at(0);
    let mut editor = fake.editor;
    let answer = editor.request("fake/custom", params.clone());
    assert_eq!(answer["result"]["echo"], "fake/custom", "{answer}");
    let [first] = descendants_running(editor.pid(), "fake-lsp")[..] else {
        panic!("{:?}", agent_tests::processes::descendants(editor.pid()))
    };

    let deaf = editor.request("fake/deafen", params.clone());
    assert_eq!(deaf["result"]["deaf"], true, "{deaf}");
    let answer = editor.request("fake/custom", params);
    assert_eq!(answer["result"]["echo"], "fake/custom", "{answer}");
    // The deaf one is killed (it can read no shutdown); a new one answered.
    let now = descendants_running(editor.pid(), "fake-lsp");
    assert!(
        now.iter().any(|pid| *pid != first),
        "a new child answered: {now:?}, first {first}"
    );
    editor.shutdown();
    // Nothing is left behind: not the new child, and not the deaf one, whose input was closed
    // (it once outlived `serve`, adopted by init).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::path::Path::new(&format!("/proc/{first}")).exists()
        && std::fs::read_to_string(format!("/proc/{first}/stat"))
            .is_ok_and(|stat| !stat.contains(") Z "))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the deaf child {first} outlived serve"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A notification about a document that finds its child dead restarts it, and the new child
/// is given the editor's buffer (its unsaved text) before the notification.
#[test]
fn a_restarted_child_gets_the_editors_documents_before_a_notification_about_them() {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    let file = root.join("a.fake");
    std::fs::write(&file, "on disk\n").unwrap();
    let state = tempfile::tempdir().unwrap();
    let record = state.path().join("received.jsonl");
    let config = format!(
        "[server.fake]\ncommand = {:?}\nargs = [\"record\", {:?}]\nfile_patterns = [\"*.fake\"]\n",
        agent_tests::workspace_bin("fake-lsp").display().to_string(),
        record.display().to_string()
    );
    let mut editor = Editor::start(agent_tests::serve_command(&root, state.path(), &config));
    editor.initialize(&root);
    editor.open(&file, "fake");
    editor.change(&file, "unsaved\n");
    let params = json!({"textDocument": {"uri": url(&file)}, "n": 1});
    editor.notify("fake/poke", params.clone());
    editor.wait_for("the first poke", |message| {
        message["method"] == "fake/poked"
    });
    let [first] = descendants_running(editor.pid(), "fake-lsp")[..] else {
        panic!("{:?}", agent_tests::processes::descendants(editor.pid()))
    };
    kill_and_wait(first);

    editor.notify(
        "fake/poke",
        json!({"textDocument": {"uri": url(&file)}, "n": 2}),
    );
    let poked = editor.wait_for("the restarted child's poke", |message| {
        message["method"] == "fake/poked" && message["params"]["n"] == 2
    });
    assert_eq!(poked["params"]["n"], 2);
    // What the new instance received, from its `initialize` on.
    let received = agent_tests::fake_lsp_record(&record);
    let start = received
        .iter()
        .rposition(|message| message["method"] == "initialize")
        .unwrap();
    let methods: Vec<&str> = received[start..]
        .iter()
        .filter_map(|message| message["method"].as_str())
        .collect();
    let open = methods
        .iter()
        .position(|method| *method == "textDocument/didOpen");
    let poke = methods.iter().position(|method| *method == "fake/poke");
    assert!(
        open.is_some() && open < poke,
        "the new child got {methods:?}"
    );
    let reopened = received[start..]
        .iter()
        .find(|message| message["method"] == "textDocument/didOpen")
        .unwrap();
    assert_eq!(reopened["params"]["textDocument"]["text"], "unsaved\n");
    editor.shutdown();
}

/// Killed with SIGKILL while a helper process still holds its pipes (as a large server's
/// teardown does for a moment), a child takes the editor's next request into a pipe nobody
/// reads. That request is delivered again to the restarted child, which answers it: 10 rounds,
/// 10 answers.
#[test]
fn a_request_sent_right_after_the_child_was_killed_is_answered_by_the_restarted_one() {
    let fake = OnAFake::serve(|_| {
        agent_tests::fake_lsp_config(&["hold-pipes"])
            + "\n[restart]\nmax_restarts = 20\nbackoff_ms = 10\n"
    });
    let hover = fake.at(1);
    let mut editor = fake.editor;
    assert_eq!(
        editor.request("textDocument/hover", hover.clone())["result"]["echo"],
        "textDocument/hover"
    );
    for round in 0..10 {
        let pids = descendants_running(editor.pid(), "fake-lsp");
        let [pid] = pids.as_slice() else {
            panic!("round {round}: {pids:?}")
        };
        // No waiting for it to be gone: the request follows the kill at once.
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        let answer = editor.request("textDocument/hover", hover.clone());
        assert_eq!(
            answer["result"]["echo"], "textDocument/hover",
            "round {round}: {answer}"
        );
        let now = descendants_running(editor.pid(), "fake-lsp");
        assert_eq!(now.len(), 1, "round {round}: {now:?}");
        assert_ne!(now[0], *pid, "round {round}");
    }
    editor.shutdown();
}

/// A server busy with its first analysis ignores cancellations for seconds while it reports
/// progress and uses a core: alive, not hung. It is not restarted, and a request sent after
/// the cancellation's grace is answered by the same process once it is done.
#[test]
fn a_busy_child_that_ignores_cancellations_but_shows_life_is_not_restarted() {
    let fake = OnAFake::serve(|state| {
        let record = state.join("received.jsonl");
        agent_tests::fake_lsp_config(&["busy", "5000", "record", record.to_str().unwrap()])
    });
    let record = fake.state.path().join("received.jsonl");
    let hover = fake.at(1);
    let mut editor = fake.editor;
    let first = editor.request_async("textDocument/hover", hover.clone());
    std::thread::sleep(std::time::Duration::from_millis(100));
    editor.notify("$/cancelRequest", json!({"id": first}));
    assert_eq!(editor.response(first)["error"]["code"], -32800);
    // Past the cancellation's grace (2 s), unanswered: suspected, but alive.
    editor.pump(std::time::Duration::from_millis(3000));
    let answer = editor.request("textDocument/hover", hover);
    assert_eq!(answer["result"]["echo"], "textDocument/hover", "{answer}");
    let starts = agent_tests::fake_lsp_record(&record)
        .iter()
        .filter(|message| message["method"] == "initialize")
        .count();
    assert_eq!(starts, 1, "the busy child was restarted");
    let progress = editor
        .backlog
        .iter()
        .filter(|message| message["method"] == "$/progress")
        .count();
    assert!(
        progress >= 10,
        "the child's progress reached the editor: {progress}"
    );
    editor.shutdown();
}
