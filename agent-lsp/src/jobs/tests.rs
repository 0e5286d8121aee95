//! The job table, its tools and its plugin against real processes, checked through `/proc`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::plugin::JobsPlugin;
use super::*;
use crate::activity::{Activity, Kind};
use crate::plugin::Plugin;
use crate::plugin::registry::PluginHost;
use crate::plugin::tool::{Tool, ToolContext};
use crate::session::History;
use crate::workspace::Workspace;

/// A workspace, a state directory and the jobs plugin's parts over them.
struct Fixture {
    _workspace: tempfile::TempDir,
    state: tempfile::TempDir,
    root: Arc<Workspace>,
    plugin: Box<dyn Plugin>,
    tools: Vec<Arc<dyn Tool>>,
    /// The host's board, where the jobs are posted.
    activity: Arc<Activity>,
    /// The session the calls run in.
    session: Option<String>,
}

impl Fixture {
    fn new(settings: JobsSettings) -> Fixture {
        let workspace = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = Arc::new(Workspace::new(workspace.path()).unwrap());
        let activity = Arc::new(Activity::default());
        let host = PluginHost {
            state_dir: Some(state.path().to_owned()),
            activity: activity.clone(),
            ..PluginHost::detached(root.root(), "test", 100_000)
        };
        let parts = JobsPlugin::parts(settings, &host).unwrap();
        Fixture {
            _workspace: workspace,
            state,
            root,
            plugin: parts.plugin.unwrap(),
            // The plugin's `shell` is offered apart (it takes the built-in one's place).
            tools: parts.shell.into_iter().chain(parts.tools).collect(),
            activity,
            session: None,
        }
    }

    async fn call(&self, name: &str, args: Value) -> crate::plugin::outcomes::ToolOutput {
        let tool = self
            .tools
            .iter()
            .find(|tool| tool.def().name == name)
            .unwrap();
        let ctx = ToolContext {
            session_id: self.session.clone(),
            ..ToolContext::outside_session(self.root.clone(), CancellationToken::new(), "call")
        };
        tool.run(ctx, args.into()).await
    }

    fn notices(&mut self) -> Vec<crate::plugin::RuntimeContribution> {
        self.plugin
            .runtime_contexts(&History::from_events(Vec::new()).unwrap())
            .unwrap()
    }
}

/// Live processes (zombies aside) whose command line is exactly `argv`.
fn live(argv: &[&str]) -> Vec<i32> {
    let wanted = argv
        .iter()
        .map(|arg| format!("{arg}\0"))
        .collect::<String>();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = stat
                .rsplit(')')
                .next()
                .unwrap_or_default()
                .trim_start()
                .starts_with('Z');
            cmdline == wanted.as_bytes() && !zombie
        })
        .collect()
}

/// Wait until `done` holds, for at most 10 s.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_is_read_incrementally_and_an_end_is_announced_once() {
    let mut fx = Fixture::new(JobsSettings::enabled());
    let started = fx
        .call(
            "shell",
            json!({"command": "echo started; sleep 1; echo done; exit 3", "background": true}),
        )
        .await;
    assert!(!started.is_error, "{}", started.text);
    assert!(
        started
            .text
            .starts_with("started background job job-1 (pid "),
        "{}",
        started.text
    );
    assert_eq!(started.meta["job"], "job-1");

    let first = fx
        .call("job_output", json!({"id": "job-1", "wait_secs": 10}))
        .await;
    assert!(
        first.text.starts_with("job-1: running for "),
        "{}",
        first.text
    );
    assert!(
        first
            .text
            .ends_with("--- output, bytes 0–8 of 8 ---\nstarted\n"),
        "{}",
        first.text
    );
    assert!(fx.notices().is_empty(), "nothing ended yet");

    // The second read waits for what is new, and returns only that; `1` names job-1 too.
    let second = fx
        .call("job_output", json!({"id": 1, "wait_secs": 10}))
        .await;
    assert!(
        second
            .text
            .ends_with("--- output, bytes 8–13 of 13 ---\ndone\n"),
        "{}",
        second.text
    );
    let third = fx
        .call("job_output", json!({"id": "job-1", "wait_secs": 10}))
        .await;
    assert!(
        third.text.starts_with("job-1: ended, exit code 3 after "),
        "{}",
        third.text
    );
    assert!(
        third.text.ends_with("(no new output; 13 bytes in all)\n"),
        "{}",
        third.text
    );
    assert_eq!(third.meta["exit_code"], 3);
    // `since` reads again what was read.
    let again = fx
        .call("job_output", json!({"id": "job-1", "since": 0}))
        .await;
    assert!(
        again
            .text
            .ends_with("bytes 0–13 of 13 ---\nstarted\ndone\n"),
        "{}",
        again.text
    );

    let notices = fx.notices();
    assert_eq!(notices.len(), 1);
    let notice = &notices[0];
    assert_eq!(notice.source.as_deref(), Some("jobs:job-1"));
    assert_eq!(notice.facts["status"], "exit code 3");
    assert!(notice.text.starts_with("<job-ended id=\"job-1\">\nThe background job job-1 (`echo started; sleep 1; echo done; exit 3`) ended: exit code 3 after "), "{}", notice.text);
    assert!(notice.text.ends_with("Its last lines (13 bytes of output in all, 0 not read with job_output):\nstarted\ndone\n</job-ended>"), "{}", notice.text);
    assert!(fx.notices().is_empty(), "an end is announced once");

    let list = fx.call("job_list", json!({})).await;
    assert!(
        list.text.starts_with("job-1: ended, exit code 3 after "),
        "{}",
        list.text
    );
    assert!(
        list.text.ends_with("; 13 bytes of output, 0 not read\n"),
        "{}",
        list.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_kill_leaves_no_process_of_the_job() {
    let mut fx = Fixture::new(JobsSettings::enabled());
    let command = "sh -c 'sleep 3001 & sleep 3002 & wait' & setsid sleep 3003 & echo up; wait";
    let started = fx
        .call("shell", json!({"command": command, "background": true}))
        .await;
    assert!(!started.is_error, "{}", started.text);
    let up = fx
        .call("job_output", json!({"id": "job-1", "wait_secs": 10}))
        .await;
    assert!(up.text.ends_with("up\n"), "{}", up.text);
    // `setsid` execs `sleep` in a session of its own, out of the job's group.
    let sleeps: [&[&str]; 3] = [&["sleep", "3001"], &["sleep", "3002"], &["sleep", "3003"]];
    eventually("the job's processes run", || {
        sleeps.iter().all(|argv| live(argv).len() == 1)
    });

    let began = Instant::now();
    let killed = fx.call("job_kill", json!({"id": "job-1"})).await;
    assert!(
        killed
            .text
            .starts_with("job-1 killed with everything it started (killed by signal 15 after "),
        "{}",
        killed.text
    );
    assert!(
        began.elapsed() < KILL_GRACE + Duration::from_secs(1),
        "{:?}",
        began.elapsed()
    );
    for argv in sleeps {
        assert_eq!(live(argv), Vec::<i32>::new(), "{argv:?} survived");
    }
    // A killed job's end is what job_kill said: no notice.
    assert!(fx.notices().is_empty());
    let again = fx.call("job_kill", json!({"id": "job-1"})).await;
    assert!(again.text.starts_with("job-1 had already ended; nothing to kill.\njob-1: ended, killed by signal 15, stopped by job_kill, after "), "{}", again.text);
    let unknown = fx.call("job_kill", json!({"id": "job-7"})).await;
    assert!(unknown.is_error);
    assert_eq!(
        unknown.text,
        "error: there is no job `job-7`; the jobs are job-1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_ignores_sigterm_is_killed_after_the_grace() {
    let fx = Fixture::new(JobsSettings::enabled());
    let command = "trap '' TERM; echo up; sleep 3004; sleep 3004";
    fx.call("shell", json!({"command": command, "background": true}))
        .await;
    fx.call("job_output", json!({"id": "job-1", "wait_secs": 10}))
        .await;
    eventually("the job runs", || live(&["sleep", "3004"]).len() == 1);
    let began = Instant::now();
    let killed = fx.call("job_kill", json!({"id": "job-1"})).await;
    // `sleep` inherits the ignored SIGTERM, so only SIGKILL ends it.
    assert!(began.elapsed() >= KILL_GRACE, "{:?}", began.elapsed());
    assert!(
        killed.text.contains("(killed by signal 9 after "),
        "{}",
        killed.text
    );
    assert!(live(&["sleep", "3004"]).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_table_kills_its_jobs_and_removes_the_spool() {
    let fx = Fixture::new(JobsSettings::enabled());
    fx.call(
        "shell",
        json!({"command": "sleep 3005", "background": true}),
    )
    .await;
    eventually("the job runs", || live(&["sleep", "3005"]).len() == 1);
    let spools = fx.state.path().join("jobs");
    let dirs = std::fs::read_dir(&spools).unwrap().count();
    assert_eq!(dirs, 1);
    let Fixture {
        plugin,
        tools,
        state,
        ..
    } = fx;
    drop(plugin);
    drop(tools);
    assert!(live(&["sleep", "3005"]).is_empty());
    assert_eq!(
        std::fs::read_dir(state.path().join("jobs"))
            .unwrap()
            .count(),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_calls_are_checked_like_shell_calls() {
    let settings = JobsSettings {
        max_running: 1,
        ..JobsSettings::enabled()
    };
    let fx = Fixture::new(settings);
    let denied = fx
        .call("shell", json!({"command": "rm -rf /", "background": true}))
        .await;
    assert!(
        denied.is_error && denied.text.starts_with("error: refused: "),
        "{}",
        denied.text
    );
    let timed = fx
        .call(
            "shell",
            json!({"command": "sleep 1", "background": true, "timeout_secs": 5}),
        )
        .await;
    assert!(
        timed.is_error
            && timed
                .text
                .starts_with("error: `timeout_secs` is for commands in the foreground"),
        "{}",
        timed.text
    );
    // In the foreground, `shell` is the plain tool.
    let foreground = fx
        .call("shell", json!({"command": "echo hi", "background": false}))
        .await;
    assert_eq!(foreground.text, "exit code: 0\n--- stdout ---\nhi\n");
    let first = fx
        .call(
            "shell",
            json!({"command": "sleep 3008", "background": true}),
        )
        .await;
    assert!(!first.is_error, "{}", first.text);
    let second = fx
        .call(
            "shell",
            json!({"command": "sleep 3008", "background": true}),
        )
        .await;
    assert!(second.is_error, "{}", second.text);
    assert!(
        second
            .text
            .contains("1 jobs are running, the most this preset allows (`max_running`)"),
        "{}",
        second.text
    );
    let none = Fixture::new(JobsSettings::enabled());
    let output = none.call("job_output", json!({"id": "job-1"})).await;
    assert_eq!(
        output.text,
        "error: there is no job `job-1`: no background job was started in this session"
    );
    assert_eq!(
        none.call("job_list", json!({})).await.text,
        "no background jobs in this session"
    );
}

#[test]
fn the_catalog_adds_background_to_shell() {
    let fx = Fixture::new(JobsSettings::enabled());
    let names = fx
        .tools
        .iter()
        .map(|tool| tool.def().name)
        .collect::<Vec<_>>();
    assert_eq!(names, ["shell", "job_output", "job_kill", "job_list"]);
    let shell = fx.tools[0].def();
    let plain = crate::tools::shell::Shell.def();
    assert_eq!(
        shell.parameters["properties"]["background"]["type"],
        "boolean"
    );
    assert_eq!(shell.parameters["required"], plain.parameters["required"]);
    assert!(shell.description.starts_with(&plain.description));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_command_is_shown_by_its_first_line_cut_short() {
    let fx = Fixture::new(JobsSettings::enabled());
    let long = format!("true {}", "x".repeat(300));
    let started = fx
        .call(
            "shell",
            json!({"command": format!("{long}\necho two"), "background": true}),
        )
        .await;
    let shown = format!("`{} …`", &long[..200]);
    assert!(started.text.contains(&shown), "{}", started.text);
    let list = fx.call("job_list", json!({})).await;
    assert!(list.text.contains(&shown), "{}", list.text);
}

/// The board's entry of `id`, once `done` holds for it.
fn entry_when(
    activity: &Activity,
    id: &str,
    what: &str,
    done: impl Fn(&crate::activity::Entry) -> bool,
) -> crate::activity::Entry {
    eventually(what, || {
        activity
            .list()
            .iter()
            .any(|entry| entry.id == id && done(entry))
    });
    activity
        .list()
        .into_iter()
        .find(|entry| entry.id == id)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_on_the_board_with_their_last_line_and_the_editor_kills_them_like_job_kill() {
    let mut fx = Fixture::new(JobsSettings::enabled());
    // A sub-agent's session: its jobs are shown under its entry.
    fx.activity
        .start(Kind::Subagent, "child-session", "explore: x", None, None);
    fx.session = Some("child-session".into());
    let started = fx
        .call(
            "shell",
            json!({"command": "echo one; echo two; sh -c 'sleep 3011 & wait'", "background": true}),
        )
        .await;
    let id = format!("job-1@{}", started.meta["pid"]);
    let entry = entry_when(&fx.activity, &id, "the job's last line is shown", |entry| {
        entry.detail == "two"
    });
    assert_eq!(entry.kind, Kind::Job);
    assert_eq!(entry.title, "echo one; echo two; sh -c 'sleep 3011 & wait'");
    assert_eq!(entry.parent.as_deref(), Some("child-session"));
    assert!(entry.cancellable && entry.running());
    eventually("the job runs", || live(&["sleep", "3011"]).len() == 1);

    // The editor's cancel: the job and what it started are gone, as after job_kill.
    assert!(fx.activity.cancel(&id));
    let ended = entry_when(&fx.activity, &id, "the job's end is posted", |entry| {
        !entry.running()
    });
    assert_eq!(ended.outcome.as_deref(), Some("killed"));
    assert!(!ended.cancellable);
    assert!(live(&["sleep", "3011"]).is_empty());
    // No job_kill result told the model: the end notice does.
    let notices = fx.notices();
    assert_eq!(notices.len(), 1);
    assert!(
        notices[0]
            .text
            .contains("ended: killed by signal 15, stopped from the editor, after "),
        "{}",
        notices[0].text
    );
    let list = fx.call("job_list", json!({})).await;
    assert!(
        list.text.contains(", stopped from the editor, after "),
        "{}",
        list.text
    );

    // A job of a session that is not on the board has no parent, and ends as itself.
    fx.session = Some("top-level".into());
    let started = fx
        .call(
            "shell",
            json!({"command": "sleep 1; exit 3", "background": true}),
        )
        .await;
    let id = format!("job-2@{}", started.meta["pid"]);
    let ended = entry_when(&fx.activity, &id, "the second job ends", |entry| {
        !entry.running()
    });
    assert_eq!(ended.outcome.as_deref(), Some("exit 3"));
    assert_eq!(ended.parent, None);
}
