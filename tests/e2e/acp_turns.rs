//! `agent-lsp acp`'s turns beyond the simple ones: the plan from `todo` and the calls made
//! inside a sub-agent or a `run_code` program, shown as tool calls of their own; a cancel
//! while a command runs.

use agent_tests::model_endpoint::Reply;
use serde_json::json;

use crate::acp::{Scene, shown};

/// The plan from `todo`, and the calls made inside another (a sub-agent's, a `run_code`
/// program's) shown as tool calls of their own that name their parent.
#[test]
fn the_plan_and_the_calls_inside_a_sub_agent_or_a_program_are_shown() {
    let scene = Scene::new();
    std::fs::write(scene.workspace.path().join("a.txt"), "alpha\n").unwrap();
    scene.endpoint.push_all([
        Reply::tool_call(
            "todo",
            json!({"items": [
                {"text": "look at a.txt", "status": "in_progress"},
                {"text": "report", "status": "pending"},
            ]})
            .to_string(),
        ),
        Reply::tool_call(
            "task",
            r#"{"prompt":"read a.txt","agent_type":"explore","description":"read a"}"#,
        ),
        // The sub-agent's two steps.
        Reply::tool_call("read", r#"{"path":"a.txt"}"#),
        Reply::text("it says alpha"),
        Reply::text("a.txt says alpha"),
        // The second session, in the `code` mode.
        Reply::tool_call(
            "run_code",
            json!({"code": "const r = await tools.read({path: 'a.txt'}); return r.length;"})
                .to_string(),
        ),
        Reply::text("read it in a program"),
    ]);
    let seen = scene.run(json!([
        {"do": "new"},
        {"do": "prompt", "text": "plan and delegate"},
        {"do": "new"},
        {"do": "set_mode", "mode": "code"},
        {"do": "prompt", "text": "read it in a program"},
    ]));
    let steps = seen["steps"].as_array().unwrap();
    for step in steps {
        assert!(step["error"].is_null(), "step failed: {step}");
    }
    let updates = steps[1]["updates"].as_array().unwrap();
    let plan = updates
        .iter()
        .find(|update| update["sessionUpdate"] == "plan")
        .unwrap_or_else(|| panic!("no plan: {updates:?}"));
    assert_eq!(plan["entries"][0]["content"], "look at a.txt");
    assert_eq!(plan["entries"][0]["status"], "in_progress");
    assert_eq!(plan["entries"][1]["status"], "pending");
    let calls = updates
        .iter()
        .filter(|update| update["sessionUpdate"] == "tool_call")
        .collect::<Vec<_>>();
    let task = calls
        .iter()
        .find(|call| call["title"] == "Sub-agent: read a")
        .unwrap();
    let task_id = task["toolCallId"].as_str().unwrap();
    let nested = calls
        .iter()
        .find(|call| call["_meta"]["agent-lsp"]["parentToolCallId"] == task_id)
        .unwrap_or_else(|| panic!("the sub-agent's read is not shown: {calls:?}"));
    assert_eq!(nested["title"], "Read a.txt");
    assert_eq!(nested["kind"], "read");
    let nested_id = nested["toolCallId"].as_str().unwrap();
    assert!(nested_id.starts_with(&format!("{task_id}/")), "{nested_id}");
    assert!(
        updates
            .iter()
            .any(|update| update["sessionUpdate"] == "tool_call_update"
                && update["toolCallId"] == nested_id
                && update["status"] == "completed"),
        "{updates:?}"
    );

    let updates = steps[4]["updates"].as_array().unwrap();
    let calls = updates
        .iter()
        .filter(|update| update["sessionUpdate"] == "tool_call")
        .collect::<Vec<_>>();
    let program = calls
        .iter()
        .find(|call| call["title"] == "Run a program")
        .unwrap();
    let program_id = program["toolCallId"].as_str().unwrap();
    assert_eq!(program["kind"], "execute");
    let inside = calls
        .iter()
        .find(|call| call["_meta"]["agent-lsp"]["parentToolCallId"] == program_id)
        .unwrap_or_else(|| panic!("the program's read is not shown: {calls:?}"));
    assert_eq!(inside["title"], "Read a.txt");
    scene.endpoint.assert_no_violations();
}

/// `session/cancel` while a command runs: the command is stopped, its call is shown failed,
/// the turn answers `cancelled`, and the session goes on with every call answered in its log.
#[test]
fn a_cancel_while_a_command_runs_stops_it_and_the_session_goes_on() {
    let scene = Scene::new();
    scene.endpoint.push_all([
        Reply::tool_call("shell", r#"{"command":"sleep 30"}"#),
        Reply::text("after the cancel"),
    ]);
    let started = std::time::Instant::now();
    let seen = scene.run(json!([
        {"do": "new"},
        {"do": "prompt_and_cancel", "text": "wait a while", "after_ms": 1500},
        {"do": "prompt", "text": "go on"},
    ]));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(25),
        "the command was not stopped"
    );
    let steps = seen["steps"].as_array().unwrap();
    for step in steps {
        assert!(step["error"].is_null(), "step failed: {step}");
    }
    let cancelled = &steps[1];
    assert_eq!(
        cancelled["response"]["stopReason"], "cancelled",
        "{cancelled}"
    );
    let (calls, _) = shown(
        &cancelled["updates"]
            .as_array()
            .unwrap()
            .iter()
            .collect::<Vec<_>>(),
    );
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].1, "execute");
    assert_eq!(calls[0].3, "failed", "{calls:?}");
    assert_eq!(
        steps[2]["response"]["stopReason"], "end_turn",
        "{}",
        steps[2]
    );
    let store = scene.store();
    let mut history = store.load(steps[0]["session"].as_str().unwrap()).unwrap();
    agent_tests::assert_tool_pairing(history.derive_messages());
    assert!(history.surface().pending_calls().next().is_none());
    scene.endpoint.assert_no_violations();
}
