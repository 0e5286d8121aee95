//! The user's hooks through the real binary and the loopback model: a `PostToolUse` formatter
//! the model reads the effect of, a `PreToolUse` hook that blocks `shell` with exit 2 or rewrites
//! its input, context added at `SessionStart` and `UserPromptSubmit`, a prompt refused, a
//! `Stop` hook that keeps the turn going, a hanging hook killed at its timeout, a workspace hook
//! that runs only once approved, and the Claude Code documentation's own examples from a
//! `settings.json`, unchanged. Every request replays byte for byte from the log, which holds
//! each run as `hook/run`.

use serde_json::{Value, json};

use agent_lsp::session::event::{EventBody, HookRun};
use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, ModelTurn};

use crate::sandbox::World;

/// A world whose config file holds `hooks` (TOML for its `[hooks]` table).
fn world(hooks: &str) -> World {
    let world = World::new();
    std::fs::write(&world.config, hooks).unwrap();
    world
}

fn endpoint(turns: Vec<ModelTurn>) -> ModelEndpoint {
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all(turns);
    endpoint
}

/// `agent-lsp run PROMPT` against `endpoint`: its output.
fn run(world: &World, endpoint: &ModelEndpoint, prompt: &str) -> std::process::Output {
    world
        .command(&["run", "--base-url", &endpoint.base_url(), prompt])
        .output()
        .unwrap()
}

fn history(world: &World) -> agent_lsp::session::History {
    let store = agent_lsp::session::store::Store::for_workspace_in(world.state.path(), &world.root)
        .unwrap();
    let session = store.resolve("last").unwrap();
    store.load(&session).unwrap()
}

fn hook_runs(world: &World) -> Vec<HookRun> {
    runs_in(&history(world))
}

/// Each run as `EVENT OUTCOME`, in order: what the tests compare.
pub(crate) fn outcomes(runs: &[HookRun]) -> Vec<String> {
    runs.iter()
        .map(|run| format!("{} {}", run.event, run.outcome))
        .collect()
}

/// The `hook/run` records of a session's log, in order.
pub(crate) fn runs_in(history: &agent_lsp::session::History) -> Vec<HookRun> {
    history
        .events()
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::HookRun(run) => Some(run.clone()),
            _ => None,
        })
        .collect()
}

/// The text of every message of chat request `index` (0-based), one string.
fn request_text(endpoint: &ModelEndpoint, index: usize) -> String {
    let requests = endpoint.chat_requests();
    let body = requests[index].body.clone().unwrap();
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["content"].as_str().unwrap_or_default().to_owned())
        .collect::<Vec<_>>()
        .join("\n---\n")
}

fn last_session(world: &World) -> String {
    let store = agent_lsp::session::store::Store::for_workspace_in(world.state.path(), &world.root)
        .unwrap();
    store.resolve("last").unwrap()
}

#[test]
fn a_post_tool_use_formatter_changes_the_edited_file_and_the_model_reads_what_it_made() {
    // A formatter: `a=1` becomes `a = 1` in the file the call wrote.
    let world = world(
        r#"
[[hooks.PostToolUse]]
matcher = "edit|write"
command = "python3 -c \"import json,re,sys; p=json.load(sys.stdin)['tool_input']['path']; t=open(p).read(); open(p,'w').write(re.sub(r'(\\w)=(\\w)', r'\\1 = \\2', t))\""
"#,
    );
    std::fs::write(world.root.join("calc.py"), "a = 1\n").unwrap();
    let endpoint = endpoint(vec![
        ModelTurn::new().tool_call(
            "edit",
            json!({"path": "calc.py", "old_string": "a = 1\n", "new_string": "a = 1\nb=2\n"})
                .to_string(),
        ),
        ModelTurn::new().content("Added b."),
    ]);
    let output = run(&world, &endpoint, "Add b.");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    endpoint.assert_no_violations();
    assert_eq!(
        std::fs::read_to_string(world.root.join("calc.py")).unwrap(),
        "a = 1\nb = 2\n"
    );
    let seen = request_text(&endpoint, 1);
    assert!(
        seen.contains("PostToolUse hooks changed `calc.py`") && seen.contains("+b = 2"),
        "the model's next request does not show the formatted text:\n{seen}"
    );
    let runs = hook_runs(&world);
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(
        (
            runs[0].event.as_str(),
            runs[0].outcome.as_str(),
            runs[0].exit_code
        ),
        ("PostToolUse", "continued", Some(0))
    );
    assert_eq!(runs[0].changed, ["calc.py"]);
    world.assert_every_request_replays(&last_session(&world), &endpoint);
}

#[test]
fn a_pre_tool_use_hook_blocks_shell_with_exit_2_and_another_rewrites_its_input() {
    let world = world(
        r#"
[[hooks.PreToolUse]]
matcher = "shell"
hooks = [{ type = "command", command = "if grep -q forbidden; then echo 'no forbidden files here' >&2; exit 2; fi" }]

[[hooks.PreToolUse]]
matcher = "shell"
command = "grep -q original && echo '{\"hookSpecificOutput\": {\"hookEventName\": \"PreToolUse\", \"updatedInput\": {\"command\": \"echo rewritten > out.txt\"}}}' || true"
"#,
    );
    let endpoint = endpoint(vec![
        ModelTurn::new().tool_call(
            "shell",
            json!({"command": "touch forbidden.txt"}).to_string(),
        ),
        ModelTurn::new().tool_call(
            "shell",
            json!({"command": "echo original > out.txt"}).to_string(),
        ),
        ModelTurn::new().content("Done."),
    ]);
    let output = run(&world, &endpoint, "Make the files.");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    endpoint.assert_no_violations();
    assert!(
        !world.root.join("forbidden.txt").exists(),
        "the blocked command ran"
    );
    let seen = request_text(&endpoint, 1);
    assert!(
        seen.contains("blocked by the user's PreToolUse hook")
            && seen.contains("no forbidden files here"),
        "the model does not read why:\n{seen}"
    );
    assert_eq!(
        std::fs::read_to_string(world.root.join("out.txt")).unwrap(),
        "rewritten\n"
    );
    let runs = hook_runs(&world);
    let outcomes: Vec<_> = runs
        .iter()
        .map(|run| (run.outcome.as_str(), run.updated_input.is_some()))
        .collect();
    // The first call: blocked by the first hook (the second does not run); the second call:
    // both run, the second rewrites it.
    assert_eq!(
        outcomes,
        [
            ("blocked", false),
            ("continued", false),
            ("continued", true)
        ]
    );
    world.assert_every_request_replays(&last_session(&world), &endpoint);
}

#[test]
fn session_start_and_prompt_hooks_add_context_a_stop_hook_keeps_the_turn_going_and_a_prompt_can_be_refused()
 {
    let world = world(
        r#"
[[hooks.SessionStart]]
command = "echo 'Branch policy: small commits.'"

[[hooks.UserPromptSubmit]]
command = "python3 -c \"import json,sys; p=json.load(sys.stdin)['prompt']; print(json.dumps({'decision': 'block', 'reason': 'no secrets in prompts'}) if 'password' in p else 'Sprint: S42')\""

[[hooks.Stop]]
command = "python3 -c \"import json,sys; e=json.load(sys.stdin); sys.exit(0) if e['stop_hook_active'] else (print('run the tests first', file=sys.stderr), sys.exit(2))\""
"#,
    );
    let endpoint = endpoint(vec![
        ModelTurn::new().content("Done."),
        ModelTurn::new().content("Tests pass; done."),
    ]);
    let output = run(&world, &endpoint, "Fix it.");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    endpoint.assert_no_violations();
    assert!(String::from_utf8_lossy(&output.stdout).contains("Tests pass; done."));
    let first = request_text(&endpoint, 0);
    assert!(
        first.contains("Branch policy: small commits.") && first.contains("Sprint: S42"),
        "{first}"
    );
    let second = request_text(&endpoint, 1);
    assert!(second.contains("run the tests first"), "{second}");
    let events = outcomes(&hook_runs(&world));
    assert_eq!(
        events,
        [
            "UserPromptSubmit continued",
            "SessionStart continued",
            "Stop blocked",
            "Stop continued"
        ]
    );
    let session = last_session(&world);
    world.assert_every_request_replays(&session, &endpoint);
    // The trajectory shows a cell per run.
    let trajectory: Value = serde_json::from_str(&world.run_ok(&[
        "session",
        "trajectory",
        &session,
        "--format",
        "json",
    ]))
    .unwrap();
    let hook_cells = trajectory["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|cell| cell["kind"] == "hook")
        .count();
    assert_eq!(hook_cells, 4);

    // A prompt the hook refuses: the user reads why, the model is not asked, the log keeps the
    // run and not the prompt.
    let refused = world
        .command(&[
            "run",
            "--base-url",
            &endpoint.base_url(),
            "--session",
            &session,
            "my password is hunter2",
        ])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("no secrets in prompts"), "{said}");
    assert_eq!(endpoint.chat_requests().len(), 2);
    let history = history(&world);
    assert!(!history.events().iter().any(|event| matches!(
        &event.body,
        EventBody::UserMessage(message) if message.text.contains("hunter2")
    )));
    // The refused prompt is no turn: its run is recorded with the turn before, and the next
    // prompt is turn 2.
    let blocked = history
        .events()
        .iter()
        .find(|event| {
            matches!(&event.body, EventBody::HookRun(run)
                if run.event == "UserPromptSubmit" && run.outcome == "blocked")
        })
        .expect("the refused prompt's run");
    assert_eq!(blocked.turn, 1);
    assert_eq!(history.next_turn(), 2);
}

#[test]
fn a_hanging_hook_is_killed_at_its_timeout_and_the_turn_goes_on() {
    let world = world(
        r#"
[[hooks.PreToolUse]]
command = "sleep 300"
timeout = 1
"#,
    );
    let endpoint = endpoint(vec![
        ModelTurn::new().tool_call(
            "shell",
            json!({"command": "echo ran > ran.txt"}).to_string(),
        ),
        ModelTurn::new().content("Done."),
    ]);
    let started = std::time::Instant::now();
    let output = run(&world, &endpoint, "Run it.");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
    assert!(
        world.root.join("ran.txt").exists(),
        "a failed hook blocks nothing"
    );
    let runs = hook_runs(&world);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].outcome, "failed");
    assert!(
        runs[0]
            .reason
            .as_deref()
            .unwrap_or_default()
            .contains("timed out after 1 s"),
        "{runs:?}"
    );
    assert!(
        agent_tests::processes::live_processes(&["sleep", "300"], &world.root).is_empty(),
        "the hook's process outlived its timeout"
    );
}

#[test]
fn a_workspace_hook_runs_only_once_its_bytes_are_approved() {
    let world = world("");
    std::fs::create_dir_all(world.root.join(".agent-lsp")).unwrap();
    std::fs::write(
        world.root.join(".agent-lsp/hooks.toml"),
        "[[hooks.PreToolUse]]\nmatcher = \"shell\"\ncommand = \"echo 'the repository says no' >&2; exit 2\"\n",
    )
    .unwrap();
    let listed = world.run_ok(&["hooks", "list"]);
    assert!(listed.contains("does not run: not approved"), "{listed}");
    let shell = || {
        ModelTurn::new().tool_call(
            "shell",
            json!({"command": "echo ran >> ran.txt"}).to_string(),
        )
    };
    let endpoint = endpoint(vec![shell(), ModelTurn::new().content("Done.")]);
    assert!(run(&world, &endpoint, "Run it.").status.success());
    assert_eq!(
        std::fs::read_to_string(world.root.join("ran.txt")).unwrap(),
        "ran\n"
    );
    assert!(hook_runs(&world).is_empty(), "an unapproved hook ran");

    let approved = world.run_ok(&["hooks", "approve", "--yes"]);
    assert!(approved.contains("approved"), "{approved}");
    let listed: Value = serde_json::from_str(&world.run_ok(&["hooks", "list", "--json"])).unwrap();
    assert_eq!(listed[0]["approved"], true, "{listed}");
    endpoint.push_all([shell(), ModelTurn::new().content("Done.")]);
    assert!(run(&world, &endpoint, "Run it again.").status.success());
    assert_eq!(
        std::fs::read_to_string(world.root.join("ran.txt")).unwrap(),
        "ran\n"
    );
    assert_eq!(
        hook_runs(&world)[0].reason.as_deref(),
        Some("the repository says no")
    );
}

/// Claude Code's documentation examples (the hooks guide's file protection, command logger
/// and markdown formatter; the reference's Bash command validator and prompt context script),
/// in a `settings.json` outside the workspace that the config file names.
#[test]
fn a_claude_code_settings_file_from_its_documentation_works_unchanged() {
    let world = world("");
    // Under the `standard` preset's sandbox a hook writes where a command may: the workspace,
    // so the command logger's log goes there instead of the home folder.
    let log = world.root.join("bash-command-log.txt");
    let settings = world.state.path().join("settings.json");
    let hooks_dir = world.root.join(".claude/hooks");
    std::fs::create_dir_all(&hooks_dir).unwrap();
    std::fs::write(
        hooks_dir.join("markdown_formatter.py"),
        include_str!("hooks/markdown_formatter.py"),
    )
    .unwrap();
    std::fs::write(
        hooks_dir.join("bash_validator.py"),
        include_str!("hooks/bash_validator.py"),
    )
    .unwrap();
    std::fs::write(
        hooks_dir.join("prompt_context.py"),
        include_str!("hooks/prompt_context.py"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        hooks_dir.join("markdown_formatter.py"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let text = include_str!("hooks/settings.json").replace(
        "~/.claude/bash-command-log.txt",
        "\\\"$CLAUDE_PROJECT_DIR\\\"/bash-command-log.txt",
    );
    std::fs::write(&settings, text).unwrap();
    std::fs::write(
        &world.config,
        format!("[hooks]\nclaude_settings = [\"{}\"]\n", settings.display()),
    )
    .unwrap();
    std::fs::write(world.root.join("notes.txt"), "foo\n").unwrap();
    let endpoint = endpoint(vec![
        ModelTurn::new().tool_call("write", json!({"path": ".env", "content": "KEY=1\n"}).to_string()),
        ModelTurn::new().tool_call("shell", json!({"command": "grep foo notes.txt"}).to_string()),
        ModelTurn::new().tool_call("shell", json!({"command": "ls"}).to_string()),
        ModelTurn::new().tool_call(
            "write",
            json!({"path": "README.md", "content": "# Demo\n\n```\nimport os\nprint(os.name)\n```\n\n\n\nEnd.\n"}).to_string(),
        ),
        ModelTurn::new().content("Done."),
    ]);
    let output = run(&world, &endpoint, "Set things up.");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    endpoint.assert_no_violations();
    let first = request_text(&endpoint, 0);
    assert!(
        first.contains("Current time: "),
        "UserPromptSubmit context:\n{first}"
    );
    // File protection: exit 2 on a `.env` path.
    assert!(!world.root.join(".env").exists());
    assert!(request_text(&endpoint, 1).contains("blocked by the user's PreToolUse hook"));
    // The Bash validator: `grep` is refused with its message.
    assert!(request_text(&endpoint, 2).contains("Use 'rg' (ripgrep) instead of 'grep'"));
    // The command logger wrote what `Bash` ran.
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("ls - No description"), "{logged}");
    // The markdown formatter labelled the fence and squeezed the blank lines, and the model
    // read it.
    let readme = std::fs::read_to_string(world.root.join("README.md")).unwrap();
    assert_eq!(
        readme,
        "# Demo\n\n```python\nimport os\nprint(os.name)\n```\n\nEnd.\n"
    );
    assert!(request_text(&endpoint, 4).contains("+```python"));
    world.assert_every_request_replays(&last_session(&world), &endpoint);
}

/// A sub-agent's end fires `SubagentStop` in its own session, which a block keeps going; the
/// parent's turn is not held.
#[test]
fn a_subagent_stop_hook_keeps_the_sub_agent_going_once() {
    let world = world(
        r#"
[[hooks.SubagentStop]]
command = "python3 -c \"import json,sys; e=json.load(sys.stdin); sys.exit(0) if e['stop_hook_active'] else (print('check the second file too', file=sys.stderr), sys.exit(2))\""
"#,
    );
    let endpoint = endpoint(vec![
        ModelTurn::new().tool_call("task", json!({"prompt": "Look around."}).to_string()),
        ModelTurn::new().content("Looked at one file."),
        ModelTurn::new().content("Looked at both files."),
        ModelTurn::new().content("The sub-agent looked at both."),
    ]);
    let output = run(&world, &endpoint, "Delegate it.");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    endpoint.assert_no_violations();
    assert!(request_text(&endpoint, 2).contains("check the second file too"));
    let parent = request_text(&endpoint, 3);
    assert!(parent.contains("Looked at both files."), "{parent}");
    let store = agent_lsp::session::store::Store::for_workspace_in(world.state.path(), &world.root)
        .unwrap();
    let runs_of = |history: &agent_lsp::session::History| outcomes(&runs_in(history));
    let (children, parents): (Vec<_>, Vec<_>) = store
        .ids()
        .unwrap()
        .into_iter()
        .map(|id| store.load(&id).unwrap())
        .partition(|history| {
            history
                .header()
                .is_some_and(|header| header.parent.is_some())
        });
    assert_eq!((children.len(), parents.len()), (1, 1));
    assert!(
        runs_of(&parents[0]).is_empty(),
        "the parent's log has no SubagentStop run"
    );
    let runs = runs_of(&children[0]);
    assert_eq!(runs, ["SubagentStop blocked", "SubagentStop continued"]);
}

/// A hook's `allow` answers the question the tool's own permission asks, and no other: leaving
/// the sandbox and writing a protected path are still asked for (and, with nobody to ask,
/// declined).
#[test]
fn a_hooks_allow_answers_the_tools_permission_and_not_the_sandbox_or_a_protected_path() {
    let world = world(
        r#"
[[hooks.PreToolUse]]
command = "echo '{\"hookSpecificOutput\": {\"hookEventName\": \"PreToolUse\", \"permissionDecision\": \"allow\"}}'"
"#,
    );
    // Without a sandbox, `shell` is `ask` in `standard`: the hook's allow runs it unasked.
    world.preset("open", "mode = \"off\"");
    let endpoint = endpoint(vec![
        ModelTurn::new().tool_call(
            "shell",
            json!({"command": "echo ran > ran.txt"}).to_string(),
        ),
        ModelTurn::new().content("Done."),
    ]);
    let output = world
        .command(&[
            "run",
            "--preset",
            "open",
            "--base-url",
            &endpoint.base_url(),
            "Run it.",
        ])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        world.root.join("ran.txt").exists(),
        "the hook's allow did not answer `ask`"
    );

    endpoint.push_all([
        ModelTurn::new()
            .tool_call("write", json!({"path": ".envrc", "content": "export A=1\n"}).to_string())
            .tool_call(
                "shell",
                json!({"command": "echo out > /var/tmp/agent-lsp-hook-left.txt", "leave_sandbox": "all"})
                    .to_string(),
            ),
        ModelTurn::new().content("Both were declined."),
    ]);
    assert!(run(&world, &endpoint, "Try both.").status.success());
    endpoint.assert_no_violations();
    assert!(
        !world.root.join(".envrc").exists(),
        "a protected path was written unasked"
    );
    assert!(
        !std::path::Path::new("/var/tmp/agent-lsp-hook-left.txt").exists(),
        "a command left the sandbox unasked"
    );
    let seen = request_text(&endpoint, 3);
    assert!(seen.contains("`.envrc` is a protected path"), "{seen}");
    assert!(
        seen.contains("needs the user's approval whatever the preset allows"),
        "{seen}"
    );
}

/// A mistake in the config file's hooks is an error naming the file and the mistake; one in a
/// workspace file leaves that hook out and `hooks list` says why.
#[test]
fn a_misconfigured_hook_is_a_clear_error_and_a_broken_matcher_is_skipped_with_why() {
    let world = world("[[hooks.Notification]]\ncommand = \"notify-send hi\"\n");
    let output = world.command(&["hooks", "list"]).output().unwrap();
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("config file") && said.contains("unknown variant `Notification`"),
        "{said}"
    );

    std::fs::write(&world.config, "").unwrap();
    std::fs::create_dir_all(world.root.join(".agent-lsp")).unwrap();
    std::fs::write(
        world.root.join(".agent-lsp/hooks.toml"),
        "[[hooks.PreToolUse]]\nmatcher = \"(shell\"\ncommand = \"exit 2\"\n",
    )
    .unwrap();
    let listed = world.run_ok(&["hooks", "list"]);
    assert!(
        listed.contains("skipped: PreToolUse: the matcher `(shell` is not a regular expression"),
        "{listed}"
    );
}
