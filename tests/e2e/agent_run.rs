//! The agent end to end, through the real binary: `agent-lsp run` against the loopback model
//! endpoint (real HTTP, real SSE, the API's rules enforced), real files, real tools, and the
//! session log read back and replayed.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use agent_lsp::session::event::{EventBody, EventKind};
use agent_lsp::session::store::Store;
use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, ModelTurn, Reply, Rule};
use serde_json::Value;

/// A workspace, a state directory and a config file that make runs independent of the machine.
struct Fixture {
    workspace: tempfile::TempDir,
    state: tempfile::TempDir,
    config: std::path::PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let workspace = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(workspace.path().join("src")).unwrap();
        std::fs::write(
            workspace.path().join("src/lib.rs"),
            "/// Parses the input.\npub fn old_name(input: &str) -> usize {\n    input.len()\n}\n",
        )
        .unwrap();
        std::fs::write(
            workspace.path().join("README.md"),
            "# demo\nCall `old_name` to parse.\n",
        )
        .unwrap();
        let state = tempfile::tempdir().unwrap();
        let config = state.path().join("config.toml");
        // Fast retries keep the retry tests short; everything else is the default.
        std::fs::write(
            &config,
            "[provider]\nbackoff_base_ms = 20\nbackoff_cap_ms = 2000\nrequest_timeout_secs = 20\n",
        )
        .unwrap();
        Fixture {
            workspace,
            state,
            config,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        agent_tests::agent_lsp_command(self.state.path(), &self.config, self.workspace.path(), args)
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run agent-lsp")
    }

    fn store(&self) -> Store {
        Store::for_workspace_in(self.state.path(), self.workspace.path()).unwrap()
    }

    fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.workspace.path().join(path)).unwrap()
    }
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Every chat request the endpoint received must be what `session replay` rebuilds.
fn assert_requests_replay(fixture: &Fixture, endpoint: &ModelEndpoint, session: &str) {
    let requests = endpoint.chat_requests();
    assert!(!requests.is_empty());
    for (index, request) in requests.iter().enumerate() {
        let n = (index + 1).to_string();
        let output = fixture.run(&["session", "replay", session, "--request", &n]);
        assert!(output.status.success(), "replay {n}: {}", stderr(&output));
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&request.raw),
            "request {n} does not replay byte-identically"
        );
    }
}

fn kinds(store: &Store, session: &str) -> Vec<EventKind> {
    store
        .load(session)
        .unwrap()
        .events()
        .iter()
        .map(|event| event.kind())
        .collect()
}

fn count(kinds: &[EventKind], kind: EventKind) -> usize {
    kinds.iter().filter(|k| **k == kind).count()
}

#[test]
fn a_scripted_model_greps_reads_edits_and_answers() {
    let fixture = Fixture::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all([
        Reply::tool_call("grep", r#"{"pattern":"old_name"}"#),
        Reply::from_fn(|request| {
            let grep = request.tool_result_text();
            assert!(grep.contains("src/lib.rs"), "grep found: {grep}");
            Reply::tool_call("read", r#"{"path":"src/lib.rs"}"#)
        }),
        Reply::tool_call(
            "edit",
            r#"{"path":"src/lib.rs","old_string":"pub fn old_name(","new_string":"pub fn new_name("}"#,
        ),
        Reply::from_fn(|request| {
            let diff = request.tool_result_text();
            assert!(diff.contains("+pub fn new_name("), "edit returned: {diff}");
            Reply::text("Renamed `old_name` to `new_name` in src/lib.rs.")
        }),
    ]);

    let output = fixture.run(&[
        "run",
        "--preset",
        "minimal",
        "--base-url",
        &endpoint.base_url(),
        "Rename old_name to new_name",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("Renamed `old_name` to `new_name`"),
        "{}",
        stdout(&output)
    );
    assert!(
        fixture
            .read("src/lib.rs")
            .contains("pub fn new_name(input: &str)")
    );
    endpoint.assert_no_violations();
    assert_eq!(endpoint.remaining_replies(), 0);

    let store = fixture.store();
    let session = store.resolve("last").unwrap();
    let kinds = kinds(&store, &session);
    assert_eq!(count(&kinds, EventKind::UserMessage), 1);
    assert_eq!(count(&kinds, EventKind::RequestHeader), 4);
    assert_eq!(count(&kinds, EventKind::RequestContext), 4);
    assert_eq!(count(&kinds, EventKind::AssistantMessage), 4);
    assert_eq!(count(&kinds, EventKind::ToolCall), 3);
    assert_eq!(count(&kinds, EventKind::ToolResult), 3);
    assert_eq!(count(&kinds, EventKind::Usage), 4);
    // minimal has no runtime-context plugin.
    assert_eq!(count(&kinds, EventKind::RuntimeContext), 0);
    assert_requests_replay(&fixture, &endpoint, &session);

    // The edit's result was recorded with its meta.
    let history = store.load(&session).unwrap();
    let edit = history
        .events()
        .iter()
        .find_map(|event| match &event.body {
            EventBody::ToolResult(result) if result.name == "edit" => Some(result.clone()),
            _ => None,
        })
        .unwrap();
    assert!(edit.text.contains("-pub fn old_name("), "{}", edit.text);
}

#[test]
fn thinking_mode_with_several_tool_rounds_gets_no_400() {
    let fixture = Fixture::new();
    let endpoint =
        ModelEndpoint::start(EndpointConfig::default().reasoning_in_tool_stretches(true)).unwrap();
    endpoint.push_all([
        Reply::Turn(
            ModelTurn::new()
                .reasoning("Find the function first.")
                .tool_call("grep", r#"{"pattern":"fn "}"#),
        ),
        // Two calls in one step: read-only, run concurrently, results in call order.
        Reply::Turn(
            ModelTurn::new()
                .reasoning("Read both files.")
                .content("Reading.")
                .tool_call("read", r#"{"path":"src/lib.rs"}"#)
                .tool_call("read", r#"{"path":"README.md"}"#),
        ),
        Reply::Turn(
            ModelTurn::new()
                .reasoning("List the tree.")
                .tool_call("list", r#"{"path":"."}"#),
        ),
        Reply::Turn(
            ModelTurn::new()
                .reasoning("Done.")
                .content("The parser is `old_name` in src/lib.rs."),
        ),
    ]);
    let output = fixture.run(&[
        "run",
        "--base-url",
        &endpoint.base_url(),
        "Where is the parser?",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    endpoint.assert_no_violations();
    let requests = endpoint.chat_requests();
    assert_eq!(requests.len(), 4);
    assert!(requests.iter().all(|request| request.status == 200));
    let last: Value = requests[3].body.clone().unwrap();
    assert_eq!(last["thinking"]["type"], "enabled");
    let reasonings = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .map(|m| {
            m["reasoning_content"]
                .as_str()
                .unwrap_or("<missing>")
                .to_owned()
        })
        .collect::<Vec<_>>();
    assert_eq!(
        reasonings,
        [
            "Find the function first.",
            "Read both files.",
            "List the tree."
        ]
    );
    // standard injects the runtime context once: it did not change between steps.
    let store = fixture.store();
    let session = store.resolve("last").unwrap();
    assert_eq!(
        count(&kinds(&store, &session), EventKind::RuntimeContext),
        1
    );
    assert_requests_replay(&fixture, &endpoint, &session);

    // A second turn in the same session continues the log and the prefix cache.
    endpoint.push(Reply::text("Still there."));
    let output = fixture.run(&[
        "run",
        "--session",
        &session,
        "--base-url",
        &endpoint.base_url(),
        "Thanks",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let requests = endpoint.chat_requests();
    let usage = requests[4].usage.as_ref().unwrap();
    assert!(usage.prompt_cache_hit_tokens > 0, "{usage:?}");
    endpoint.assert_no_violations();
    assert_requests_replay(&fixture, &endpoint, &session);
}

#[test]
fn rate_limits_and_overload_are_retried_and_succeed() {
    let fixture = Fixture::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all([
        Reply::rate_limited(Some(1)),
        Reply::overloaded(),
        Reply::text("Hello after retries."),
    ]);
    let output = fixture.run(&[
        "run",
        "--preset",
        "minimal",
        "--base-url",
        &endpoint.base_url(),
        "hi",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("Hello after retries."));
    let statuses = endpoint
        .chat_requests()
        .iter()
        .map(|request| request.status)
        .collect::<Vec<_>>();
    assert_eq!(statuses, [429, 503, 200]);
    // The three attempts sent the same body: one request of the session.
    let requests = endpoint.chat_requests();
    assert_eq!(requests[0].raw, requests[2].raw);
    let store = fixture.store();
    assert_eq!(
        count(
            &kinds(&store, &store.resolve("last").unwrap()),
            EventKind::RequestHeader
        ),
        1
    );
}

#[test]
fn auth_and_balance_errors_stop_with_a_clear_message() {
    let fixture = Fixture::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push(Reply::auth_failed("abcd"));
    let output = fixture.run(&["run", "--base-url", &endpoint.base_url(), "hi"]);
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(message.contains("DEEPSEEK_API_KEY"), "{message}");
    assert_eq!(endpoint.chat_requests().len(), 1, "401 is not retried");

    endpoint.push(Reply::insufficient_balance());
    let output = fixture.run(&["run", "--base-url", &endpoint.base_url(), "hi"]);
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output).to_lowercase();
    assert!(message.contains("balance"), "{message}");
    assert_eq!(endpoint.chat_requests().len(), 2, "402 is not retried");

    // Both failures are in the sessions' logs.
    let store = fixture.store();
    for id in store.ids().unwrap() {
        let history = store.load(&id).unwrap();
        let class = history.events().iter().find_map(|event| match &event.body {
            EventBody::RequestError(error) => Some(error.class.clone()),
            _ => None,
        });
        assert!(
            matches!(class.as_deref(), Some("auth" | "balance")),
            "{class:?}"
        );
    }
}

#[test]
fn context_overflow_is_surfaced_as_such() {
    let fixture = Fixture::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default().context_window(64)).unwrap();
    let output = fixture.run(&[
        "run",
        "--base-url",
        &endpoint.base_url(),
        "a prompt for a tiny window",
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("maximum context length"),
        "{}",
        stderr(&output)
    );
    let violations = endpoint.take_violations();
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].rule, Rule::ContextLength);
    let store = fixture.store();
    let history = store.load("last").unwrap();
    assert!(history.events().iter().any(|event| matches!(&event.body, EventBody::RequestError(error) if error.class == "context_overflow")));
}

#[test]
fn without_a_model_run_explains_how_to_configure_one_and_tools_still_work() {
    let fixture = Fixture::new();
    let output = fixture.run(&["run", "hi"]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(message.contains("no model is configured"), "{message}");
    assert!(
        message.contains("DEEPSEEK_API_KEY") && message.contains("--base-url"),
        "{message}"
    );
    assert!(
        fixture.store().ids().unwrap().is_empty(),
        "no empty session is left behind"
    );

    let output = fixture.run(&["tool", "read", "--args", r#"{"path":"README.md"}"#]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("Call `old_name` to parse."));
    let output = fixture.run(&["tool", "--list", "--json"]);
    let catalog: Value = serde_json::from_slice(&output.stdout).unwrap();
    let names = catalog
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect::<Vec<_>>();
    assert_eq!(
        names,
        [
            "edit",
            "glob",
            "grep",
            "job_kill",
            "job_list",
            "job_output",
            "list",
            "lsp_call_hierarchy",
            "lsp_definition",
            "lsp_diagnostics",
            "lsp_document_symbols",
            "lsp_hover",
            "lsp_implementation",
            "lsp_references",
            "lsp_rename_preview",
            "lsp_type_definition",
            "lsp_workspace_symbols",
            "memory",
            "read",
            "recall_history",
            "shell",
            "skill",
            "task",
            "todo",
            "web_fetch",
            "web_search",
            "write"
        ]
    );
    assert!(catalog[0]["parameters"]["properties"].is_object());
}

#[test]
fn models_lists_what_the_endpoint_offers() {
    let fixture = Fixture::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let output = fixture.run(&["models", "--base-url", &endpoint.base_url()]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "deepseek-v4-flash\ndeepseek-v4-pro\n");
}

#[test]
fn an_interrupted_run_leaves_a_consistent_session() {
    let fixture = Fixture::new();
    let endpoint =
        ModelEndpoint::start(EndpointConfig::default().keep_alive(Duration::from_millis(100)))
            .unwrap();
    endpoint.push_all([
        Reply::tool_call("read", r#"{"path":"README.md"}"#),
        Reply::hang(),
    ]);
    let child = fixture
        .command(&["run", "--base-url", &endpoint.base_url(), "read and think"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the second request is in flight, then interrupt as Ctrl-C would.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while endpoint.chat_requests().len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the second request never came"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130), "{}", stderr(&output));

    let store = fixture.store();
    let session = store.resolve("last").unwrap();
    let mut history = store.load(&session).unwrap();
    // The turn's end is captured whatever its outcome (a rewind's baseline), after the
    // cancelled request's record.
    let events = history.events();
    let (checkpoint, last) = (&events[events.len() - 1], &events[events.len() - 2]);
    assert!(
        matches!(&checkpoint.body, EventBody::FileCheckpoint(end) if end.reason == agent_lsp::session::event::CheckpointReason::TurnEnd),
        "{checkpoint:?}"
    );
    let last = last.clone();
    assert!(
        matches!(&last.body, EventBody::RequestError(error) if error.class == "cancelled"),
        "{last:?}"
    );
    agent_tests::assert_tool_pairing(history.derive_messages());

    // The session goes on where it stopped, and the endpoint sees a valid history.
    endpoint.push(Reply::text("Back again."));
    let output = fixture.run(&[
        "run",
        "--session",
        &session,
        "--base-url",
        &endpoint.base_url(),
        "go on",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    endpoint.assert_no_violations();
}

#[test]
fn hostile_paths_are_refused_by_every_file_tool_through_the_cli() {
    let fixture = Fixture::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret").unwrap();
    std::os::unix::fs::symlink(outside.path(), fixture.workspace.path().join("escape")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        fixture.workspace.path().join("secret-link"),
    )
    .unwrap();
    let long = "a/".repeat(3000);
    let hostile = [
        "../x".to_owned(),
        "../../etc/passwd".into(),
        "src/../../x".into(),
        "./../x".into(),
        "a/b/../../../x".into(),
        "/etc/passwd".into(),
        "/tmp".into(),
        outside.path().join("secret.txt").display().to_string(),
        "escape/secret.txt".into(),
        "escape".into(),
        "escape/../x".into(),
        "secret-link".into(),
        "escape/new.txt".into(),
        "src/\u{0}x".into(),
        long,
        format!("{}/x", "b".repeat(300)),
        "..\\..\\x".into(),
        "C:\\Windows\\system.ini".into(),
        "\\\\server\\share\\x".into(),
        "file:///etc/passwd".into(),
        "..".into(),
        "".into(),
    ];
    assert!(hostile.len() >= 20);
    for path in &hostile {
        let quoted = serde_json::to_string(path).unwrap();
        let calls = [
            ("read", format!(r#"{{"path":{quoted}}}"#)),
            ("list", format!(r#"{{"path":{quoted}}}"#)),
            ("glob", format!(r#"{{"pattern":"*","path":{quoted}}}"#)),
            ("grep", format!(r#"{{"pattern":"secret","path":{quoted}}}"#)),
            ("write", format!(r#"{{"path":{quoted},"content":"pwned"}}"#)),
            (
                "edit",
                format!(r#"{{"path":{quoted},"old_string":"secret","new_string":"pwned"}}"#),
            ),
        ];
        for (tool, args) in calls {
            let output = fixture.run(&["tool", tool, "--args", &args, "--json"]);
            let result: Value = serde_json::from_slice(&output.stdout)
                .unwrap_or_else(|_| panic!("{tool} {path:?}: {}", stderr(&output)));
            assert_eq!(
                output.status.code(),
                Some(1),
                "{tool} accepted {path:?}: {result}"
            );
            assert_eq!(
                result["is_error"], true,
                "{tool} accepted {path:?}: {result}"
            );
            let text = result["text"].as_str().unwrap();
            assert!(
                text.starts_with("error:") && !text.contains("secret\n"),
                "{tool} {path:?}: {text}"
            );
        }
    }
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret.txt")).unwrap(),
        "secret"
    );
    assert!(!outside.path().join("new.txt").exists());
    assert!(std::fs::read_dir(outside.path()).unwrap().count() == 1);
}

#[test]
fn json_output_is_one_object_per_line_and_a_pipe_gets_plain_text() {
    let fixture = Fixture::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let turns = || {
        [
            Reply::Turn(
                ModelTurn::new()
                    .reasoning("Look first.")
                    .tool_call("list", r#"{"path":"src"}"#),
            ),
            Reply::Turn(
                ModelTurn::new()
                    .reasoning("Enough.")
                    .content("One file: src/lib.rs."),
            ),
        ]
    };
    endpoint.push_all(turns());
    let output = fixture.run(&[
        "run",
        "--json",
        "--base-url",
        &endpoint.base_url(),
        "What is in src?",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let lines = stdout(&output)
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap_or_else(|_| panic!("not JSON: {line}"))
        })
        .collect::<Vec<_>>();
    let types = lines
        .iter()
        .map(|line| line["type"].as_str().unwrap().to_owned())
        .collect::<Vec<_>>();
    for expected in [
        "reasoning",
        "tool_call_started",
        "tool_call",
        "tool_result",
        "step",
        "text",
        "end",
    ] {
        assert!(
            types.iter().any(|t| t == expected),
            "no `{expected}` line in {types:?}"
        );
    }
    let end = lines.last().unwrap();
    assert_eq!(end["outcome"], "answered");
    assert_eq!(end["steps"], 2);
    let text = lines
        .iter()
        .filter(|line| line["type"] == "text")
        .map(|line| line["text"].as_str().unwrap())
        .collect::<String>();
    assert_eq!(text, "One file: src/lib.rs.");

    endpoint.push_all(turns());
    let output = fixture.run(&["run", "--base-url", &endpoint.base_url(), "What is in src?"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "One file: src/lib.rs.\n");
    let progress = stderr(&output);
    assert!(
        !progress.contains('\u{1b}'),
        "escape codes on a pipe: {progress:?}"
    );
    assert!(progress.contains("✓ list"), "{progress}");
    endpoint.assert_no_violations();
}

#[test]
fn on_a_terminal_the_answer_streams_beside_a_spinner() {
    let fixture = Fixture::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all([
        Reply::Turn(
            ModelTurn::new()
                .tool_call("read", r#"{"path":"README.md"}"#)
                .chunk_delay(Duration::from_millis(150)),
        ),
        Reply::text("It is a demo."),
    ]);
    // `script` gives the command a pseudo-terminal, as a person's shell would.
    let binary = agent_tests::workspace_bin("agent-lsp");
    let command = format!(
        "{} --workspace {} run --base-url {} --preset minimal 'What is this?'",
        binary.display(),
        fixture.workspace.path().display(),
        endpoint.base_url()
    );
    let output = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("AGENT_LSP_STATE_DIR", fixture.state.path())
        .env("AGENT_LSP_CONFIG", &fixture.config)
        .stdin(Stdio::piped())
        .output()
        .unwrap();
    let screen = stdout(&output);
    assert!(output.status.success(), "{screen}");
    assert!(screen.contains("It is a demo."), "{screen}");
    assert!(screen.contains("✓ read"), "{screen}");
    assert!(
        screen.contains("step 1"),
        "the spinner never showed a step: {screen:?}"
    );
    endpoint.assert_no_violations();
}

#[test]
fn the_agent_navigates_with_a_real_language_server_and_sees_its_edit_checked() {
    let workspace = agent_tests::fixture("python");
    let state = tempfile::tempdir().unwrap();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all([
        Reply::tool_call("lsp_definition", r#"{"path":"main.py","line":5,"symbol":"größe_von"}"#),
        Reply::from_fn(|request| {
            let found = request.tool_result_text();
            assert!(found.contains("pkg/geometry.py\n  14:5  def größe_von"), "{found}");
            Reply::tool_call(
                "edit",
                r#"{"path":"main.py","old_string":"größe_von(eins))","new_string":"größe_von(eins, 2))"}"#,
            )
        }),
        Reply::from_fn(|request| {
            let edited = request.tool_result_text();
            assert!(edited.contains("diagnostics of main.py (version"), "{edited}");
            assert!(edited.contains(" error"), "{edited}");
            Reply::text("The call now fails to type-check; reverting is needed.")
        }),
    ]);
    let output = Command::new(agent_tests::workspace_bin("agent-lsp"))
        .env("PATH", agent_tests::tools_path())
        .env("AGENT_LSP_STATE_DIR", state.path())
        .env("AGENT_LSP_CONFIG", state.path().join("none.toml"))
        .env_remove("DEEPSEEK_API_KEY")
        .args([
            "--workspace",
            workspace.path().to_str().unwrap(),
            "run",
            "--base-url",
            &endpoint.base_url(),
            "Where is größe_von?",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    endpoint.assert_no_violations();
    assert_eq!(endpoint.remaining_replies(), 0);
    let store = Store::for_workspace_in(state.path(), workspace.path()).unwrap();
    let history = store.load("last").unwrap();
    let results = history
        .events()
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::ToolResult(result) => Some(result.clone()),
            _ => None,
        })
        .collect::<Vec<_>>();
    assert_eq!(results[0].name, "lsp_definition");
    assert_eq!(results[0].meta["server"], "pyright");
    assert!(
        results[1].meta["after_write"]
            .as_str()
            .unwrap()
            .contains("error"),
        "{:?}",
        results[1].meta
    );
}

#[test]
fn progress_lines_on_a_pipe_are_cut_to_one_line() {
    let fixture = Fixture::new();
    let wide = "w".repeat(2_000);
    std::fs::write(
        fixture.workspace.path().join("wide.txt"),
        format!("{wide}\n"),
    )
    .unwrap();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all([
        Reply::tool_call("read", r#"{"path":"wide.txt"}"#),
        Reply::text("It is one wide line."),
    ]);
    let output = fixture.run(&[
        "run",
        "--base-url",
        &endpoint.base_url(),
        "What is in wide.txt?",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let progress = stderr(&output);
    let read = progress
        .lines()
        .find(|line| line.starts_with("✓ read"))
        .unwrap_or_else(|| panic!("no progress line for the read: {progress}"));
    assert!(read.ends_with('…'), "{read}");
    for line in progress.lines() {
        assert!(
            line.chars().count() <= 120,
            "{} characters: {line}",
            line.chars().count()
        );
    }
    // The model got the whole line: only the progress display is cut.
    let requests = endpoint.chat_requests();
    let last = requests.last().unwrap().body.as_ref().unwrap().to_string();
    assert!(last.contains(&wide));
}

/// `run`'s stderr for a turn whose one call, `lsp_hover` on `a.fake`, waits for `fake-lsp` run
/// with `fake`, as lines; the run must succeed.
fn stderr_waiting_on(fake: &[&str]) -> Vec<String> {
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("a.fake"), "alpha beta\n").unwrap();
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("config.toml");
    std::fs::write(&config, agent_tests::fake_lsp_config(fake)).unwrap();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all([
        Reply::tool_call("lsp_hover", r#"{"path":"a.fake","line":1,"symbol":"beta"}"#),
        Reply::text("Done."),
    ]);
    let output = agent_tests::agent_lsp_command(
        state.path(),
        &config,
        workspace.path(),
        &["run", "--base-url", &endpoint.base_url(), "What is beta?"],
    )
    .env("PATH", agent_tests::tools_path())
    .output()
    .unwrap();
    let err = stderr(&output);
    assert!(output.status.success(), "{err}");
    endpoint.assert_no_violations();
    err.lines().map(str::to_owned).collect()
}

/// The index of the first of `lines` that contains `needle`.
fn line_with(lines: &[String], needle: &str) -> usize {
    lines
        .iter()
        .position(|line| line.contains(needle))
        .unwrap_or_else(|| panic!("no line with `{needle}` in:\n{}", lines.join("\n")))
}

/// A cold server is not invisible during a turn: while an `lsp_*` call waits for a server that
/// takes 1.5 s to start and then 2 s to analyse (reporting progress), `run`'s progress on stderr
/// says that it starts and what it reports, before the call's result, and then that it is ready.
#[test]
fn a_call_waiting_for_a_cold_server_shows_it_starting_and_working() {
    let lines = stderr_waiting_on(&["slow", "initialize", "1500", "busy", "2000", "diagnose"]);
    let starting = line_with(&lines, "↳ language server fake · starting");
    let working = line_with(&lines, "↳ language server fake · analysing");
    let result = line_with(&lines, "lsp_hover {");
    assert!(starting < working && working < result, "{lines:#?}");
    line_with(&lines, "↳ language server fake → ready");
}

/// A server that works on the request without reporting progress (pyright analysing a package
/// for its first answer) is shown too: after half a second of waiting, the call's own server is
/// on `run`'s progress as answering, with the seconds waited, until the call is done.
#[test]
fn a_call_waiting_on_a_server_that_reports_nothing_shows_it_answering() {
    let lines = stderr_waiting_on(&["slow", "textDocument/hover", "2500", "diagnose"]);
    let answering = line_with(&lines, "↳ language server fake · answering");
    line_with(&lines, "↳ language server fake · answering (1 s)");
    let result = line_with(&lines, "lsp_hover {");
    assert!(answering < result, "{lines:#?}");
    line_with(&lines, "↳ language server fake → ready");
}
