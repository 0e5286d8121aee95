//! The file tools against an adversary on the same machine: a symlink swapped in while a tool
//! checks and opens a path, through the real `serve` and its `agent.tool` command, as fast as
//! the editor can ask.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use agent_tests::editor::Editor;
use serde_json::{Value, json};

const SECRET: &str = "THE-SECRET-OUTSIDE-THE-WORKSPACE";

/// Swap `race.txt` between a file inside and a link to the secret outside, and `dir` between a
/// directory inside and a link to the secret's directory, each in one atomic exchange (so the
/// name always exists, as one or the other), until `stop` is set. Returns the swaps made.
fn swapper(root: &Path, outside: &Path, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    let (root, outside) = (root.to_owned(), outside.to_owned());
    std::os::unix::fs::symlink(outside.join("secret.txt"), root.join(".race-link")).unwrap();
    std::fs::create_dir(root.join("dir")).unwrap();
    std::fs::write(root.join("dir/secret.txt"), "inside\n").unwrap();
    std::os::unix::fs::symlink(&outside, root.join(".dir-link")).unwrap();
    std::thread::spawn(move || {
        let exchange = |a: &str, b: &str| {
            rustix::fs::renameat_with(
                rustix::fs::CWD,
                root.join(a),
                rustix::fs::CWD,
                root.join(b),
                rustix::fs::RenameFlags::EXCHANGE,
            )
            .expect("renameat2 RENAME_EXCHANGE");
        };
        let mut swaps = 0;
        while !stop.load(Ordering::Relaxed) {
            exchange("race.txt", ".race-link");
            exchange("dir", ".dir-link");
            swaps += 1;
        }
        swaps
    })
}

fn tool(editor: &mut Editor, name: &str, arguments: Value) -> String {
    let answer = editor.request(
        "workspace/executeCommand",
        json!({"command": "agent.tool", "arguments": [{"name": name, "arguments": arguments}]}),
    );
    answer.to_string()
}

#[test]
fn a_symlink_swapped_in_during_the_check_never_lets_read_or_grep_out() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), format!("{SECRET}\n")).unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    std::fs::write(root.join("race.txt"), "inside\n").unwrap();
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let mut command = Command::new(agent_tests::workspace_bin("agent-lsp"));
    command
        .env("AGENT_LSP_STATE_DIR", state.path())
        .env("AGENT_LSP_CONFIG", &config)
        .env_remove("DEEPSEEK_API_KEY")
        .args(["--workspace", root.to_str().unwrap(), "serve"]);
    let mut editor = Editor::start(command);
    editor.initialize_with(&root, Value::Null);

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = swapper(&root, outside.path(), stop.clone());
    let (mut calls, mut escapes, mut inside) = (0, Vec::new(), 0);
    let deadline = Instant::now() + Duration::from_secs(4);
    while Instant::now() < deadline {
        for (name, arguments) in [
            ("read", json!({"path": "race.txt"})),
            ("read", json!({"path": "dir/secret.txt"})),
            (
                "grep",
                json!({"pattern": "SECRET|inside", "path": "race.txt"}),
            ),
            ("grep", json!({"pattern": "SECRET|inside"})),
        ] {
            let answer = tool(&mut editor, name, arguments);
            calls += 1;
            if answer.contains(SECRET) {
                escapes.push(answer);
            } else if answer.contains("inside") {
                inside += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swaps.join().unwrap();
    editor.shutdown();
    assert!(
        escapes.is_empty(),
        "{} of {calls} calls escaped: {:?}",
        escapes.len(),
        &escapes[..1]
    );
    // The race was real: the tools did read the file inside between swaps, many times.
    assert!(
        swaps > 100 && inside > 10,
        "{swaps} swaps, {inside} reads inside of {calls}"
    );
}

/// `git` in `dir`, with an identity so a commit needs no global configuration.
fn git(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.email=test@example.invalid",
            "-c",
            "user.name=test",
        ])
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("run git")
}

/// `agent-lsp run PROMPT` in `root` against `endpoint`, with an empty config: it must succeed.
/// The body of the last model request, where the tools' results are.
fn run_turn(
    root: &Path,
    endpoint: &agent_tests::model_endpoint::ModelEndpoint,
    prompt: &str,
) -> String {
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let output = agent_tests::agent_lsp_command(
        state.path(),
        &config,
        root,
        &["run", "--base-url", &endpoint.base_url(), prompt],
    )
    .output()
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let requests = endpoint.chat_requests();
    requests.last().unwrap().body.as_ref().unwrap().to_string()
}

#[test]
fn the_writing_tools_cannot_plant_code_that_git_runs_later() {
    use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, ModelTurn, Reply};
    use std::os::unix::fs::PermissionsExt;

    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    assert!(git(&root, &["init", "-q"]).status.success());
    // A hook the programmer installed: executable, so a write that kept its mode would run.
    let hook = root.join(".git/hooks/pre-commit");
    std::fs::write(&hook, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config_before = std::fs::read_to_string(root.join(".git/config")).unwrap();
    let marker = root.join("pwned");
    let fsmonitor = format!("[core]\n\tfsmonitor = \"touch {} #\"\n", marker.display());
    let payload_hook = format!("#!/bin/sh\ntouch {}\n", marker.display());

    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all([
        Reply::from(
            ModelTurn::new()
                .tool_call(
                    "write",
                    json!({"path": ".git/config", "content": fsmonitor}).to_string(),
                )
                .tool_call(
                    "write",
                    json!({"path": "src/../.git/hooks/pre-commit", "content": payload_hook})
                        .to_string(),
                )
                .tool_call(
                    "edit",
                    json!({"path": ".git/config", "old_string": "[core]", "new_string": fsmonitor})
                        .to_string(),
                )
                .tool_call(
                    "write",
                    json!({"path": "notes.txt", "content": "ordinary\n"}).to_string(),
                ),
        ),
        Reply::text("Done."),
    ]);
    std::fs::create_dir_all(root.join("src")).unwrap();
    // What the model was told: each protected write was refused, saying why; the ordinary
    // file was written.
    let results = run_turn(&root, &endpoint, "Set the repository up.");
    assert_eq!(
        results.matches("is a protected path").count(),
        3,
        "{results}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        "ordinary\n"
    );

    // Nothing was planted, and git's ordinary commands run nothing of the model's.
    assert_eq!(
        std::fs::read_to_string(root.join(".git/config")).unwrap(),
        config_before
    );
    assert_eq!(
        std::fs::read_to_string(&hook).unwrap(),
        "#!/bin/sh\nexit 0\n"
    );
    assert!(git(&root, &["status"]).status.success());
    assert!(git(&root, &["add", "notes.txt"]).status.success());
    let commit = git(&root, &["commit", "-q", "-m", "x"]);
    assert!(
        commit.status.success(),
        "{}",
        String::from_utf8_lossy(&commit.stderr)
    );
    assert!(!marker.exists(), "a payload ran");
    endpoint.assert_no_violations();
}

/// Start stdio `serve`, initialize it, write `garbage`, and return how it ended and its stderr.
fn serve_fed(garbage: &[u8]) -> (std::process::ExitStatus, String) {
    use std::io::{Read, Write};
    let workspace = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let mut child =
        agent_tests::agent_lsp_command(state.path(), &config, workspace.path(), &["serve"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"processId": null, "rootUri": null, "capabilities": {}}})
    .to_string();
    write!(
        stdin,
        "Content-Length: {}\r\n\r\n{initialize}",
        initialize.len()
    )
    .unwrap();
    stdin.write_all(garbage).unwrap();
    // A well-formed request after the garbage: a server that recovered would answer it.
    let hover = r#"{"jsonrpc":"2.0","id":2,"method":"nobody/knows","params":{}}"#;
    write!(stdin, "Content-Length: {}\r\n\r\n{hover}", hover.len()).unwrap();
    stdin.flush().unwrap();
    // The editor keeps its end open, as editors do: the server must end on its own.
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "serve stayed alive after {garbage:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(stdin);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (status, stderr)
}

#[test]
fn broken_framing_ends_serve_with_the_reason_and_stray_line_breaks_do_not() {
    let broken: [(&[u8], &str); 11] = [
        (b"Content-Type: x\r\n\r\n{}", "without Content-Length"),
        (b"Content-Length: -1\r\n\r\n{}", "invalid Content-Length"),
        (b"Content-Length: 1000000000000\r\n\r\n{}", "too large"),
        (
            b"Content-Length: 18446744073709551617\r\n\r\n{}",
            "invalid Content-Length",
        ),
        (b"Content-Length: ten\r\n\r\n{}", "invalid Content-Length"),
        (
            b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
            "conflicting",
        ),
        (b"Content-Length: 2\r\n{}", "expected a header"),
        (b"this is not a header\r\n", "expected a header"),
        (b"Content-Length: \xff\r\n\r\n{}", "not UTF-8"),
        (&[b'x'; 10_000], "longer than"),
        (b"Content-Length: 1\r\n\r\n{}", "expected a header"),
    ];
    for (garbage, reason) in broken {
        let (status, stderr) = serve_fed(garbage);
        assert!(!status.success(), "{status} after {garbage:?}");
        assert!(
            stderr.contains("framing is broken") && stderr.contains(reason),
            "after {:?}: {stderr}",
            String::from_utf8_lossy(&garbage[..garbage.len().min(60)])
        );
    }

    // Stray line breaks between messages are skipped: the request after them is answered.
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let mut editor = Editor::start(agent_tests::agent_lsp_command(
        state.path(),
        &config,
        &root,
        &["serve"],
    ));
    editor.initialize(&root);
    editor.send_raw(b"\r\n\n\r\n");
    let answer = editor.request("nobody/knows", json!({}));
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    editor.shutdown();
}

/// A repository whose hooks live where `core.hooksPath` says (husky's `.husky/`): a hook the
/// model writes there would run at the next commit, so that folder is as protected as
/// `.git/hooks/`, whether it exists yet or not.
#[test]
fn the_hooks_folder_a_repository_configures_is_protected_like_git_hooks() {
    use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, ModelTurn, Reply};

    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    assert!(git(&root, &["init", "-q"]).status.success());
    assert!(
        git(&root, &["config", "core.hooksPath", ".husky"])
            .status
            .success()
    );
    let marker = root.join("pwned");
    let payload = format!("#!/bin/sh\ntouch {}\n", marker.display());
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all([
        Reply::from(
            ModelTurn::new()
                .tool_call(
                    "write",
                    json!({"path": ".husky/pre-commit", "content": payload}).to_string(),
                )
                .tool_call(
                    "write",
                    json!({"path": "notes.txt", "content": "ordinary\n"}).to_string(),
                ),
        ),
        Reply::text("Done."),
    ]);
    let results = run_turn(&root, &endpoint, "Add a hook.");
    assert_eq!(
        results.matches("is a protected path").count(),
        1,
        "{results}"
    );
    assert!(results.contains("core.hooksPath"), "{results}");
    assert!(!root.join(".husky/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        "ordinary\n"
    );
}

/// A session log holds prompts, tool results and file contents: it is the user's alone (0600),
/// in folders only the user can enter (0700), also where an earlier version left them 0755.
#[test]
fn session_logs_and_their_folders_are_the_users_alone() {
    use std::os::unix::fs::PermissionsExt;
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    std::fs::write(root.join("notes.txt"), "secret plans\n").unwrap();
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    // What an earlier version made with the usual umask.
    let workspaces = state.path().join("workspaces");
    std::fs::create_dir_all(&workspaces).unwrap();
    std::fs::set_permissions(&workspaces, std::fs::Permissions::from_mode(0o755)).unwrap();
    let output = agent_tests::agent_lsp_command(
        state.path(),
        &config,
        &root,
        &["tool", "read", "--args", r#"{"path": "notes.txt"}"#],
    )
    .output()
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&workspaces), 0o700);
    let workspace_dir = std::fs::read_dir(&workspaces)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert_eq!(mode(&workspace_dir), 0o700);
    let sessions = workspace_dir.join("sessions");
    assert_eq!(mode(&sessions), 0o700);
    let logs: Vec<_> = std::fs::read_dir(&sessions)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert!(!logs.is_empty());
    for log in logs {
        assert_eq!(mode(&log), 0o600, "{}", log.display());
    }
}

/// A cloned repository can carry a `.mcp.json` that is a link to `/dev/zero` or a FIFO, and an
/// AGENTS.md that links to a file outside it. Every command still finishes, saying what it did
/// not read, and nothing outside the workspace reaches the model.
#[test]
fn hostile_workspace_files_are_refused_with_a_reason_and_never_read_out_of_bounds() {
    use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, Reply};
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.md");
    std::fs::write(&secret, "SECRET-OUTSIDE-THE-WORKSPACE\n").unwrap();
    std::os::unix::fs::symlink(&secret, root.join("AGENTS.md")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", root.join(".mcp.json")).unwrap();
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let finishes = |args: &[&str]| {
        let mut child = agent_tests::agent_lsp_command(state.path(), &config, &root, args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("agent-lsp {args:?} did not finish");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        child.wait_with_output().unwrap()
    };
    let listed = finishes(&["mcp", "list"]);
    let said = String::from_utf8_lossy(&listed.stderr).into_owned();
    assert!(
        said.contains(".mcp.json is not read") && said.contains("outside the workspace"),
        "{said}"
    );
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all([Reply::text("Hello.")]);
    let ran = finishes(&["run", "--base-url", &endpoint.base_url(), "Hi."]);
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let request = endpoint.chat_requests()[0]
        .body
        .as_ref()
        .unwrap()
        .to_string();
    assert!(!request.contains("SECRET-OUTSIDE"), "{request}");

    // A FIFO is not waited on.
    std::fs::remove_file(root.join(".mcp.json")).unwrap();
    nix::unistd::mkfifo(&root.join(".mcp.json"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let listed = finishes(&["mcp", "list"]);
    let said = String::from_utf8_lossy(&listed.stderr).into_owned();
    assert!(said.contains("not a regular file"), "{said}");
}
