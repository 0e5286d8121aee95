//! Code mode through the real binary: `agent-lsp run --preset code` against the loopback model
//! endpoint, a `run_code` program that greps and asks pyright for the definition of each hit
//! (one model request for the step, every nested call a `subtool/call` + `subtool/result`
//! pair under the `run_code` call, `subtool` cells in the trajectory, byte-identical replay),
//! and hostile programs, each ending with its own error while the run goes on.

use agent_lsp::session::History;
use agent_lsp::session::event::EventBody;
use agent_tests::cli::CliFixture;
use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, ModelTurn, Reply};
use agent_tests::session_log::{assistant_texts, tool_results};
use serde_json::json;

/// A Python project with 12 calls of `helper`, defined in `lib.py`.
pub(crate) fn project() -> CliFixture {
    let calls = (0..12)
        .map(|n| format!("total += helper({n})\n"))
        .collect::<String>();
    let app = format!("from lib import helper\n\ntotal = 0\n{calls}print(total)\n");
    CliFixture::new("[provider]\nrequest_timeout_secs = 60\n").with_files(&[
        ("pyrightconfig.json", "{}"),
        ("lib.py", "def helper(value):\n    return value * 2\n"),
        ("app.py", &app),
    ])
}

/// Run `agent-lsp run --preset PRESET` with the language servers of `.ci/tools` on PATH.
pub(crate) fn run(
    fixture: &CliFixture,
    endpoint: &ModelEndpoint,
    preset: &str,
) -> std::process::Output {
    fixture
        .command(&[
            "run",
            "--preset",
            preset,
            "--base-url",
            &endpoint.base_url(),
            "Where is helper defined for each call?",
        ])
        .env("PATH", agent_tests::tools_path())
        .output()
        .unwrap()
}

pub(crate) fn session(fixture: &CliFixture) -> History {
    let store = fixture.store();
    store.load("last").unwrap()
}

/// A nested call: its parent's id, its tool's name and its arguments.
pub(crate) type NestedCall = (String, String, String);

/// Every nested call, and every nested result as (call id, text).
pub(crate) fn nested(history: &History) -> (Vec<NestedCall>, Vec<(String, String)>) {
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for event in history.events() {
        match &event.body {
            EventBody::SubtoolCall(call) => calls.push((
                call.parent_call_id.clone(),
                call.name.clone(),
                call.arguments.clone(),
            )),
            EventBody::SubtoolResult(result) => {
                results.push((result.call_id.clone(), result.text.clone()))
            }
            _ => {}
        }
    }
    (calls, results)
}

const PROGRAM: &str = r#"const hits = (await tools.grep({pattern: "helper\\(", path: "app.py"})).split("\n").filter(l => /^app\.py:\d+:/.test(l));
const rows = [];
for (const hit of hits) {
  const line = Number(hit.split(":")[1]);
  const found = await tools.lsp_definition({path: "app.py", line, symbol: "helper"});
  // "definition of `helper` (app.py:4): 1 result(s)\nlib.py\n  1:5  def helper(value):"
  const at = found.match(/\n(\S+)\n\s+(\d+):\d+/);
  rows.push(`app.py:${line} -> ${at ? at[1] + ":" + at[2] : "?"}`);
}
console.log(rows.join("\n"));
return rows.length;"#;

#[test]
fn a_program_greps_and_asks_pyright_for_twelve_definitions_in_one_step() {
    let fixture = project();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push(ModelTurn::thinking_call(
        "run_code",
        json!({"code": PROGRAM}),
    ));
    endpoint.push(Reply::from_fn(|request| {
        Reply::text(format!("Definitions:\n{}", request.tool_result_text()))
    }));
    let output = run(&fixture, &endpoint, "code");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    endpoint.assert_no_violations();
    // The whole lookup is one step: the request that asked for the program, and the answer.
    assert_eq!(endpoint.chat_requests().len(), 2);

    let history = session(&fixture);
    let run_code = tool_results(&history, "run_code");
    assert_eq!(run_code.len(), 1);
    let (parent, table) = &run_code[0];
    let rows = table
        .lines()
        .filter(|line| line.starts_with("app.py:"))
        .collect::<Vec<_>>();
    let (calls, results) = nested(&history);
    assert_eq!(rows.len(), 12, "{table}");
    assert!(
        rows.iter().all(|row| row.ends_with("-> lib.py:1")),
        "{table}\n{results:?}"
    );
    assert!(table.contains("→ returned 12"), "{table}");

    // 13 nested pairs, all under the run_code call: the grep and 12 definitions.
    assert_eq!(calls.len(), 13);
    assert_eq!(results.len(), 13);
    assert!(calls.iter().all(|(of, ..)| of == parent));
    assert_eq!(calls[0].1, "grep");
    assert!(
        calls[1..]
            .iter()
            .all(|(_, name, _)| name == "lsp_definition")
    );
    // The arguments exactly as the program passed them.
    assert_eq!(
        calls[1].2,
        r#"{"path":"app.py","line":4,"symbol":"helper"}"#
    );
    assert!(results[1].1.contains("lib.py\n  1:5"), "{}", results[1].1);
    assert!(results[1].0.starts_with(&format!("{parent}.")));
    // The model saw none of them: its second request has one tool result, the program's.
    let last = endpoint.chat_requests().pop().unwrap().body.unwrap();
    let tool_messages = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] == "tool")
        .count();
    assert_eq!(tool_messages, 1);

    // Every request replays byte for byte from the log.
    let sent = endpoint
        .chat_requests()
        .into_iter()
        .map(|request| request.raw)
        .collect::<Vec<_>>();
    let id = history.header().unwrap().session_id.clone();
    for (index, bytes) in sent.iter().enumerate() {
        let replayed = fixture
            .command(&[
                "session",
                "replay",
                &id,
                "--request",
                &(index + 1).to_string(),
            ])
            .output()
            .unwrap();
        assert_eq!(&replayed.stdout, bytes, "request {}", index + 1);
    }

    // The trajectory shows the nested calls as subtool cells under the run_code cell.
    let trajectory = fixture.trajectory(&id);
    let cell = trajectory["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|cell| cell["tool"]["name"] == "run_code")
        .unwrap();
    let subtools = cell["nested"].as_array().unwrap();
    assert_eq!(subtools.len(), 13);
    assert!(subtools.iter().all(|sub| sub["kind"] == "subtool"));
    assert_eq!(subtools[1]["tool"]["arguments"], calls[1].2.as_str());
    assert!(
        subtools[12]["tool"]["result"]
            .as_str()
            .unwrap()
            .contains("lib.py")
    );

    // The system prompt documents the API from the catalog.
    let first = endpoint.chat_requests()[0].body.clone().unwrap();
    let system = first["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("`await tools.lsp_definition({"),
        "the API section is missing"
    );
    assert!(!system.contains("tools.run_code("));
}

/// The code preset with `write` in the catalog and denied, written into the state folder.
pub(crate) fn denied_write_preset(fixture: &CliFixture) -> std::path::PathBuf {
    let preset = agent_lsp::preset::catalog::builtin_text("code")
        .unwrap()
        .replace("\"run_code\",\n", "\"run_code\", \"write\",\n")
        .replace(
            "default = \"allow\"\n",
            "default = \"allow\"\nwrite = \"deny\"\n",
        );
    let path = fixture.state.path().join("denied.toml");
    std::fs::write(&path, preset).unwrap();
    path
}

#[test]
fn hostile_programs_each_end_with_their_own_error_and_the_run_goes_on() {
    let fixture = project();
    let path = denied_write_preset(&fixture);
    let programs = [
        (
            "loop",
            json!({"code": "while (true) {}", "timeout_secs": 1}),
            "ran past its 1 s",
        ),
        (
            "memory",
            json!({"code": "const a = []; while (true) a.push('x'.repeat(1 << 20) + a.length);"}),
            "more than its 64 MiB of memory",
        ),
        (
            "calls",
            json!({"code": "for (let i = 0; i < 10000; i++) await tools.list({path: '.'});"}),
            "more than 200 tool calls",
        ),
        (
            "require",
            json!({"code": "const fs = require('fs');"}),
            "ReferenceError",
        ),
        (
            "fetch",
            json!({"code": "await fetch('http://127.0.0.1/');"}),
            "ReferenceError",
        ),
        (
            "denied",
            json!({"code": "await tools.write({path: 'x.txt', content: 'x'});"}),
            "refused by the preset's permission policy",
        ),
        (
            "thrown",
            json!({"code": "const n = 1;\nthrow new Error('broken ' + n);"}),
            "the program threw at line 2: Error: broken 1",
        ),
    ];
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let mut turn = ModelTurn::new().reasoning("Try them all.");
    for (_, arguments, _) in &programs {
        turn = turn.tool_call("run_code", arguments.to_string());
    }
    endpoint.push(turn);
    endpoint.push(Reply::text("All refused."));
    let output = run(&fixture, &endpoint, &path.display().to_string());
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    endpoint.assert_no_violations();
    let history = session(&fixture);
    let results = tool_results(&history, "run_code");
    assert_eq!(results.len(), programs.len());
    for ((what, _, expected), (_, text)) in programs.iter().zip(&results) {
        assert!(text.starts_with("error: "), "{what}: {text}");
        assert!(text.contains(expected), "{what}: {text}");
    }
    assert!(!fixture.workspace.path().join("x.txt").exists());
    // The call limit let 200 calls through, each recorded with its result; nothing waits.
    let (calls, nested_results) = nested(&history);
    assert_eq!(
        calls.iter().filter(|(_, name, _)| name == "list").count(),
        200
    );
    assert_eq!(calls.len(), nested_results.len());
    assert_eq!(history.surface().pending_calls().count(), 0);
    let answers = assistant_texts(&history);
    assert_eq!(answers.last().unwrap(), "All refused.");
}

#[test]
fn cancelling_the_turn_stops_a_running_program() {
    let fixture = project();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push(ModelTurn::thinking_call(
        "run_code",
        json!({"code": "await tools.list({path: '.'});\nwhile (true) {}"}),
    ));
    let mut child = fixture
        .command(&[
            "run",
            "--preset",
            "code",
            "--base-url",
            &endpoint.base_url(),
            "Spin",
        ])
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Once the program made its call it spins; then the person presses Ctrl-C.
    let store = fixture.store();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !store
        .load("last")
        .is_ok_and(|history| nested(&history).1.len() == 1)
    {
        assert!(std::time::Instant::now() < deadline, "the program started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let interrupted = std::time::Instant::now();
    std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(
        interrupted.elapsed() < std::time::Duration::from_secs(10),
        "the program ran on after the cancel"
    );
    let history = session(&fixture);
    let results = tool_results(&history, "run_code");
    assert_eq!(results.len(), 1);
    assert!(results[0].1.contains("cancelled"), "{}", results[0].1);
    assert_eq!(history.surface().pending_calls().count(), 0);
}
