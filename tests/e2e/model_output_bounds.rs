//! Unbounded model output and prompts against the real `agent-lsp run` and `serve`: a step
//! runs at most `model.max_tool_calls_per_step` calls, one message enters the session at most
//! a quarter of the window (a longer prompt is refused before anything is written, a longer
//! answer is cut with a marker and a call with cut arguments does not run), and a session that
//! already holds a message larger than the window answers its next prompt (and a background
//! candidate an elision made stale is not waited for). The loopback endpoint enforces
//! the wire rules and the window.

use std::process::Output;

use agent_lsp::preset::Preset;
use agent_lsp::session::NewEvent;
use agent_lsp::session::event::{EventBody, EventKind, UserMessage};
use agent_lsp::session::log::Durability;
use agent_lsp::session::store::Store;
use agent_tests::editor::Editor;
use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, ModelTurn, Reply, Rule};
use serde_json::json;

/// The standard preset's `model.max_tool_calls_per_step`.
const CALLS_PER_STEP: usize = 32;

struct Fixture {
    workspace: tempfile::TempDir,
    state: tempfile::TempDir,
    config: std::path::PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let workspace = tempfile::tempdir().unwrap();
        agent_tests::write_tree(workspace.path(), &[("README.md", "# demo\n")]);
        let state = tempfile::tempdir().unwrap();
        let config = state.path().join("config.toml");
        std::fs::write(&config, "[provider]\nrequest_timeout_secs = 60\n").unwrap();
        Fixture {
            workspace,
            state,
            config,
        }
    }

    /// `agent-lsp run --base-url ENDPOINT ARGS… PROMPT`.
    fn run(&self, endpoint: &ModelEndpoint, args: &[&str], prompt: &str) -> Output {
        let base_url = endpoint.base_url();
        let mut all = vec!["run", "--base-url", &base_url];
        all.extend(args);
        all.push(prompt);
        agent_tests::agent_lsp_command(self.state.path(), &self.config, self.workspace.path(), &all)
            .output()
            .expect("run agent-lsp")
    }

    fn store(&self) -> Store {
        Store::for_workspace_in(self.state.path(), self.workspace.path()).unwrap()
    }

    /// The standard preset with another context window, as a file `--preset` takes.
    fn standard_with_window(&self, tokens: u64) -> String {
        let text = Preset::builtin("standard").unwrap().text;
        assert!(text.contains("context_window = 128000"));
        let path = self.state.path().join("wide.toml");
        std::fs::write(
            &path,
            text.replace(
                "context_window = 128000",
                &format!("context_window = {tokens}"),
            ),
        )
        .unwrap();
        path.display().to_string()
    }
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn log_len(store: &Store) -> u64 {
    let id = store.resolve("last").unwrap();
    std::fs::metadata(store.path_of(&id)).unwrap().len()
}

#[test]
fn ten_thousand_tool_calls_in_one_message_run_only_the_cap() {
    let fixture = Fixture::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default().delta_bytes(4096)).unwrap();
    let runaway = (0..10_000).fold(ModelTurn::new(), |turn, _| {
        turn.tool_call("read", r#"{"path":"README.md"}"#)
    });
    endpoint.push(runaway);
    endpoint.push(Reply::from_fn(|request| {
        let answer = request
            .messages
            .iter()
            .rfind(|message| message.role == "assistant")
            .unwrap();
        let ids = answer
            .tool_calls
            .iter()
            .map(|call| call.id.clone())
            .collect::<Vec<_>>();
        let answered = request
            .trailing_tool_results()
            .iter()
            .map(|message| message.tool_call_id.clone().unwrap())
            .collect::<Vec<_>>();
        assert_eq!(ids.len(), CALLS_PER_STEP);
        assert_eq!(answered, ids);
        Reply::text(format!("{} calls came back", answered.len()))
    }));

    let output = fixture.run(&endpoint, &["--preset", "minimal"], "read the readme");
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("32 calls came back"));
    endpoint.assert_no_violations();

    let store = fixture.store();
    let history = store.load("last").unwrap();
    let count = |kind| {
        history
            .events()
            .iter()
            .filter(|event| event.kind() == kind)
            .count()
    };
    assert_eq!(count(EventKind::ToolCall), CALLS_PER_STEP);
    assert_eq!(count(EventKind::ToolResult), CALLS_PER_STEP);
    let results_ok = history.events().iter().all(|event| match &event.body {
        EventBody::ToolResult(result) => result.text.contains("# demo"),
        _ => true,
    });
    assert!(results_ok, "every call that ran read the file");
    let EventBody::AssistantMessage(answer) = &history
        .events()
        .iter()
        .find(|event| event.kind() == EventKind::AssistantMessage)
        .unwrap()
        .body
    else {
        unreachable!()
    };
    assert_eq!(answer.tool_calls.len(), CALLS_PER_STEP);
    assert!(
        answer
            .text
            .contains("this answer made 10000 tool calls and a step runs at most 32"),
        "{}",
        answer.text
    );
    assert!(answer.text.contains("and 9960 more;"), "{}", answer.text);
    // Ten thousand calls with a result each wrote megabytes; the cap keeps the log small.
    let bytes = log_len(&store);
    assert!(bytes < 200_000, "the session log holds {bytes} bytes");
}

#[test]
fn a_prompt_longer_than_a_message_may_be_is_refused_before_anything_is_written() {
    let fixture = Fixture::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    // minimal: a 32000-token window, so a message may hold about 8000 tokens.
    let long = "x".repeat(100_000);

    let output = fixture.run(&endpoint, &["--preset", "minimal"], &long);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.contains("the prompt is too long: about 25000 tokens"),
        "{message}"
    );
    assert!(message.contains("about 8000 tokens"), "{message}");
    assert!(
        message.contains("your text is still where you typed it"),
        "{message}"
    );
    // No session was made for it, and the model never saw it.
    assert!(fixture.store().ids().unwrap().is_empty());
    assert!(endpoint.chat_requests().is_empty());

    // In a session that exists, nothing is appended.
    endpoint.push(Reply::text("hello"));
    let output = fixture.run(&endpoint, &["--preset", "minimal"], "hi");
    assert!(output.status.success(), "{}", stderr(&output));
    let store = fixture.store();
    let path = store.path_of(&store.resolve("last").unwrap());
    let before = std::fs::read(&path).unwrap();
    let output = fixture.run(&endpoint, &["--session", "last"], &long);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("the prompt is too long"));
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(endpoint.chat_requests().len(), 1);
    endpoint.assert_no_violations();
}

#[test]
fn a_5_mb_prompt_over_lsp_is_refused_and_the_session_goes_on() {
    let fixture = Fixture::new();
    let root = fixture.workspace.path().canonicalize().unwrap();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let mut command = std::process::Command::new(agent_tests::workspace_bin("agent-lsp"));
    command
        .env("AGENT_LSP_STATE_DIR", fixture.state.path())
        .env("AGENT_LSP_CONFIG", &fixture.config)
        .env_remove("DEEPSEEK_API_KEY")
        .args(["--workspace", root.to_str().unwrap(), "serve"]);
    let mut editor = Editor::start(command);
    editor.initialize_with(
        &root,
        json!({"baseUrl": endpoint.base_url(), "apiKey": "sk-test", "preset": "standard"}),
    );
    let ask = |editor: &mut Editor, prompt: &str| {
        editor.request(
            "workspace/executeCommand",
            json!({"command": "agent.ask", "arguments": [{"prompt": prompt}]}),
        )
    };

    let response = ask(&mut editor, &"x".repeat(5 << 20));
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("the prompt is too long"), "{response}");
    assert!(message.contains("about 32000 tokens"), "{message}");
    assert!(message.contains("still where you typed it"), "{message}");
    assert!(endpoint.chat_requests().is_empty());

    endpoint.push(Reply::text("Here."));
    let response = ask(&mut editor, "Are you there?");
    assert_eq!(response["result"]["text"], "Here.", "{response}");
    endpoint.assert_no_violations();
    editor.shutdown();

    let store = Store::for_workspace_in(fixture.state.path(), &root).unwrap();
    let history = store.load("last").unwrap();
    let prompts = history
        .events()
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::UserMessage(message) => Some(message.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>();
    assert_eq!(prompts, ["Are you there?"]);
}

/// 6 MiB each: under the 8 MiB an answer may hold at all (`model_response_bounds.rs`), far
/// over what one message may bring into the session.
#[test]
fn six_mb_of_arguments_and_of_content_are_cut_and_the_session_goes_on() {
    let fixture = Fixture::new();
    let endpoint = ModelEndpoint::start(EndpointConfig::default().delta_bytes(1 << 20)).unwrap();
    let huge = "x".repeat(6 << 20);
    endpoint.push(ModelTurn::new().tool_call(
        "write",
        format!(r#"{{"path":"big.txt","content":"{huge}"}}"#),
    ));
    endpoint.push(Reply::from_fn(|request| {
        let call = &request.messages.last().unwrap();
        let result = call.content.clone().unwrap_or_default();
        assert!(result.contains("error: not run: the arguments of this `write` call"));
        let answer = request
            .messages
            .iter()
            .rfind(|message| message.role == "assistant")
            .unwrap();
        let arguments = &answer.tool_calls[0].arguments;
        assert!(arguments.len() < 64 * 1024, "{} bytes", arguments.len());
        assert!(arguments.contains("[… agent-lsp cut "), "{arguments}");
        ModelTurn::new().content("y".repeat(6 << 20)).into()
    }));
    let output = fixture.run(&endpoint, &["--preset", "minimal"], "write a big file");
    assert!(output.status.success(), "{}", stderr(&output));
    // The answer streamed whole; what entered the session is cut.
    assert!(output.stdout.len() >= 6 << 20);
    assert!(!fixture.workspace.path().join("big.txt").exists());

    let store = fixture.store();
    let history = store.load("last").unwrap();
    let answers = history
        .events()
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::AssistantMessage(message) => Some(message),
            _ => None,
        })
        .collect::<Vec<_>>();
    assert_eq!(answers.len(), 2);
    let text = &answers[1].text;
    assert!(text.starts_with("yyyy") && text.ends_with("yyyy"));
    assert!(
        text.contains("of 6291456 bytes (about 1572864 tokens) from the middle of this text"),
        "{}",
        &text[..text.len().min(40_000)]
    );
    let bytes = log_len(&store);
    assert!(bytes < 1_000_000, "the session log holds {bytes} bytes");

    // The next request carries the cut messages and fits.
    endpoint.push(Reply::from_fn(|request| {
        assert!(request.prompt_tokens < 32_000, "{}", request.prompt_tokens);
        Reply::text("still here")
    }));
    let output = fixture.run(&endpoint, &["--session", "last"], "and now?");
    assert!(output.status.success(), "{}", stderr(&output));
    endpoint.assert_no_violations();
}

#[test]
fn a_session_holding_a_message_larger_than_the_window_answers_even_an_empty_prompt() {
    let fixture = Fixture::new();
    // A session written before messages were bounded: a prompt of about 600000 tokens in a
    // 128000-token window.
    let store = fixture.store();
    let preset = Preset::builtin("standard").unwrap();
    let mut session = store.create_session(&preset, Durability::Sync).unwrap();
    let huge = session
        .append(NewEvent::new(
            1,
            0,
            EventBody::UserMessage(UserMessage {
                text: "x".repeat(2_400_000),
                origin: "prompt".into(),
            }),
        ))
        .unwrap()
        .seq;
    drop(session);

    let endpoint = ModelEndpoint::start(EndpointConfig::default().context_window(128_000)).unwrap();
    endpoint.push(Reply::from_fn(|request| {
        let longest = request
            .messages
            .iter()
            .filter_map(|message| message.content.as_ref())
            .map(String::len)
            .max();
        assert!(longest < Some(16_000), "{longest:?}");
        Reply::text("back")
    }));
    let output = fixture.run(&endpoint, &["--session", "last"], "");
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("back"));
    endpoint.assert_no_violations();

    let history = fixture.store().load("last").unwrap();
    let stub = history
        .events()
        .iter()
        .find(|event| event.source_event_seqs == [huge])
        .expect("a stub in place of the oversized prompt");
    let EventBody::UserMessage(message) = &stub.body else {
        panic!("{stub:?}")
    };
    assert_eq!(message.origin, "elision");
    assert!(
        message
            .text
            .contains(&format!("recall_history {{\"event_seq\": {huge}}}")),
        "{}",
        message.text
    );
    assert!(!history.surface().contains(huge));
}

#[test]
fn a_prompt_over_the_endpoints_window_is_elided_after_the_overflow_and_answered() {
    let fixture = Fixture::new();
    // The preset believes in a million tokens; the endpoint holds 32000 and says so.
    let preset = fixture.standard_with_window(1_000_000);
    let endpoint = ModelEndpoint::start(EndpointConfig::default().context_window(32_000)).unwrap();
    endpoint.push(Reply::text("answered after all"));
    let output = fixture.run(&endpoint, &["--preset", &preset], &"x".repeat(130_000));
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("answered after all"));
    let violations = endpoint.take_violations();
    assert_eq!(
        violations
            .iter()
            .map(|violation| violation.rule)
            .collect::<Vec<_>>(),
        [Rule::ContextLength]
    );

    // The window the endpoint stated holds for the session's next prompts, an empty one too.
    endpoint.push(Reply::text("and again"));
    let output = fixture.run(&endpoint, &["--session", "last"], "");
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("and again"));
    endpoint.assert_no_violations();
}

#[tokio::test]
async fn a_candidate_whose_range_was_elided_is_discarded_without_waiting_for_its_summary() {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use agent_lsp::agent::TurnOutcome;
    use agent_tests::compaction_harness::{Harness, Next, Script, is_summary_request, preset};

    let endpoint =
        ModelEndpoint::start(EndpointConfig::default().reasoning_in_tool_stretches(true)).unwrap();
    let script = Arc::new(Mutex::new(Script::new(6, 24)));
    // The first step reads a result over one message's budget (2500 tokens of a 10000 window);
    // the step after the candidate's summary call went out reads one over the whole window.
    script
        .lock()
        .unwrap()
        .queued
        .push(Next::ReadPath("mid.txt".into()));
    let summary_seen = Arc::new(Mutex::new(false));
    for _ in 0..40 {
        let (script, summary_seen) = (script.clone(), summary_seen.clone());
        endpoint.push(Reply::from_fn(move |request| {
            let mut script = script.lock().unwrap();
            let mut seen = summary_seen.lock().unwrap();
            if is_summary_request(request) && script.summary_requests == 0 {
                // The candidate's summary would take ten minutes.
                *seen = true;
                script.summary_delay = Duration::from_secs(600);
                let reply = script.reply(request);
                script.summary_delay = Duration::ZERO;
                return reply;
            }
            if *seen && !is_summary_request(request) {
                *seen = false;
                script.queued.push(Next::ReadPath("huge.txt".into()));
            }
            script.reply(request)
        }));
    }
    let preset = preset(
        10_000,
        "soft_ratio = 0.6\nhard_ratio = 0.9\nkeep_recent_steps = 1\nbackground = true",
        "",
    );
    let mut harness = Harness::new(&endpoint, preset, 6, 2000);
    let lines = |name: &str, n: usize| {
        (0..n)
            .map(|line| format!("{name} line {line}: one two three four five six\n"))
            .collect::<String>()
    };
    std::fs::write(harness.workspace.path().join("mid.txt"), lines("mid", 300)).unwrap();
    std::fs::write(
        harness.workspace.path().join("huge.txt"),
        lines("huge", 1000),
    )
    .unwrap();

    let outcome = tokio::time::timeout(
        Duration::from_secs(120),
        harness.turn("Read every file and report."),
    )
    .await
    .expect("the stale candidate's summary is not waited for");
    assert!(
        matches!(outcome, TurnOutcome::Answered { .. }),
        "{outcome:?}"
    );
    endpoint.assert_no_violations();

    let history = harness.store().load(harness.session.id()).unwrap();
    let elided = history
        .events()
        .iter()
        .filter(|event| matches!(&event.body, EventBody::ToolResult(result) if result.meta["elided"] == true))
        .count();
    assert_eq!(elided, 2, "both large results were elided");
    let ends = history
        .events()
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::CompactionEnd(end) => Some((end.outcome.as_str(), end.reason.clone())),
            _ => None,
        })
        .collect::<Vec<_>>();
    assert_eq!(
        ends[0],
        (
            "discarded",
            Some("the surface changed inside the range since the candidate was built".into())
        ),
        "{ends:?}"
    );
    assert!(
        ends.iter().any(|(outcome, _)| *outcome == "committed"),
        "{ends:?}"
    );
}
