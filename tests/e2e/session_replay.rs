//! Replay test: a recorded multi-step session (tool rounds, thinking mode, runtime-context
//! changes, a system prompt and tool catalog change, a compaction-style replace, usage records)
//! is replayed request by request through the real `agent-lsp session replay` command, and every
//! body is byte-identical to the one built at the time. Also covers `session list` and `show`.

use std::path::Path;
use std::process::{Command, Output};

use agent_lsp::context::request::build_request;
use agent_lsp::context::runtime::{RuntimeContextProjection, RuntimeSnapshot};
use agent_lsp::context::system_prompt::SystemPrompt;
use agent_lsp::llm::{ModelParams, Thinking, ToolDef, wire};
use agent_lsp::session::event::{
    AssistantMessage, EventBody, SurfaceOp, ToolCallRef, ToolResult, Usage, UserMessage,
};
use agent_lsp::session::log::Durability;
use agent_lsp::session::store::{STATE_DIR_ENV, Store};
use agent_lsp::session::{NewEvent, Session};
use serde_json::{Value, json};

fn agent_lsp(state: &Path, workspace: &Path, args: &[&str]) -> Output {
    Command::new(agent_tests::workspace_bin("agent-lsp"))
        .env(STATE_DIR_ENV, state)
        .arg("--workspace")
        .arg(workspace)
        .args(args)
        .output()
        .expect("run agent-lsp")
}

fn tool(name: &str) -> ToolDef {
    ToolDef {
        name: name.into(),
        description: format!("The {name} tool."),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string", "description": "Relative path"}}, "required": ["path"]}),
    }
}

fn user(text: &str) -> EventBody {
    EventBody::UserMessage(UserMessage {
        text: text.into(),
        origin: "prompt".into(),
    })
}

fn snapshot(branch: &str) -> RuntimeSnapshot {
    RuntimeSnapshot(
        [
            ("cwd", "/w"),
            ("date", "2026-11-29"),
            ("git_branch", branch),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect(),
    )
}

/// One simulated model step: maybe a runtime-context change, a request, an answer with calls and
/// their results, and a usage record. Returns the body that was "sent".
#[allow(clippy::too_many_arguments)]
fn step(
    session: &mut Session,
    prompt: &SystemPrompt,
    params: &ModelParams,
    turn: u32,
    step: u32,
    branch: &str,
    calls: &[&str],
    text: &str,
) -> String {
    RuntimeContextProjection::project(session, turn, step, &snapshot(branch)).unwrap();
    let assembled = prompt.assemble().unwrap();
    let request =
        build_request(session, &assembled, "deepseek-v4-flash", params, turn, step).unwrap();
    let body = wire::chat_completions_body(&request);
    let tool_calls = calls
        .iter()
        .enumerate()
        .map(|(index, name)| ToolCallRef {
            id: format!("call_{turn}_{step}_{index}"),
            name: (*name).into(),
            arguments: format!(r#"{{"path":"src/ünï{index}.rs"}}"#),
        })
        .collect::<Vec<_>>();
    let reasoning = params
        .thinking_enabled()
        .then(|| format!("思考 {turn}.{step}"));
    let message = AssistantMessage {
        text: text.into(),
        reasoning,
        tool_calls: tool_calls.clone(),
    };
    session
        .append(NewEvent::new(
            turn,
            step,
            EventBody::AssistantMessage(message),
        ))
        .unwrap();
    for call in &tool_calls {
        let result = ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            text: format!("1: fn main() {{}} // {}", call.id),
            meta: json!({"truncated": false}),
        };
        session
            .append(NewEvent::new(turn, step, EventBody::ToolResult(result)))
            .unwrap();
    }
    let usage = Usage {
        index: request.index,
        prompt_tokens: 1000,
        completion_tokens: 50,
        cache_read: 900,
        input: 100,
    };
    session
        .append(NewEvent::new(turn, step, EventBody::Usage(usage)))
        .unwrap();
    body
}

#[test]
fn every_request_replays_byte_identically_through_the_cli() {
    let state = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    // The same store the CLI finds through AGENT_LSP_STATE_DIR.
    let store = Store::for_workspace_in(state.path(), workspace.path()).unwrap();
    let mut session = store
        .create_session(
            &agent_lsp::preset::Preset::builtin("standard").unwrap(),
            Durability::Sync,
        )
        .unwrap();
    let mut prompt = SystemPrompt::default();
    prompt
        .section(
            "role",
            0,
            "You are agent-lsp, a coding agent in {{workspace}}.",
        )
        .variable("workspace", "demo")
        .tool(tool("read"))
        .tool(tool("grep"));
    let thinking = ModelParams {
        thinking: Some(Thinking::Enabled),
        reasoning_effort: Some("high".into()),
        ..Default::default()
    };
    let plain = ModelParams {
        temperature: Some(0.2),
        max_tokens: Some(4096),
        ..Default::default()
    };

    let mut bodies = Vec::new();
    session
        .append(NewEvent::new(
            1,
            0,
            user("Find where the parser is défini and fix it."),
        ))
        .unwrap();
    bodies.push(step(
        &mut session,
        &prompt,
        &thinking,
        1,
        1,
        "main",
        &["grep"],
        "",
    ));
    bodies.push(step(
        &mut session,
        &prompt,
        &thinking,
        1,
        2,
        "main",
        &["read", "read"],
        "Reading both.",
    ));
    bodies.push(step(
        &mut session,
        &prompt,
        &thinking,
        1,
        3,
        "main",
        &[],
        "Fixed it.",
    ));

    // The catalog changes between turns: the next header must carry the new full text.
    prompt
        .tool(tool("edit"))
        .section("rules", 5, "Never leave the workspace.");
    session
        .append(NewEvent::new(2, 0, user("Now run the tests.")))
        .unwrap();
    bodies.push(step(
        &mut session,
        &prompt,
        &plain,
        2,
        1,
        "fix-branch",
        &["grep"],
        "",
    ));
    bodies.push(step(
        &mut session,
        &prompt,
        &plain,
        2,
        2,
        "fix-branch",
        &[],
        "Tests pass.",
    ));

    // A compaction-style checkpoint replaces the first turn on the surface.
    let entries = session.history().surface().entries().to_vec();
    let first_turn_end = entries
        .iter()
        .rev()
        .find(|entry| session.history().event(entry.seq).unwrap().turn == 1)
        .unwrap()
        .seq;
    session
        .append(
            NewEvent::new(
                3,
                0,
                EventBody::UserMessage(UserMessage {
                    text: "<compacted-summary>turn 1</compacted-summary>".into(),
                    origin: "compaction".into(),
                }),
            )
            .with_op(SurfaceOp::Replace {
                start: entries[0].seq,
                end: first_turn_end,
            }),
        )
        .unwrap();
    session
        .append(NewEvent::new(3, 0, user("And document it.")))
        .unwrap();
    bodies.push(step(
        &mut session,
        &prompt,
        &thinking,
        3,
        1,
        "fix-branch",
        &["read"],
        "",
    ));
    bodies.push(step(
        &mut session,
        &prompt,
        &thinking,
        3,
        2,
        "main",
        &[],
        "Documented.",
    ));
    let id = session.id().to_owned();
    drop(session);

    // The system prompt text is recorded only when it changed.
    let history = store.load(&id).unwrap();
    let full_headers = history
        .events()
        .iter()
        .filter(|event| matches!(&event.body, EventBody::RequestHeader(h) if h.system.is_some()))
        .count();
    assert_eq!(
        full_headers, 2,
        "full system text is written once per change"
    );
    // The runtime context was injected only when it changed: main, fix-branch, main again.
    assert_eq!(history.runtime_context_seqs().len(), 3);

    for (index, body) in bodies.iter().enumerate() {
        let n = (index + 1).to_string();
        let output = agent_lsp(
            state.path(),
            workspace.path(),
            &["session", "replay", &id[id.len() - 4..], "--request", &n],
        );
        assert!(
            output.status.success(),
            "replay {n} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(
            String::from_utf8(output.stdout).unwrap(),
            *body,
            "request {n} does not replay byte-identically"
        );
    }

    // Bodies really differ in what they should: thinking passback and the compaction.
    let last: Value = serde_json::from_str(bodies.last().unwrap()).unwrap();
    assert_eq!(
        last["messages"][1]["content"],
        "<compacted-summary>turn 1</compacted-summary>"
    );
    assert_eq!(last["thinking"]["type"], "enabled");

    let output = agent_lsp(
        state.path(),
        workspace.path(),
        &["session", "replay", "last", "--request", "99"],
    );
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("request 99 does not exist: the session made 7 requests")
    );

    let output = agent_lsp(
        state.path(),
        workspace.path(),
        &["session", "list", "--json"],
    );
    assert!(output.status.success());
    let list: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(list[0]["id"], id.as_str());
    assert_eq!(list[0]["requests"], 7);
    assert_eq!(
        list[0]["first_prompt"],
        "Find where the parser is défini and fix it."
    );

    let output = agent_lsp(
        state.path(),
        workspace.path(),
        &["session", "show", &id, "--json"],
    );
    assert!(output.status.success());
    let show: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(show["surface"]["generation"], 1);
    assert_eq!(show["requests"][0]["cache_read"], 900);

    let output = agent_lsp(state.path(), workspace.path(), &["session", "show", "last"]);
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("preset     standard"), "{text}");
    assert!(text.contains("90.0% from cache"), "{text}");
    assert!(text.contains("(off the surface)"), "{text}");
}
