//! `agent-lsp acp` driven by real ACP clients the project does not write: the TypeScript SDK's
//! `ClientApp` (@agentclientprotocol/sdk 2.4, tests/acp/client.mjs) and its 1.x
//! `ClientSideConnection` (tests/acp/client_v1.mjs), both installed by .ci/tools.sh, against
//! the loopback model endpoint: a whole session (an edit through the editor's buffer, an MCP
//! server the client passed, a call approved and one rejected, a cancel mid-turn, the list,
//! a load that shows what the live turns showed, every request replayed). The plan, nested
//! calls and a cancel mid-command are in `acp_turns.rs`, bad input in `acp_requests.rs`.

use std::path::Path;
use std::process::Command;

use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, Reply};
use serde_json::{Value, json};

/// The environment `agent-lsp acp` runs in: its own state and no config file.
fn env(state: &Path) -> Value {
    json!({
        "PATH": agent_tests::tools_path().to_str().unwrap(),
        "HOME": state,
        "AGENT_LSP_STATE_DIR": state,
        "AGENT_LSP_CONFIG": state.join("none.toml"),
    })
}

/// Run an ACP client script (`tests/acp/NAME`) with `request` and return what it saw.
pub(crate) fn acp_client(script: &str, request: Value) -> Value {
    agent_tests::node_client(&format!("acp/{script}"), &request)
}

/// A workspace, a state directory and the loopback model endpoint: what an ACP test drives
/// `agent-lsp acp` in.
pub(crate) struct Scene {
    pub workspace: tempfile::TempDir,
    pub state: tempfile::TempDir,
    pub endpoint: ModelEndpoint,
}

impl Scene {
    pub(crate) fn new() -> Scene {
        Scene::with(EndpointConfig::default())
    }

    pub(crate) fn with(config: EndpointConfig) -> Scene {
        Scene {
            workspace: tempfile::tempdir().unwrap(),
            state: tempfile::tempdir().unwrap(),
            endpoint: ModelEndpoint::start(config).unwrap(),
        }
    }

    /// The request that starts `agent-lsp acp` here and runs `steps`.
    pub(crate) fn request(&self, steps: Value) -> Value {
        json!({
            "command": agent_tests::workspace_bin("agent-lsp"),
            "args": ["acp", "--base-url", self.endpoint.base_url()],
            "env": env(self.state.path()),
            "cwd": self.workspace.path(),
            "steps": steps,
        })
    }

    /// Run `steps` with tests/acp/client.mjs and return what it saw.
    pub(crate) fn run(&self, steps: Value) -> Value {
        acp_client("client.mjs", self.request(steps))
    }

    /// The store of the workspace's sessions.
    pub(crate) fn store(&self) -> agent_lsp::session::store::Store {
        agent_lsp::session::store::Store::for_workspace_in(self.state.path(), self.workspace.path())
            .unwrap()
    }
}

fn npm_bin(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../.ci/tools/node_modules/.bin")
        .join(name);
    assert!(
        path.exists(),
        "{} is missing: run .ci/tools.sh",
        path.display()
    );
    path.display().to_string()
}

/// The updates of kind `kind` (`tool_call`, `plan`, …) a step of the client saw, in order.
pub(crate) fn updates_of<'a>(step: &'a Value, kind: &str) -> Vec<&'a Value> {
    step["updates"]
        .as_array()
        .unwrap_or_else(|| panic!("a step without updates: {step}"))
        .iter()
        .filter(|update| update["sessionUpdate"] == kind)
        .collect()
}

/// What a client can compare between a live turn and a load: each tool call's id, kind,
/// title and final status, and the agent's text.
pub(crate) fn shown(updates: &[&Value]) -> (Vec<(String, String, String, String)>, String) {
    let mut calls: Vec<(String, String, String, String)> = Vec::new();
    let mut text = String::new();
    for update in updates {
        match update["sessionUpdate"].as_str().unwrap() {
            "tool_call" => calls.push((
                update["toolCallId"].as_str().unwrap().to_owned(),
                update["kind"].as_str().unwrap_or("other").to_owned(),
                update["title"].as_str().unwrap().to_owned(),
                update["status"].as_str().unwrap_or("pending").to_owned(),
            )),
            "tool_call_update" => {
                let id = update["toolCallId"].as_str().unwrap();
                let call = calls
                    .iter_mut()
                    .find(|call| call.0 == id)
                    .unwrap_or_else(|| panic!("an update of a call never shown: {update}"));
                if let Some(status) = update["status"].as_str() {
                    call.3 = status.to_owned();
                }
            }
            "agent_message_chunk" => text.push_str(update["content"]["text"].as_str().unwrap()),
            _ => {}
        }
    }
    (calls, text)
}

#[test]
fn an_acp_client_runs_a_session_and_loads_it_back_as_it_saw_it() {
    let scene = Scene::new();
    let app = scene.workspace.path().join("app.py");
    std::fs::write(&app, "x = 1\n").unwrap();
    scene.endpoint.push_all([
        Reply::tool_call(
            "edit",
            r#"{"path":"app.py","old_string":"y = 2","new_string":"y = 3"}"#,
        ),
        Reply::text("fixed"),
        Reply::tool_call("mcp__everything__echo", r#"{"message":"hi"}"#),
        Reply::tool_call("mcp__everything__echo", r#"{"message":"again"}"#),
        Reply::text("done echoing"),
        Reply::hang(),
        // The turn after the session was loaded by a second client.
        Reply::text("again"),
    ]);
    let mut live = scene.request(json!([
            {"do": "new", "mcpServers": [
                {"name": "everything", "command": npm_bin("mcp-server-everything"), "args": [], "env": []}
            ]},
            {"do": "prompt", "text": "fix y"},
            {"do": "prompt", "text": "echo twice"},
            {"do": "prompt_and_cancel", "text": "think forever", "after_ms": 700},
            {"do": "list"},
        ]),
    );
    // The editor has app.py open with a line the disk does not have yet.
    live["buffers"] = json!({ app.display().to_string(): "x = 1\ny = 2\n" });
    live["answers"] = json!(["allow-once", "reject-once"]);
    let seen = acp_client("client.mjs", live);

    let init = &seen["initialize"];
    assert_eq!(init["protocolVersion"], 1, "{init}");
    assert_eq!(init["agentCapabilities"]["loadSession"], true, "{init}");
    assert!(
        init["agentCapabilities"]["sessionCapabilities"]["list"].is_object(),
        "{init}"
    );
    assert_eq!(init["agentInfo"]["name"], "agent-lsp");

    let steps = seen["steps"].as_array().unwrap();
    for step in steps {
        assert!(step["error"].is_null(), "step failed: {step}");
    }
    let created = &steps[0];
    let id = created["session"].as_str().unwrap().to_owned();
    assert_eq!(created["response"]["modes"]["currentModeId"], "standard");
    let modes = created["response"]["modes"]["availableModes"]
        .as_array()
        .unwrap();
    assert!(
        modes.iter().any(|mode| mode["id"] == "readonly"),
        "{modes:?}"
    );
    assert_eq!(created["response"]["configOptions"][0]["id"], "model");
    let commands = updates_of(created, "available_commands_update")
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no commands: {created}"));
    let names = commands["availableCommands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|command| command["name"].as_str().unwrap())
        .collect::<Vec<_>>();
    assert!(
        names.contains(&"compact") && names.contains(&"memory"),
        "{names:?}"
    );

    // The edit read the editor's unsaved text and wrote through the editor; the disk is as it
    // was, and the client was shown the call with its place and diff.
    let fix = &steps[1];
    assert_eq!(fix["response"]["stopReason"], "end_turn", "{fix}");
    assert!(
        seen["reads"]
            .as_array()
            .unwrap()
            .iter()
            .any(|path| path == app.to_str().unwrap())
    );
    assert_eq!(
        seen["writes"],
        json!([{ "path": app.display().to_string(), "content": "x = 1\ny = 3\n" }])
    );
    assert_eq!(std::fs::read_to_string(&app).unwrap(), "x = 1\n");
    let updates = fix["updates"].as_array().unwrap();
    let edit = updates
        .iter()
        .find(|update| update["sessionUpdate"] == "tool_call")
        .unwrap_or_else(|| panic!("no tool call: {fix}"));
    assert_eq!(edit["kind"], "edit");
    assert_eq!(edit["title"], "Edit app.py");
    assert_eq!(edit["locations"][0]["path"], app.display().to_string());
    assert_eq!(edit["content"][0]["type"], "diff");
    assert_eq!(edit["content"][0]["oldText"], "y = 2");
    assert_eq!(edit["content"][0]["newText"], "y = 3");
    let (calls, text) = shown(&updates.iter().collect::<Vec<_>>());
    assert_eq!(calls[0].3, "completed", "{calls:?}");
    assert_eq!(text, "fixed");
    let usage = updates
        .iter()
        .find(|update| update["sessionUpdate"] == "usage_update")
        .unwrap_or_else(|| panic!("no usage: {fix}"));
    assert!(usage["used"].as_u64().unwrap() > 0, "{usage}");
    assert!(
        usage["size"].as_u64().unwrap() >= 100_000,
        "the preset's window: {usage}"
    );
    assert!(
        usage["_meta"]["agent-lsp"]["cacheReadTokens"].is_u64(),
        "{usage}"
    );

    // The client's MCP server ran in the turn: one call approved, one rejected, and the
    // model was told of the rejection.
    let echo = &steps[2];
    assert_eq!(echo["response"]["stopReason"], "end_turn", "{echo}");
    let permissions = seen["permissions"].as_array().unwrap();
    assert_eq!(permissions.len(), 2, "{permissions:?}");
    assert_eq!(permissions[0]["toolCall"]["rawInput"]["message"], "hi");
    for permission in permissions {
        assert_eq!(
            permission["shownBefore"], true,
            "asked before shown: {permission}"
        );
    }
    let (calls, text) = shown(
        &echo["updates"]
            .as_array()
            .unwrap()
            .iter()
            .collect::<Vec<_>>(),
    );
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0].3, "completed");
    assert_eq!(calls[1].3, "failed");
    assert_eq!(text, "done echoing");
    let echoed = updates_of(echo, "tool_call_update")
        .into_iter()
        .next()
        .unwrap();
    assert!(echoed.to_string().contains("hi"), "{echoed}");
    let requests = scene.endpoint.chat_requests();
    let refusal = String::from_utf8_lossy(&requests[4].raw).into_owned();
    assert!(
        refusal.contains("did not allow it in the editor"),
        "{refusal}"
    );

    // Cancelled mid-turn: the turn stops cleanly.
    let cancelled = &steps[3];
    assert_eq!(
        cancelled["response"]["stopReason"], "cancelled",
        "{cancelled}"
    );

    let listed = steps[4]["response"]["sessions"].as_array().unwrap();
    assert_eq!(listed[0]["sessionId"], id.as_str(), "{listed:?}");
    assert_eq!(listed[0]["title"], "fix y");
    assert_eq!(
        listed[0]["cwd"],
        scene
            .workspace
            .path()
            .canonicalize()
            .unwrap()
            .display()
            .to_string()
    );

    // The log has the approvals as it has any other.
    let log = std::fs::read_to_string(scene.store().path_of(&id)).unwrap();
    assert!(log.contains(r#""answer":"allowed""#), "{log}");
    assert!(log.contains(r#""answer":"declined""#), "{log}");

    // A second client loads the session: it is shown what the live one was.
    let loaded =
        scene.run(json!([{"do": "load", "session": id}, {"do": "prompt", "text": "and again"}]));
    let load = &loaded["steps"][0];
    assert!(load["error"].is_null(), "{load}");
    let live_updates = steps[1..=3]
        .iter()
        .flat_map(|step| step["updates"].as_array().unwrap())
        .collect::<Vec<_>>();
    let loaded_updates = load["updates"]
        .as_array()
        .unwrap()
        .iter()
        .collect::<Vec<_>>();
    assert_eq!(shown(&loaded_updates), shown(&live_updates));
    let prompts = loaded_updates
        .iter()
        .filter(|update| update["sessionUpdate"] == "user_message_chunk")
        .map(|update| update["content"]["text"].as_str().unwrap())
        .collect::<Vec<_>>();
    assert_eq!(prompts, ["fix y", "echo twice", "think forever"]);
    // The loaded session goes on where it was.
    let again = &loaded["steps"][1];
    assert_eq!(again["response"]["stopReason"], "end_turn", "{again}");
    assert_eq!(
        shown(
            &again["updates"]
                .as_array()
                .unwrap()
                .iter()
                .collect::<Vec<_>>()
        )
        .1,
        "again"
    );

    // Every request the turns sent replays byte for byte from the log.
    for n in 1..=scene.endpoint.chat_requests().len() {
        let replayed = Command::new(agent_tests::workspace_bin("agent-lsp"))
            .args(["--workspace", scene.workspace.path().to_str().unwrap()])
            .args(["session", "replay", &id, "--request", &n.to_string()])
            .env("HOME", scene.state.path())
            .env("AGENT_LSP_STATE_DIR", scene.state.path())
            .env("AGENT_LSP_CONFIG", scene.state.path().join("none.toml"))
            .output()
            .unwrap();
        assert!(replayed.status.success(), "request {n}: {replayed:?}");
        assert_eq!(
            replayed.stdout,
            scene.endpoint.chat_requests()[n - 1].raw,
            "request {n} does not replay byte-identically"
        );
    }
    scene.endpoint.assert_no_violations();
}

/// The SDK's 1.x client, `ClientSideConnection`, as plugins written before 2.0 use it.
#[test]
fn the_sdks_first_client_generation_runs_a_session_too() {
    let scene = Scene::new();
    let notes = scene.workspace.path().join("notes.md");
    std::fs::write(&notes, "old\n").unwrap();
    scene.endpoint.push_all([
        Reply::tool_call("write", r#"{"path":"notes.md","content":"new\n"}"#),
        Reply::tool_call(
            "write",
            r#"{"path":".vscode/settings.json","content":"{}\n"}"#,
        ),
        Reply::text("written"),
        Reply::hang(),
    ]);
    let mut run = scene.request(json!([]));
    run["buffers"] = json!({ notes.display().to_string(): "old, unsaved\n" });
    let seen = acp_client("client_v1.mjs", run);
    assert_eq!(seen["first"]["stopReason"], "end_turn", "{seen}");
    // notes.md went through the editor; the protected path asked first.
    assert_eq!(
        seen["writes"],
        json!([{ "path": notes.display().to_string(), "content": "new\n" }])
    );
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "old\n");
    let permissions = seen["permissions"].as_array().unwrap();
    assert_eq!(permissions.len(), 1, "{permissions:?}");
    assert!(
        permissions[0]
            .as_str()
            .unwrap()
            .contains(".vscode/settings.json")
    );
    assert_eq!(
        std::fs::read_to_string(scene.workspace.path().join(".vscode/settings.json")).unwrap(),
        "{}\n"
    );
    assert_eq!(seen["cancelled"]["stopReason"], "cancelled", "{seen}");
    assert_eq!(
        seen["listed"]["sessions"][0]["sessionId"],
        seen["sessionId"]
    );
    assert_eq!(
        seen["resumed"]["modes"]["currentModeId"], "standard",
        "{seen}"
    );
    scene.endpoint.assert_no_violations();
}
