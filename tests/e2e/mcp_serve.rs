//! `agent-lsp mcp serve` driven by real MCP clients: the TypeScript SDK's (tests/mcp/client.mjs,
//! installed by .ci/tools.sh) lists the tools and calls them on the pyright fixture over stdio
//! and over streamable HTTP, and its `lsp_definition` answer is compared with `agent-lsp tool`'s;
//! the MCP Inspector's CLI mode does the same; raw JSON-RPC lines check that malformed requests
//! get errors and the server keeps serving, and raw HTTP requests that the HTTP server refuses
//! other hosts and origins (DNS rebinding) and addresses that are not loopback.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

/// How long any one answer may take (pyright's first start included).
const WAIT: Duration = Duration::from_secs(90);

const DEFINITION_ARGS: &str = r#"{"path":"main.py","line":5,"symbol":"größe_von"}"#;

/// Run tests/mcp/client.mjs against `agent-lsp --workspace WORKSPACE mcp serve EXTRA…` and
/// return what it saw.
fn mcp_client(workspace: &Path, state: &Path, extra: &[&str], calls: Value) -> Value {
    let mut args = vec![
        "--workspace".to_owned(),
        workspace.display().to_string(),
        "mcp".to_owned(),
        "serve".to_owned(),
    ];
    args.extend(extra.iter().map(|arg| arg.to_string()));
    run_client(json!({
        "command": agent_tests::workspace_bin("agent-lsp"),
        "args": args,
        "env": {
            "PATH": agent_tests::tools_path().to_str().unwrap(),
            "HOME": state,
            "AGENT_LSP_STATE_DIR": state,
            "AGENT_LSP_CONFIG": state.join("none.toml"),
        },
        "calls": calls,
    }))
}

/// Run tests/mcp/client.mjs with `request` (a server to start, or a `url` to connect to) and
/// return what it saw.
fn run_client(request: Value) -> Value {
    agent_tests::node_client("mcp/client.mjs", &request)
}

fn tool_names(seen: &Value) -> Vec<&str> {
    seen["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect()
}

#[test]
fn an_mcp_client_lists_the_tools_and_gets_what_agent_lsp_tool_answers() {
    let workspace = agent_tests::fixture("python");
    let state = tempfile::tempdir().unwrap();
    let seen = mcp_client(
        workspace.path(),
        state.path(),
        &[],
        json!([
            {"name": "lsp_definition", "arguments": serde_json::from_str::<Value>(DEFINITION_ARGS).unwrap()},
            {"name": "shell", "arguments": {"command": "true"}},
            {"name": "files", "arguments": {"query": "geometry"}},
            {"name": "lsp_definition", "arguments": {"path": "main.py"}},
            {"name": "session_list", "arguments": {}},
        ]),
    );

    assert_eq!(seen["server"]["name"], "agent-lsp");
    assert_eq!(seen["server"]["version"], env!("CARGO_PKG_VERSION"));
    assert!(
        seen["instructions"]
            .as_str()
            .unwrap()
            .contains("lsp_definition")
    );
    assert!(seen["capabilities"]["tools"].is_object(), "{seen}");

    let names = tool_names(&seen);
    for name in [
        "lsp_definition",
        "lsp_references",
        "lsp_hover",
        "files",
        "read",
        "glob",
        "grep",
        "session_list",
        "session_show",
    ] {
        assert!(names.contains(&name), "{name} is missing from {names:?}");
    }
    for name in ["write", "edit", "shell", "task", "memory", "web_fetch"] {
        assert!(!names.contains(&name), "{name} is listed: {names:?}");
    }
    let definition = seen["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == "lsp_definition")
        .unwrap();
    assert_eq!(definition["inputSchema"]["type"], "object");
    assert!(definition["inputSchema"]["properties"]["symbol"].is_object());
    assert!(!definition["description"].as_str().unwrap().is_empty());
    assert_eq!(definition["annotations"]["readOnlyHint"], true);

    // The same call through `agent-lsp tool`, on the same workspace.
    let output = Command::new(agent_tests::workspace_bin("agent-lsp"))
        .env("PATH", agent_tests::tools_path())
        .env("AGENT_LSP_STATE_DIR", state.path())
        .env("AGENT_LSP_CONFIG", state.path().join("none.toml"))
        .arg("--workspace")
        .arg(workspace.path())
        .args(["tool", "lsp_definition", "--args", DEFINITION_ARGS])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let expected = String::from_utf8(output.stdout).unwrap();
    let calls = seen["calls"].as_array().unwrap();
    let answer = &calls[0]["result"];
    assert_eq!(answer["isError"], false, "{answer}");
    assert_eq!(
        answer["content"][0]["text"].as_str().unwrap().trim_end(),
        expected.trim_end()
    );
    assert!(expected.contains("pkg/geometry.py\n  14:5  def größe_von"));

    // A tool the server does not expose is an unroutable request: invalid params (-32602).
    assert_eq!(calls[1]["error"]["code"], -32602, "{}", calls[1]);
    assert!(
        calls[1]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("shell")
    );
    // The server is still up, and the `@path` ranking answers.
    let files = calls[2]["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(files.lines().next(), Some("pkg/geometry.py"), "{files}");
    // A call the tool refuses is a result with isError, with the tool's own words.
    assert_eq!(calls[3]["result"]["isError"], true, "{}", calls[3]);
    assert!(
        calls[3]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("invalid arguments for `lsp_definition`")
    );
    // Every call was recorded in the server's own session, which session_list shows.
    let sessions: Value =
        serde_json::from_str(calls[4]["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    let server_session = calls[0]["result"]["_meta"]["agent-lsp/session"]
        .as_str()
        .unwrap();
    let row = sessions
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["id"] == server_session)
        .unwrap_or_else(|| panic!("{server_session} is not in {sessions}"));
    assert_eq!(row["preset"], "readonly");
}

#[test]
fn allow_write_adds_write_and_edit_and_nothing_else() {
    let workspace = agent_tests::fixture("python");
    let state = tempfile::tempdir().unwrap();
    let seen = mcp_client(
        workspace.path(),
        state.path(),
        &["--allow-write"],
        json!([{"name": "write", "arguments": {"path": "notes.txt", "content": "hello\n"}}]),
    );
    let names = tool_names(&seen);
    assert!(
        names.contains(&"write") && names.contains(&"edit"),
        "{names:?}"
    );
    assert!(!names.contains(&"shell"), "{names:?}");
    let write = seen["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == "write")
        .unwrap();
    assert_eq!(write["annotations"]["readOnlyHint"], false);
    assert_eq!(seen["calls"][0]["result"]["isError"], false, "{seen}");
    assert_eq!(
        std::fs::read_to_string(workspace.path().join("notes.txt")).unwrap(),
        "hello\n"
    );
}

/// Malformed JSON-RPC on the server's stdin, line by line as the stdio transport frames it.
#[test]
fn malformed_requests_get_json_rpc_errors_and_the_server_keeps_serving() {
    let workspace = agent_tests::fixture("python");
    let state = tempfile::tempdir().unwrap();
    let mut child = agent_tests::agent_lsp_command(
        state.path(),
        &state.path().join("none.toml"),
        workspace.path(),
        &["mcp", "serve"],
    )
    .env("PATH", agent_tests::tools_path())
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (lines, answers) = mpsc::channel::<Value>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = lines.send(serde_json::from_str(&line).expect("every line is JSON"));
        }
    });
    let mut send = |line: &str| {
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    };
    // Every answer with a null id seen while waiting for others (only parse errors have one).
    let parse_errors = std::sync::Mutex::new(Vec::new());
    let answer_to = |id: &Value| loop {
        let message = answers.recv_timeout(WAIT).expect("an answer in time");
        if &message["id"] == id {
            break message;
        }
        if message.get("id") == Some(&Value::Null) {
            parse_errors.lock().unwrap().push(message);
        }
    };
    let answer = |id: i64| answer_to(&json!(id));

    send(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#,
    );
    assert_eq!(answer(1)["result"]["serverInfo"]["name"], "agent-lsp");
    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);

    // A line that is not JSON has no id to answer: a parse error with a null id, and the
    // server reads on.
    send("this is not json");
    send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":7}}"#);
    let error = answer(2);
    let refused = parse_errors.lock().unwrap().clone();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["jsonrpc"], "2.0", "{}", refused[0]);
    assert_eq!(refused[0]["error"]["code"], -32700, "{}", refused[0]);
    let message = refused[0]["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("Parse error: "), "{message}");
    assert!(error["error"]["code"].is_i64(), "{error}");
    // JSON that is no JSON-RPC 2.0 message: an invalid request, answered to its id if it
    // has one.
    send("42");
    send(r#"{"jsonrpc":"1.0","id":"old","method":"ping"}"#);
    let old = answer_to(&json!("old"));
    assert_eq!(old["error"]["code"], -32600, "{old}");
    send(r#"{"jsonrpc":"2.0","id":3,"method":"no/such/method","params":{}}"#);
    let error = answer(3);
    assert_eq!(error["error"]["code"], -32601, "{error}");
    send(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"no_such_tool"}}"#);
    assert_eq!(answer(4)["error"]["code"], -32602);

    send(r#"{"jsonrpc":"2.0","id":5,"method":"tools/list"}"#);
    let listed = answer(5);
    assert!(
        listed["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|tool| tool["name"] == "lsp_definition"),
        "{listed}"
    );

    // Closing stdin ends the server cleanly, with no other parse error written.
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    let late: Vec<Value> = answers.try_iter().collect();
    assert!(late.is_empty(), "{late:?}");
    let refused = parse_errors.lock().unwrap();
    let codes: Vec<&Value> = refused
        .iter()
        .map(|error| &error["error"]["code"])
        .collect();
    assert_eq!(codes, [&json!(-32700), &json!(-32600)], "{refused:?}");
}

/// `agent-lsp tool lsp_definition` on `workspace`, the answer every MCP client must get.
fn tool_definition(workspace: &Path, state: &Path) -> String {
    let output = agent_tests::agent_lsp_command(
        state,
        &state.join("none.toml"),
        workspace,
        &["tool", "lsp_definition", "--args", DEFINITION_ARGS],
    )
    .env("PATH", agent_tests::tools_path())
    .output()
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// `agent-lsp mcp serve --http 127.0.0.1:0` on a workspace, stopped with SIGTERM on drop.
pub(crate) struct HttpServer {
    pub(crate) child: Child,
    /// `http://127.0.0.1:PORT/mcp`, as the server printed it.
    pub(crate) url: String,
    pub(crate) port: u16,
}

impl HttpServer {
    pub(crate) fn start(workspace: &Path, state: &Path) -> HttpServer {
        let mut child = agent_tests::agent_lsp_command(
            state,
            &state.join("none.toml"),
            workspace,
            &["mcp", "serve", "--http", "127.0.0.1:0"],
        )
        .env("PATH", agent_tests::tools_path())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
        let (urls, url) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        // Read stderr to its end, so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                eprintln!("mcp serve: {line}");
                if let Some(url) = line.strip_prefix("agent-lsp mcp serve: listening on ") {
                    let _ = urls.send(url.to_owned());
                }
            }
        });
        let url = url.recv_timeout(WAIT).expect("the server prints its URL");
        let port = url
            .strip_prefix("http://127.0.0.1:")
            .and_then(|rest| rest.strip_suffix("/mcp"))
            .unwrap_or_else(|| panic!("unexpected URL {url}"))
            .parse()
            .unwrap();
        HttpServer { child, url, port }
    }

    /// SIGTERM, and the exit status it ended with.
    pub(crate) fn stop(mut self) -> std::process::ExitStatus {
        let pid = rustix::process::Pid::from_child(&self.child);
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        let status = wait_with_timeout(&mut self.child);
        std::mem::forget(self);
        status
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_with_timeout(child: &mut Child) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the server did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One raw HTTP/1.1 POST of an MCP `initialize` to `127.0.0.1:port/mcp` with the given `Host`
/// and optional `Origin`; returns the status line's code.
fn post_initialize(port: u16, host: &str, origin: Option<&str>) -> u16 {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
    let origin = origin
        .map(|origin| format!("Origin: {origin}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\n{origin}Content-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    // The status line is all we need; an SSE answer may stay open, so read only that.
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    let head = String::from_utf8_lossy(&head).into_owned();
    head.strip_prefix("HTTP/1.1 ")
        .and_then(|code| code.trim().parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP status line: {head:?}"))
}

#[test]
fn over_http_an_mcp_client_gets_what_it_gets_over_stdio() {
    let workspace = agent_tests::fixture("python");
    let state = tempfile::tempdir().unwrap();
    let calls = json!([
        {"name": "lsp_definition", "arguments": serde_json::from_str::<Value>(DEFINITION_ARGS).unwrap()},
        {"name": "files", "arguments": {"query": "geometry"}},
        {"name": "shell", "arguments": {"command": "true"}},
    ]);
    let stdio = mcp_client(workspace.path(), state.path(), &[], calls.clone());
    let server = HttpServer::start(workspace.path(), state.path());
    let http = run_client(json!({"url": server.url, "calls": calls}));

    assert_eq!(http["server"], stdio["server"]);
    assert_eq!(http["instructions"], stdio["instructions"]);
    assert_eq!(http["tools"], stdio["tools"]);
    let text = |seen: &Value, call: usize| seen["calls"][call]["result"]["content"].clone();
    assert_eq!(text(&http, 0), text(&stdio, 0), "{http}");
    assert_eq!(text(&http, 1), text(&stdio, 1));
    assert_eq!(http["calls"][2]["error"]["code"], -32602, "{http}");
    // `agent-lsp tool` beside the running server is answered by the server's bridge (one
    // warm bridge per workspace), whose transient copy of main.py is at a later version.
    let expected = tool_definition(workspace.path(), state.path());
    assert_eq!(
        without_version(
            http["calls"][0]["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .trim_end()
        ),
        without_version(expected.trim_end())
    );
    // A second client of the same server is recorded in the same session as the first.
    let again = run_client(
        json!({"url": server.url, "calls": [{"name": "files", "arguments": {"query": "main"}}]}),
    );
    assert_eq!(
        again["calls"][0]["result"]["_meta"]["agent-lsp/session"],
        http["calls"][0]["result"]["_meta"]["agent-lsp/session"]
    );

    // SIGTERM ends the server cleanly.
    let status = server.stop();
    assert!(status.success(), "{status}");
}

#[test]
fn the_http_server_refuses_other_hosts_and_origins_and_addresses_that_are_not_loopback() {
    let workspace = agent_tests::fixture("python");
    let state = tempfile::tempdir().unwrap();
    let server = HttpServer::start(workspace.path(), state.path());
    let port = server.port;
    assert_eq!(
        post_initialize(port, &format!("127.0.0.1:{port}"), None),
        200
    );
    assert_eq!(
        post_initialize(port, &format!("localhost:{port}"), None),
        200
    );
    assert_eq!(
        post_initialize(
            port,
            &format!("127.0.0.1:{port}"),
            Some(&format!("http://localhost:{port}"))
        ),
        200
    );
    // A rebound name: a page of evil.example whose name now resolves to 127.0.0.1.
    assert_eq!(
        post_initialize(port, &format!("evil.example:{port}"), None),
        403
    );
    // The right host, but another page's script (a browser always sends its Origin).
    assert_eq!(
        post_initialize(
            port,
            &format!("127.0.0.1:{port}"),
            Some("http://evil.example")
        ),
        403
    );
    // Another port of this machine is another origin too.
    assert_eq!(post_initialize(port, "127.0.0.1:1", None), 403);
    drop(server);

    for (address, says) in [
        ("192.0.2.1:0", "--allow-remote"),
        ("0.0.0.0:0", "unspecified"),
    ] {
        let output = agent_tests::agent_lsp_command(
            state.path(),
            &state.path().join("none.toml"),
            workspace.path(),
            &["mcp", "serve", "--http", address],
        )
        .output()
        .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{address}: {stderr}");
        assert!(stderr.contains(says), "{address}: {stderr}");
        // Refused before anything starts: no session was opened for it.
        assert!(!stderr.contains("recording calls"), "{stderr}");
    }
}

/// The MCP Inspector (installed by .ci/tools.sh in .ci/tools/inspector) in its CLI mode,
/// starting `agent-lsp mcp serve` itself as a client configuration would.
fn inspector(workspace: &Path, state: &Path, method: &[&str]) -> Value {
    let inspector = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../.ci/tools/inspector/node_modules/.bin/mcp-inspector");
    let output = Command::new(&inspector)
        .arg("--cli")
        .arg(agent_tests::workspace_bin("agent-lsp"))
        .arg("--workspace")
        .arg(workspace)
        .args(["mcp", "serve", "--method"])
        .args(method)
        .env("PATH", agent_tests::tools_path())
        .env("HOME", state)
        .env("AGENT_LSP_STATE_DIR", state)
        .env("AGENT_LSP_CONFIG", state.join("none.toml"))
        .env_remove("DEEPSEEK_API_KEY")
        .current_dir(state)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|error| {
            panic!(
                "{} runs (installed with .ci/tools.sh): {error}",
                inspector.display()
            )
        });
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the Inspector failed: {stderr}");
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("the Inspector prints JSON ({error}): {stderr}"))
}

#[test]
fn the_mcp_inspector_cli_lists_the_tools_and_calls_lsp_definition() {
    let workspace = agent_tests::fixture("python");
    let state = tempfile::tempdir().unwrap();
    // --strict: the Inspector checks every tool schema's portability and fails on an error.
    let listed = inspector(workspace.path(), state.path(), &["tools/list", "--strict"]);
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    for name in [
        "lsp_definition",
        "lsp_references",
        "files",
        "read",
        "session_show",
    ] {
        assert!(names.contains(&name), "{name} is missing from {names:?}");
    }
    assert!(!names.contains(&"write"), "{names:?}");

    let called = inspector(
        workspace.path(),
        state.path(),
        &[
            "tools/call",
            "--tool-name",
            "lsp_definition",
            "--tool-arg",
            "path=main.py",
            "line=5",
            "symbol=größe_von",
        ],
    );
    assert_eq!(called["isError"], false, "{called}");
    let expected = tool_definition(workspace.path(), state.path());
    assert_eq!(
        called["content"][0]["text"].as_str().unwrap().trim_end(),
        expected.trim_end()
    );
}

/// An `lsp_*` answer without the version of the document it was computed on (`main.py v2]`
/// becomes `main.py v]`), for answers of the same query made at different versions.
fn without_version(text: &str) -> String {
    let (stamp, rest) = text.split_once('\n').unwrap_or((text, ""));
    let stamp = match stamp.rfind(" v") {
        Some(at) => format!(
            "{} v{}",
            &stamp[..at],
            stamp[at + 2..].trim_start_matches(|c: char| c.is_ascii_digit())
        ),
        None => stamp.to_owned(),
    };
    format!("{stamp}\n{rest}")
}
