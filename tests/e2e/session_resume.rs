//! A session whose `agent-lsp run` was killed with SIGKILL, at a chosen or a random moment,
//! continues: the calls the dead process left without a result are answered as interrupted
//! when the session is next opened, once, and every earlier request still replays byte for byte.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use agent_lsp::session::event::{Event, EventBody};
use agent_lsp::session::log::read_log;
use agent_lsp::session::store::Store;
use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, Reply};

const KILLS: u64 = 30;

struct Fixture {
    workspace: tempfile::TempDir,
    state: tempfile::TempDir,
    config: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let workspace = tempfile::tempdir().unwrap();
        std::fs::write(workspace.path().join("README.md"), "# demo\n").unwrap();
        let state = tempfile::tempdir().unwrap();
        let config = state.path().join("config.toml");
        std::fs::write(&config, "[provider]\nrequest_timeout_secs = 20\n").unwrap();
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

    fn spawn(&self, args: &[&str]) -> Child {
        self.command(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn agent-lsp")
    }

    fn store(&self) -> Store {
        Store::for_workspace_in(self.state.path(), self.workspace.path()).unwrap()
    }

    /// The events of the workspace's only session, once it exists.
    fn events(&self) -> Vec<Event> {
        let store = self.store();
        match store.resolve("last") {
            Ok(id) => read_log(&store.path_of(&id))
                .map(|log| log.events)
                .unwrap_or_default(),
            Err(_) => Vec::new(),
        }
    }
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Whether the log ends in a tool call still running: a `tool/call` without its result.
fn a_call_is_running(events: &[Event]) -> bool {
    let started = events
        .iter()
        .filter(|event| matches!(event.body, EventBody::ToolCall(_)))
        .count();
    let answered = events
        .iter()
        .filter(|event| matches!(event.body, EventBody::ToolResult(_)))
        .count();
    started > answered
}

fn interrupted_results(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::ToolResult(result) if result.meta["interrupted"] == true => {
                Some(result.call_id.clone())
            }
            _ => None,
        })
        .collect()
}

fn kill_hard(child: &mut Child) {
    child.kill().expect("SIGKILL");
    child.wait().unwrap();
}

#[test]
fn a_run_killed_during_a_shell_call_continues_and_replays() {
    let fixture = Fixture::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push(Reply::tool_call("shell", r#"{"command":"sleep 30"}"#));
    let base_url = endpoint.base_url();
    let mut child = fixture.spawn(&["run", "--yes", "--base-url", &base_url, "sleep a while"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !a_call_is_running(&fixture.events()) {
        assert!(Instant::now() < deadline, "the shell call never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    kill_hard(&mut child);
    let store = fixture.store();
    let session = store.resolve("last").unwrap();
    let path = store.path_of(&session);
    assert!(interrupted_results(&read_log(&path).unwrap().events).is_empty());

    endpoint.push(Reply::from_fn(|request| {
        let result = request.tool_result("call_00_r0").unwrap_or_default();
        assert!(result.starts_with("interrupted:"), "{result}");
        Reply::text("Continued after the crash.")
    }));
    let output = fixture.run(&[
        "run",
        "--session",
        &session,
        "--base-url",
        &base_url,
        "go on",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("Continued after the crash."));
    endpoint.assert_no_violations();

    // Exactly one result says the call was interrupted, and opening again adds nothing.
    let events = read_log(&path).unwrap().events;
    assert_eq!(interrupted_results(&events).len(), 1, "{events:#?}");
    let before = std::fs::read(&path).unwrap();
    let output = fixture.run(&[
        "tool",
        "--session",
        &session,
        "read",
        "--args",
        r#"{"path":"README.md"}"#,
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let after = read_log(&path).unwrap().events;
    assert_eq!(interrupted_results(&after).len(), 1);
    assert!(std::fs::read(&path).unwrap().starts_with(&before));

    // Both requests, the one before the crash and the one after, replay byte for byte.
    let requests = endpoint.chat_requests();
    assert_eq!(requests.len(), 2);
    for (index, request) in requests.iter().enumerate() {
        let n = (index + 1).to_string();
        let output = fixture.run(&["session", "replay", &session, "--request", &n]);
        assert!(output.status.success(), "replay {n}: {}", stderr(&output));
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&request.raw),
            "request {n} does not replay byte-identically"
        );
    }
    kill_stray_sleeps(fixture.workspace.path());
}

/// Each round, a `run` of one session is killed with SIGKILL (at a random moment, or while its
/// shell call runs), and a second `run` continues the session to an answer.
#[test]
fn every_continuation_of_a_randomly_killed_session_succeeds() {
    let fixture = Fixture::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    // Whatever the kills left, each request gets a call when it ends with a prompt and an
    // answer when it ends with results.
    let script = || {
        Reply::from_fn(|request| {
            if request.trailing_tool_results().is_empty() {
                Reply::tool_call("shell", r#"{"command":"sleep 0.3"}"#)
            } else {
                Reply::text("done")
            }
        })
    };
    endpoint.push_all((0..KILLS * 4).map(|_| script()));
    let base_url = endpoint.base_url();
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut session = None::<String>;
    let mut killed_mid_call = 0;
    for round in 0..KILLS {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let prompt = format!("round {round}");
        let mut args = vec!["run", "--yes", "--base-url", &base_url];
        if let Some(id) = &session {
            args.extend(["--session", id.as_str()]);
        }
        args.push(&prompt);
        // Counted before the run starts: on a loaded machine it can reach its shell call
        // before a count taken after the spawn.
        let before = fixture.events().len();
        let mut child = fixture.spawn(&args);
        if seed.is_multiple_of(3) {
            // Kill while the shell call runs.
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let events = fixture.events();
                // Running, or already answered: reading a long log on a loaded machine can
                // take longer than the call's 0.3 s, and the run then ends without another.
                let started = events[before.min(events.len())..]
                    .iter()
                    .any(|event| matches!(event.body, EventBody::ToolCall(_)));
                if started {
                    break;
                }
                assert!(Instant::now() < deadline, "round {round}: no call started");
                std::thread::sleep(Duration::from_millis(5));
            }
        } else {
            std::thread::sleep(Duration::from_millis(seed % 700));
        }
        kill_hard(&mut child);
        if a_call_is_running(&fixture.events()) {
            killed_mid_call += 1;
        }
        if session.is_none() {
            session = fixture.store().resolve("last").ok();
        }
        let Some(id) = &session else {
            continue; // killed before the session file was made
        };
        let output = fixture.run(&[
            "run",
            "--yes",
            "--session",
            id,
            "--base-url",
            &base_url,
            "continue",
        ]);
        assert!(
            output.status.success(),
            "round {round}: the continuation failed: {}",
            stderr(&output)
        );
        let mut history = fixture.store().load(id).unwrap();
        agent_tests::assert_tool_pairing(history.derive_messages());
        assert!(history.surface().pending_calls().next().is_none());
    }
    endpoint.assert_no_violations();
    assert!(killed_mid_call > 0, "no kill hit a running call");
    eprintln!("{KILLS} kills, {killed_mid_call} during a tool call; every continuation answered");
    kill_stray_sleeps(fixture.workspace.path());
}

/// The `sleep`s of killed runs outlive them (their shell's parent died with SIGKILL); end
/// those started in this test's workspace, found by their working directory.
fn kill_stray_sleeps(workspace: &std::path::Path) {
    let workspace = workspace.canonicalize().unwrap();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if std::fs::read_link(entry.path().join("cwd")).ok().as_deref() == Some(&workspace) {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    }
}
