//! Project instructions through the real binary: the workspace root's `AGENTS.md` and the
//! user's are in the system prompt with their paths and digests, a subfolder's is brought in
//! once when the agent works below it, a change mid-session keeps the system prompt and is
//! announced once, and every request replays byte-identically.

use agent_lsp::session::event::EventBody;
use agent_tests::model_endpoint::{ChatRequest, EndpointConfig, ModelEndpoint, Reply};

type Fixture = agent_tests::cli::CliFixture;

fn fixture() -> Fixture {
    let fixture = Fixture::new("").with_files(&[
        ("AGENTS.md", "Root rule: run `make check` before finishing."),
        ("CLAUDE.md", "Claude rule: prefer small diffs."),
        ("sub/AGENTS.md", "Sub rule: indent with tabs here."),
        ("sub/code.txt", "code\n"),
        ("other/notes.txt", "notes\n"),
    ]);
    // The user's own instructions live beside the config file.
    std::fs::write(
        fixture.state.path().join("AGENTS.md"),
        "User rule: answer briefly.",
    )
    .unwrap();
    fixture
}

/// How many messages of `request` (system prompt excluded) contain `needle`.
fn in_messages(request: &ChatRequest, needle: &str) -> usize {
    request
        .messages
        .iter()
        .filter(|message| message.role != "system")
        .filter(|message| message.content.as_deref().unwrap_or("").contains(needle))
        .count()
}

#[test]
fn agents_md_root_nested_and_user_are_in_the_right_requests_recorded_and_replayed() {
    let fixture = fixture();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let user_file = fixture.state.path().join("AGENTS.md");
    let user_path = user_file.canonicalize().unwrap_or(user_file);
    endpoint.push_all([
        Reply::from_fn(|request| {
            let system = request.system_text().unwrap();
            assert!(system.contains("Root rule: run `make check`"), "{system}");
            assert!(system.contains("User rule: answer briefly."), "{system}");
            // CLAUDE.md is not a default file name.
            assert!(!system.contains("Claude rule"), "{system}");
            // A subfolder's file waits until the agent works there.
            assert!(!system.contains("Sub rule"), "{system}");
            assert_eq!(in_messages(request, "Sub rule"), 0);
            Reply::tool_call("read", r#"{"path":"other/notes.txt"}"#)
        }),
        Reply::from_fn(|request| {
            assert_eq!(
                in_messages(request, "Sub rule"),
                0,
                "other/ has no AGENTS.md"
            );
            Reply::tool_call("read", r#"{"path":"sub/code.txt"}"#)
        }),
        Reply::from_fn(|request| {
            assert_eq!(in_messages(request, "Sub rule: indent with tabs here."), 1);
            assert_eq!(
                in_messages(request, "<project-instructions path=\"sub/AGENTS.md\">"),
                1
            );
            Reply::tool_call("read", r#"{"path":"sub/code.txt"}"#)
        }),
        Reply::from_fn(|request| {
            // Once per session, not once per read.
            assert_eq!(in_messages(request, "Sub rule"), 1);
            Reply::text("done")
        }),
    ]);
    let base_url = endpoint.base_url();
    let output = fixture.run(&["run", "--base-url", &base_url, "look around"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    // The root file changes between turns: same system prompt, one announcement.
    std::fs::write(
        fixture.workspace.path().join("AGENTS.md"),
        "Root rule: run `make test` now.",
    )
    .unwrap();
    endpoint.push_all([
        Reply::from_fn(|request| {
            let system = request.system_text().unwrap();
            assert!(system.contains("make check"), "the prompt stays as it was");
            assert_eq!(in_messages(request, "Root rule: run `make test` now."), 1);
            Reply::tool_call("read", r#"{"path":"sub/code.txt"}"#)
        }),
        Reply::from_fn(|request| {
            assert_eq!(in_messages(request, "make test"), 1, "announced once");
            assert_eq!(in_messages(request, "Sub rule"), 1);
            Reply::text("done again")
        }),
    ]);
    let output = fixture.run(&["run", "--session", "last", "--base-url", &base_url, "again"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    endpoint.assert_no_violations();
    assert_eq!(endpoint.remaining_replies(), 0);

    let requests = endpoint.chat_requests();
    assert_eq!(requests.len(), 6);
    let system = |request: &agent_tests::model_endpoint::RecordedRequest| {
        request.body.as_ref().unwrap()["messages"][0].clone()
    };
    assert_eq!(system(&requests[0])["role"], "system");
    assert!(
        requests
            .iter()
            .all(|request| system(request) == system(&requests[0])),
        "the system prompt is byte-stable for the session"
    );

    // Every request/header records both sourced sections with the same digests.
    let store = fixture.store();
    let session = store.resolve("last").unwrap();
    let history = store.load(&session).unwrap();
    let headers = history
        .events()
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::RequestHeader(header) => Some(header.clone()),
            _ => None,
        })
        .collect::<Vec<_>>();
    assert_eq!(headers.len(), 6);
    let sources = headers[0]
        .sections
        .iter()
        .map(|section| section.source.clone())
        .collect::<Vec<_>>();
    assert_eq!(
        sources,
        [user_path.display().to_string(), "AGENTS.md".into()]
    );
    assert!(
        headers
            .iter()
            .all(|header| header.sections == headers[0].sections)
    );
    assert!(
        headers
            .iter()
            .all(|header| header.system_digest == headers[0].system_digest)
    );

    for (index, request) in requests.iter().enumerate() {
        let n = (index + 1).to_string();
        let output = fixture.run(&["session", "replay", &session, "--request", &n]);
        assert!(output.status.success());
        assert_eq!(
            output.stdout, request.raw,
            "request {n} does not replay byte-identically"
        );
    }
}

#[test]
fn the_preset_decides_which_file_names_count() {
    let fixture = fixture();
    let standard = agent_lsp::preset::Preset::builtin("standard").unwrap().text;
    let text = standard.replace(
        "file_names = [\"AGENTS.md\"]",
        "file_names = [\"AGENTS.md\", \"CLAUDE.md\"]",
    );
    assert_ne!(text, standard);
    let preset = fixture.state.path().join("claude.toml");
    std::fs::write(&preset, text).unwrap();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push(Reply::from_fn(|request| {
        let system = request.system_text().unwrap();
        assert!(
            system.contains("Root rule") && system.contains("Claude rule: prefer small diffs.")
        );
        Reply::text("ok")
    }));
    let output = fixture.run(&[
        "run",
        "--preset",
        preset.to_str().unwrap(),
        "--base-url",
        &endpoint.base_url(),
        "hi",
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    endpoint.assert_no_violations();
}
