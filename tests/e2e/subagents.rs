//! Sub-agents through the real binary: `agent-lsp run` against the loopback model endpoint,
//! whose replies are routed by who asks (the parent, or which child, at which step), since
//! children run at the same time and their requests arrive in any order. Checked from the
//! logs: child sessions linked to the parent's calls, `subagent/start` and `subagent/end`,
//! overlapping children, results in call order, budgets, a failing endpoint, cancellation,
//! byte-identical replay of child requests and the trajectory's `subtool` cells.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_lsp::session::History;
use agent_lsp::session::event::{EventBody, SubagentEnd, SubagentStart};
use agent_tests::cli::CliFixture;
use agent_tests::model_endpoint::{
    ChatRequest, EndpointConfig, ModelEndpoint, ModelTurn, Reply, Route,
};
use agent_tests::session_log::{assistant_texts, picked, tool_results};
use serde_json::{Value, json};

/// Few retries with short waits, so a failing endpoint fails fast.
const CONFIG: &str = "[provider]\nrequest_timeout_secs = 30\nmax_retries = 2\nbackoff_base_ms = 10\nbackoff_cap_ms = 50\n";

/// The role section every child's system prompt has.
const CHILD_MARK: &str = "You are a sub-agent";

/// An endpoint that answers every request with `route`.
fn endpoint(route: Route) -> ModelEndpoint {
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.route(64, route);
    endpoint
}

/// `agent-lsp run --yes [--preset FILE] PROMPT` against `endpoint`, which must succeed without
/// a rule broken.
fn run(fixture: &CliFixture, endpoint: &ModelEndpoint, preset: Option<&str>, prompt: &str) {
    let mut args = vec!["run", "--yes", "--base-url"];
    let base_url = endpoint.base_url();
    args.push(&base_url);
    let preset_path = preset.map(|name| fixture.state.path().join(name).display().to_string());
    if let Some(path) = &preset_path {
        args.extend(["--preset", path]);
    }
    args.push(prompt);
    let output = fixture.run(&args);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    endpoint.assert_no_violations();
}

fn is_child(request: &ChatRequest) -> bool {
    request
        .system_text()
        .is_some_and(|text| text.contains(CHILD_MARK))
}

/// Whether the request's first prompt names `mark`.
fn asks(request: &ChatRequest, mark: &str) -> bool {
    request
        .first_user_text()
        .is_some_and(|text| text.contains(mark))
}

fn task(prompt: &str) -> Value {
    json!({"prompt": prompt, "description": prompt.split(':').next().unwrap()})
}

/// The sessions of the fixture's workspace: the top-level one and its children by id.
fn sessions(fixture: &CliFixture) -> (History, Vec<History>) {
    let store = fixture.store();
    let mut parent = None;
    let mut children = Vec::new();
    for id in store.ids().unwrap() {
        let history = store.load(&id).unwrap();
        if history.header().unwrap().parent.is_some() {
            children.push(history);
        } else {
            assert!(parent.is_none(), "one top-level session");
            parent = Some(history);
        }
    }
    (parent.expect("a top-level session"), children)
}

fn starts(history: &History) -> Vec<SubagentStart> {
    picked(history, |body| match body {
        EventBody::SubagentStart(start) => Some(start.clone()),
        _ => None,
    })
}

fn ends(history: &History) -> Vec<SubagentEnd> {
    picked(history, |body| match body {
        EventBody::SubagentEnd(end) => Some(end.clone()),
        _ => None,
    })
}

fn child_with(children: &[History], call_id: &str) -> History {
    children
        .iter()
        .find(|child| child.header().unwrap().parent.as_ref().unwrap().call_id == call_id)
        .cloned()
        .unwrap_or_else(|| panic!("no child for call {call_id}"))
}

/// Every request of `session` replays to exactly the bytes one recorded request carried.
fn assert_replays(fixture: &CliFixture, endpoint: &ModelEndpoint, history: &History) {
    let id = &history.header().unwrap().session_id;
    let sent = endpoint
        .chat_requests()
        .into_iter()
        .map(|request| request.raw)
        .collect::<Vec<_>>();
    let requests = history
        .events()
        .iter()
        .filter(|event| matches!(event.body, EventBody::RequestHeader(_)))
        .count();
    assert!(requests > 0, "session {id} made requests");
    for index in 1..=requests {
        let replayed = fixture
            .command(&["session", "replay", id, "--request", &index.to_string()])
            .output()
            .unwrap();
        assert!(replayed.status.success(), "replay {id} {index}");
        assert!(
            sent.contains(&replayed.stdout),
            "request {index} of {id} replays to bytes no request carried"
        );
    }
}

#[test]
fn two_tasks_in_one_step_run_concurrently_and_answer_in_call_order() {
    let fixture = CliFixture::new(CONFIG).with_files(&[
        ("a.txt", "ALPHA is the first letter.\n"),
        ("b.txt", "BETA is the second letter.\n"),
    ]);
    let slow = Duration::from_millis(400);
    let route: Route = Arc::new(move |request| {
        if !is_child(request) {
            return match request.answers() {
                0 => ModelTurn::new()
                    .reasoning("Delegate both.")
                    .tool_call("task", task("TASK-A: what does a.txt say?").to_string())
                    .tool_call("task", task("TASK-B: what does b.txt say?").to_string())
                    .into(),
                // Read the first child's steps back from its log.
                1 => {
                    let result = request.tool_result_text();
                    let child = result
                        .split("sub-agent session ")
                        .nth(1)
                        .and_then(|rest| rest.split(':').next())
                        .expect("the result names the child's session");
                    ModelTurn::thinking_call("recall_history", json!({"session": child})).into()
                }
                _ => Reply::text("Both letters found."),
            };
        }
        let (file, word) = if asks(request, "TASK-A") {
            ("a.txt", "ALPHA")
        } else {
            ("b.txt", "BETA")
        };
        match request.answers() {
            0 => ModelTurn::thinking_call("read", json!({"path": file}))
                .first_byte_delay(slow)
                .into(),
            _ => ModelTurn::new()
                .content(format!("{file} says {word}."))
                .first_byte_delay(slow)
                .into(),
        }
    });
    let endpoint = endpoint(route);
    run(&fixture, &endpoint, None, "Read both");

    let (parent, children) = sessions(&fixture);
    assert_eq!(children.len(), 2);
    let parent_id = parent.header().unwrap().session_id.clone();
    let calls = tool_results(&parent, "task");
    assert_eq!(calls.len(), 2);
    // Results in call order, each its own child's answer, naming the child's session.
    assert!(
        calls[0].1.starts_with("a.txt says ALPHA."),
        "{}",
        calls[0].1
    );
    assert!(calls[1].1.starts_with("b.txt says BETA."), "{}", calls[1].1);
    let (starts, ends) = (starts(&parent), ends(&parent));
    assert_eq!(starts.len(), 2);
    assert_eq!(ends.len(), 2);
    for (call_id, text) in &calls {
        let child = child_with(&children, call_id);
        let header = child.header().unwrap();
        let link = header.parent.as_ref().unwrap();
        assert_eq!(link.session_id, parent_id);
        assert_eq!((link.agent_type.as_str(), link.depth), ("explore", 1));
        assert_eq!(header.preset, "explore");
        assert!(text.contains(&header.session_id), "{text}");
        let end = ends.iter().find(|end| &end.call_id == call_id).unwrap();
        assert_eq!(end.child, header.session_id);
        assert_eq!(
            (end.outcome.as_str(), end.steps, end.requests),
            ("answered", 2, 2)
        );
        assert!(end.prompt_tokens > 0 && end.completion_tokens > 0);
        // The child's calls stay in its log; the parent's model saw none of them.
        assert_eq!(tool_results(&child, "read").len(), 1);
        assert_replays(&fixture, &endpoint, &child);
    }
    // The parent reached into the first child's log, and saw what its read returned.
    let recalled = tool_results(&parent, "recall_history");
    assert_eq!(recalled.len(), 1);
    assert!(
        recalled[0].1.contains("ALPHA is the first letter"),
        "{}",
        recalled[0].1
    );
    // Both starts are recorded before either end: the children ran at the same time, and so
    // did their logs (each started before the other ended).
    let kinds = parent
        .events()
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::SubagentStart(_) => Some("start"),
            EventBody::SubagentEnd(_) => Some("end"),
            _ => None,
        })
        .collect::<Vec<_>>();
    assert_eq!(kinds, ["start", "start", "end", "end"]);
    let span = |history: &History| {
        let events = history.events();
        (
            events.first().unwrap().ts.clone(),
            events.last().unwrap().ts.clone(),
        )
    };
    let ((a_start, a_end), (b_start, b_end)) = (span(&children[0]), span(&children[1]));
    assert!(a_start < b_end && b_start < a_end, "the children overlap");
    assert_replays(&fixture, &endpoint, &parent);

    // Siblings of one type share their prompt prefix: the same system prompt and catalog, so the
    // later first request is served from the cache.
    let firsts = endpoint
        .chat_requests()
        .into_iter()
        .filter_map(|request| request.body)
        .filter(|body| {
            body["messages"][0]["content"]
                .as_str()
                .is_some_and(|text| text.contains(CHILD_MARK))
                && !body["messages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|m| m["role"] == "assistant")
        })
        .collect::<Vec<_>>();
    assert_eq!(firsts.len(), 2);
    assert_eq!(firsts[0]["messages"][0], firsts[1]["messages"][0]);
    assert_eq!(firsts[0]["tools"], firsts[1]["tools"]);
    let names = firsts[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["function"]["name"].as_str().unwrap())
        .collect::<Vec<_>>();
    assert!(names.contains(&"read") && names.contains(&"lsp_definition"));
    for absent in ["write", "edit", "shell", "task"] {
        assert!(!names.contains(&absent), "explore has no `{absent}`");
    }

    // The trajectory nests each child's calls under its `task` cell, raw.
    let trajectory = fixture.trajectory(&parent_id);
    let tasks = trajectory["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|cell| cell["tool"]["name"] == "task")
        .collect::<Vec<_>>();
    assert_eq!(tasks.len(), 2);
    for (cell, file) in tasks.iter().zip(["a.txt", "b.txt"]) {
        let subagent = &cell["subagent"];
        assert_eq!(subagent["end"]["outcome"], "answered");
        let subtools = subagent["cells"].as_array().unwrap();
        assert_eq!(subtools.len(), 1);
        assert_eq!(subtools[0]["kind"], "subtool");
        assert_eq!(
            subtools[0]["tool"]["arguments"],
            json!({"path": file}).to_string()
        );
        assert!(
            subtools[0]["tool"]["result"]
                .as_str()
                .unwrap()
                .contains("letter")
        );
    }
    // The HTML page renders each child's calls nested under its `task` cell.
    let page = fixture.state.path().join("trajectory.html");
    let page_arg = page.display().to_string();
    fixture.ok(&["session", "trajectory", &parent_id, "-o", &page_arg]);
    let dom = crate::context_editor::run_chromium(&[
        "--dump-dom".into(),
        format!("file://{}", page.display()),
    ]);
    assert!(
        dom.contains("data-rendered=\"ok\""),
        "the page did not render"
    );
    let summary: Value = serde_json::from_str(&crate::context_editor::between(
        &dom,
        "<pre id=\"render-summary\">",
        "</pre>",
    ))
    .unwrap();
    assert_eq!(summary["subagents"], 2, "{summary}");
    assert_eq!(summary["subagent_subtools"], 2, "{summary}");
    // `session show` nests the children's timelines under their starts.
    let shown = fixture.ok(&["session", "show", &parent_id]);
    assert!(shown.contains("    │ "), "{shown}");
    assert!(shown.contains("tool/call") && shown.matches("read {\"path\"").count() >= 2);
    // `last` is the person's session, not the child started after it.
    let last: Value =
        serde_json::from_str(&fixture.ok(&["session", "show", "last", "--json"])).unwrap();
    assert_eq!(last["summary"]["id"], parent_id.as_str());
}

#[test]
fn budgets_and_a_failing_endpoint_end_children_and_the_parent_goes_on() {
    let standard = agent_lsp::preset::catalog::builtin_text("standard").unwrap();
    let preset = standard.replace(
        "max_steps = 30\nwall_secs = 900",
        "max_steps = 2\nwall_secs = 3",
    );
    assert_ne!(preset, standard);
    let fixture = CliFixture::new(CONFIG).with_files(&[("a.txt", "ALPHA\n")]);
    std::fs::write(fixture.state.path().join("tight.toml"), preset).unwrap();
    let route: Route = Arc::new(move |request| {
        if !is_child(request) {
            return match request.answers() {
                0 => ModelTurn::new()
                    .reasoning("Delegate three.")
                    .tool_call("task", task("LOOP: read forever").to_string())
                    .tool_call("task", task("FAIL: the endpoint fails").to_string())
                    .tool_call("task", task("SLOW: the model hangs").to_string())
                    .into(),
                _ => Reply::text("Went on without them."),
            };
        }
        if asks(request, "FAIL") {
            return Reply::server_error();
        }
        if asks(request, "SLOW") {
            return Reply::hang();
        }
        ModelTurn::thinking_call("read", json!({"path": "a.txt"})).into()
    });
    let endpoint = endpoint(route);
    run(&fixture, &endpoint, Some("tight.toml"), "Try three");
    let (parent, children) = sessions(&fixture);
    assert_eq!(children.len(), 3);
    let calls = tool_results(&parent, "task");
    let outcome = |index: usize| {
        let end = ends(&parent)
            .into_iter()
            .find(|end| end.call_id == calls[index].0)
            .unwrap();
        (end.outcome, end.reason.unwrap_or_default(), end.steps)
    };
    assert_eq!(outcome(0), ("step_budget".into(), "2 steps".into(), 2));
    assert!(
        calls[0].1.contains("step budget (2 steps)"),
        "{}",
        calls[0].1
    );
    let (failed, reason, _) = outcome(1);
    assert_eq!(failed, "error");
    assert!(
        reason.contains("500") || reason.contains("Server Error"),
        "{reason}"
    );
    assert!(
        calls[1].1.starts_with("error: the sub-agent failed"),
        "{}",
        calls[1].1
    );
    assert_eq!(outcome(2), ("time_budget".into(), "3 s".into(), 0));
    // The failing child's endpoint answered 500 to each of its three attempts.
    let failures = endpoint
        .chat_requests()
        .iter()
        .filter(|request| request.status == 500)
        .count();
    assert_eq!(failures, 3);
    // The parent read the three results and answered.
    let answers = assistant_texts(&parent);
    assert_eq!(answers.last().unwrap(), "Went on without them.");
    // Every child's log is consistent: every call it made has its result.
    for child in &children {
        let calls = child
            .events()
            .iter()
            .filter(|event| matches!(event.body, EventBody::ToolCall(_)))
            .count();
        let answered = child
            .events()
            .iter()
            .filter(|event| matches!(event.body, EventBody::ToolResult(_)))
            .count();
        assert_eq!(calls, answered);
        assert_replays(&fixture, &endpoint, child);
    }
}

#[test]
fn cancelling_the_parent_cancels_its_children_and_leaves_every_log_consistent() {
    let fixture = CliFixture::new(CONFIG).with_files(&[("a.txt", "ALPHA\n")]);
    let route: Route = Arc::new(move |request| {
        if !is_child(request) {
            return ModelTurn::new()
                .reasoning("Delegate.")
                .tool_call("task", task("HANG-1: wait").to_string())
                .tool_call("task", task("HANG-2: wait").to_string())
                .into();
        }
        match request.answers() {
            0 => ModelTurn::thinking_call("read", json!({"path": "a.txt"})).into(),
            _ => Reply::hang(),
        }
    });
    let endpoint = endpoint(route);
    let mut child = fixture
        .command(&["run", "--yes", "--base-url", &endpoint.base_url(), "Wait"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    // Once both children hang in their second request, the parent is interrupted.
    let deadline = Instant::now() + Duration::from_secs(20);
    while endpoint.chat_requests().len() < 5 {
        assert!(Instant::now() < deadline, "the children started");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let (parent, children) = sessions(&fixture);
    assert_eq!(children.len(), 2);
    let calls = tool_results(&parent, "task");
    assert_eq!(calls.len(), 2);
    for (call_id, text) in &calls {
        assert!(
            text.starts_with("error: the sub-agent was cancelled"),
            "{text}"
        );
        let child = child_with(&children, call_id);
        assert!(child.events().iter().any(|event| matches!(
            &event.body,
            EventBody::RequestError(error) if error.class == "cancelled"
        )));
    }
    assert!(ends(&parent).iter().all(|end| end.outcome == "cancelled"));
    // The logs open for writing without anything to repair: nothing was left waiting.
    let store = fixture.store();
    for id in store.ids().unwrap() {
        let session = store
            .open(&id, agent_lsp::session::log::Durability::Sync)
            .unwrap();
        assert_eq!(session.history().surface().pending_calls().count(), 0);
    }
}

#[test]
fn a_preset_that_allows_depth_two_nests_a_grandchild_and_the_trajectory_nests_it_too() {
    let standard = agent_lsp::preset::catalog::builtin_text("standard").unwrap();
    let deep = standard.replace("max_depth = 1", "max_depth = 2");
    assert_ne!(deep, standard);
    let fixture = CliFixture::new(CONFIG).with_files(&[("a.txt", "ALPHA\n")]);
    std::fs::write(fixture.state.path().join("deep.toml"), deep).unwrap();
    let route: Route = Arc::new(move |request| {
        let tools = request.tool_names();
        if !is_child(request) {
            return match request.answers() {
                0 => ModelTurn::thinking_call(
                    "task",
                    json!({"prompt": "GEN: find out what a.txt says", "agent_type": "general"}),
                )
                .into(),
                _ => Reply::text("Done."),
            };
        }
        if asks(request, "GEN") {
            // A general child at depth 1 of 2: the parent's tools, `task` among them.
            assert!(tools.iter().any(|tool| tool == "task"), "{tools:?}");
            return match request.answers() {
                0 => ModelTurn::thinking_call("task", task("GRAND: read a.txt")).into(),
                _ => Reply::text(format!("child got: {}", request.tool_result_text())),
            };
        }
        // The grandchild, at the deepest level, has no `task`.
        assert!(!tools.iter().any(|tool| tool == "task"), "{tools:?}");
        match request.answers() {
            0 => ModelTurn::thinking_call("read", json!({"path": "a.txt"})).into(),
            _ => Reply::text("grand ALPHA"),
        }
    });
    let endpoint = endpoint(route);
    run(&fixture, &endpoint, Some("deep.toml"), "Go deep");
    let (parent, children) = sessions(&fixture);
    assert_eq!(children.len(), 2);
    let parent_id = parent.header().unwrap().session_id.clone();
    let depth_of = |depth: u32| {
        children
            .iter()
            .find(|child| child.header().unwrap().parent.as_ref().unwrap().depth == depth)
            .unwrap()
    };
    let (child, grandchild) = (depth_of(1), depth_of(2));
    let child_id = child.header().unwrap().session_id.clone();
    assert_eq!(
        child.header().unwrap().parent.as_ref().unwrap().session_id,
        parent_id
    );
    assert_eq!(
        grandchild
            .header()
            .unwrap()
            .parent
            .as_ref()
            .unwrap()
            .session_id,
        child_id
    );
    assert_eq!(ends(child).len(), 1);
    assert!(
        tool_results(&parent, "task")[0]
            .1
            .starts_with("child got: grand ALPHA")
    );
    // parent's task cell → the child's task subtool → the grandchild's read subtool.
    let trajectory = fixture.trajectory(&parent_id);
    let task_cell = trajectory["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|cell| cell["tool"]["name"] == "task")
        .unwrap();
    let nested = &task_cell["subagent"]["cells"][0];
    assert_eq!(
        (nested["kind"].as_str(), nested["tool"]["name"].as_str()),
        (Some("subtool"), Some("task"))
    );
    let deepest = &nested["subagent"]["cells"][0];
    assert_eq!(deepest["tool"]["name"], "read");
    assert_eq!(
        deepest["tool"]["arguments"],
        json!({"path": "a.txt"}).to_string()
    );
}

#[test]
fn a_sub_agent_is_never_allowed_more_than_its_parent() {
    let standard = agent_lsp::preset::catalog::builtin_text("standard").unwrap();
    // A cloned repository's preset that lets the shell run without asking.
    let yolo = standard.replace("shell = \"ask\"", "shell = \"allow\"");
    assert_ne!(yolo, standard);
    // A preset whose window takes no prompt longer than 1000 tokens.
    let tiny = agent_lsp::preset::catalog::builtin_text("explore")
        .unwrap()
        .replace("context_window = 128000", "context_window = 4000");
    let fixture = CliFixture::new(CONFIG).with_files(&[
        (".agent-lsp/presets/yolo.toml", &yolo),
        (".agent-lsp/presets/tiny.toml", &tiny),
    ]);
    let long = format!("LONG: {}", "read everything again and again. ".repeat(400));
    let route: Route = Arc::new(move |request| {
        if !is_child(request) {
            return match request.answers() {
                0 => ModelTurn::new()
                    .reasoning("Three ways in.")
                    .tool_call(
                        "task",
                        json!({"prompt": "SHELL: run it", "agent_type": "yolo"}).to_string(),
                    )
                    .tool_call(
                        "task",
                        json!({"prompt": "PATH: escape", "agent_type": "../../../etc/x"})
                            .to_string(),
                    )
                    .tool_call(
                        "task",
                        json!({"prompt": long, "agent_type": "tiny"}).to_string(),
                    )
                    .into(),
                _ => Reply::text("Refused, as it should be."),
            };
        }
        match request.answers() {
            // Out of the sandbox: the parent (`standard`) would be asked for that.
            0 => ModelTurn::thinking_call(
                "shell",
                json!({"command": "echo pwned > pwned.txt", "leave_sandbox": "all"}),
            )
            .into(),
            _ => Reply::text(request.tool_result_text()),
        }
    });
    let endpoint = endpoint(route);
    // No --yes: `ask` means deny headless, whatever the child's preset says.
    let output = fixture.run(&["run", "--base-url", &endpoint.base_url(), "Try"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    endpoint.assert_no_violations();
    assert!(!fixture.workspace.path().join("pwned.txt").exists());
    let (parent, children) = sessions(&fixture);
    assert_eq!(
        children.len(),
        1,
        "the path-like type and the prompt too long started nothing"
    );
    let calls = tool_results(&parent, "task");
    assert!(calls[0].1.contains("was refused"), "{}", calls[0].1);
    assert!(
        calls[1].1.contains("is not an agent type"),
        "{}",
        calls[1].1
    );
    assert!(calls[2].1.contains("could not start"), "{}", calls[2].1);
    assert!(calls[2].1.contains("too long"), "{}", calls[2].1);
    assert_eq!(children[0].header().unwrap().preset, "yolo");
}

#[test]
fn a_child_over_its_prompt_token_budget_stops_after_that_answer() {
    let standard = agent_lsp::preset::catalog::builtin_text("standard").unwrap();
    let tight = standard.replace(
        "max_steps = 30\n",
        "max_steps = 30\nmax_prompt_tokens = 1000\n",
    );
    assert_ne!(tight, standard);
    let fixture = CliFixture::new(CONFIG).with_files(&[("a.txt", "ALPHA\n")]);
    std::fs::write(fixture.state.path().join("tokens.toml"), tight).unwrap();
    let route: Route = Arc::new(move |request| {
        if !is_child(request) {
            return match request.answers() {
                0 => ModelTurn::thinking_call("task", task("READ: read a.txt, twice")).into(),
                _ => Reply::text("Noted."),
            };
        }
        ModelTurn::thinking_call("read", json!({"path": "a.txt"})).into()
    });
    let endpoint = endpoint(route);
    run(&fixture, &endpoint, Some("tokens.toml"), "Go");
    let (parent, children) = sessions(&fixture);
    let end = &ends(&parent)[0];
    // The first request alone is over 1000 tokens (the system prompt and catalog): the child
    // stops after its first answer, whose call is answered as cancelled.
    assert_eq!(
        (end.outcome.as_str(), end.steps, end.requests),
        ("token_budget", 1, 1)
    );
    assert!(end.prompt_tokens > 1000);
    let reason = end.reason.as_deref().unwrap();
    assert_eq!(
        reason,
        format!("{} of 1000 prompt tokens", end.prompt_tokens)
    );
    assert!(
        tool_results(&parent, "task")[0]
            .1
            .contains("prompt-token budget")
    );
    let read = tool_results(&children[0], "read");
    assert_eq!(read.len(), 1);
    assert!(read[0].1.contains("cancelled"), "{}", read[0].1);
}
