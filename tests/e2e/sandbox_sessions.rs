//! The sandbox over a whole session, through `agent-lsp run` and the loopback model: each
//! command's `tool/call` record names its policy and mechanism (and what it asked beyond
//! them), the answer is in its result, the session replays byte-identically, and a background
//! job is held and ends with its agent.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::sandbox::World;

/// A session under `standard`: each command's `tool/call` record names the policy and the
/// mechanism (and what the call asked beyond them), the result records the question and the
/// answer, and every request still replays byte-identically.
#[test]
fn the_record_of_each_command_names_its_sandbox_and_the_session_replays() {
    use agent_lsp::session::event::EventBody;
    use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, ModelTurn, Reply};

    let world = World::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all::<Reply>([
        ModelTurn::thinking_call("shell", json!({"command": "echo held > held.txt"})).into(),
        ModelTurn::thinking_call(
            "shell",
            json!({"command": "echo out", "leave_sandbox": "network"}),
        )
        .into(),
        ModelTurn::new().reasoning("Done.").content("Done.").into(),
    ]);
    // No --yes: the held command runs, the one leaving the sandbox is declined.
    world.run_ok(&["run", "--base-url", &endpoint.base_url(), "Do it"]);
    endpoint.assert_no_violations();
    assert!(world.root.join("held.txt").exists());

    let store = agent_lsp::session::store::Store::for_workspace_in(world.state.path(), &world.root)
        .unwrap();
    let session = store.resolve("last").unwrap();
    let history = store.load(&session).unwrap();
    let calls: Vec<Value> = history
        .events()
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::ToolCall(call) => Some(call.sandbox.clone().unwrap_or_default()),
            _ => None,
        })
        .collect();
    let held = json!({"mode": "workspace-write", "network": false, "mechanism": "bubblewrap"});
    let mut leaving = held.clone();
    leaving["leave"] = json!("network");
    assert_eq!(calls, [held, leaving]);
    let asked: Vec<Value> = history
        .events()
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::ToolResult(result) => Some(result.meta["asked"].clone()),
            _ => None,
        })
        .collect();
    assert_eq!(asked[0], Value::Null, "the held command was not asked for");
    assert_eq!(asked[1]["answer"], "declined");

    // `session show` puts what held each command beside it, and the answer beside its result.
    let shown = world.run_ok(&["session", "show", &session]);
    assert!(
        shown.contains(
            "shell {\"command\":\"echo held > held.txt\"} [workspace-write, no network, bubblewrap]"
        ),
        "{shown}"
    );
    assert!(
        shown.contains("[workspace-write, no network, bubblewrap; asks to leave: network]"),
        "{shown}"
    );
    assert!(shown.contains("(asked: declined)"), "{shown}");

    assert_eq!(endpoint.chat_requests().len(), 3);
    world.assert_every_request_replays(&session, &endpoint);
}

/// A background job runs in the sandbox too (its write outside the workspace refused), and
/// nothing of it outlives `agent-lsp run`.
#[test]
fn a_sandboxed_background_job_is_held_and_ends_with_its_agent() {
    use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, ModelTurn, Reply};

    fn sleepers() -> usize {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(Result::ok)
            .filter(|entry| {
                std::fs::read(entry.path().join("cmdline"))
                    .is_ok_and(|argv| argv == b"sleep\x004321\x00")
            })
            .count()
    }
    let world = World::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let out = world.outside("job");
    let command = format!(
        "{{ echo x > {}; }} 2> refused.txt; sleep 4321",
        out.display()
    );
    endpoint.push_all::<Reply>([
        ModelTurn::thinking_call("shell", json!({"command": command, "background": true})).into(),
        Reply::from_fn(|_| {
            let deadline = Instant::now() + Duration::from_secs(20);
            while sleepers() != 1 {
                assert!(Instant::now() < deadline, "the job's sleep never ran");
                std::thread::sleep(Duration::from_millis(20));
            }
            ModelTurn::new()
                .reasoning("Done.")
                .content("It runs.")
                .into()
        }),
    ]);
    world.run_ok(&["run", "--base-url", &endpoint.base_url(), "Start it"]);
    endpoint.assert_no_violations();
    assert_eq!(endpoint.remaining_replies(), 0);
    assert!(!out.exists());
    let refused = std::fs::read_to_string(world.root.join("refused.txt")).unwrap();
    assert!(refused.contains("Read-only file system"), "{refused}");
    assert_eq!(sleepers(), 0, "the job's sleep outlived `agent-lsp run`");
}

/// A `run_code` program's commands run in the session's sandbox too, and each `subtool/call`
/// record names what held it, as a `tool/call` does.
#[test]
fn a_programs_commands_are_held_and_recorded_like_the_models() {
    use agent_lsp::session::event::EventBody;
    use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, ModelTurn, Reply};

    let world = World::new();
    world.preset("coded", "mode = \"workspace-write\"");
    let path = world.root.join(".agent-lsp/presets/coded.toml");
    let preset = std::fs::read_to_string(&path).unwrap().replacen(
        "\"read\", \"list\",",
        "\"run_code\", \"read\", \"list\",",
        1,
    ) + "\n[plugins.code_mode]\nenabled = true\n";
    std::fs::write(&path, preset).unwrap();
    let out = world.outside("from-code");
    let program = format!(
        "await tools.shell({{command: \"echo held > from-code.txt\"}});\nawait tools.shell({{command: \"echo x > {}\"}});\nreturn 2;",
        out.display()
    );
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all::<Reply>([
        ModelTurn::thinking_call("run_code", json!({"code": program})).into(),
        ModelTurn::new().reasoning("Done.").content("Done.").into(),
    ]);
    world.run_ok(&[
        "run",
        "--preset",
        "coded",
        "--base-url",
        &endpoint.base_url(),
        "Go",
    ]);
    endpoint.assert_no_violations();
    assert!(world.root.join("from-code.txt").exists());
    assert!(!out.exists());

    let store = agent_lsp::session::store::Store::for_workspace_in(world.state.path(), &world.root)
        .unwrap();
    let history = store.load("last").unwrap();
    let records: Vec<Value> = history
        .events()
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::SubtoolCall(call) => Some(call.sandbox.clone().unwrap_or_default()),
            _ => None,
        })
        .collect();
    let held = json!({"mode": "workspace-write", "network": false, "mechanism": "bubblewrap"});
    assert_eq!(records, [held.clone(), held]);
}
