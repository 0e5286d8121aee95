//! What the editors show of the user's hooks: under `serve`, a call a `PreToolUse` hook
//! blocked is a warning with the hook's reason, a prompt a `UserPromptSubmit` hook refused is
//! the request's error, and `agent.compact` runs the `PreCompact` hooks (`manual`); in an ACP
//! panel, the blocked call is a failed tool call whose content is the reason.

use std::path::Path;
use std::process::Command;

use agent_lsp::session::event::HookRun;
use agent_lsp::session::store::Store;
use agent_tests::editor::Editor;
use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, Reply};
use serde_json::{Value, json};

use crate::acp::{Scene, updates_of};

/// Blocks every `shell` call.
const BLOCK_SHELL: &str = r#"
[[hooks.PreToolUse]]
matcher = "shell"
command = "echo 'no shell here, use the file tools' >&2; exit 2"
"#;

/// [`BLOCK_SHELL`], and: refuses prompts with a password, notes manual compactions, and a
/// `Stop` hook that fails.
fn hooks() -> String {
    format!(
        "{BLOCK_SHELL}{}",
        r#"
[[hooks.UserPromptSubmit]]
command = "grep -q password && { echo 'no secrets in prompts' >&2; exit 2; } || true"

[[hooks.PreCompact]]
matcher = "manual"
command = "cat > /dev/null"

[[hooks.Stop]]
command = "echo 'the notifier is broken' >&2; exit 1"

[[hooks.SessionStart]]
command = "echo '{\"systemMessage\": \"remember the style guide\"}'"
"#
    )
}

/// `agent-lsp serve` on `root` with `config` (its state folder beside it) and `endpoint` as its
/// model, initialized as an editor initializes it.
fn serve(root: &Path, config: &Path, endpoint: &ModelEndpoint) -> Editor {
    let mut command = Command::new(agent_tests::workspace_bin("agent-lsp"));
    command
        .env("PATH", agent_tests::tools_path())
        .env("AGENT_LSP_STATE_DIR", config.parent().unwrap())
        .env("AGENT_LSP_CONFIG", config)
        .env_remove("DEEPSEEK_API_KEY")
        .args(["--workspace", root.to_str().unwrap(), "serve"]);
    let mut editor = Editor::start(command);
    editor.initialize_with(
        root,
        json!({"baseUrl": endpoint.base_url(), "apiKey": "sk-test", "model": "deepseek-v4-flash", "preset": "standard"}),
    );
    editor
}

/// `workspace/executeCommand` of `command` with `argument` (none when null): the answer.
fn execute(editor: &mut Editor, command: &str, argument: Value) -> Value {
    let arguments = if argument.is_null() {
        json!([])
    } else {
        json!([argument])
    };
    editor.request(
        "workspace/executeCommand",
        json!({"command": command, "arguments": arguments}),
    )
}

fn hook_runs(store: &Store) -> Vec<HookRun> {
    crate::hooks::runs_in(&store.load("last").unwrap())
}

#[test]
fn the_editor_shows_a_blocked_calls_reason_and_a_refused_prompt() {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("config.toml");
    std::fs::write(&config, hooks()).unwrap();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all([
        Reply::tool_call("shell", r#"{"command": "echo hi > made.txt"}"#),
        Reply::text("The shell is blocked here."),
    ]);
    let mut editor = serve(&root, &config, &endpoint);
    let answer = execute(
        &mut editor,
        "agent.ask",
        json!({"prompt": "Make the file."}),
    );
    assert_eq!(answer["result"]["outcome"], "answered", "{answer}");
    let warning = editor.wait_for("the blocked call's warning", |message| {
        message["method"] == "window/showMessage"
            && message["params"]["message"]
                .as_str()
                .unwrap()
                .contains("blocked `shell`")
    });
    assert_eq!(warning["params"]["type"], 2, "{warning}");
    assert!(
        warning["params"]["message"]
            .as_str()
            .unwrap()
            .contains("no shell here, use the file tools"),
        "{warning}"
    );
    assert!(!root.join("made.txt").exists());
    // A loop-level hook's failure has no call to go with: it is a warning of its own.
    let failed = editor.wait_for("the Stop hook's failure", |message| {
        message["method"] == "window/showMessage"
            && message["params"]["message"]
                .as_str()
                .unwrap()
                .contains("the Stop hook `echo 'the notifier is broken' >&2; exit 1` failed: exit code 1: the notifier is broken")
    });
    assert_eq!(failed["params"]["type"], 2, "{failed}");
    editor.wait_for("the SessionStart hook's message", |message| {
        message["method"] == "window/showMessage"
            && message["params"]["message"]
                .as_str()
                .unwrap()
                .ends_with(": remember the style guide")
    });

    let refused = execute(
        &mut editor,
        "agent.ask",
        json!({"prompt": "my password is hunter2"}),
    );
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("blocked by the UserPromptSubmit hook")
            && message.contains("no secrets in prompts"),
        "{refused}"
    );
    assert_eq!(
        endpoint.chat_requests().len(),
        2,
        "a refused prompt reached the model"
    );

    let compacted = execute(&mut editor, "agent.compact", Value::Null);
    assert!(compacted["error"].is_null(), "{compacted}");
    let store = Store::for_workspace_in(state.path(), &root).unwrap();
    let events = crate::hooks::outcomes(&hook_runs(&store));
    assert_eq!(
        events,
        [
            "UserPromptSubmit continued",
            "SessionStart continued",
            "PreToolUse blocked",
            "Stop failed",
            "UserPromptSubmit blocked",
            "PreCompact continued"
        ]
    );
    endpoint.assert_no_violations();
    editor.shutdown();
}

#[test]
fn an_acp_client_sees_a_blocked_call_fail_with_the_hooks_reason() {
    let scene = Scene::new();
    std::fs::write(scene.state.path().join("none.toml"), hooks()).unwrap();
    scene.endpoint.push_all([
        Reply::tool_call("shell", r#"{"command": "echo hi > made.txt"}"#),
        Reply::text("The shell is blocked here."),
    ]);
    let seen = scene.run(json!([
        {"do": "new"},
        {"do": "prompt", "text": "Make the file."},
        {"do": "prompt", "text": "my password is hunter2"},
    ]));
    let steps = seen["steps"].as_array().unwrap();
    assert!(steps[1]["error"].is_null(), "{}", steps[1]);
    let failed: Vec<&Value> = updates_of(&steps[1], "tool_call_update")
        .into_iter()
        .filter(|update| update["status"] == "failed")
        .collect();
    assert_eq!(failed.len(), 1, "{}", steps[1]);
    assert!(
        failed[0]
            .to_string()
            .contains("no shell here, use the file tools"),
        "{}",
        failed[0]
    );
    assert!(!scene.workspace.path().join("made.txt").exists());
    let refused = steps[2]["error"].to_string();
    assert!(refused.contains("no secrets in prompts"), "{}", steps[2]);
    assert_eq!(scene.endpoint.chat_requests().len(), 2);
}

/// In a real Helix: a prompt document's turn whose `shell` call a hook blocked shows the hook's
/// reason on the status line, and the answer streams in.
#[test]
fn helix_shows_the_reason_a_hook_blocked_a_call() {
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all([
        Reply::tool_call("shell", r#"{"command": "echo hi > made.txt"}"#),
        Reply::text("The shell is blocked here."),
    ]);
    let helix = agent_tests::helix::Helix::start_configured(
        &[
            ("pyproject.toml", ""),
            ("notes.agent.md", "Make the file.\n"),
        ],
        "notes.agent.md",
        Some(&endpoint.base_url()),
        BLOCK_SHELL,
    );
    helix.wait_exchange("initialize", |_| true);
    helix.wait_screen("the prompt document", |screen| {
        screen.contains("Make the file.")
    });
    helix.keys(&["Space", "a"]);
    helix.wait_screen("Send to agent", |screen| screen.contains("Send to agent"));
    helix.keys(&["Enter"]);
    helix.wait_notification("window/showMessage", |message| {
        message
            .to_string()
            .contains("no shell here, use the file tools")
    });
    let screen = helix.wait_screen("the answer and the hook's reason", |screen| {
        screen.contains("The shell is blocked here.") && screen.contains("no shell here")
    });
    assert!(screen.contains("blocked `shell`"), "{screen}");
    assert!(!helix.root().join("made.txt").exists());
}

/// The workspace's unapproved hooks file is asked about when a session starts ("Not now" runs
/// nothing, and is not asked again for the same bytes), `agent.hooks.approve` asks again and
/// "Approve" lets the hooks run from the next session on, recorded as the command line records
/// it.
#[test]
fn the_editor_approves_the_workspaces_hooks_when_a_session_starts_or_with_agent_hooks_approve() {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join(".agent-lsp")).unwrap();
    std::fs::write(
        root.join(".agent-lsp/hooks.toml"),
        "[[hooks.PreToolUse]]\nmatcher = \"shell\"\ncommand = \"echo 'the repository says no' >&2; exit 2\"\n",
    )
    .unwrap();
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let shell = || Reply::tool_call("shell", r#"{"command": "echo ran >> ran.txt"}"#);
    endpoint.push_all([shell(), Reply::text("Ran it.")]);
    let mut editor = serve(&root, &config, &endpoint);
    let questions = |editor: &Editor| -> Vec<String> {
        editor
            .server_requests
            .iter()
            .filter(|request| request["method"] == "window/showMessageRequest")
            .map(|request| request["params"]["message"].as_str().unwrap().to_owned())
            .collect()
    };

    editor.message_answer = Some("Not now".into());
    let answer = execute(&mut editor, "agent.ask", json!({"prompt": "Run it."}));
    assert_eq!(answer["result"]["outcome"], "answered", "{answer}");
    let asked = questions(&editor);
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0].contains(".agent-lsp/hooks.toml runs these commands in")
            && asked[0].contains("PreToolUse: echo 'the repository says no' >&2; exit 2"),
        "{}",
        asked[0]
    );
    assert_eq!(
        std::fs::read_to_string(root.join("ran.txt")).unwrap(),
        "ran\n"
    );
    execute(&mut editor, "agent.session.new", Value::Null);
    assert_eq!(questions(&editor).len(), 1, "Not now holds for these bytes");

    editor.message_answer = Some("Approve".into());
    let approved = execute(&mut editor, "agent.hooks.approve", Value::Null);
    assert_eq!(approved["result"]["approved"], true, "{approved}");
    assert_eq!(questions(&editor).len(), 2);
    execute(&mut editor, "agent.session.new", Value::Null);
    endpoint.push_all([shell(), Reply::text("Blocked.")]);
    let answer = execute(&mut editor, "agent.ask", json!({"prompt": "Run it again."}));
    assert_eq!(answer["result"]["outcome"], "answered", "{answer}");
    assert_eq!(
        std::fs::read_to_string(root.join("ran.txt")).unwrap(),
        "ran\n",
        "the approved hook did not run"
    );
    editor.shutdown();
    // The command line sees the editor's approval.
    let listed = agent_tests::agent_lsp_command(state.path(), &config, &root, &["hooks", "list"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("runs (approved)"),
        "{listed:?}"
    );
}
