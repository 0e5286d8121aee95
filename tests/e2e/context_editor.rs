//! The context editor and the trajectory end to end: a session recorded by `agent-lsp run`
//! against the loopback model endpoint, edited through `agent-lsp context …` (fold, pin, delete,
//! replace, rollback), the derived requests checked before and after, the session continued
//! after the edits with the endpoint enforcing the API's rules, the same commands over LSP
//! (`agent.context.*`), and the HTML trajectory rendered by headless Chromium.
//!
//! The Chromium test keeps its screenshot at `target/test-artifacts/trajectory.png` (next to the
//! page it rendered, `trajectory.html`).

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use agent_lsp::context_editor::ops::next_request;
use agent_lsp::llm::wire;
use agent_lsp::session::store::Store;
use agent_tests::editor::Editor;
use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, Reply};
use serde_json::{Value, json};

const PRESET: &str = "description = \"context editor test\"\n\
[model]\nthinking = \"disabled\"\nmax_steps = 10\ncontext_window = 100000\n\
[tools]\nenabled = [\"read\", \"grep\"]\n\
[permissions]\ndefault = \"allow\"\n\
[plugins.runtime_context]\nenabled = true\n";

struct Fixture {
    workspace: tempfile::TempDir,
    state: tempfile::TempDir,
    config: PathBuf,
    preset: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let workspace = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(workspace.path().join("src")).unwrap();
        std::fs::write(workspace.path().join("src/a.txt"), "alpha\n".repeat(300)).unwrap();
        std::fs::write(workspace.path().join("src/b.txt"), "beta\n").unwrap();
        let state = tempfile::tempdir().unwrap();
        let config = state.path().join("config.toml");
        std::fs::write(&config, "[provider]\nbackoff_base_ms = 20\n").unwrap();
        let preset = state.path().join("ctx.toml");
        std::fs::write(&preset, PRESET).unwrap();
        Fixture {
            workspace,
            state,
            config,
            preset,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        agent_tests::agent_lsp_command(self.state.path(), &self.config, self.workspace.path(), args)
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run agent-lsp")
    }

    fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(
            output.status.success(),
            "agent-lsp {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        serde_json::from_str(&self.ok(args)).unwrap()
    }

    fn store(&self) -> Store {
        Store::for_workspace_in(self.state.path(), self.workspace.path()).unwrap()
    }

    /// The body the session's next request would carry before its new messages.
    fn next_body(&self, session: &str) -> String {
        let history = self.store().load(session).unwrap();
        wire::chat_completions_body(&next_request(&history).unwrap())
    }

    /// A session that read both files and answered: prompt, runtime context, two tool pairs and
    /// an answer that names `src/a.txt` and points back with "as shown above".
    fn recorded_session(&self, endpoint: &ModelEndpoint) -> String {
        endpoint.push_all([
            Reply::tool_call("read", r#"{"path":"src/a.txt"}"#),
            Reply::tool_call("read", r#"{"path":"src/b.txt"}"#),
            Reply::text("src/a.txt says alpha and b says beta, as shown above."),
        ]);
        let preset = self.preset.to_str().unwrap();
        self.ok(&[
            "run",
            "--preset",
            preset,
            "--base-url",
            &endpoint.base_url(),
            "What do the two files in src say?",
        ]);
        self.store().resolve("last").unwrap()
    }
}

fn messages(body: &str) -> Vec<Value> {
    serde_json::from_str::<Value>(body).unwrap()["messages"]
        .as_array()
        .unwrap()
        .clone()
}

fn segment(view: &Value, what: impl Fn(&Value) -> bool) -> &Value {
    view["segments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|segment| what(segment))
        .unwrap_or_else(|| panic!("no such segment in {view:#}"))
}

fn id(segment: &Value) -> String {
    segment["id"].as_u64().unwrap().to_string()
}

/// Every request the endpoint served is what `session replay` rebuilds from the log.
fn assert_requests_replay(fixture: &Fixture, endpoint: &ModelEndpoint, session: &str) {
    let served = endpoint
        .chat_requests()
        .into_iter()
        .filter(|request| {
            request.body.as_ref().is_some_and(|body| {
                !body
                    .to_string()
                    .contains(agent_lsp::context_editor::ops::FOLD_INSTRUCTION_MARKER)
            })
        })
        .collect::<Vec<_>>();
    for (index, request) in served.iter().enumerate() {
        let n = (index + 1).to_string();
        let replayed = fixture.ok(&["session", "replay", session, "--request", &n]);
        assert_eq!(
            replayed,
            String::from_utf8_lossy(&request.raw),
            "request {n} does not replay byte-identically"
        );
    }
}

#[test]
fn context_edits_over_a_recorded_session_change_the_requests_and_rollback_restores_them() {
    let fixture = Fixture::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let session = fixture.recorded_session(&endpoint);
    let session = session.as_str();

    let view = fixture.json(&["context", "show", session, "--json"]);
    let prompt = segment(&view, |s| s["role"] == "user");
    let runtime = segment(&view, |s| s["source"] == "runtime-context");
    assert_eq!(runtime["role"], "context");
    let read_a = segment(&view, |s| {
        s["role"] == "tool" && s["source"].as_str().unwrap().contains("read src/a.txt")
    });
    let read_b = segment(&view, |s| {
        s["role"] == "tool" && s["source"].as_str().unwrap().contains("read src/b.txt")
    });
    let answer = segment(&view, |s| s["source"] == "model");
    assert_eq!(read_a["referenced"], true, "{read_a:#}");
    assert_eq!(read_b["referenced"], true, "{read_b:#}");
    assert_eq!(prompt["referenced"], false);
    assert!(read_a["tokens"].as_u64().unwrap() > 300);
    assert!(read_a["preview"].as_str().unwrap().chars().count() <= 201);
    assert_eq!(view["totals"]["segments"], 7);
    assert_eq!(view["totals"]["by_role"]["tool"]["segments"], 2);
    let largest = fixture.json(&["context", "show", session, "--json", "--sort", "tokens"]);
    assert_eq!(largest["segments"][0]["id"], read_a["id"]);
    let found = fixture.json(&["context", "show", session, "--json", "--query", "BETA"]);
    assert!(found["segments"].as_array().unwrap().len() >= 2);
    let tools = fixture.json(&["context", "show", session, "--json", "--role", "tool"]);
    assert_eq!(tools["segments"].as_array().unwrap().len(), 2);
    let human = fixture.ok(&["context", "show", session]);
    assert!(human.contains("tool read src/a.txt"), "{human}");

    let before = fixture.next_body(session);
    let before_messages = messages(&before);

    // Fold the big result: the pair stays whole, only that message changes.
    let fold = fixture.json(&[
        "context",
        "fold",
        session,
        &id(read_a),
        "--summary",
        "a.txt repeats alpha 300 times",
        "--json",
    ]);
    let snapshot = fold["snapshot"].as_u64().unwrap().to_string();
    let folded = messages(&fixture.next_body(session));
    assert_eq!(folded.len(), before_messages.len());
    let changed = (0..folded.len())
        .filter(|i| folded[*i] != before_messages[*i])
        .collect::<Vec<_>>();
    assert_eq!(changed.len(), 1);
    let tool_message = &folded[changed[0]];
    assert_eq!(tool_message["role"], "tool");
    assert!(
        tool_message["content"]
            .as_str()
            .unwrap()
            .contains("a.txt repeats alpha 300 times")
    );

    // Pin the prompt: appended, everything before it untouched (the cached prefix holds).
    fixture.ok(&["context", "pin", session, &id(prompt)]);
    let pinned = messages(&fixture.next_body(session));
    assert_eq!(pinned[..folded.len()], folded[..]);
    let last = pinned.last().unwrap();
    assert_eq!(last["role"], "user");
    assert!(
        last["content"]
            .as_str()
            .unwrap()
            .contains("What do the two files in src say?")
    );

    // Deleting the second read needs confirmation: the answer points back at it.
    let call_b = view["segments"]
        .as_array()
        .unwrap()
        .iter()
        .take_while(|s| s["id"] != read_b["id"])
        .last()
        .unwrap();
    let refused = fixture.run(&[
        "context",
        "delete",
        session,
        &id(call_b),
        "--end",
        &id(read_b),
    ]);
    assert_eq!(refused.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--force"));
    assert_eq!(messages(&fixture.next_body(session)), pinned);
    fixture.ok(&[
        "context",
        "delete",
        session,
        &id(call_b),
        "--end",
        &id(read_b),
        "--force",
    ]);
    // Splitting the pair is refused, and nothing changes.
    let folded_a = fold["results"][0]["seq"].as_u64().unwrap().to_string();
    let split = fixture.run(&["context", "delete", session, &folded_a, "--force"]);
    assert!(!split.status.success());
    assert!(
        String::from_utf8_lossy(&split.stderr).contains("separate tool call"),
        "{}",
        String::from_utf8_lossy(&split.stderr)
    );
    fixture.ok(&[
        "context",
        "replace",
        session,
        &id(answer),
        "--text",
        "Both files hold one repeated word.",
    ]);
    let edited = messages(&fixture.next_body(session));
    assert_eq!(edited.len(), pinned.len() - 2);
    assert!(
        edited
            .iter()
            .any(|m| m["role"] == "assistant"
                && m["content"] == "Both files hold one repeated word.")
    );

    // The audit trail has every batch, with its snapshot and result.
    let history = fixture.json(&["context", "history", session, "--json"]);
    let outcomes = history
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["ops"][0]["op"].as_str().unwrap().to_owned(),
                r["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect::<Vec<_>>();
    let expected = [
        ("fold", "applied"),
        ("pin", "applied"),
        ("delete", "applied"),
        ("delete", "refused"),
        ("replace", "applied"),
    ]
    .map(|(op, outcome)| (op.to_owned(), outcome.to_owned()));
    assert_eq!(outcomes, expected);
    assert!(
        history[0]["ops"][0]["before"]
            .as_str()
            .unwrap()
            .contains("tool/result")
    );
    assert!(
        history[0]["results"][0]["after"]
            .as_str()
            .unwrap()
            .contains("folded-context")
    );
    assert!(
        history
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["ts"].as_str().is_some())
    );
    let human = fixture.ok(&["context", "history", session]);
    assert!(
        human.contains("before:") && human.contains("after:"),
        "{human}"
    );

    // Rollback to the first snapshot: the next request is byte-identical to before the edits.
    fixture.ok(&["context", "rollback", session, &snapshot]);
    assert_eq!(fixture.next_body(session), before);

    // The session continues after the rollback: its request extends the old one exactly.
    endpoint.push(Reply::text("Still alpha and beta."));
    fixture.ok(&[
        "run",
        "--session",
        session,
        "--base-url",
        &endpoint.base_url(),
        "Anything else?",
    ]);
    let served = endpoint.chat_requests();
    let continued = served.last().unwrap().body.clone().unwrap();
    let continued = continued["messages"].as_array().unwrap();
    assert_eq!(continued[..before_messages.len()], before_messages[..]);

    // Edit again, with the fold summary written by the model, and continue: the endpoint sees
    // the fold and the pin and no rule is broken.
    endpoint.push(Reply::text("The file is the word alpha, 300 times."));
    let view = fixture.json(&["context", "show", session, "--json"]);
    let read_a = segment(&view, |s| {
        s["role"] == "tool" && s["source"].as_str().unwrap().contains("read src/a.txt")
    });
    fixture.ok(&[
        "context",
        "fold",
        session,
        &id(read_a),
        "--base-url",
        &endpoint.base_url(),
    ]);
    let fold_call = endpoint
        .chat_requests()
        .last()
        .unwrap()
        .body
        .clone()
        .unwrap();
    let fold_messages = fold_call["messages"].as_array().unwrap();
    assert!(
        fold_messages.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .starts_with("<fold-request>")
    );
    fixture.ok(&["context", "pin", session, &id(prompt)]);
    endpoint.push(Reply::from_fn(|request| {
        let all = request
            .messages
            .iter()
            .filter_map(|m| m.content.clone())
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            all.contains("The file is the word alpha, 300 times."),
            "{all}"
        );
        assert!(all.contains("<pinned-context"), "{all}");
        Reply::text("Done.")
    }));
    fixture.ok(&[
        "run",
        "--session",
        session,
        "--base-url",
        &endpoint.base_url(),
        "Summarize once more.",
    ]);
    endpoint.assert_no_violations();
    assert_eq!(endpoint.remaining_replies(), 0);
    assert_requests_replay(&fixture, &endpoint, session);
}

#[test]
fn context_commands_over_lsp_show_edit_and_roll_back_the_servers_session() {
    let fixture = Fixture::new();
    let config = fixture.state.path().join("config.toml");
    let root = fixture.workspace.path().canonicalize().unwrap();
    let mut command = Command::new(agent_tests::workspace_bin("agent-lsp"));
    command
        .env("AGENT_LSP_STATE_DIR", fixture.state.path())
        .env("AGENT_LSP_CONFIG", &config)
        .env_remove("DEEPSEEK_API_KEY")
        .args(["--workspace", root.to_str().unwrap(), "serve"]);
    let mut editor = Editor::start(command);
    editor.initialize_with(&root, Value::Null);
    let execute = |editor: &mut Editor, name: &str, argument: Value| {
        let answer = editor.request(
            "workspace/executeCommand",
            json!({"command": name, "arguments": [argument]}),
        );
        answer
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{name}: {answer:#}"))
    };
    execute(
        &mut editor,
        "agent.tool",
        json!({"name": "read", "arguments": {"path": "src/a.txt"}}),
    );
    let shown = execute(&mut editor, "agent.context.show", json!({}));
    let segments = shown["segments"]
        .as_array()
        .unwrap_or_else(|| panic!("{shown:#}"));
    assert_eq!(segments.len(), 2, "{shown:#}");
    for key in ["id", "role", "source", "tokens", "preview", "referenced"] {
        assert!(segments[1].get(key).is_some(), "{key} missing: {shown:#}");
    }
    assert_eq!(segments[1]["role"], "tool");
    assert!(shown["totals"]["tokens"].as_u64().unwrap() > 0);
    let tools = execute(
        &mut editor,
        "agent.context.show",
        json!({"role": "tool", "sort": "tokens", "query": "alpha"}),
    );
    assert_eq!(tools["segments"].as_array().unwrap().len(), 1);

    let edited = execute(
        &mut editor,
        "agent.context.edit",
        json!({"ops": [{"op": "fold", "id": segments[1]["id"], "summary": "alpha, 300 times"}]}),
    );
    assert_eq!(edited["applied"], true, "{edited:#}");
    let after = execute(&mut editor, "agent.context.show", json!({}));
    assert_eq!(after["segments"][1]["role"], "summary");
    assert!(
        after["segments"][1]["preview"]
            .as_str()
            .unwrap()
            .contains("alpha, 300 times")
    );
    let split = editor.request(
        "workspace/executeCommand",
        json!({"command": "agent.context.edit", "arguments": [{"ops": [{"op": "delete", "id": after["segments"][1]["id"]}], "force": true}]}),
    );
    assert!(
        split["error"]["message"]
            .as_str()
            .unwrap()
            .contains("separate tool call"),
        "{split:#}"
    );
    let rolled = execute(
        &mut editor,
        "agent.context.rollback",
        json!({"snapshot": edited["snapshot"]}),
    );
    assert_eq!(rolled["applied"], true, "{rolled:#}");
    let restored = execute(&mut editor, "agent.context.show", json!({}));
    assert_eq!(restored["segments"], shown["segments"]);
    editor.shutdown();
}

/// The `chromium` binary: Debian's package, installed by `.ci/tools.sh`.
fn chromium() -> PathBuf {
    for candidate in ["chromium", "chromium-browser"] {
        if let Ok(output) = Command::new("which").arg(candidate).output()
            && output.status.success()
        {
            return PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
        }
    }
    panic!("chromium is not installed: run `bash .ci/tools.sh` (Debian package `chromium`)");
}

/// Run headless Chromium with `args` and a bounded time; returns its stdout.
pub(crate) fn run_chromium(args: &[String]) -> String {
    let mut command = Command::new(chromium());
    command
        .args([
            "--headless",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
        ])
        .args(["--disable-dev-shm-usage", "--virtual-time-budget=5000"]);
    // Chromium refuses to run as root with its sandbox on.
    let uid = Command::new("id").arg("-u").output().unwrap();
    if String::from_utf8_lossy(&uid.stdout).trim() == "0" {
        command.arg("--no-sandbox");
    }
    let mut child = command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut text).unwrap();
        text
    });
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("chromium did not finish within 90 s: {args:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    reader.join().unwrap()
}

pub(crate) fn artifacts_dir() -> PathBuf {
    // target/<profile>/deps/e2e-… → target/test-artifacts
    let exe = std::env::current_exe().unwrap();
    let target = exe.ancestors().nth(3).unwrap();
    let dir = target.join("test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_html_trajectory_renders_every_cell_kind_in_headless_chromium() {
    let fixture = Fixture::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let session = fixture.recorded_session(&endpoint);
    let session = session.as_str();
    // A tool run outside a model step (a subtool cell), and a fold (a compacted cell).
    fixture.ok(&[
        "tool",
        "read",
        "--args",
        r#"{"path":"src/b.txt"}"#,
        "--session",
        session,
    ]);
    let view = fixture.json(&["context", "show", session, "--json"]);
    let read_a = segment(&view, |s| {
        s["role"] == "tool" && s["source"].as_str().unwrap().contains("read src/a.txt")
    });
    fixture.ok(&[
        "context",
        "fold",
        session,
        &id(read_a),
        "--summary",
        "alpha x300",
    ]);
    // A rewind of the files (nothing of the agent's to take back: a rewind cell all the same).
    fixture.ok(&["rewind", session, "--files"]);
    endpoint.assert_no_violations();

    let trajectory = fixture.json(&["session", "trajectory", session, "--format", "json"]);
    let kinds = trajectory["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cell| cell["kind"].as_str().unwrap().to_owned())
        .collect::<std::collections::BTreeSet<_>>();
    assert_eq!(
        kinds.iter().map(String::as_str).collect::<Vec<_>>(),
        [
            "compacted",
            "context",
            "files",
            "message",
            "rewind",
            "subtool",
            "system",
            "tool",
            "user"
        ]
    );
    let tool = trajectory["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|cell| cell["kind"] == "tool")
        .unwrap();
    assert_eq!(tool["tool"]["arguments"], r#"{"path":"src/a.txt"}"#);
    assert!(tool["tool"]["result"].as_str().unwrap().contains("alpha"));
    let answered = trajectory["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|cell| cell["kind"] == "message")
        .filter(|cell| cell["request"]["prompt_tokens"].as_u64().is_some())
        .count();
    assert_eq!(answered, 3);
    assert_eq!(trajectory["totals"]["requests"], 3);

    let dir = artifacts_dir();
    let page = dir.join("trajectory.html");
    fixture.ok(&[
        "session",
        "trajectory",
        session,
        "--format",
        "html",
        "-o",
        page.to_str().unwrap(),
    ]);
    let html = std::fs::read_to_string(&page).unwrap();
    for forbidden in ["http://", "https://", "src=\"", "<link"] {
        assert!(
            !html.contains(forbidden),
            "the page must load nothing: {forbidden}"
        );
    }
    let url = format!("file://{}", page.display());
    let dom = run_chromium(&["--dump-dom".into(), url.clone()]);
    assert!(
        dom.contains("data-rendered=\"ok\""),
        "the script did not run:\n{dom}"
    );
    let summary = between(&dom, "<pre id=\"render-summary\">", "</pre>");
    let summary: Value = serde_json::from_str(&summary.replace("&quot;", "\"")).unwrap();
    for kind in [
        "system",
        "user",
        "context",
        "compacted",
        "message",
        "tool",
        "subtool",
        "files",
        "rewind",
    ] {
        assert!(
            summary["kinds"][kind].as_u64().unwrap() > 0,
            "no {kind} cell rendered: {summary}"
        );
    }
    assert_eq!(
        summary["tool_cells_with_payload_and_result"], 3,
        "{summary}"
    );
    assert!(summary["json_trees"].as_u64().unwrap() >= 3, "{summary}");
    // The first tool cell shows its raw arguments and its result.
    let cell = between(&dom, "data-kind=\"tool\"", "</section>");
    assert!(cell.contains("{\"path\":\"src/a.txt\"}"), "{cell}");
    assert!(
        cell.contains("tool-result") && cell.contains("alpha"),
        "{cell}"
    );
    assert!(cell.contains("json-tree"), "{cell}");

    let screenshot = dir.join("trajectory.png");
    let _ = std::fs::remove_file(&screenshot);
    run_chromium(&[
        format!("--screenshot={}", screenshot.display()),
        "--window-size=1280,2400".into(),
        url,
    ]);
    let png = std::fs::read(&screenshot).expect("chromium wrote the screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{}",
        png.len()
    );
}

pub(crate) fn between(text: &str, start: &str, end: &str) -> String {
    let from = text
        .find(start)
        .unwrap_or_else(|| panic!("`{start}` not found"))
        + start.len();
    let to = text[from..].find(end).unwrap() + from;
    text[from..to].to_owned()
}
