//! The activity board as an editor sees it, through the real binary: `agent-lsp serve` over
//! stdio, the loopback model endpoint starting background jobs with `shell`, and the editor
//! receiving each job as a `$/progress` of its own (cancellable), listing it in `agent.status`,
//! and cancelling it with `window/workDoneProgress/cancel`; what is left of a job is checked
//! through `/proc`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use agent_tests::editor::Editor;
use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, ModelTurn, Reply};
use agent_tests::processes::{alive, live_processes};
use serde_json::{Value, json};

/// The job the editor cancels, and the one that ends by itself once the test creates `go`.
const SLEEPER: &str = "sleep 30";
const GATED: &str = "echo waiting for go; until [ -e go ]; do sleep 0.1; done; exit 3";

struct Fixture {
    _workspace: tempfile::TempDir,
    root: PathBuf,
    state: tempfile::TempDir,
    config: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let workspace = tempfile::tempdir().unwrap();
        let root = workspace.path().canonicalize().unwrap();
        let state = tempfile::tempdir().unwrap();
        let config = state.path().join("config.toml");
        std::fs::write(&config, "").unwrap();
        Fixture {
            _workspace: workspace,
            root,
            state,
            config,
        }
    }

    /// `serve` with the model at `endpoint`, the standard preset, and an editor that allows
    /// what the preset asks about (`shell`).
    fn serve(&self, endpoint: &ModelEndpoint) -> Editor {
        let mut editor = Editor::start(agent_tests::agent_lsp_command(
            self.state.path(),
            &self.config,
            &self.root,
            &["serve"],
        ));
        editor.message_answer = Some("Allow".into());
        editor.initialize_with(
            &self.root,
            json!({"baseUrl": endpoint.base_url(), "apiKey": "sk-test", "model": "deepseek-v4-flash", "preset": "standard"}),
        );
        editor
    }
}

/// A step of the standard preset (thinking mode) that starts `command` as a background job.
fn background(command: &str) -> Reply {
    ModelTurn::new()
        .reasoning("Start it.")
        .tool_call(
            "shell",
            json!({"command": command, "background": true}).to_string(),
        )
        .into()
}

/// The pid of the one live `sleep 30` the fixture's jobs run, once it runs.
fn sleeping(fixture: &Fixture) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let [pid] = live_processes(&["sleep", "30"], &fixture.root)[..] {
            return pid;
        }
        assert!(Instant::now() < deadline, "no single `sleep 30` runs");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn is_activity_progress(message: &Value, kind: &str) -> bool {
    message["method"] == "$/progress"
        && message["params"]["value"]["kind"] == kind
        && message["params"]["token"]
            .as_str()
            .is_some_and(|token| token.starts_with("agent-lsp/activity/"))
}

/// The `begin` of the job whose command is `command`.
fn begin_of(editor: &mut Editor, command: &str) -> Value {
    let title = format!("job: {command} (in agent)");
    editor.wait_for(&format!("the progress begin of `{command}`"), |message| {
        is_activity_progress(message, "begin") && message["params"]["value"]["title"] == title
    })
}

/// The `end` of progress `token`.
fn end_of(editor: &mut Editor, token: &Value) -> Value {
    editor.wait_for(&format!("the progress end of {token}"), |message| {
        is_activity_progress(message, "end") && message["params"]["token"] == *token
    })
}

/// `agent.status`'s `activity` entry of the job whose title is `command`.
fn status_entry(editor: &mut Editor, command: &str) -> Value {
    let status = editor.request(
        "workspace/executeCommand",
        json!({"command": "agent.status", "arguments": []}),
    );
    status["result"]["activity"]
        .as_array()
        .unwrap_or_else(|| panic!("no activity in {status}"))
        .iter()
        .find(|entry| entry["title"] == command)
        .unwrap_or_else(|| panic!("no entry for `{command}` in {status}"))
        .clone()
}

#[test]
fn jobs_are_cancellable_progress_and_status_entries_and_the_editor_kills_them() {
    let fixture = Fixture::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all([
        background(SLEEPER),
        background(GATED),
        ModelTurn::new()
            .reasoning("Both run.")
            .content("Two jobs are running.")
            .into(),
    ]);
    let mut editor = fixture.serve(&endpoint);
    let answered = editor.request(
        "workspace/executeCommand",
        json!({"command": "agent.ask", "arguments": [{"prompt": "Start the jobs"}]}),
    );
    assert_eq!(answered["result"]["outcome"], "answered", "{answered}");

    // Each job is a progress of its own, created first, cancellable, titled by the turn it
    // started in.
    let sleeper = begin_of(&mut editor, SLEEPER);
    let gated = begin_of(&mut editor, GATED);
    for begin in [&sleeper, &gated] {
        assert_eq!(begin["params"]["value"]["cancellable"], true, "{begin}");
        let token = &begin["params"]["token"];
        assert!(
            editor.server_requests.iter().any(|request| {
                request["method"] == "window/workDoneProgress/create"
                    && request["params"]["token"] == *token
            }),
            "{token} was not created"
        );
    }
    // The gated job's output line is its progress message, in its begin or a report.
    let gated_token = gated["params"]["token"].clone();
    if gated["params"]["value"]["message"] != "waiting for go" {
        editor.wait_for("the gated job's output line", |message| {
            is_activity_progress(message, "report")
                && message["params"]["token"] == gated_token
                && message["params"]["value"]["message"] == "waiting for go"
        });
    }

    // `agent.status` lists both, running.
    let entry = status_entry(&mut editor, SLEEPER);
    assert_eq!(entry["kind"], "job", "{entry}");
    assert_eq!(entry["cancellable"], true, "{entry}");
    assert!(entry.get("outcome").is_none(), "{entry}");
    assert!(
        entry["id"].as_str().unwrap().starts_with("job-1@"),
        "{entry}"
    );
    assert_eq!(status_entry(&mut editor, GATED)["detail"], "waiting for go");

    // The editor's cancel kills the job, leaving no process, and its progress ends so.
    let pid = sleeping(&fixture);
    editor.notify(
        "window/workDoneProgress/cancel",
        json!({"token": sleeper["params"]["token"]}),
    );
    let end = end_of(&mut editor, &sleeper["params"]["token"]);
    assert_eq!(end["params"]["value"]["message"], "killed", "{end}");
    assert!(!alive(pid), "the cancelled job's sleep {pid} survived");
    assert!(live_processes(&["sleep", "30"], &fixture.root).is_empty());
    let entry = status_entry(&mut editor, SLEEPER);
    assert_eq!(entry["outcome"], "killed", "{entry}");
    assert_eq!(entry["cancellable"], false, "{entry}");

    // A job that ends by itself ends its progress with its exit status.
    std::fs::write(fixture.root.join("go"), "").unwrap();
    let end = end_of(&mut editor, &gated_token);
    assert_eq!(end["params"]["value"]["message"], "exit 3", "{end}");
    assert_eq!(status_entry(&mut editor, GATED)["outcome"], "exit 3");

    // `agent.activity.cancel` of an entry that ended cancels nothing.
    let cancelled = editor.request(
        "workspace/executeCommand",
        json!({"command": "agent.activity.cancel", "arguments": [{"id": entry["id"]}]}),
    );
    assert_eq!(cancelled["result"]["cancelled"], false, "{cancelled}");
    endpoint.assert_no_violations();
    editor.shutdown();
}

#[test]
fn agent_activity_cancel_stops_a_job_started_without_a_turn() {
    let fixture = Fixture::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let mut editor = fixture.serve(&endpoint);
    let started = editor.request(
        "workspace/executeCommand",
        json!({"command": "agent.tool", "arguments": [{"name": "shell", "arguments": {"command": SLEEPER, "background": true}}]}),
    );
    assert_eq!(started["result"]["is_error"], false, "{started}");
    // No turn runs, so the title names nothing it belongs to.
    let begin = editor.wait_for("the job's progress begin", |message| {
        is_activity_progress(message, "begin")
            && message["params"]["value"]["title"] == format!("job: {SLEEPER}")
    });
    let entry = status_entry(&mut editor, SLEEPER);
    let pid = sleeping(&fixture);
    let cancelled = editor.request(
        "workspace/executeCommand",
        json!({"command": "agent.activity.cancel", "arguments": [{"id": entry["id"]}]}),
    );
    assert_eq!(cancelled["result"]["cancelled"], true, "{cancelled}");
    let end = end_of(&mut editor, &begin["params"]["token"]);
    assert_eq!(end["params"]["value"]["message"], "killed", "{end}");
    assert!(!alive(pid), "the cancelled job's sleep {pid} survived");
    assert!(live_processes(&["sleep", "30"], &fixture.root).is_empty());
    editor.shutdown();
}

/// A cold server is not invisible in the editor either: while the agent's `lsp_*` call waits for
/// a server that starts slowly and then reports its analysis, the editor gets a progress of the
/// server's own, titled by the turn, reporting what the server reports, ended `ready`; and
/// `agent.status` lists the server.
#[test]
fn a_server_an_agent_call_waits_for_is_a_progress_until_it_is_ready() {
    let fixture = Fixture::new();
    std::fs::write(fixture.root.join("a.fake"), "alpha beta\n").unwrap();
    std::fs::write(
        &fixture.config,
        agent_tests::fake_lsp_config(&["slow", "initialize", "1500", "busy", "2000", "diagnose"]),
    )
    .unwrap();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all([
        ModelTurn::new()
            .reasoning("Look it up.")
            .tool_call("lsp_hover", r#"{"path":"a.fake","line":1,"symbol":"beta"}"#),
        ModelTurn::new().reasoning("Found.").content("It is beta."),
    ]);
    let mut editor = fixture.serve(&endpoint);
    let asked = editor.request_async(
        "workspace/executeCommand",
        json!({"command": "agent.ask", "arguments": [{"prompt": "What is beta?"}]}),
    );
    let begin = editor.wait_for("the server's progress begin", |message| {
        is_activity_progress(message, "begin")
            && message["params"]["value"]["title"] == "language server: fake (in agent)"
    });
    assert_eq!(begin["params"]["value"]["cancellable"], false, "{begin}");
    let token = begin["params"]["token"].clone();
    let entry = status_entry(&mut editor, "fake");
    assert_eq!(entry["kind"], "server", "{entry}");
    editor.wait_for("the server's analysis as a report", |message| {
        is_activity_progress(message, "report")
            && message["params"]["token"] == token
            && message["params"]["value"]["message"]
                .as_str()
                .is_some_and(|text| text.starts_with("analysing"))
    });
    let end = end_of(&mut editor, &token);
    assert_eq!(end["params"]["value"]["message"], "ready", "{end}");
    assert_eq!(editor.response(asked)["result"]["outcome"], "answered");
    editor.shutdown();
}
