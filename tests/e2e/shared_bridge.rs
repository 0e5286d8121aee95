//! One warm bridge per workspace: a terminal `agent-lsp tool` beside an editor's `serve` is
//! answered by the editor's pyright over the editor's unsaved buffer, and starts no pyright of
//! its own; the owner killed, the next call still answers (and replaces the stale socket);
//! a remaining client takes over; an owner that answers garbage, or nothing, costs an answer
//! nothing but the warm servers; `agent-lsp servers` shows the owner's servers in its table.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_tests::cli::CliFixture;
use agent_tests::editor::Editor;
use agent_tests::processes::{alive, descendants, kill_and_wait};
use serde_json::{Value, json};

/// The pyright fixture: `main.py` calls `greet` from `app.py`.
struct Fixture {
    cli: CliFixture,
    root: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let cli = CliFixture::new("").with_files(&[
            ("pyrightconfig.json", "{}"),
            (
                "app.py",
                "def greet(name: str) -> str:\n    return 'hi ' + name\n",
            ),
            ("main.py", "from app import greet\n\nprint(greet('you'))\n"),
        ]);
        let root = cli.workspace.path().canonicalize().unwrap();
        Fixture { cli, root }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = self.cli.command(args);
        command.env("PATH", agent_tests::tools_path());
        command
    }

    /// `agent-lsp tool NAME --json --args ARGS`, its JSON answer.
    fn tool(&self, name: &str, args: Value) -> Value {
        let output = self
            .command(&["tool", name, "--json", "--args", &args.to_string()])
            .output()
            .unwrap();
        json_of(&output)
    }

    /// `tool` while counting, every 10 ms, the pyright processes it runs: the most seen at
    /// once, and the answer.
    fn tool_counting_pyrights(&self, name: &str, args: Value) -> (usize, Value) {
        let mut child = self
            .command(&["tool", name, "--json", "--args", &args.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut most = 0;
        while child.try_wait().unwrap().is_none() {
            most = most.max(pyrights_under(child.id()).len());
            std::thread::sleep(Duration::from_millis(10));
        }
        (most, json_of(&child.wait_with_output().unwrap()))
    }

    fn servers(&self) -> Value {
        json_of(&self.command(&["servers", "--json"]).output().unwrap())["bridge"].clone()
    }

    /// An editor's `serve` with `app.py` open and [`BUFFER_ONLY`] added to it unsaved, once
    /// pyright has analysed the buffer (the editor answers its `workspace/configuration`, as
    /// every editor does).
    fn editor_with_an_unsaved_symbol(&self) -> Editor {
        let mut editor = Editor::start(self.command(&["serve"]));
        editor.initialize(&self.root);
        let app = self.root.join("app.py");
        editor.open(&app, "python");
        let text = std::fs::read_to_string(&app).unwrap() + BUFFER_ONLY;
        editor.change(&app, &text);
        editor.wait_for("app.py's diagnostics", |message| {
            message["method"] == "textDocument/publishDiagnostics"
                && message["params"]["uri"] == agent_tests::editor::url(&app)
        });
        editor
    }

    fn workspace_dir(&self) -> PathBuf {
        self.cli.store().workspace_dir().to_owned()
    }
}

fn json_of(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "{error}: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// The pyright language servers running under `pid`.
fn pyrights_under(pid: u32) -> Vec<u32> {
    descendants(pid)
        .into_iter()
        .filter(|(_, line)| line.contains("pyright-langserver"))
        .map(|(pid, _)| pid)
        .collect()
}

const BUFFER_ONLY: &str =
    "def only_in_the_editors_buffer(count: int) -> int:\n    return count * 2\n";

#[test]
fn a_terminal_tool_uses_the_editors_warm_pyright_and_buffer_and_takes_over_when_it_dies() {
    let fixture = Fixture::new();
    let mut editor = fixture.editor_with_an_unsaved_symbol();
    let editors_pyright = pyrights_under(editor.pid());
    assert_eq!(editors_pyright.len(), 1);
    let owner = fixture.servers();
    assert_eq!(owner["state"], "owned", "{owner}");
    assert_eq!(owner["owner"]["role"], "serve");
    assert_eq!(owner["owner"]["pid"], editor.pid());

    let (most, answer) = while_pumping(&mut editor, || {
        fixture.tool_counting_pyrights(
            "lsp_workspace_symbols",
            json!({"query": "only_in_the_editors_buffer"}),
        )
    });
    let text = answer["text"].as_str().unwrap();
    assert!(
        text.contains("only_in_the_editors_buffer") && text.contains("app.py"),
        "{answer}"
    );
    assert_eq!(answer["meta"]["bridge"]["owner"], "serve", "{answer}");
    assert_eq!(answer["meta"]["bridge"]["pid"], editor.pid());
    assert_eq!(most, 0, "the terminal's call started a pyright of its own");
    assert_eq!(pyrights_under(editor.pid()), editors_pyright);
    // The call is the terminal's: recorded in its own session.
    let session = answer["session"].as_str().unwrap();
    let shown = fixture
        .command(&["session", "show", session, "--json"])
        .output()
        .unwrap();
    assert!(output_text(&shown).contains("only_in_the_editors_buffer"));

    // The owner dies without a word: its socket stays, its lock goes.
    let socket = fixture.workspace_dir().join("bridge.sock");
    assert!(socket.exists());
    let server = editor.pid();
    kill_and_wait(server);
    drop(editor);
    assert_eq!(fixture.servers()["state"], "stale");
    let answer = fixture.tool(
        "lsp_definition",
        json!({"path": "main.py", "line": 3, "symbol": "greet"}),
    );
    assert_eq!(answer["is_error"], false, "{answer}");
    assert!(
        answer["text"]
            .as_str()
            .unwrap()
            .contains("app.py\n  1:5  def greet"),
        "{answer}"
    );
    assert!(answer["meta"].get("bridge").is_none(), "{answer}");
    // The call took the bridge over and let it go when it ended: nothing is left behind.
    assert_eq!(fixture.servers()["state"], "none");
    assert!(!socket.exists());
    assert!(!alive(server));
}

#[test]
fn servers_shows_the_owners_servers_in_its_table_not_as_not_started() {
    let fixture = Fixture::new();
    let mut editor = Editor::start(fixture.command(&["serve"]));
    editor.initialize(&fixture.root);
    let app = fixture.root.join("app.py");
    editor.open(&app, "python");
    editor.wait_for("app.py's diagnostics", |message| {
        message["method"] == "textDocument/publishDiagnostics"
            && message["params"]["uri"] == agent_tests::editor::url(&app)
    });
    let pyright = pyrights_under(editor.pid());
    assert_eq!(pyright.len(), 1);
    let output = while_pumping(&mut editor, || {
        fixture.command(&["servers"]).output().unwrap()
    });
    let text = output_text(&output);
    // The bridge line and the table say the same: pyright runs, in the editor's `serve`.
    assert!(
        text.lines()
            .next()
            .unwrap()
            .contains(&format!("its servers: pyright ready (pid {})", pyright[0])),
        "{text}"
    );
    let row = text
        .lines()
        .find(|line| line.starts_with("pyright "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        row.ends_with(&format!(
            "ready (pid {}) in the bridge's owner, `agent-lsp serve` (pid {})",
            pyright[0],
            editor.pid()
        )),
        "{text}"
    );
    assert!(!text.contains("not started"), "{text}");
    let json = while_pumping(&mut editor, || {
        json_of(&fixture.command(&["servers", "--json"]).output().unwrap())
    });
    let row = json["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["name"] == "pyright")
        .unwrap();
    assert_eq!(row["in_owner"]["pid"], pyright[0], "{json}");
    editor.shutdown();
}

/// An ACP agent (`agent-lsp acp`, as Zed starts it beside our language server) answers its
/// `lsp_*` calls from the editor's warm pyright and unsaved buffer, as `tool` does.
#[test]
fn an_acp_agent_beside_the_editor_uses_its_warm_pyright() {
    use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, Reply};
    let fixture = Fixture::new();
    let mut editor = fixture.editor_with_an_unsaved_symbol();
    let editors_pyright = pyrights_under(editor.pid());
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all([
        Reply::tool_call(
            "lsp_workspace_symbols",
            r#"{"query":"only_in_the_editors_buffer"}"#,
        ),
        Reply::text("found it"),
    ]);
    let request = json!({
        "command": agent_tests::workspace_bin("agent-lsp"),
        "args": ["acp", "--base-url", endpoint.base_url()],
        "env": {
            "PATH": agent_tests::tools_path().to_str().unwrap(),
            "HOME": fixture.cli.state.path(),
            "AGENT_LSP_STATE_DIR": fixture.cli.state.path(),
            "AGENT_LSP_CONFIG": fixture.cli.config,
        },
        "cwd": fixture.root,
        "steps": [{"do": "new"}, {"do": "prompt", "text": "where is it?"}],
    });
    let seen = while_pumping(&mut editor, || {
        crate::acp::acp_client("client.mjs", request)
    });
    let turn = &seen["steps"][1];
    assert_eq!(turn["response"]["stopReason"], "end_turn", "{turn}");
    let result = crate::acp::updates_of(turn, "tool_call_update")
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no result: {turn}"));
    assert!(
        result.to_string().contains("only_in_the_editors_buffer"),
        "{result}"
    );
    // Answered by the editor's server, whose pyright is the only one.
    let session = turn["session"].as_str().unwrap();
    let log = std::fs::read_to_string(fixture.cli.store().path_of(session)).unwrap();
    let answered = log
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|event| event["kind"] == "tool/result")
        .unwrap();
    assert_eq!(
        answered["payload"]["meta"]["bridge"]["owner"], "serve",
        "{answered}"
    );
    assert_eq!(answered["payload"]["meta"]["bridge"]["pid"], editor.pid());
    assert_eq!(pyrights_under(editor.pid()), editors_pyright);
    endpoint.assert_no_violations();
}

/// Run `call` while the editor keeps reading the server, as a real one does.
fn while_pumping<T: Send>(editor: &mut Editor, call: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| {
        let call = scope.spawn(call);
        while !call.is_finished() {
            editor.pump(Duration::from_millis(20));
        }
        call.join().unwrap()
    })
}

fn output_text(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `agent-lsp mcp serve` as a long-lived process with a line-oriented MCP session on its stdin.
struct McpServe {
    child: std::process::Child,
    lines: BufReader<std::process::ChildStdout>,
    next: u64,
}

impl McpServe {
    fn start(fixture: &Fixture) -> McpServe {
        let mut child = fixture
            .command(&["mcp", "serve"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap());
        let mut serve = McpServe {
            child,
            lines,
            next: 1,
        };
        serve.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}),
        );
        serve.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        serve
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            assert!(
                self.lines.read_line(&mut line).unwrap() > 0,
                "mcp serve closed"
            );
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }

    /// `lsp_definition` of `greet` in main.py, which must find it in app.py.
    fn finds_greet(&mut self) {
        let answer = self.call(
            "lsp_definition",
            json!({"path": "main.py", "line": 3, "symbol": "greet"}),
        );
        assert!(answer.contains("app.py\n  1:5  def greet"), "{answer}");
    }

    /// Call an `lsp_*` tool: the text it answered.
    fn call(&mut self, name: &str, arguments: Value) -> String {
        let answer = self.request("tools/call", json!({"name": name, "arguments": arguments}));
        assert!(
            answer["result"].is_object() && answer["result"]["isError"] != true,
            "{answer}"
        );
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned()
    }
}

#[test]
fn a_remaining_client_takes_over_and_later_processes_attach_to_it() {
    let fixture = Fixture::new();
    let definition = json!({"path": "main.py", "line": 3, "symbol": "greet"});
    // The first `mcp serve` owns the bridge once it queries; the second attaches to it.
    let mut first = McpServe::start(&fixture);
    first.finds_greet();
    let owner = fixture.servers();
    assert_eq!(owner["owner"]["role"], "mcp serve", "{owner}");
    assert_eq!(owner["owner"]["pid"], first.child.id());
    let mut second = McpServe::start(&fixture);
    second.finds_greet();
    assert_eq!(fixture.servers()["owner"]["pid"], first.child.id());
    assert!(
        descendants(second.child.id())
            .iter()
            .all(|(_, line)| !line.contains("pyright")),
        "the attached process started a pyright"
    );

    // The owner is killed: the client's next call answers, and it owns the bridge now.
    kill_and_wait(first.child.id());
    let _ = first.child.wait();
    second.finds_greet();
    let owner = fixture.servers();
    assert_eq!(owner["owner"]["pid"], second.child.id(), "{owner}");
    assert_eq!(owner["owner"]["servers"][0]["name"], "pyright", "{owner}");
    // A terminal call now uses the new owner's pyright.
    let answer = fixture.tool("lsp_definition", definition);
    assert_eq!(
        answer["meta"]["bridge"]["pid"],
        second.child.id(),
        "{answer}"
    );
    drop(second.child.stdin.take());
    let _ = second.child.wait();
}

/// An owner stopped with SIGSTOP keeps its lock and its socket (the kernel even accepts the
/// connection) but answers nothing, heartbeat included: an attached client's next call is
/// answered from its own servers within seconds, not at the tool's 60 s timeout, and later
/// calls do not wait for the stopped owner again.
#[test]
fn a_stopped_owner_costs_an_attached_call_seconds_not_its_timeout() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let fixture = Fixture::new();
    let mut first = McpServe::start(&fixture);
    first.finds_greet();
    let mut second = McpServe::start(&fixture);
    second.finds_greet();
    assert_eq!(fixture.servers()["owner"]["pid"], first.child.id());

    let owner = Pid::from_raw(first.child.id() as i32);
    kill(owner, Signal::SIGSTOP).unwrap();
    let started = std::time::Instant::now();
    second.finds_greet();
    let first_call = started.elapsed();
    assert!(
        descendants(second.child.id())
            .iter()
            .any(|(_, line)| line.contains("pyright")),
        "the client answered from the stopped owner's servers?"
    );
    let started = std::time::Instant::now();
    second.finds_greet();
    let next_call = started.elapsed();
    eprintln!("with the owner stopped: the first call took {first_call:?}, the next {next_call:?}");
    // Bounds far under the 60 s the call used to wait: 2 s of silence, then a cold pyright.
    assert!(
        first_call < Duration::from_secs(30),
        "the first call took {first_call:?}"
    );
    assert!(
        next_call < Duration::from_secs(10),
        "the next call took {next_call:?}"
    );
    kill(owner, Signal::SIGCONT).unwrap();
    drop(second.child.stdin.take());
    drop(first.child.stdin.take());
    let _ = second.child.wait();
    let _ = first.child.wait();
}

/// A process that holds the workspace's bridge lock and listens on its socket, answering every
/// request with `answer` (or never, with `None`).
fn impostor(fixture: &Fixture, answer: Option<&'static str>) -> (std::fs::File, Arc<Mutex<u32>>) {
    let dir = fixture.workspace_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join("bridge.lock"))
        .unwrap();
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).unwrap();
    let listener = UnixListener::bind(dir.join("bridge.sock")).unwrap();
    let asked = Arc::new(Mutex::new(0));
    {
        let asked = asked.clone();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming().flatten() {
                *asked.lock().unwrap() += 1;
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                match answer {
                    Some(answer) => {
                        let mut stream = stream;
                        let _ = writeln!(stream, "{answer}");
                    }
                    None => held.push(stream),
                }
            }
        });
    }
    (lock, asked)
}

#[test]
fn an_owner_that_answers_garbage_or_nothing_costs_the_answer_nothing() {
    for answer in [Some("{\"answer\": \"what\"}"), Some("not json"), None] {
        let fixture = Fixture::new();
        let (_lock, asked) = impostor(&fixture, answer);
        let result = fixture.tool(
            "lsp_definition",
            json!({"path": "main.py", "line": 3, "symbol": "greet"}),
        );
        assert_eq!(result["is_error"], false, "{answer:?}: {result}");
        assert!(
            result["text"]
                .as_str()
                .unwrap()
                .contains("app.py\n  1:5  def greet"),
            "{answer:?}: {result}"
        );
        assert!(result["meta"].get("bridge").is_none(), "{result}");
        assert!(
            *asked.lock().unwrap() >= 1,
            "{answer:?}: the socket was not tried"
        );
        if answer.is_none() {
            assert_eq!(fixture.servers()["state"], "silent");
        }
    }
}

/// Something planted where the bridge's lock goes: a FIFO (opening it for writing would wait
/// for a reader forever) or a dangling link (opening it would create its target elsewhere).
/// A call neither hangs nor creates anything: it answers from its own servers.
#[test]
fn a_fifo_or_a_dangling_link_for_the_lock_neither_hangs_a_call_nor_creates_its_target() {
    let fixture = Fixture::new();
    let definition = json!({"path": "main.py", "line": 3, "symbol": "greet"});
    let dir = fixture.workspace_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let lock = dir.join("bridge.lock");
    nix::unistd::mkfifo(&lock, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let answer = fixture.tool("lsp_definition", definition.clone());
    assert_eq!(answer["is_error"], false, "{answer}");
    assert!(
        answer["text"]
            .as_str()
            .unwrap()
            .contains("app.py\n  1:5  def greet"),
        "{answer}"
    );
    std::fs::remove_file(&lock).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let target = elsewhere.path().join("created-by-agent-lsp");
    std::os::unix::fs::symlink(&target, &lock).unwrap();
    let answer = fixture.tool("lsp_definition", definition);
    assert_eq!(answer["is_error"], false, "{answer}");
    assert!(!target.exists(), "the link's target was created");
}
