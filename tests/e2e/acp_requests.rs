//! `agent-lsp acp`'s answers to what a session is set up with and to bad input: modes (the
//! presets) chosen before the first prompt and kept after it, the model option from the
//! endpoint's `/models`, `/memory`, refused prompts (too long, an unknown session, an image),
//! unknown methods and bad parameters, and lines that are not JSON-RPC at all; the log holds
//! only what was accepted.

use std::process::{Command, Stdio};

use agent_tests::model_endpoint::{EndpointConfig, Reply};
use serde_json::{Value, json};

use crate::acp::{Scene, acp_client, updates_of};

#[test]
fn modes_models_commands_and_bad_requests_get_answers_and_the_log_stays_whole() {
    let scene = Scene::with(EndpointConfig::default().models(["m-one", "m-two"]));
    scene
        .endpoint
        .push_all([Reply::text("read only here"), Reply::text("still serving")]);
    let seen = scene.run(json!([
        {"do": "new"},
        {"do": "raw", "method": "session/frobnicate", "params": {}},
        {"do": "raw", "method": "session/prompt", "params": {"prompt": "not blocks"}},
        {"do": "raw", "method": "session/prompt", "params": {
            "sessionId": "20200101-000000-0000", "prompt": [{"type": "text", "text": "hi"}]}},
        {"do": "raw", "method": "session/prompt", "params": {"sessionId": "x", "prompt": [
            {"type": "image", "data": "AAAA", "mimeType": "image/png"}]}},
        {"do": "set_mode", "mode": "no-such-preset"},
        {"do": "set_mode", "mode": "readonly"},
        {"do": "set_model", "model": "m-two"},
        {"do": "prompt", "repeat": 2 << 20},
        {"do": "prompt", "text": "/memory"},
        {"do": "prompt", "text": "what may you do?"},
        {"do": "set_mode", "mode": "standard"},
        {"do": "prompt", "text": "and now?"},
        {"do": "raw", "method": "session/load", "params": {
            "sessionId": "../../etc/passwd", "cwd": scene.workspace.path(), "mcpServers": []}},
    ]));
    let steps = seen["steps"].as_array().unwrap();
    let error = |at: usize| {
        let step = &steps[at];
        assert!(step["error"].is_object(), "step {at} did not fail: {step}");
        (
            step["error"]["code"].as_i64().unwrap(),
            step["error"]["message"].as_str().unwrap().to_owned(),
        )
    };
    let options = steps[0]["response"]["configOptions"][0]["options"].to_string();
    assert!(
        options.contains("m-two"),
        "the endpoint's models are offered: {options}"
    );
    assert_eq!(error(1).0, -32601, "unknown method");
    assert_eq!(error(2).0, -32602, "bad params");
    assert_eq!(error(3).0, -32002, "unknown session");
    assert!(error(3).1.contains("no open session"), "{:?}", error(3));
    assert!(
        error(4).0 == -32602 || error(4).0 == -32002,
        "{:?}",
        error(4)
    );
    assert!(error(5).1.contains("no-such-preset"), "{:?}", error(5));
    // Before the first prompt the mode may change; the client is told.
    assert!(steps[6]["error"].is_null(), "{}", steps[6]);
    assert!(
        steps[6]["updates"]
            .as_array()
            .unwrap()
            .iter()
            .any(|update| update["sessionUpdate"] == "current_mode_update"
                && update["currentModeId"] == "readonly"),
        "{}",
        steps[6]
    );
    assert_eq!(
        steps[7]["response"]["configOptions"][0]["currentValue"],
        "m-two"
    );
    let (code, message) = error(8);
    assert_eq!(code, -32602, "{message}");
    assert!(
        message.contains("too long") || message.contains("prompt"),
        "{message}"
    );
    let memory = steps[9]["updates"].to_string();
    assert!(memory.contains("no memories yet"), "{memory}");
    assert_eq!(
        steps[10]["response"]["stopReason"], "end_turn",
        "{}",
        steps[10]
    );
    // After the first turn the session keeps its preset.
    assert!(error(11).1.contains("keeps its preset"), "{:?}", error(11));
    assert_eq!(
        steps[12]["response"]["stopReason"], "end_turn",
        "{}",
        steps[12]
    );
    assert_eq!(error(13).0, -32002, "{:?}", error(13));

    // One log, made at the first turn with the mode and model picked, holding the two turns
    // and nothing of the refused prompt.
    let store = scene.store();
    let ids = store.ids().unwrap();
    assert_eq!(ids, [steps[0]["session"].as_str().unwrap()]);
    let history = store.load(&ids[0]).unwrap();
    assert_eq!(history.header().unwrap().preset, "readonly");
    let prompts = history
        .events()
        .iter()
        .filter_map(|event| match &event.body {
            agent_lsp::session::event::EventBody::UserMessage(message) => {
                Some(message.text.as_str())
            }
            _ => None,
        })
        .collect::<Vec<_>>();
    assert!(
        prompts.iter().all(|prompt| prompt.len() < 1000),
        "{prompts:?}"
    );
    assert_eq!(prompts.len(), 2, "{prompts:?}");
    let requests = scene.endpoint.chat_requests();
    assert_eq!(requests.len(), 2);
    assert!(String::from_utf8_lossy(&requests[0].raw).contains(r#""model":"m-two""#));
    scene.endpoint.assert_no_violations();
}

/// Lines that are not JSON-RPC get an error, and the agent keeps serving.
#[test]
fn malformed_lines_get_errors_and_the_agent_keeps_serving() {
    use std::io::{BufRead, BufReader, Write};
    let state = tempfile::tempdir().unwrap();
    let mut child = Command::new(agent_tests::workspace_bin("agent-lsp"))
        .arg("acp")
        .env("HOME", state.path())
        .env("AGENT_LSP_STATE_DIR", state.path())
        .env("AGENT_LSP_CONFIG", state.path().join("none.toml"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let mut output = BufReader::new(child.stdout.take().unwrap());
    for line in [
        "this is not json",
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"one"}}"#,
        r#"[1,2,3]"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":1}}"#,
    ] {
        writeln!(input, "{line}").unwrap();
    }
    input.flush().unwrap();
    let mut answers = Vec::new();
    while !answers.iter().any(|answer: &Value| answer["id"] == 2) {
        let mut line = String::new();
        assert!(
            output.read_line(&mut line).unwrap() > 0,
            "stdout closed: {answers:?}"
        );
        answers
            .push(serde_json::from_str(&line).unwrap_or_else(|error| {
                panic!("stdout carries only JSON-RPC ({error}): {line:?}")
            }));
    }
    let bad_params = answers.iter().find(|answer| answer["id"] == 1).unwrap();
    assert_eq!(bad_params["error"]["code"], -32602, "{answers:?}");
    let initialized = answers.iter().find(|answer| answer["id"] == 2).unwrap();
    assert_eq!(initialized["result"]["protocolVersion"], 1, "{answers:?}");
    assert!(
        answers
            .iter()
            .any(|answer| answer["error"]["code"] == -32700),
        "a line that is not JSON gets a parse error: {answers:?}"
    );
    drop(input);
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "the agent ends when its input closes: {status:?}"
    );
}

/// "Always allow" covers that tool for that reason for the rest of the session, and nothing
/// else: a protected path is asked for again, with why.
#[test]
fn always_allowing_a_tool_covers_its_calls_but_not_a_protected_path() {
    let scene = Scene::new();
    scene.endpoint.push_all([
        Reply::tool_call("mcp__everything__echo", r#"{"message":"one"}"#),
        Reply::tool_call("mcp__everything__echo", r#"{"message":"two"}"#),
        Reply::tool_call("write", r#"{"path":".vscode/tasks.json","content":"{}"}"#),
        Reply::text("done"),
    ]);
    let everything = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../.ci/tools/node_modules/.bin/mcp-server-everything");
    let mut run = scene.request(json!([
        {"do": "new", "mcpServers": [
            {"name": "everything", "command": everything, "args": [], "env": []}
        ]},
        {"do": "prompt", "text": "echo and configure"},
    ]));
    run["answers"] = json!(["allow-always", "reject-once"]);
    let seen = acp_client("client.mjs", run);
    let turn = &seen["steps"][1];
    assert_eq!(turn["response"]["stopReason"], "end_turn", "{turn}");
    let permissions = seen["permissions"].as_array().unwrap();
    assert_eq!(permissions.len(), 2, "{permissions:?}");
    assert_eq!(permissions[0]["toolCall"]["rawInput"]["message"], "one");
    let title = permissions[1]["toolCall"]["title"].as_str().unwrap();
    assert!(
        title.contains(".vscode/tasks.json") && title.contains("protected path"),
        "{title}"
    );
    let statuses = updates_of(turn, "tool_call_update")
        .into_iter()
        .map(|update| update["status"].as_str().unwrap())
        .collect::<Vec<_>>();
    assert_eq!(statuses, ["completed", "completed", "failed"]);
    assert!(!scene.workspace.path().join(".vscode/tasks.json").exists());
    scene.endpoint.assert_no_violations();
}

/// A session made with `session/new` has no log until its first prompt; resumed or loaded
/// before that (a client reconnecting its panel), it is the same session, with no history.
#[test]
fn a_session_not_prompted_yet_can_be_resumed_and_loaded() {
    let scene = Scene::new();
    scene.endpoint.push(Reply::text("here"));
    let cwd = scene.workspace.path().to_str().unwrap();
    let seen = scene.run(json!([
        {"do": "new"},
        {"do": "raw", "method": "session/resume", "params": {
            "sessionId": "$session", "cwd": cwd, "mcpServers": []}},
        {"do": "raw", "method": "session/load", "params": {
            "sessionId": "$session", "cwd": cwd, "mcpServers": []}},
        {"do": "prompt", "text": "still there?"},
        {"do": "list"},
    ]));
    let steps = seen["steps"].as_array().unwrap();
    for step in steps {
        assert!(step["error"].is_null(), "step failed: {step}");
    }
    assert_eq!(steps[1]["response"]["modes"]["currentModeId"], "standard");
    let history = steps[2]["updates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|update| update["sessionUpdate"] != "available_commands_update")
        .count();
    assert_eq!(history, 0, "{}", steps[2]);
    assert_eq!(steps[3]["response"]["stopReason"], "end_turn");
    assert_eq!(
        steps[4]["response"]["sessions"][0]["sessionId"],
        steps[0]["session"]
    );
    scene.endpoint.assert_no_violations();
}

/// An MCP server the client passes over streamable HTTP is used in the turn like a stdio one.
#[test]
fn an_http_mcp_server_the_client_passes_is_used_in_the_turn() {
    let server = crate::mcp_client::HttpServer::start();
    let scene = Scene::new();
    scene.endpoint.push_all([
        Reply::tool_call("mcp__web__echo", r#"{"message":"over http"}"#),
        Reply::text("echoed"),
    ]);
    let mut run = scene.request(json!([
        {"do": "new", "mcpServers": [
            {"type": "http", "name": "web", "url": server.url, "headers": []}
        ]},
        {"do": "prompt", "text": "echo over http"},
    ]));
    run["answers"] = json!(["allow-once"]);
    let seen = acp_client("client.mjs", run);
    let turn = &seen["steps"][1];
    assert_eq!(turn["response"]["stopReason"], "end_turn", "{turn}");
    let result = updates_of(turn, "tool_call_update")
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no result: {turn}"));
    assert_eq!(result["status"], "completed", "{result}");
    assert!(result.to_string().contains("over http"), "{result}");
    scene.endpoint.assert_no_violations();
}

/// A cancel sent right behind its prompt stops that prompt, even before its conversation is
/// open; while a prompt runs, a second prompt and a change of mode or model are refused.
#[test]
fn a_cancel_right_behind_the_prompt_stops_it_and_a_running_turn_refuses_changes() {
    let scene = Scene::new();
    // A cancel right behind its prompt may stop it before or after its request: each reply
    // answers the prompt it is for, whichever comes.
    let reply = || {
        Reply::from_fn(|request| {
            let mut prompts = request
                .messages
                .iter()
                .filter(|message| message.role == "user")
                .filter_map(|message| message.content.as_deref());
            if prompts.any(|text| text == "wait") {
                agent_tests::model_endpoint::ModelTurn::new()
                    .content("later")
                    .first_byte_delay(std::time::Duration::from_millis(1500))
                    .into()
            } else {
                Reply::hang()
            }
        })
    };
    scene.endpoint.push_all([reply(), reply()]);
    let seen = scene.run(json!([
        {"do": "new"},
        {"do": "prompt_and_cancel", "text": "never mind", "after_ms": 0},
        {"do": "prompt_during", "text": "wait", "during": [
            {"do": "set_mode", "mode": "readonly"},
            {"do": "set_model", "model": "other"},
            {"do": "raw", "method": "session/prompt", "params": {
                "sessionId": "$session", "prompt": [{"type": "text", "text": "me too"}]}},
        ]},
    ]));
    let steps = seen["steps"].as_array().unwrap();
    assert_eq!(
        steps[1]["response"]["stopReason"], "cancelled",
        "{}",
        steps[1]
    );
    let during = steps[2]["during"].as_array().unwrap();
    for refused in during {
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("a turn is"), "{refused}");
    }
    assert_eq!(
        steps[2]["response"]["stopReason"], "end_turn",
        "{}",
        steps[2]
    );
    scene.endpoint.assert_no_violations();
}

/// A skill of the workspace is a slash command: listed with its description, and `/NAME what`
/// asks the model to load it for that; the model's thinking streams as thought chunks.
#[test]
fn a_skill_is_a_slash_command_and_thinking_streams_as_thoughts() {
    let scene = Scene::new();
    let skill = scene
        .workspace
        .path()
        .join(".agent-lsp/skills/review/SKILL.md");
    std::fs::create_dir_all(skill.parent().unwrap()).unwrap();
    std::fs::write(
        &skill,
        "---\nname: review\ndescription: Review a change for bugs\n---\nRead the diff first.\n",
    )
    .unwrap();
    scene.endpoint.push(Reply::from_fn(|request| {
        let asked = request.messages.iter().any(|message| {
            message.content.as_deref().is_some_and(|text| {
                text.contains("Load the skill `review`") && text.contains("the parser")
            })
        });
        agent_tests::model_endpoint::ModelTurn::new()
            .reasoning("which skill")
            .content(if asked { "loading it" } else { "not asked" })
            .into()
    }));
    let seen = scene.run(json!([
        {"do": "new"},
        {"do": "prompt", "text": "/review the parser"},
    ]));
    let steps = seen["steps"].as_array().unwrap();
    let commands = updates_of(&steps[0], "available_commands_update")
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no commands: {}", steps[0]))["availableCommands"]
        .clone();
    let review = commands
        .as_array()
        .unwrap()
        .iter()
        .find(|command| command["name"] == "review")
        .unwrap_or_else(|| panic!("the skill is no command: {commands}"));
    assert_eq!(review["description"], "Review a change for bugs");
    let updates = steps[1]["updates"].as_array().unwrap();
    let text = |kind: &str| {
        updates
            .iter()
            .filter(|update| update["sessionUpdate"] == kind)
            .map(|update| update["content"]["text"].as_str().unwrap())
            .collect::<String>()
    };
    assert_eq!(text("agent_message_chunk"), "loading it", "{updates:?}");
    assert_eq!(text("agent_thought_chunk"), "which skill", "{updates:?}");
    scene.endpoint.assert_no_violations();
}
