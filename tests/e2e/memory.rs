//! Memory across sessions end to end, through the real binary: what a session's model remembers
//! is in the next session's first request with its provenance, and stays byte-stable while that
//! session lives; a secret is refused with the reason; `agent-lsp memory forget` takes a memory
//! out of the next session; `list`, `show` and `edit` (also through `$EDITOR`) from the
//! terminal, `agent.memory.*` from an editor; and a writer killed with SIGKILL mid-change leaves
//! a file that opens with its torn tail cut and every acknowledged change kept.

use std::process::Command;

use agent_lsp::canonical::sha256_hex;
use agent_lsp::memory::{Caps, Memories, Provenance, Scope};
use agent_lsp::session::event::EventBody;
use agent_lsp::session::store::Store;
use agent_tests::editor::Editor;
use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, RecordedRequest, Reply};
use serde_json::{Value, json};

type Fixture = agent_tests::cli::CliFixture;

/// A workspace of one README, with fast retries.
fn fixture() -> Fixture {
    Fixture::new(
        "[provider]\nbackoff_base_ms = 20\nbackoff_cap_ms = 2000\nrequest_timeout_secs = 20\n",
    )
    .with_files(&[("README.md", "# demo\n")])
}

fn memories_of(fixture: &Fixture) -> Memories {
    Memories::for_store(&fixture.store())
}

/// The system message of a recorded chat request.
fn system_of(request: &RecordedRequest) -> String {
    let body = request.body.as_ref().expect("a JSON body");
    let first = &body["messages"][0];
    assert_eq!(first["role"], "system", "{body:#}");
    first["content"].as_str().unwrap().to_owned()
}

/// The memory section of a system prompt, if it has one.
fn memory_section(system: &str) -> Option<&str> {
    system
        .find("# Memory\n")
        .map(|start| system[start..].split("\n\n").next().unwrap())
}

/// Every chat request the endpoint served since `from` belongs to `session`, and is what
/// `session replay` rebuilds from its log alone.
fn assert_replays(fixture: &Fixture, endpoint: &ModelEndpoint, from: usize, session: &str) {
    for (index, request) in endpoint.chat_requests()[from..].iter().enumerate() {
        let n = (index + 1).to_string();
        let replayed = fixture.ok(&["session", "replay", session, "--request", &n]);
        assert_eq!(
            replayed,
            String::from_utf8_lossy(&request.raw),
            "request {n} of {session} does not replay byte-identically"
        );
    }
}

#[test]
fn a_memory_of_session_a_is_in_session_bs_first_request_until_it_is_forgotten() {
    let fixture = fixture();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let base_url = endpoint.base_url();
    let store = fixture.store();
    // Runs `prompt` and returns the session it ran in (ids made in the same second sort by
    // their random tail, so `last` is not necessarily the newest).
    let run = |prompt: &str, session: Option<&str>| {
        let before = store.ids().unwrap();
        let mut args = vec!["run", "--preset", "standard", "--base-url", &base_url];
        if let Some(session) = session {
            args.extend(["--session", session]);
        }
        args.push(prompt);
        fixture.ok(&args);
        match session {
            Some(session) => session.to_owned(),
            None => {
                let mut new = store.ids().unwrap();
                new.retain(|id| !before.contains(id));
                assert_eq!(new.len(), 1, "one new session");
                new.pop().unwrap()
            }
        }
    };

    // Session A: the model keeps a note, and is refused a secret with the reason.
    endpoint.push_all([
        Reply::tool_call(
            "memory",
            r#"{"action":"remember","text":"Tests run with `make check`; never `cargo test` alone."}"#,
        ),
        Reply::from_fn(|request| {
            let result = request.tool_result_text();
            assert!(result.starts_with("remembered as w1"), "{result}");
            Reply::tool_call(
                "memory",
                r#"{"action":"remember","text":"deploy with AWS key AKIAIOSFODNN7EXAMPLE","scope":"user"}"#,
            )
        }),
        Reply::from_fn(|request| {
            let result = request.tool_result_text();
            assert!(
                result.starts_with("error: refused: it looks like it contains an AWS access key id"),
                "{result}"
            );
            Reply::text("Noted how tests run; the key was not kept.")
        }),
    ]);
    let a = run("Remember how the tests run.", None);
    let history = store.load(&a).unwrap();
    let call_seq = history
        .events()
        .iter()
        .find(|event| matches!(&event.body, EventBody::ToolCall(call) if call.name == "memory"))
        .map(|event| event.seq)
        .unwrap();
    // A's own prompt does not change: it started without memories.
    let a_requests = endpoint.chat_requests();
    assert_eq!(a_requests.len(), 3);
    assert!(
        a_requests
            .iter()
            .all(|request| memory_section(&system_of(request)).is_none())
    );
    let listed = fixture.ok(&["memory", "list"]);
    assert!(
        listed.starts_with(&format!("w1 (workspace; session {a} event {call_seq}, ")),
        "{listed}"
    );
    assert!(!listed.contains("AKIA"), "{listed}");

    // Session B: its first request has the memory, with where it came from.
    endpoint.push(Reply::text("I will run `make check`."));
    let b = run("How do I run the tests?", None);
    let b_first = &endpoint.chat_requests()[3];
    let system = system_of(b_first);
    let section = memory_section(&system).unwrap_or_else(|| panic!("no memory section: {system}"));
    let line = format!("- w1 (workspace; session {a} event {call_seq}, ");
    assert!(section.contains(&line), "{section}");
    assert!(
        section.ends_with("): Tests run with `make check`; never `cargo test` alone."),
        "{section}"
    );
    // Recorded: the memories B started with, and the section's digest in its request header.
    let history = store.load(&b).unwrap();
    let state = history
        .events()
        .iter()
        .find_map(|event| match &event.body {
            EventBody::PluginState(state) if state.plugin == "memory" => Some(state.data.clone()),
            _ => None,
        })
        .expect("a plugin/state event of memory");
    assert_eq!(
        state["memories"][0]["provenance"]["session"],
        a.as_str(),
        "{state:#}"
    );
    assert_eq!(state["memories"][0]["provenance"]["seq"], call_seq);
    assert_eq!(state["digest"], sha256_hex(section));
    let header = history
        .events()
        .iter()
        .find_map(|event| match &event.body {
            EventBody::RequestHeader(header) => Some(header.clone()),
            _ => None,
        })
        .unwrap();
    let record = header
        .sections
        .iter()
        .find(|record| record.id == "memory")
        .unwrap();
    assert_eq!(record.source, "memory");
    assert_eq!(record.digest, sha256_hex(section));

    // Forgotten from the terminal: B keeps its prompt for its whole life, a new session has none.
    let forgot = fixture.ok(&["memory", "forget", "w1"]);
    assert!(forgot.starts_with("forgot w1: "), "{forgot}");
    endpoint.push(Reply::text("Still `make check`."));
    run("And again?", Some(&b));
    let b_second = &endpoint.chat_requests()[4];
    assert_eq!(system_of(b_second), system, "B's system prompt changed");
    assert_eq!(
        count_plugin_states(&store, &b),
        1,
        "the resumed session rebuilt its section from the record"
    );
    assert_replays(&fixture, &endpoint, 3, &b);

    endpoint.push(Reply::text("No notes."));
    let c = run("Any notes?", None);
    assert_ne!(c, b);
    let c_first = &endpoint.chat_requests()[5];
    assert_eq!(
        memory_section(&system_of(c_first)),
        None,
        "{}",
        system_of(c_first)
    );
    endpoint.assert_no_violations();
    assert_eq!(endpoint.remaining_replies(), 0);
}

fn count_plugin_states(store: &Store, session: &str) -> usize {
    store
        .load(session)
        .unwrap()
        .events()
        .iter()
        .filter(|event| matches!(&event.body, EventBody::PluginState(state) if state.plugin == "memory"))
        .count()
}

#[test]
fn memory_commands_list_show_forget_and_edit_with_text_or_editor() {
    let fixture = fixture();
    assert_eq!(fixture.ok(&["memory", "list"]), "no memories yet\n");
    let memories = memories_of(&fixture);
    let from = Provenance {
        session: "20261129-100000-abcd".into(),
        seq: Some(12),
        time: "2026-11-29T10:00:00Z".into(),
    };
    memories
        .remember(
            Scope::Workspace,
            "Tests run with `make check`.",
            from.clone(),
        )
        .unwrap();
    memories
        .remember(Scope::User, "Prefers British spelling.", from)
        .unwrap();

    assert_eq!(
        fixture.ok(&["memory", "list"]),
        "w1 (workspace; session 20261129-100000-abcd event 12, 2026-11-29T10:00:00Z): Tests run with `make check`.\n\
         u1 (user; session 20261129-100000-abcd event 12, 2026-11-29T10:00:00Z): Prefers British spelling.\n"
    );
    let json: Value =
        serde_json::from_str(&fixture.ok(&["memory", "list", "--json", "--scope", "user"]))
            .unwrap();
    assert_eq!(json.as_array().unwrap().len(), 1);
    assert_eq!(json[0]["id"], "u1");
    assert_eq!(json[0]["provenance"]["seq"], 12);
    let shown = fixture.ok(&["memory", "show", "w1"]);
    assert!(shown.contains("scope:   workspace\n"), "{shown}");
    assert!(
        shown.contains("from:    session 20261129-100000-abcd event 12, 2026-11-29T10:00:00Z\n"),
        "{shown}"
    );
    assert!(
        shown.ends_with("\nTests run with `make check`.\n"),
        "{shown}"
    );

    // With TEXT; then through $EDITOR, which the shell runs with its arguments.
    assert_eq!(
        fixture.ok(&["memory", "edit", "w1", "Tests run with `make test`."]),
        "edited w1: Tests run with `make test`.\n"
    );
    let output = fixture
        .command(&["memory", "edit", "u1"])
        .env("VISUAL", "")
        .env("EDITOR", "sed -i s/British/Australian/")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "edited u1: Prefers Australian spelling.\n"
    );
    let show = fixture.ok(&["memory", "show", "u1", "--json"]);
    let shown: Value = serde_json::from_str(&show).unwrap();
    assert_eq!(shown["text"], "Prefers Australian spelling.");
    assert_eq!(
        shown["provenance"]["session"], "20261129-100000-abcd",
        "the first provenance stays"
    );
    assert_eq!(shown["edited"]["session"], "cli");
    // An editor that leaves the text as it was changes nothing; one that fails, neither.
    let unchanged = fixture
        .command(&["memory", "edit", "u1"])
        .env("VISUAL", "true")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&unchanged.stdout),
        "u1 is unchanged\n"
    );
    let failed = fixture
        .command(&["memory", "edit", "u1"])
        .env("VISUAL", "false")
        .output()
        .unwrap();
    assert!(!failed.status.success());
    assert!(String::from_utf8_lossy(&failed.stderr).contains("the memory is unchanged"));

    let refused = fixture.fails(&["memory", "edit", "w1", "key: AKIAIOSFODNN7EXAMPLE"]);
    assert!(
        refused.contains("refused: it looks like it contains an AWS access key id"),
        "{refused}"
    );
    assert_eq!(
        fixture.ok(&["memory", "forget", "w1"]),
        "forgot w1: Tests run with `make test`.; new sessions will not get it\n"
    );
    let gone = fixture.fails(&["memory", "show", "w1"]);
    assert!(gone.contains("there is no memory `w1`"), "{gone}");
    let ids = memories_of(&fixture)
        .list()
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect::<Vec<_>>();
    assert_eq!(ids, ["u1"]);
}

#[test]
fn memory_commands_over_lsp_record_the_editors_session() {
    let fixture = fixture();
    let root = fixture.workspace.path().canonicalize().unwrap();
    let mut command = Command::new(agent_tests::workspace_bin("agent-lsp"));
    command
        .env("AGENT_LSP_STATE_DIR", fixture.state.path())
        .env("AGENT_LSP_CONFIG", &fixture.config)
        .env_remove("DEEPSEEK_API_KEY")
        .args(["--workspace", root.to_str().unwrap(), "serve"]);
    let mut editor = Editor::start(command);
    editor.initialize_with(&root, Value::Null);
    let mut execute = |name: &str, argument: Value| {
        editor.request(
            "workspace/executeCommand",
            json!({"command": name, "arguments": [argument]}),
        )
    };
    let result = |answer: Value| {
        answer
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{answer:#}"))
    };

    // Before the editor has a session, a memory comes from `editor`.
    let made = result(execute(
        "agent.memory.remember",
        json!({"text": "The docs build with `mdbook build`."}),
    ));
    assert_eq!(made["memory"]["id"], "w1", "{made:#}");
    assert_eq!(made["memory"]["provenance"]["session"], "editor");
    let refused = execute(
        "agent.memory.remember",
        json!({"text": "token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "scope": "user"}),
    );
    assert_eq!(refused["error"]["code"], -32803, "{refused:#}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("refused: it looks like it contains a GitHub token"),
        "{message}"
    );

    // Once it has one, changes name it.
    let tool = result(execute(
        "agent.tool",
        json!({"name": "read", "arguments": {"path": "README.md"}}),
    ));
    let session = tool["session"].as_str().unwrap().to_owned();
    let edited = result(execute(
        "agent.memory.edit",
        json!({"id": "w1", "text": "The docs build with `mdbook build docs`."}),
    ));
    assert_eq!(
        edited["memory"]["edited"]["session"],
        session.as_str(),
        "{edited:#}"
    );
    assert_eq!(edited["memory"]["provenance"]["session"], "editor");
    // The agent's tool, run from the editor, records the session and its `tool/call` seq.
    let by_tool = result(execute(
        "agent.tool",
        json!({"name": "memory", "arguments": {"action": "remember", "text": "Generated code is in gen/."}}),
    ));
    assert!(
        by_tool["text"]
            .as_str()
            .unwrap()
            .starts_with("remembered as w2"),
        "{by_tool:#}"
    );
    let listed = result(execute("agent.memory.list", json!({"scope": "workspace"})));
    let w2 = &listed["memories"][1];
    assert_eq!(w2["provenance"]["session"], session.as_str(), "{listed:#}");
    assert!(w2["provenance"]["seq"].as_u64().is_some(), "{listed:#}");
    result(execute("agent.memory.forget", json!({"id": "w2"})));
    let user = result(execute(
        "agent.memory.remember",
        json!({"text": "Answers in German.", "scope": "user"}),
    ));
    assert_eq!(user["memory"]["id"], "u1");
    assert_eq!(user["memory"]["provenance"]["session"], session.as_str());

    let listed = result(execute("agent.memory.list", json!({})));
    let ids = listed["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|memory| memory["id"].as_str().unwrap())
        .collect::<Vec<_>>();
    assert_eq!(ids, ["w1", "u1"], "{listed:#}");
    assert_eq!(listed["caps"]["max_per_scope"], 100);
    let only_user = result(execute("agent.memory.list", json!({"scope": "user"})));
    assert_eq!(only_user["memories"].as_array().unwrap().len(), 1);

    let forgotten = result(execute("agent.memory.forget", json!({"id": "w1"})));
    assert_eq!(
        forgotten["forgotten"]["text"],
        "The docs build with `mdbook build docs`."
    );
    let again = execute("agent.memory.forget", json!({"id": "w1"}));
    assert!(
        again["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no memory `w1`"),
        "{again:#}"
    );
    // The terminal sees what the editor did.
    assert!(
        fixture
            .ok(&["memory", "list"])
            .starts_with("u1 (user; session ")
    );
    editor.shutdown();
}

const KILLS: u64 = 40;

#[test]
fn a_writer_killed_mid_change_leaves_a_file_that_opens_with_its_torn_tail_cut() {
    let dir = tempfile::tempdir().unwrap();
    let (workspace_file, user_file) = (dir.path().join("w.jsonl"), dir.path().join("u.jsonl"));
    // The writer's caps: room for its 20 long memories.
    let memories = Memories::new(workspace_file.clone(), user_file.clone()).with_caps(Caps {
        max_per_scope: 100,
        max_chars: 1000,
        max_scope_bytes: 1 << 20,
    });
    let writer = agent_tests::workspace_bin("memory-writer");
    // What the writer acknowledged, in order: (`remember` | `forget`, id).
    let mut acknowledged: Vec<(String, String)> = Vec::new();
    let mut torn_tails = 0;
    let mut seed = 0x2545_f491_u64;
    for round in 0..KILLS {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let lines = agent_tests::processes::kill_while_writing(
            Command::new(&writer)
                .arg(&workspace_file)
                .arg(&user_file)
                .arg(seed.to_string()),
            seed,
            30,
            150,
        );
        acknowledged.extend(lines.iter().map(|line| {
            let (op, id) = line.split_once(' ').expect("`op id`");
            (op.to_owned(), id.to_owned())
        }));
        let bytes = std::fs::read(&workspace_file).unwrap_or_default();
        if !bytes.is_empty() && !bytes.ends_with(b"\n") {
            torn_tails += 1;
        }
        if let Some(id) = check_acknowledged(&memories, &acknowledged, round) {
            acknowledged.push(("forget".into(), id));
        }
    }
    assert!(
        torn_tails > 0,
        "no round left a torn tail; the test proved nothing"
    );

    // The next writer cuts the tail: the file is whole lines again, each a record.
    memories
        .remember(
            Scope::Workspace,
            "after the crashes",
            Provenance::now("test", None),
        )
        .unwrap();
    let text = std::fs::read_to_string(&workspace_file).unwrap();
    assert!(text.ends_with('\n'));
    for (number, line) in text.lines().enumerate() {
        serde_json::from_str::<agent_lsp::memory::Record>(line)
            .unwrap_or_else(|error| panic!("line {}: {error}: {line}", number + 1));
    }
    assert!(
        !text.contains("never acknowledged"),
        "a torn record survived"
    );
}

/// Every acknowledged change is in the file as it reads now: a memory whose `remember` was
/// acknowledged is in force unless its `forget` was, and one that was forgotten is not. The kill
/// may come after a change reached the file and before it was acknowledged: a `remember` then
/// shows as a memory nobody acknowledged (allowed), a `forget` as the oldest memory in force
/// missing (allowed once a round, since the writer forgets the oldest first; returned, to count
/// as forgotten from then on).
fn check_acknowledged(
    memories: &Memories,
    acknowledged: &[(String, String)],
    round: u64,
) -> Option<String> {
    let listed = memories
        .list()
        .unwrap_or_else(|error| panic!("round {round}: the file does not open: {error:#}"));
    let in_force = listed
        .iter()
        .map(|memory| memory.id.as_str())
        .collect::<Vec<_>>();
    let forgotten = |id: &str| {
        acknowledged
            .iter()
            .any(|(op, other)| op == "forget" && other == id)
    };
    let expected = acknowledged
        .iter()
        .filter(|(op, id)| op == "remember" && !forgotten(id))
        .map(|(_, id)| id.as_str())
        .collect::<Vec<_>>();
    let missing = expected
        .iter()
        .filter(|id| !in_force.contains(id))
        .collect::<Vec<_>>();
    assert!(
        missing.is_empty() || (missing.len() == 1 && *missing[0] == expected[0]),
        "round {round}: acknowledged memories {missing:?} were lost (in force: {in_force:?})"
    );
    for (op, id) in acknowledged {
        assert!(
            op != "forget" || !in_force.contains(&id.as_str()),
            "round {round}: forgotten {id} is back"
        );
    }
    missing.first().map(|id| id.to_string())
}
