//! Model answers far larger than any model writes, against the real binary: a one-piece JSON
//! body of 1 GB and an event stream that never ends, for the agent's chat request (`run` and
//! `serve`) and for inline completion's FIM request (`serve`). Reading stops at the cap, so
//! memory stays bounded; the error names the cap; nothing of the answer enters the session log.

use std::process::Stdio;
use std::time::{Duration, Instant};

use agent_lsp::completion::log::CompletionLog;
use agent_lsp::session::event::EventBody;
use agent_lsp::session::store::Store;
use agent_tests::editor::{Editor, url};
use agent_tests::model_endpoint::{EndpointConfig, FimReply, ModelEndpoint, Reply};
use agent_tests::processes::peak_rss_kib;
use serde_json::json;

const GIB: usize = 1 << 30;
/// The most memory a process may reach while the endpoint offers 1 GB (before the caps, a
/// 1 GB body took `serve` from 82 MB to 3 GB).
const PEAK_LIMIT_KIB: u64 = 300 * 1024;
/// What the chat errors say: the cap on a one-piece body, and on an answer.
const BODY_CAPPED: &str = "the endpoint sent more than 16 MiB in its one-piece JSON answer";
const ANSWER_CAPPED: &str =
    "the endpoint sent more than 8 MiB of answer (text, reasoning and tool calls together)";

struct Fixture {
    workspace: tempfile::TempDir,
    state: tempfile::TempDir,
    config: std::path::PathBuf,
}

impl Fixture {
    /// A workspace, and a config file whose deadline ends a request the caps do not.
    fn new(extra: &str) -> Fixture {
        let workspace = tempfile::tempdir().unwrap();
        agent_tests::write_tree(workspace.path(), &[("notes.txt", "total = area(\n")]);
        let state = tempfile::tempdir().unwrap();
        let config = state.path().join("config.toml");
        std::fs::write(
            &config,
            format!("[provider]\ntotal_timeout_secs = 30\nmax_retries = 0\n{extra}"),
        )
        .unwrap();
        Fixture {
            workspace,
            state,
            config,
        }
    }

    fn root(&self) -> std::path::PathBuf {
        self.workspace.path().canonicalize().unwrap()
    }

    /// `agent-lsp run` to its end: its exit code, stderr and memory high-water mark.
    fn run(&self, endpoint: &ModelEndpoint) -> (Option<i32>, String, u64) {
        let base_url = endpoint.base_url();
        let args = ["run", "--preset", "minimal", "--base-url", &base_url, "hi"];
        let mut child = agent_tests::agent_lsp_command(
            self.state.path(),
            &self.config,
            self.workspace.path(),
            &args,
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
        let started = Instant::now();
        let mut peak = 0;
        let status = loop {
            peak = peak.max(peak_rss_kib(child.id()));
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > Duration::from_secs(120) {
                let _ = child.kill();
                panic!("the run went on far past its deadline");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        (status.code(), stderr, peak)
    }

    /// `serve` with the chat model and `[completion]` both at `endpoint`, initialized.
    fn serve(&self, endpoint: &ModelEndpoint) -> Editor {
        let config = self.state.path().join("serve.toml");
        std::fs::write(
            &config,
            format!(
                "[provider]\ntotal_timeout_secs = 30\nmax_retries = 0\n[completion]\nmodel = \"deepseek-v4-flash\"\nbase_url = \"{}/beta\"\napi_key_env = \"TEST_FIM_KEY\"\ndebounce_ms = 5\ntimeout_ms = 30000\n",
                endpoint.root_url()
            ),
        )
        .unwrap();
        let mut command =
            agent_tests::agent_lsp_command(self.state.path(), &config, &self.root(), &["serve"]);
        command.env("TEST_FIM_KEY", "sk-fim");
        let mut editor = Editor::start(command);
        editor.initialize_with(
            &self.root(),
            json!({"baseUrl": endpoint.base_url(), "apiKey": "sk-test", "preset": "minimal"}),
        );
        editor
    }

    /// The events of the last session, checked to hold no answer and the errors of `requests`
    /// requests, each `too_large`.
    fn assert_no_answer_recorded(&self, requests: usize) {
        let store = Store::for_workspace_in(self.state.path(), &self.root()).unwrap();
        let history = store.load("last").unwrap();
        let events = history.events();
        assert!(
            !events
                .iter()
                .any(|event| matches!(event.body, EventBody::AssistantMessage(_))),
            "an answer was recorded"
        );
        let classes = events
            .iter()
            .filter_map(|event| match &event.body {
                EventBody::RequestError(error) => Some(error.class.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>();
        assert_eq!(classes, vec!["too_large"; requests]);
        let bytes = std::fs::metadata(store.path_of(&store.resolve("last").unwrap()))
            .unwrap()
            .len();
        assert!(bytes < 1_000_000, "the session log holds {bytes} bytes");
    }
}

#[test]
fn a_one_gigabyte_json_answer_to_run_is_refused_at_the_cap_with_bounded_memory() {
    let fixture = Fixture::new("");
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push(Reply::huge_json(GIB));
    let (code, stderr, peak) = fixture.run(&endpoint);
    eprintln!("run, 1 GB JSON answer: peak RSS {peak} KiB");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains(BODY_CAPPED), "{stderr}");
    assert!(peak < PEAK_LIMIT_KIB, "peak RSS {peak} KiB");
    fixture.assert_no_answer_recorded(1);
    // Not retried: the same endpoint would send the same.
    assert_eq!(endpoint.chat_requests().len(), 1);
}

#[test]
fn an_endless_answer_stream_to_run_is_refused_at_the_cap_with_bounded_memory() {
    let fixture = Fixture::new("");
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push(Reply::endless());
    let (code, stderr, peak) = fixture.run(&endpoint);
    eprintln!("run, endless answer stream: peak RSS {peak} KiB");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains(ANSWER_CAPPED), "{stderr}");
    assert!(peak < PEAK_LIMIT_KIB, "peak RSS {peak} KiB");
    fixture.assert_no_answer_recorded(1);
}

#[test]
fn serve_refuses_a_one_gigabyte_and_an_endless_chat_answer_with_bounded_memory() {
    let fixture = Fixture::new("");
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let mut editor = fixture.serve(&endpoint);
    let ask = |editor: &mut Editor| {
        editor.request(
            "workspace/executeCommand",
            json!({"command": "agent.ask", "arguments": [{"prompt": "hi"}]}),
        )
    };
    endpoint.push(Reply::huge_json(GIB));
    let response = ask(&mut editor);
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(BODY_CAPPED), "{response}");
    endpoint.push(Reply::endless());
    let response = ask(&mut editor);
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(ANSWER_CAPPED), "{response}");
    let peak = peak_rss_kib(editor.pid());
    eprintln!("serve, 1 GB JSON answer and endless answer stream: peak RSS {peak} KiB");
    assert!(peak < PEAK_LIMIT_KIB, "peak RSS {peak} KiB");
    // The session goes on.
    endpoint.push(Reply::text("Here."));
    let response = ask(&mut editor);
    assert_eq!(response["result"]["text"], "Here.", "{response}");
    endpoint.assert_no_violations();
    editor.shutdown();
}

#[test]
fn serve_refuses_a_one_gigabyte_completion_and_drops_an_endless_one_with_bounded_memory() {
    let fixture = Fixture::new("");
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let mut editor = fixture.serve(&endpoint);
    let notes = fixture.root().join("notes.txt");
    editor.open(&notes, "plaintext");
    let inline = |editor: &mut Editor| {
        let response = editor.request(
            "textDocument/inlineCompletion",
            json!({"textDocument": {"uri": url(&notes)}, "position": {"line": 0, "character": 13},
                   "context": {"triggerKind": 1}}),
        );
        response["result"].clone()
    };
    endpoint.push_fim(FimReply::huge_json(GIB));
    assert_eq!(inline(&mut editor), json!({"items": []}));
    endpoint.push_fim(FimReply::endless());
    assert_eq!(inline(&mut editor), json!({"items": []}));
    let peak = peak_rss_kib(editor.pid());
    eprintln!("serve, 1 GB and endless FIM answers: peak RSS {peak} KiB");
    assert!(peak < PEAK_LIMIT_KIB, "peak RSS {peak} KiB");
    let calls = endpoint.fim_calls();
    assert_eq!(calls.len(), 2);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !endpoint.fim_calls().iter().all(|call| call.dropped) {
        assert!(Instant::now() < deadline, "{:?}", endpoint.fim_calls());
        std::thread::sleep(Duration::from_millis(10));
    }
    let store = Store::for_workspace_in(fixture.state.path(), &fixture.root()).unwrap();
    let records = CompletionLog::in_dir(store.workspace_dir()).read().unwrap();
    let error = records[0].error.as_deref().unwrap_or_default();
    assert!(
        error.contains("the endpoint sent more than 2 MiB in its one-piece JSON completion"),
        "{records:?}"
    );
    endpoint.assert_no_violations();
    editor.shutdown();
}
