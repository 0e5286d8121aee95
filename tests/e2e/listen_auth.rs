//! `agent-lsp serve --listen` against other local processes: a TCP client without the server's
//! token (or with a wrong one) is refused at `initialize` and closed, and its command never
//! runs; the token comes from a file only the user can read; an idle connection neither
//! blocks other editors nor stays open; a Unix socket is the user's alone and needs no token.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_tests::editor::Editor;
use serde_json::{Value, json};

/// A workspace and the state and runtime directories of the server.
struct Setup {
    _dir: tempfile::TempDir,
    root: PathBuf,
    state: PathBuf,
    runtime: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let root = base.join("workspace");
        agent_tests::write_tree(&root, &[("notes.txt", "listen here\n")]);
        let (state, runtime) = (base.join("state"), base.join("run"));
        for dir in [&state, &runtime] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(state.join("config.toml"), "").unwrap();
        Setup {
            _dir: dir,
            root,
            state,
            runtime,
        }
    }

    /// `agent-lsp serve --listen ADDRESS EXTRA…`, its runtime directory this setup's own.
    fn listen(&self, address: &str, extra: &[&str]) -> Listening {
        let mut args = vec!["serve", "--listen", address];
        args.extend_from_slice(extra);
        let mut command = agent_tests::agent_lsp_command(
            &self.state,
            &self.state.join("config.toml"),
            &self.root,
            &args,
        );
        let mut process = command
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The token file's path (unless it is a Unix socket or --token-file), then the address.
        let mut stderr = BufReader::new(process.stderr.take().unwrap());
        let mut lines = Vec::new();
        let address = loop {
            let mut line = String::new();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "no address printed: {lines:?}"
            );
            lines.push(line.clone());
            if let Some(address) = line.trim().strip_prefix("agent-lsp: listening on ") {
                break address.to_owned();
            }
        };
        let token_file = lines.iter().find_map(|line| {
            let rest = line.trim().strip_prefix("agent-lsp: token in ")?;
            Some(PathBuf::from(rest.split(" (").next()?))
        });
        let stderr_lines = Arc::new(Mutex::new(lines));
        let seen = stderr_lines.clone();
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                eprintln!("server: {line}");
                seen.lock().unwrap().push(line);
            }
        });
        Listening {
            process,
            address,
            token_file,
            stderr: stderr_lines,
        }
    }

    /// Where the planted command of test `name` would leave its mark: in the workspace, which
    /// the `standard` preset's sandbox lets a command write, so only the listener's admission
    /// decides whether it appears.
    fn mark(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }
}

struct Listening {
    process: Child,
    address: String,
    /// The generated token's file, as printed.
    token_file: Option<PathBuf>,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Listening {
    fn token(&self) -> String {
        let path = self.token_file.as_ref().expect("a token file was printed");
        std::fs::read_to_string(path).unwrap().trim().to_owned()
    }

    /// How many sockets the server process has open (its listener and its connections).
    fn sockets(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.process.id()))
            .unwrap()
            .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
            .filter(|target| target.to_string_lossy().starts_with("socket:"))
            .count()
    }

    fn tcp(&self) -> std::net::TcpStream {
        let stream = std::net::TcpStream::connect(&self.address).unwrap();
        stream.set_nodelay(true).unwrap();
        stream
    }

    /// An editor on a new TCP connection, answering permission prompts with Allow.
    fn editor(&self) -> Editor {
        let stream = self.tcp();
        let mut editor = Editor::over(stream.try_clone().unwrap(), stream);
        editor.message_answer = Some("Allow".into());
        editor
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

fn framed(message: &Value) -> Vec<u8> {
    let body = serde_json::to_vec(message).unwrap();
    let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    frame.extend_from_slice(&body);
    frame
}

/// `agent.tool shell` running `command`, as request `id`.
fn shell(id: i64, command: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "workspace/executeCommand",
           "params": {"command": "agent.tool",
                      "arguments": [{"name": "shell", "arguments": {"command": command}}]}})
}

fn tool(editor: &mut Editor, name: &str, arguments: Value) -> Value {
    editor.request(
        "workspace/executeCommand",
        json!({"command": "agent.tool", "arguments": [{"name": name, "arguments": arguments}]}),
    )
}

/// An admitted editor's `shell` tool runs: it creates `mark`.
fn assert_shell_runs(editor: &mut Editor, mark: &Path) {
    let ran = tool(
        editor,
        "shell",
        json!({"command": format!("touch {}", mark.display())}),
    );
    assert_eq!(ran["result"]["is_error"], false, "{ran}");
    assert!(mark.exists(), "{ran}");
}

/// Send `initialize` with `options` and, right behind it without waiting, a planted `shell`
/// command that would create `mark`; returns the answer to `initialize`, after checking the
/// connection was closed and the command never ran.
fn intrude(setup: &Setup, server: &Listening, options: Value, mark: &Path) -> Value {
    let before = server.sockets();
    let mut editor = server.editor();
    let mut bytes = framed(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                   "params": editor.initialize_params(&setup.root, options)}));
    bytes.extend(framed(&shell(2, &format!("touch {}", mark.display()))));
    bytes.extend(framed(
        &json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}),
    ));
    editor.send_raw(&bytes);
    let answer = editor.response(1);
    assert!(answer.get("error").is_some(), "admitted: {answer}");
    assert!(
        editor.closed_within(Duration::from_secs(30)),
        "the refused connection stayed open"
    );
    // Nothing answered the command: the connection closed without running it.
    assert!(
        !editor.backlog.iter().any(|message| message["id"] == 2),
        "{:?}",
        editor.backlog
    );
    assert!(!mark.exists(), "the planted command ran");
    // Closed on the server's side too, not only ended: it holds nothing of the connection
    // once the peer has gone (after a refusal it reads what the peer still sends for a moment).
    drop(editor);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while server.sockets() > before {
        assert!(
            std::time::Instant::now() < deadline,
            "the server still holds the refused connection"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    answer
}

#[test]
fn an_unauthenticated_tcp_client_is_refused_and_its_command_never_runs() {
    let setup = Setup::new();
    let server = setup.listen("127.0.0.1:0", &[]);
    let answer = intrude(
        &setup,
        &server,
        json!({"model": "m"}),
        &setup.mark("no-token"),
    );
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("initializationOptions.token is missing"),
        "{answer}"
    );
    assert!(!message.contains(&server.token()), "{answer}");

    // A command sent before any `initialize` is refused too, and the connection closed.
    let mark = setup.mark("before-initialize");
    let mut early = server.editor();
    early.send_raw(&framed(&shell(1, &format!("touch {}", mark.display()))));
    let answer = early.response(1);
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("before `initialize`")),
        "{answer}"
    );
    assert!(early.closed_within(Duration::from_secs(30)));
    assert!(!mark.exists(), "the command sent before initialize ran");

    // The server is still there for an editor with the token.
    let mut editor = server.editor();
    editor.initialize_with(&setup.root, json!({"token": server.token()}));
    editor.shutdown();
}

#[test]
fn a_wrong_token_is_refused_without_a_hint_of_the_right_one() {
    let setup = Setup::new();
    let server = setup.listen("127.0.0.1:0", &[]);
    let token = server.token();
    // Off by its last character, and the right one with something after it.
    let mut near = token.clone();
    near.pop();
    near.push(if token.ends_with('0') { '1' } else { '0' });
    for (name, wrong) in [("near", near), ("longer", format!("{token}x"))] {
        let answer = intrude(&setup, &server, json!({"token": wrong}), &setup.mark(name));
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("initializationOptions.token is wrong"),
            "{answer}"
        );
        assert!(!message.contains(&token[..8]), "{answer}");
    }
    let log = server.stderr.lock().unwrap().join("\n");
    assert!(log.contains("connection refused"), "{log}");
    assert!(!log.contains(&token), "the token was printed: {log}");
}

#[test]
fn the_token_from_its_private_file_admits_an_editor_whose_commands_run() {
    let setup = Setup::new();
    let server = setup.listen("127.0.0.1:0", &[]);
    let path = server
        .token_file
        .clone()
        .expect("the token file's path is printed");
    assert!(path.starts_with(&setup.runtime), "{}", path.display());
    let mode = |path: &Path| std::fs::metadata(path).unwrap().mode() & 0o777;
    assert_eq!(mode(&path), 0o600, "{}", path.display());
    assert_eq!(mode(path.parent().unwrap()), 0o700);
    assert!(server.token().len() >= 32);
    let printed = server.stderr.lock().unwrap().join("\n");
    assert!(!printed.contains(&server.token()), "{printed}");

    let mut editor = server.editor();
    let init = editor.initialize_with(&setup.root, json!({"token": server.token()}));
    assert_eq!(init["serverInfo"]["name"], "agent-lsp");
    let read = tool(&mut editor, "read", json!({"path": "notes.txt"}));
    assert!(
        read["result"]["text"]
            .as_str()
            .unwrap()
            .contains("listen here"),
        "{read}"
    );
    assert_shell_runs(&mut editor, &setup.mark("allowed"));
    editor.shutdown();

    // The listener goes on: the next editor is served too.
    let mut next = server.editor();
    next.initialize_with(&setup.root, json!({"token": server.token()}));
    next.shutdown();
}

#[test]
fn a_token_file_must_be_the_users_alone() {
    let setup = Setup::new();
    let path = setup.state.join("my.token");
    let secret = "a-secret-of-my-own-0123456789";
    std::fs::write(&path, format!("{secret}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let output = agent_tests::agent_lsp_command(
        &setup.state,
        &setup.state.join("config.toml"),
        &setup.root,
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--token-file",
            path.to_str().unwrap(),
        ],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("chmod 600"), "{stderr}");
    assert!(!stderr.contains(secret), "{stderr}");

    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let server = setup.listen("127.0.0.1:0", &["--token-file", path.to_str().unwrap()]);
    assert!(server.token_file.is_none(), "a token was generated anyway");
    let mut editor = server.editor();
    editor.initialize_with(&setup.root, json!({"token": secret}));
    editor.shutdown();
}

#[test]
fn an_idle_connection_neither_blocks_another_editor_nor_stays_open() {
    let setup = Setup::new();
    let server = setup.listen("127.0.0.1:0", &[]);
    // A connection that never sends anything…
    let mut silent = server.tcp();
    silent
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    // …and an editor that initialized and then does nothing.
    let mut idle = server.editor();
    idle.initialize_with(&setup.root, json!({"token": server.token()}));

    let mut editor = server.editor();
    editor.initialize_with(&setup.root, json!({"token": server.token()}));
    let read = tool(&mut editor, "read", json!({"path": "notes.txt"}));
    assert!(
        read["result"]["text"]
            .as_str()
            .unwrap()
            .contains("listen here"),
        "{read}"
    );
    editor.shutdown();

    // The silent one is closed by the server (within the admission window; 60 s is only the
    // bound of this wait), without an answer.
    let mut received = Vec::new();
    match silent.read_to_end(&mut received) {
        Ok(_) => assert!(
            received.is_empty(),
            "{}",
            String::from_utf8_lossy(&received)
        ),
        Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(error) => panic!("the silent connection is still open: {error}"),
    }
    // The idle editor was served all along, and still is.
    let read = tool(&mut idle, "read", json!({"path": "notes.txt"}));
    assert!(read["result"]["text"].as_str().is_some(), "{read}");
    idle.shutdown();
}

#[test]
fn a_unix_socket_is_the_users_alone_and_needs_no_token() {
    let setup = Setup::new();
    let socket = setup.runtime.join("agent.sock");
    let address = format!("unix:{}", socket.display());
    let server = setup.listen(&address, &[]);
    assert_eq!(server.address, address);
    let metadata = std::fs::symlink_metadata(&socket).unwrap();
    assert!(metadata.file_type().is_socket());
    assert_eq!(metadata.mode() & 0o777, 0o600, "{:o}", metadata.mode());
    // Ours: the same owner as the directories this test made.
    assert_eq!(
        metadata.uid(),
        std::fs::metadata(&setup.state).unwrap().uid()
    );

    let stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    let mut editor = Editor::over(stream.try_clone().unwrap(), stream);
    editor.message_answer = Some("Allow".into());
    editor.initialize(&setup.root);
    assert_shell_runs(&mut editor, &setup.mark("over-unix"));
    editor.shutdown();
    drop(server);

    // Something at the path that is not a socket of ours is refused, and left alone.
    let file = setup.runtime.join("not-a-socket");
    std::fs::write(&file, "keep me").unwrap();
    let output = agent_tests::agent_lsp_command(
        &setup.state,
        &setup.state.join("config.toml"),
        &setup.root,
        &["serve", "--listen", &format!("unix:{}", file.display())],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("is not a socket of yours"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
}
