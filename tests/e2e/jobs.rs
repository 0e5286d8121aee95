//! Background jobs through the real binary: `agent-lsp run` against the loopback model endpoint
//! starts jobs with `shell` `background: true`, reads them with `job_output` and kills them with
//! `job_kill`; what is left of a job is checked through `/proc`, after `job_kill`, after the
//! process ends (`run`, `tool`, `serve`) and after it is killed with SIGKILL (also of the
//! processes that left the job's group with `setsid`, found by the call token they carry).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_lsp::session::event::EventBody;
use agent_lsp::session::store::Store;
use agent_tests::editor::Editor;
use agent_tests::model_endpoint::{ChatRequest, EndpointConfig, ModelEndpoint, ModelTurn, Reply};
use agent_tests::processes::{alive, kill_and_wait, live_processes};
use serde_json::json;

/// A workspace (its canonical path: jobs run there, and their processes are found by it), a
/// state directory and an empty config file.
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
        // The jobs' own pids are what these tests follow: unsandboxed (`tests/e2e/sandbox.rs`
        // has a sandboxed job killed with its agent).
        agent_tests::standard_with_sandbox(&root, "unboxed", "mode = \"off\"");
        std::fs::write(
            &config,
            "preset = \"unboxed\"\n[provider]\nrequest_timeout_secs = 30\n",
        )
        .unwrap();
        Fixture {
            _workspace: workspace,
            root,
            state,
            config,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        agent_tests::agent_lsp_command(self.state.path(), &self.config, &self.root, args)
    }

    /// `agent-lsp run --yes` (the standard preset unsandboxed: `shell` and `job_kill` ask) against
    /// `endpoint`.
    fn run(&self, endpoint: &ModelEndpoint) -> Command {
        self.command(&["run", "--yes", "--base-url", &endpoint.base_url(), "Run it"])
    }

    /// The pid a job's command wrote to `file` in the workspace, once it is there.
    fn pid_in(&self, file: &str) -> u32 {
        let path = self.root.join(file);
        eventually(&format!("{file} is written"), || {
            std::fs::read_to_string(&path).is_ok_and(|text| text.ends_with('\n'))
        });
        std::fs::read_to_string(&path)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }
}

/// A step of the standard preset (thinking mode) that calls one tool, as the replies of
/// `Reply::from_fn` are.
fn call(name: &str, arguments: serde_json::Value) -> Reply {
    ModelTurn::thinking_call(name, arguments).into()
}

/// Wait until `done` holds, for at most 20 s.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The `context/runtime` events of the last session whose source is `source`, as texts.
fn notices(fixture: &Fixture, source: &str) -> Vec<String> {
    let store = Store::for_workspace_in(fixture.state.path(), &fixture.root).unwrap();
    let session = store.resolve("last").unwrap();
    store
        .load(&session)
        .unwrap()
        .events()
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::RuntimeContext(context) if context.source.as_deref() == Some(source) => {
                Some(context.text.clone())
            }
            _ => None,
        })
        .collect()
}

/// What the model was shown: each request's newest tool result, in order.
type Seen = Arc<Mutex<Vec<String>>>;

/// Record the request's newest tool result (a runtime-context notice may follow it).
fn see(seen: &Seen, request: &ChatRequest) {
    let result = request
        .messages
        .iter()
        .rev()
        .find(|message| message.role == "tool")
        .and_then(|message| message.content.clone())
        .unwrap_or_default();
    seen.lock().unwrap().push(result);
}

/// The live descendants of `pid` whose command line is `cmdline`.
fn descendants_running_exactly(pid: u32, cmdline: &str) -> Vec<u32> {
    agent_tests::processes::descendants(pid)
        .into_iter()
        .filter(|(_, line)| line == cmdline)
        .map(|(pid, _)| pid)
        .collect()
}

#[test]
fn a_background_job_is_read_incrementally_and_its_end_is_announced_once() {
    let fixture = Fixture::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let seen: Seen = Arc::default();
    let read = json!({"id": "job-1", "wait_secs": 10});
    let last_request = Arc::new(Mutex::new(None));
    endpoint.push(call(
        "shell",
        json!({"command": "echo started; sleep 2; echo done; exit 3", "background": true}),
    ));
    for _ in 0..3 {
        let (seen, read) = (seen.clone(), read.clone());
        endpoint.push(Reply::from_fn(move |request| {
            see(&seen, request);
            call("job_output", read)
        }));
    }
    let (seen_last, last) = (seen.clone(), last_request.clone());
    endpoint.push(Reply::from_fn(move |request| {
        see(&seen_last, request);
        *last.lock().unwrap() = Some(request.clone());
        ModelTurn::new()
            .reasoning("Done.")
            .content("The job printed done and exited with 3.")
            .into()
    }));

    let output = fixture.run(&endpoint).output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    endpoint.assert_no_violations();
    assert_eq!(endpoint.remaining_replies(), 0);

    let seen = seen.lock().unwrap().clone();
    assert!(
        seen[0].starts_with("started background job job-1 (pid "),
        "{}",
        seen[0]
    );
    // Each read returns only what is new since the last one.
    assert!(seen[1].starts_with("job-1: running for "), "{}", seen[1]);
    assert!(
        seen[1].ends_with("--- output, bytes 0–8 of 8 ---\nstarted\n"),
        "{}",
        seen[1]
    );
    assert!(
        seen[2].ends_with("--- output, bytes 8–13 of 13 ---\ndone\n"),
        "{}",
        seen[2]
    );
    assert!(
        seen[3].starts_with("job-1: ended, exit code 3 after "),
        "{}",
        seen[3]
    );
    assert!(
        seen[3].ends_with("(no new output; 13 bytes in all)\n"),
        "{}",
        seen[3]
    );

    // One notice in the log, and the model saw it once.
    let notices = notices(&fixture, "jobs:job-1");
    assert_eq!(notices.len(), 1, "{notices:#?}");
    assert!(
        notices[0].starts_with(
            "<job-ended id=\"job-1\">\nThe background job job-1 (`echo started; sleep 2; echo done; exit 3`) ended: exit code 3 after "
        ),
        "{}",
        notices[0]
    );
    assert!(
        notices[0].ends_with("started\ndone\n</job-ended>"),
        "{}",
        notices[0]
    );
    let last = last_request.lock().unwrap().take().unwrap();
    let shown = last
        .messages
        .iter()
        .filter(|message| {
            message
                .content
                .as_deref()
                .is_some_and(|text| text.contains("<job-ended id=\"job-1\">"))
        })
        .count();
    assert_eq!(shown, 1);
}

#[test]
fn job_kill_leaves_no_process_of_a_job_that_started_grandchildren() {
    let fixture = Fixture::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let agent = Arc::new(AtomicU32::new(0));
    let before = Arc::new(Mutex::new(Vec::new()));
    let after = Arc::new(Mutex::new(Vec::new()));
    let seen: Seen = Arc::default();
    // Two grandchildren under an inner `sh`, and one that leaves the job's group and session.
    let command = "sh -c 'sleep 4001 & sleep 4002 & wait' & setsid sleep 4003 & echo up; wait";
    let sleeps: [&[&str]; 3] = [&["sleep", "4001"], &["sleep", "4002"], &["sleep", "4003"]];
    endpoint.push(call(
        "shell",
        json!({"command": command, "background": true}),
    ));
    {
        let (agent, before, root) = (agent.clone(), before.clone(), fixture.root.clone());
        endpoint.push(Reply::from_fn(move |_| {
            eventually("the job's processes run", || {
                sleeps
                    .iter()
                    .all(|argv| live_processes(argv, &root).len() == 1)
            });
            let agent = agent.load(Ordering::SeqCst);
            *before.lock().unwrap() = ["sleep 4001", "sleep 4002", "sleep 4003"]
                .iter()
                .map(|needle| descendants_running_exactly(agent, needle).len())
                .collect::<Vec<_>>();
            call("job_kill", json!({"id": "job-1"}))
        }));
    }
    {
        let (after, seen, root) = (after.clone(), seen.clone(), fixture.root.clone());
        endpoint.push(Reply::from_fn(move |request| {
            see(&seen, request);
            *after.lock().unwrap() = sleeps
                .iter()
                .flat_map(|argv| live_processes(argv, &root))
                .collect::<Vec<_>>();
            ModelTurn::new()
                .reasoning("Done.")
                .content("Killed.")
                .into()
        }));
    }

    let child = fixture.run(&endpoint).spawn().unwrap();
    agent.store(child.id(), Ordering::SeqCst);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    endpoint.assert_no_violations();
    // `setsid sleep` left the group but is still a descendant.
    assert_eq!(*before.lock().unwrap(), [1, 1, 1]);
    let killed = &seen.lock().unwrap()[0];
    assert!(
        killed.starts_with("job-1 killed with everything it started (killed by signal 15 after "),
        "{killed}"
    );
    assert_eq!(
        *after.lock().unwrap(),
        Vec::<u32>::new(),
        "processes of the job survived"
    );
    // A job killed on request is not announced again.
    assert!(notices(&fixture, "jobs:job-1").is_empty());
}

#[test]
fn a_job_still_running_when_run_ends_is_killed() {
    let fixture = Fixture::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let agent = Arc::new(AtomicU32::new(0));
    let descendant = Arc::new(Mutex::new(None));
    endpoint.push(call(
        "shell",
        json!({"command": "sleep 4004 & echo $! > sleep.pid; wait", "background": true}),
    ));
    {
        let (agent, descendant, root) = (agent.clone(), descendant.clone(), fixture.root.clone());
        endpoint.push(Reply::from_fn(move |_| {
            eventually("the job runs", || {
                live_processes(&["sleep", "4004"], &root).len() == 1
            });
            *descendant.lock().unwrap() = Some(descendants_running_exactly(
                agent.load(Ordering::SeqCst),
                "sleep 4004",
            ));
            ModelTurn::new()
                .reasoning("Done.")
                .content("It runs.")
                .into()
        }));
    }
    let child = fixture.run(&endpoint).spawn().unwrap();
    agent.store(child.id(), Ordering::SeqCst);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    endpoint.assert_no_violations();
    let pid = fixture.pid_in("sleep.pid");
    assert_eq!(descendant.lock().unwrap().clone(), Some(vec![pid]));
    // The process ended before `run` did: nothing to wait for.
    assert!(
        !alive(pid),
        "the job's sleep {pid} outlived `agent-lsp run`"
    );
    assert!(live_processes(&["sleep", "4004"], &fixture.root).is_empty());
    // Its spool went with it.
    let spools = fixture.state.path().join("workspaces");
    let left = walk(&spools)
        .into_iter()
        .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
        .collect::<Vec<_>>();
    assert_eq!(left, Vec::<PathBuf>::new());
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn a_sigkilled_agent_lsp_leaves_no_job_behind() {
    let fixture = Fixture::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push(call(
        "shell",
        json!({"command": "sleep 4005 & echo $! > sleep.pid; wait", "background": true}),
    ));
    // The model never answers the next request: the agent waits while the job runs.
    endpoint.push(Reply::hang());
    let mut child = fixture.run(&endpoint).spawn().unwrap();
    let pid = fixture.pid_in("sleep.pid");
    assert!(alive(pid));
    kill_and_wait(child.id());
    let _ = child.wait();
    // The watchdog sees agent-lsp go and kills the job's group.
    eventually("the job's sleep is killed", || !alive(pid));
    assert!(live_processes(&["sleep", "4005"], &fixture.root).is_empty());
}

/// The live processes carrying a call token of the agent-lsp process `agent` (the tokens are
/// `PID-N`), as `(pid, process group)`.
fn marked_by(agent: u32) -> Vec<(u32, u32)> {
    let entry = format!("\0AGENT_LSP_SHELL_CALL={agent}-");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|process| process.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            let mut environ = vec![0];
            environ.extend(std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default());
            alive(pid)
                && environ
                    .windows(entry.len())
                    .any(|window| window == entry.as_bytes())
        })
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // After the parenthesised name: state, ppid, pgrp.
            let pgrp = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(2)?
                .parse()
                .ok()?;
            Some((pid, pgrp))
        })
        .collect()
}

#[test]
fn a_sigkilled_agent_lsp_leaves_no_process_that_left_the_jobs_group() {
    let fixture = Fixture::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    // Three processes leave the job's group (and session): a `setsid sleep`, and a `setsid sh`
    // with its own `sleep`; `$$` is the job's `sh`, whose pid is the group's id.
    endpoint.push(call(
        "shell",
        json!({"command": "echo $$ > job.pid; setsid sleep 4021 & setsid sh -c 'sleep 4022; true' & sleep 4023 & wait", "background": true}),
    ));
    // The model never answers the next request: the agent waits while the job runs.
    endpoint.push(Reply::hang());
    let mut child = fixture.run(&endpoint).spawn().unwrap();
    let agent = child.id();
    let group = fixture.pid_in("job.pid");
    eventually("the job's five processes run", || {
        marked_by(agent).len() == 5
    });
    let outside = marked_by(agent)
        .into_iter()
        .filter(|(_, pgrp)| *pgrp != group)
        .count();
    assert_eq!(outside, 3, "{:?}", marked_by(agent));
    kill_and_wait(agent);
    let _ = child.wait();
    // The watchdog kills the group, waits the grace, then kills whatever carries the token.
    eventually("no process of the job is left", || {
        marked_by(agent).is_empty()
    });
}

#[test]
fn tool_runs_and_serve_kill_their_jobs_when_they_end_and_readonly_starts_none() {
    let fixture = Fixture::new();
    let background = |seconds: &str| {
        json!({"command": format!("sleep {seconds} & echo $! > {seconds}.pid; wait"), "background": true})
            .to_string()
    };

    // `readonly` denies `shell`, so it starts no job.
    let output = fixture
        .command(&[
            "tool",
            "--preset",
            "readonly",
            "shell",
            "--args",
            &background("4006"),
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("the call to `shell` was refused by the preset's permission policy"),
        "{text}"
    );
    assert!(!fixture.root.join("4006.pid").exists());

    // `agent-lsp tool` starts the job, and the job ends with the process.
    let output = fixture
        .command(&["tool", "--yes", "shell", "--args", &background("4007")])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.starts_with("started background job job-1 (pid "),
        "{text}\n{}",
        stderr(&output)
    );
    // The process may end before the job got as far as writing its pid: whatever it started
    // is gone once `tool` has returned.
    assert!(live_processes(&["sleep", "4007"], &fixture.root).is_empty());

    // `serve`: the job ends when the editor shuts the server down.
    let mut editor = Editor::start(fixture.command(&["serve"]));
    editor.message_answer = Some("Allow".into());
    editor.initialize(&fixture.root);
    let started = editor.request(
        "workspace/executeCommand",
        json!({"command": "agent.tool", "arguments": [{"name": "shell", "arguments": serde_json::from_str::<serde_json::Value>(&background("4008")).unwrap()}]}),
    );
    assert_eq!(started["result"]["is_error"], false, "{started}");
    let pid = fixture.pid_in("4008.pid");
    let server = editor.pid();
    // The pid file is written as soon as the shell forks, which can be before the fork has
    // become `sleep`.
    eventually("the job's sleep runs under the server", || {
        descendants_running_exactly(server, "sleep 4008") == [pid]
    });
    editor.shutdown();
    assert!(
        !alive(pid),
        "the job's sleep {pid} outlived `agent-lsp serve`"
    );
}
