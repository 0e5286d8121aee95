//! The MCP client through the real binary, against real servers from npm (installed by
//! `.ci/tools.sh`: `@modelcontextprotocol/server-everything`, and `server-filesystem` on a
//! temporary folder) and a scripted one that misbehaves (`tests/fixtures/mcp/scripted-server.js`):
//! the servers' tools in the catalog and called in a scripted model run, their results in the
//! log and every request replayed byte for byte; a server that crashes (restarted a bounded
//! number of times, then reported as failed), one that hangs (the call's timeout) and one that
//! answers with a line that is not JSON, each failing alone; a workspace `.mcp.json` that runs
//! nothing until it is approved, on the command line or from the editor (`serve` asks when a
//! session would start, and `agent.mcp.approve`), and whose approval holds in its own workspace
//! alone; and a server over streamable HTTP on a loopback port.

use std::path::{Path, PathBuf};

use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, Reply};
use serde_json::{Value, json};

type Fixture = agent_tests::cli::CliFixture;

fn npm_bin(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/tools/node_modules/.bin");
    let path = path.join(name);
    assert!(
        path.exists(),
        "{} is missing: run .ci/tools.sh",
        path.display()
    );
    path.display().to_string()
}

fn scripted_server() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/mcp/scripted-server.js")
        .display()
        .to_string()
}

fn scripted(name: &str, mode: &str) -> String {
    format!(
        "[mcp.servers.{name}]\ncommand = \"node\"\nargs = [{:?}, {mode:?}]\n",
        scripted_server()
    )
}

/// The `tool/result` lines of the last session's log, as text.
fn logged_results(fixture: &Fixture) -> Vec<String> {
    let store = fixture.store();
    let path = store.path_of(&store.resolve("last").unwrap());
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|event| event["kind"] == "tool/result")
        .map(|event| event.to_string())
        .collect()
}

/// Every chat request the endpoint received is what `session replay` rebuilds.
fn assert_requests_replay(fixture: &Fixture, endpoint: &ModelEndpoint) {
    let requests = endpoint.chat_requests();
    assert!(!requests.is_empty());
    for (index, request) in requests.iter().enumerate() {
        let n = (index + 1).to_string();
        let replayed = fixture.ok(&["session", "replay", "last", "--request", &n]);
        assert_eq!(
            replayed,
            String::from_utf8_lossy(&request.raw),
            "request {n} does not replay byte-identically"
        );
    }
}

#[test]
fn real_servers_tools_are_listed_called_logged_and_replayed() {
    let files = tempfile::tempdir().unwrap();
    let files_dir: PathBuf = files.path().canonicalize().unwrap();
    std::fs::write(files_dir.join("notes.txt"), "the notes\n").unwrap();
    let config = format!(
        "[mcp.servers.everything]\ncommand = {:?}\n[mcp.servers.fs]\ncommand = {:?}\nargs = [{:?}]\n",
        npm_bin("mcp-server-everything"),
        npm_bin("mcp-server-filesystem"),
        files_dir.display().to_string(),
    );
    let fixture = Fixture::new(&config);
    let notes = files_dir.join("notes.txt").display().to_string();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all([
        Reply::from_fn(|request| {
            let names = request.tool_names();
            let mcp = names
                .iter()
                .filter(|name| name.starts_with("mcp__"))
                .collect::<Vec<_>>();
            let mut sorted = mcp.clone();
            sorted.sort();
            assert_eq!(mcp, sorted, "the catalog is sorted");
            for tool in ["mcp__everything__echo", "mcp__fs__read_text_file"] {
                assert!(names.iter().any(|name| name == tool), "{tool} in {names:?}");
            }
            Reply::tool_call("mcp__everything__echo", r#"{"message":"hello mcp"}"#)
        }),
        Reply::from_fn(move |request| {
            let result = request.tool_result_text();
            assert!(result.contains("Echo: hello mcp"), "{result}");
            Reply::tool_call(
                "mcp__fs__read_text_file",
                json!({ "path": notes }).to_string(),
            )
        }),
        Reply::from_fn(|request| {
            let result = request.tool_result_text();
            assert_eq!(result, "the notes\n");
            Reply::text("done")
        }),
    ]);
    let base_url = endpoint.base_url();
    // `mcp__*` tools are `ask` in `standard`: --yes answers for the person.
    fixture.ok(&["run", "--yes", "--base-url", &base_url, "use the servers"]);
    endpoint.assert_no_violations();
    assert_eq!(endpoint.remaining_replies(), 0);

    let results = logged_results(&fixture);
    assert!(results[0].contains("Echo: hello mcp"), "{results:?}");
    assert!(results[1].contains("the notes"), "{results:?}");
    assert_requests_replay(&fixture, &endpoint);

    // The next session's catalog comes from the cached tool lists, byte for byte.
    endpoint.push_all([Reply::text("again")]);
    fixture.ok(&["run", "--yes", "--base-url", &base_url, "again"]);
    let requests = endpoint.chat_requests();
    let tools = |n: usize| requests[n].body.as_ref().unwrap()["tools"].clone();
    assert_eq!(tools(0), tools(3));

    let listed: Value = serde_json::from_str(&fixture.ok(&["mcp", "list", "--json"])).unwrap();
    let states = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|server| {
            (
                server["name"].as_str().unwrap(),
                server["state"].as_str().unwrap(),
            )
        })
        .collect::<Vec<_>>();
    assert_eq!(states, [("everything", "running"), ("fs", "running")]);
}

#[test]
fn a_crashing_a_hanging_and_a_malformed_server_each_fail_alone() {
    let config = format!(
        "{}{}{}[mcp.servers.everything]\ncommand = {:?}\n",
        scripted("crash", "crash"),
        scripted("hang", "hang"),
        scripted("malformed", "malformed"),
        npm_bin("mcp-server-everything"),
    );
    let fixture = Fixture::new(&config);
    // `standard` with calls allowed and a short call timeout.
    let preset = agent_lsp::preset::catalog::builtin_text("standard")
        .unwrap()
        .replace("call_timeout_secs = 120", "call_timeout_secs = 3")
        .replace("mcp = \"ask\"", "mcp = \"allow\"");
    let preset_path = fixture.state.path().join("mcp-test.toml");
    std::fs::write(&preset_path, preset).unwrap();

    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let mut replies = vec![Reply::tool_call("mcp__crash__act", "{}")];
    // The crash, and three more after three restarts.
    for _ in 0..3 {
        replies.push(Reply::from_fn(|request| {
            let result = request.tool_result_text();
            assert!(
                result.starts_with("error: MCP server `crash` stopped during the request")
                    && result.contains("crashing on purpose"),
                "{result}"
            );
            Reply::tool_call("mcp__crash__act", "{}")
        }));
    }
    replies.extend([
        Reply::from_fn(|request| {
            let result = request.tool_result_text();
            assert!(result.contains("0 restarts left"), "{result}");
            Reply::tool_call("mcp__crash__act", "{}")
        }),
        Reply::from_fn(|request| {
            let result = request.tool_result_text();
            assert!(
                result.contains("stopped 4 times and is not started again"),
                "{result}"
            );
            Reply::tool_call("mcp__hang__act", "{}")
        }),
        Reply::from_fn(|request| {
            let result = request.tool_result_text();
            assert!(
                result.starts_with("error: `mcp__hang__act` did not finish within 3 s"),
                "{result}"
            );
            Reply::tool_call("mcp__malformed__act", "{}")
        }),
        Reply::from_fn(|request| {
            let result = request.tool_result_text();
            assert!(
                result.contains("the server sent a line that is not JSON: `this is {not JSON`"),
                "{result}"
            );
            Reply::tool_call("mcp__everything__echo", r#"{"message":"still here"}"#)
        }),
        Reply::from_fn(|request| {
            let result = request.tool_result_text();
            assert!(result.contains("Echo: still here"), "{result}");
            Reply::text("done")
        }),
    ]);
    endpoint.push_all(replies);
    let base_url = endpoint.base_url();
    fixture.ok(&[
        "run",
        "--preset",
        &preset_path.display().to_string(),
        "--base-url",
        &base_url,
        "misbehave",
    ]);
    endpoint.assert_no_violations();
    assert_eq!(endpoint.remaining_replies(), 0);
    assert_requests_replay(&fixture, &endpoint);
}

#[test]
fn a_workspace_file_runs_nothing_until_it_is_approved_and_the_model_is_told_why() {
    let marks = tempfile::tempdir().unwrap();
    let mark = marks.path().join("started");
    let file = json!({"mcpServers": {"repo": {
        "command": "node",
        "args": [scripted_server(), "hang", format!("mark={}", mark.display())],
    }}});
    let fixture = Fixture::new("").with_files(&[(".mcp.json", &file.to_string())]);
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all([Reply::from_fn(|request| {
        let names = request.tool_names();
        assert!(
            !names.iter().any(|name| name.starts_with("mcp__")),
            "{names:?}"
        );
        Reply::text("nothing from the repository")
    })]);
    let base_url = endpoint.base_url();
    fixture.ok(&["run", "--base-url", &base_url, "hello"]);
    let listed: Value = serde_json::from_str(&fixture.ok(&["mcp", "list", "--json"])).unwrap();
    assert_eq!(listed[0]["name"], "repo");
    assert!(
        listed[0]["state"]
            .as_str()
            .unwrap()
            .starts_with("not approved: run `agent-lsp mcp approve`"),
        "{listed}"
    );
    assert!(!mark.exists(), "an unapproved server was started");
    // Without a terminal, approving needs --yes.
    let refused = fixture.fails(&["mcp", "approve"]);
    assert!(refused.contains("--yes"), "{refused}");

    fixture.ok(&["mcp", "approve", "--yes"]);
    let listed: Value = serde_json::from_str(&fixture.ok(&["mcp", "list", "--json"])).unwrap();
    assert_eq!(listed[0]["state"], "running", "{listed}");
    assert_eq!(listed[0]["tools"], json!(["mcp__repo__act"]));
    assert!(mark.exists());

    // A changed file needs approving again. Its `repo` server is declared as before, so the
    // catalog still lists its tool (from the cached list), but a call is refused with what the
    // user is to do, and nothing starts.
    let mut changed = file.clone();
    changed["mcpServers"]["other"] =
        json!({"command": "node", "args": [scripted_server(), "crash"]});
    std::fs::write(
        fixture.workspace.path().join(".mcp.json"),
        changed.to_string(),
    )
    .unwrap();
    std::fs::remove_file(&mark).unwrap();
    let listed: Value = serde_json::from_str(&fixture.ok(&["mcp", "list", "--json"])).unwrap();
    assert!(
        listed[0]["state"]
            .as_str()
            .unwrap()
            .starts_with("not approved"),
        "{listed}"
    );
    endpoint.push_all([
        Reply::from_fn(|request| {
            assert!(request.tool_names().contains(&"mcp__repo__act".to_owned()));
            Reply::tool_call("mcp__repo__act", "{}")
        }),
        Reply::from_fn(|request| {
            let result = request.tool_result_text();
            assert!(
                result.starts_with("error: MCP server `repo` comes from ")
                    && result.contains("has not approved")
                    && result.contains("`agent-lsp mcp approve`"),
                "{result}"
            );
            Reply::text("asked the user to approve")
        }),
    ]);
    fixture.ok(&["run", "--yes", "--base-url", &base_url, "call it"]);
    endpoint.assert_no_violations();
    assert_eq!(endpoint.remaining_replies(), 0);
    assert!(!mark.exists(), "a server of an unapproved file was started");
}

/// The same `.mcp.json` bytes in two repositories, each with its own `srv.js` that the file
/// names by a relative path: approving them in one lets nothing of the other run, the other is
/// asked about in its turn, and each question names the repository's own file, resolved.
#[test]
fn an_approval_is_for_one_workspace_and_the_question_names_its_files_resolved() {
    let server = std::fs::read_to_string(scripted_server()).unwrap();
    // `mark=started` is relative too: each repository's server marks its own folder.
    let file = json!({"mcpServers": {"repo": {
        "command": "node",
        "args": ["srv.js", "hang", "mark=started"],
    }}})
    .to_string();
    let a = Fixture::new("").with_files(&[(".mcp.json", &file), ("srv.js", &server)]);
    let b = tempfile::tempdir().unwrap();
    agent_tests::write_tree(b.path(), &[(".mcp.json", &file), ("srv.js", &server)]);
    // Repository B seen by the same user as A: A's state directory and config file.
    let in_b = |args: &[&str]| {
        agent_tests::agent_lsp_command(a.state.path(), &a.config, b.path(), args)
            .output()
            .unwrap()
    };
    let state_of = |output: &std::process::Output| {
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let listed: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(listed[0]["name"], "repo", "{listed}");
        listed[0]["state"].as_str().unwrap().to_owned()
    };

    let approved = a.ok(&["mcp", "approve", "--yes"]);
    assert!(
        approved.contains(&format!(
            "repo: node {}/srv.js hang mark=started",
            a.workspace.path().display()
        )),
        "{approved}"
    );
    assert_eq!(state_of(&a.run(&["mcp", "list", "--json"])), "running");
    assert!(a.workspace.path().join("started").exists());

    // B's bytes are A's, but B's srv.js is another program: not approved, nothing started.
    let listed = state_of(&in_b(&["mcp", "list", "--json"]));
    assert!(listed.starts_with("not approved"), "{listed}");
    assert!(
        !b.path().join("started").exists(),
        "B's server ran on A's approval"
    );
    // B asks, naming B's file; without a terminal it needs --yes.
    let asked = in_b(&["mcp", "approve"]);
    assert!(!asked.status.success());
    let question = String::from_utf8_lossy(&asked.stdout);
    assert!(
        question.contains(&format!(
            "repo: node {}/srv.js hang mark=started",
            b.path().display()
        )),
        "{question}"
    );
    assert!(!b.path().join("started").exists());
    // Approved in B, it runs there too; A's approval is untouched.
    let approved = in_b(&["mcp", "approve", "--yes"]);
    assert!(approved.status.success());
    assert_eq!(state_of(&in_b(&["mcp", "list", "--json"])), "running");
    assert!(b.path().join("started").exists());
    assert_eq!(state_of(&a.run(&["mcp", "list", "--json"])), "running");
}

/// `server-everything` over streamable HTTP on a loopback port, killed when the test ends.
pub(crate) struct HttpServer {
    child: std::process::Child,
    pub(crate) url: String,
}

impl HttpServer {
    pub(crate) fn start() -> HttpServer {
        use std::io::BufRead;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = std::process::Command::new(npm_bin("mcp-server-everything"))
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                let _ = sender.send(line);
            }
        });
        loop {
            let line = receiver
                .recv_timeout(std::time::Duration::from_secs(60))
                .expect("the HTTP server says it listens");
            if line.contains("listening on port") {
                break;
            }
        }
        HttpServer {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_streamable_http_server_is_listed_and_called() {
    let server = HttpServer::start();
    let fixture = Fixture::new(&format!(
        "[mcp.servers.web]\nurl = {:?}\nheaders = {{ X-Test = \"1\" }}\n",
        server.url
    ));
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all([
        Reply::from_fn(|request| {
            let names = request.tool_names();
            assert!(
                names.iter().any(|name| name == "mcp__web__get-sum"),
                "{names:?}"
            );
            Reply::tool_call("mcp__web__get-sum", r#"{"a": 2, "b": 3}"#)
        }),
        Reply::from_fn(|request| {
            let result = request.tool_result_text();
            assert!(result.contains('5'), "{result}");
            Reply::text("done")
        }),
    ]);
    let base_url = endpoint.base_url();
    fixture.ok(&["run", "--yes", "--base-url", &base_url, "add"]);
    endpoint.assert_no_violations();
    assert_eq!(endpoint.remaining_replies(), 0);
    assert_requests_replay(&fixture, &endpoint);
}

/// The `window/showMessageRequest`s the editor was sent, as their messages.
fn questions(editor: &agent_tests::editor::Editor) -> Vec<String> {
    editor
        .server_requests
        .iter()
        .filter(|request| request["method"] == "window/showMessageRequest")
        .map(|request| {
            let actions: Vec<&str> = request["params"]["actions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|action| action["title"].as_str().unwrap())
                .collect();
            assert_eq!(actions, ["Approve", "Not now"], "{request}");
            request["params"]["message"].as_str().unwrap().to_owned()
        })
        .collect()
}

fn execute(editor: &mut agent_tests::editor::Editor, command: &str) -> Value {
    let answer = editor.request(
        "workspace/executeCommand",
        json!({"command": command, "arguments": []}),
    );
    assert!(answer.get("error").is_none(), "{command}: {answer}");
    answer["result"].clone()
}

#[test]
fn the_editor_approves_a_workspace_file_when_a_session_starts_or_with_agent_mcp_approve() {
    let marks = tempfile::tempdir().unwrap();
    let mark = marks.path().join("repo-started");
    let server = |mark: &Path| json!({"command": "node", "args": [scripted_server(), "hang", format!("mark={}", mark.display())]});
    let file = json!({"mcpServers": {"repo": server(&mark)}});
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    std::fs::write(root.join(".mcp.json"), file.to_string()).unwrap();
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let mut command = std::process::Command::new(agent_tests::workspace_bin("agent-lsp"));
    command
        .env("PATH", agent_tests::tools_path())
        .env("AGENT_LSP_STATE_DIR", state.path())
        .env("AGENT_LSP_CONFIG", &config)
        .env_remove("DEEPSEEK_API_KEY")
        .args(["--workspace", root.to_str().unwrap(), "serve"]);
    let mut editor = agent_tests::editor::Editor::start(command);
    editor.initialize(&root);

    // The first session starts (agent.status makes it): the editor is asked, names each server
    // and what it runs, and "Not now" starts nothing.
    editor.message_answer = Some("Not now".into());
    execute(&mut editor, "agent.status");
    let asked = questions(&editor);
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0].contains(".mcp.json runs these MCP servers:"),
        "{}",
        asked[0]
    );
    assert!(
        asked[0].contains(&format!("repo: node {} hang mark=", scripted_server())),
        "{}",
        asked[0]
    );
    assert!(!mark.exists(), "a server of an unapproved file was started");
    // "Not now" holds for these contents on this connection: a new session does not ask again.
    execute(&mut editor, "agent.session.new");
    assert_eq!(questions(&editor).len(), 1);
    assert!(!mark.exists());

    // agent.mcp.approve asks again, and "Approve" records the digest as the CLI does.
    editor.message_answer = Some("Approve".into());
    let approved = execute(&mut editor, "agent.mcp.approve");
    assert_eq!(approved["approved"], true, "{approved}");
    assert_eq!(approved["servers"][0]["name"], "repo", "{approved}");
    assert_eq!(questions(&editor).len(), 2);
    let digest = approved["digest"].as_str().unwrap();
    let key = agent_lsp::mcp::state::approval_key(&root, digest);
    assert!(state.path().join("mcp/approvals").join(key).is_file());
    let again = execute(&mut editor, "agent.mcp.approve");
    assert_eq!(again["already"], true, "{again}");
    // The running session's catalog does not change; the next session's has the server, which
    // is started to list its tools.
    assert!(!mark.exists());
    execute(&mut editor, "agent.session.new");
    assert!(
        mark.exists(),
        "the approved server did not start with the next session"
    );
    assert_eq!(questions(&editor).len(), 2);

    // A changed file is asked about when the next session starts, and "Approve" there lets its
    // new server join that very session.
    let other_mark = marks.path().join("other-started");
    let mut changed = file.clone();
    changed["mcpServers"]["other"] = server(&other_mark);
    std::fs::write(root.join(".mcp.json"), changed.to_string()).unwrap();
    execute(&mut editor, "agent.session.new");
    let asked = questions(&editor);
    assert_eq!(asked.len(), 3, "{asked:?}");
    assert!(asked[2].contains("other: node"), "{}", asked[2]);
    assert!(
        other_mark.exists(),
        "the server approved at the session's start did not join it"
    );
    editor.shutdown();

    // The command line sees the editor's approval.
    let fixture_state = state.path();
    let output = agent_tests::agent_lsp_command(fixture_state, &config, &root, &["mcp", "approve"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("is already approved"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
}

/// A stdio server gets what a program needs to run and what its config names, never the
/// model's API key or another secret of the user's environment.
#[test]
fn a_stdio_server_gets_its_configured_env_and_no_secrets() {
    let config = format!(
        "[mcp.servers.everything]\ncommand = {:?}\nenv = {{ GIVEN_TO_THE_SERVER = \"given\" }}\n",
        npm_bin("mcp-server-everything"),
    );
    let fixture = Fixture::new(&config);
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all([
        Reply::tool_call("mcp__everything__get-env", "{}"),
        Reply::text("done"),
    ]);
    let output = fixture
        .command(&["run", "--yes", "--base-url", &endpoint.base_url(), "env?"])
        .env("DEEPSEEK_API_KEY", "sk-do-not-leak")
        .env("ANOTHER_SECRET", "hunter2")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result = logged_results(&fixture).join("\n");
    assert!(result.contains("GIVEN_TO_THE_SERVER"), "{result}");
    assert!(
        result.contains("\\\"PATH\\\"") || result.contains("\"PATH\""),
        "{result}"
    );
    for secret in [
        "DEEPSEEK_API_KEY",
        "sk-do-not-leak",
        "ANOTHER_SECRET",
        "hunter2",
    ] {
        assert!(
            !result.contains(secret),
            "{secret} reached the server: {result}"
        );
    }
}
