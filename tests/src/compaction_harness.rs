//! A long scripted session through the library's agent loop against the loopback model endpoint,
//! for the compaction tests (`e2e/compaction.rs`) and the cache-stability benchmark
//! (`benches/compaction.rs`).
//!
//! The script is one responder shared by every reply: a summary request (recognised by the
//! compaction instruction's marker) gets a summary in the fixed template, every other request
//! gets the next step of a long task: thinking, a tool call reading one of the workspace's files,
//! and once every `answer_every` steps a final answer that ends the turn.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_lsp::agent::{Agent, AgentEvent, TurnOutcome, TurnUi};
use agent_lsp::compaction::summary::{INSTRUCTION_MARKER, SECTIONS};
use agent_lsp::llm::provider::{Provider, ProviderConfig, ProviderOptions};
use agent_lsp::preset::Preset;
use agent_lsp::session::Session;
use agent_lsp::session::log::Durability;
use agent_lsp::session::store::Store;
use agent_lsp::tools::{ToolRegistry, ToolRuntime};
use agent_lsp::workspace::Workspace;
use tokio_util::sync::CancellationToken;

use crate::model_endpoint::{ChatRequest, Failure, ModelEndpoint, ModelTurn, Reply};

/// A preset for the scripted session: thinking on, `read`, `grep` and `recall_history`, the given
/// window, and `compaction` as the body of `[plugins.compaction]` (empty: no compaction).
pub fn preset(context_window: u64, compaction: &str, extra: &str) -> Preset {
    let compaction = if compaction.is_empty() {
        String::new()
    } else {
        format!("[plugins.compaction]\nenabled = true\n{compaction}\n")
    };
    let text = format!(
        "description = \"scripted compaction session\"\n\
         [model]\nthinking = \"enabled\"\nmax_steps = 200\ncontext_window = {context_window}\n\
         [tools]\nenabled = [\"grep\", \"read\", \"recall_history\"]\n\
         [permissions]\ndefault = \"allow\"\n\
         [plugins.runtime_context]\nenabled = true\n{compaction}{extra}"
    );
    Preset::parse("scripted", "the scripted test preset", &text).expect("test preset parses")
}

/// What the scripted model does next; set by the test between steps when it wants to.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// Read `src/file{n}.txt` (n = step number modulo the number of files).
    Read,
    /// Read this workspace path.
    ReadPath(String),
    /// Call `recall_history` with these arguments.
    Recall(String),
    /// Call the tool `.0` with the arguments `.1` (JSON text).
    Call(String, String),
    /// Answer and end the turn.
    Answer,
}

/// A hook called with the number and the body of each main request.
pub type OnMain = Box<dyn FnMut(usize, &ChatRequest) + Send>;

/// The responder's state.
pub struct Script {
    /// Main (non-summary) requests answered so far.
    pub main_requests: usize,
    /// Summary requests answered so far.
    pub summary_requests: usize,
    pub files: usize,
    /// Answer (end the turn) at every this many main requests.
    pub answer_every: usize,
    /// When set, summary requests get this HTTP status instead of a summary.
    pub fail_summaries: Option<u16>,
    /// How long the summary answer takes to start.
    pub summary_delay: Duration,
    /// How long each main answer takes to start.
    pub step_delay: Duration,
    /// Every `.0`-th main request reads the file `.1` instead of a small one.
    pub large: Option<(usize, String)>,
    /// One-off actions for upcoming main requests.
    pub queued: Vec<Next>,
    /// Called with each main request (after the `queued` action is chosen), e.g. to change the
    /// workspace's git branch so the runtime context changes.
    pub on_main: Option<OnMain>,
}

impl Script {
    pub fn new(files: usize, answer_every: usize) -> Script {
        Script {
            main_requests: 0,
            summary_requests: 0,
            files,
            answer_every,
            fail_summaries: None,
            summary_delay: Duration::ZERO,
            step_delay: Duration::ZERO,
            large: None,
            queued: Vec::new(),
            on_main: None,
        }
    }

    /// The answer to one request.
    pub fn reply(&mut self, request: &ChatRequest) -> Reply {
        if is_summary_request(request) {
            self.summary_requests += 1;
            if let Some(status) = self.fail_summaries {
                return Failure::new(status, "scripted summary failure", "invalid_request_error")
                    .into();
            }
            let mut text = String::new();
            for section in SECTIONS {
                text.push_str(&format!(
                    "## {section}\nsummary {} of {section}\n",
                    self.summary_requests
                ));
            }
            return ModelTurn::new()
                .reasoning("Summarize.")
                .content(text)
                .first_byte_delay(self.summary_delay)
                .into();
        }
        self.main_requests += 1;
        let n = self.main_requests;
        if let Some(on_main) = &mut self.on_main {
            on_main(n, request);
        }
        let next = if self.queued.is_empty() {
            if n.is_multiple_of(self.answer_every) {
                Next::Answer
            } else {
                Next::Read
            }
        } else {
            self.queued.remove(0)
        };
        let turn = ModelTurn::new()
            .reasoning(format!("Step {n}: the next thing to look at."))
            .first_byte_delay(self.step_delay);
        match next {
            Next::Read => {
                let path = match &self.large {
                    Some((every, path)) if n.is_multiple_of(*every) => path.clone(),
                    _ => format!("src/file{}.txt", n % self.files),
                };
                turn.tool_call_with_id(
                    format!("read-{n}"),
                    "read",
                    format!(r#"{{"path":"{path}"}}"#),
                )
                .into()
            }
            Next::ReadPath(path) => turn
                .tool_call_with_id(
                    format!("read-{n}"),
                    "read",
                    serde_json::json!({ "path": path }).to_string(),
                )
                .into(),
            Next::Recall(arguments) => turn
                .tool_call_with_id(format!("recall-{n}"), "recall_history", arguments)
                .into(),
            Next::Call(name, arguments) => turn
                .tool_call_with_id(format!("{name}-{n}"), name, arguments)
                .into(),
            Next::Answer => turn.content(format!("Done with part {n}.")).into(),
        }
    }
}

/// Whether a request is a compaction's summary call.
pub fn is_summary_request(request: &ChatRequest) -> bool {
    request
        .last_user_text()
        .is_some_and(|text| text.starts_with(INSTRUCTION_MARKER))
}

/// Whether a recorded request body is a summary call.
pub fn is_summary_body(body: &serde_json::Value) -> bool {
    body["messages"]
        .as_array()
        .and_then(|messages| messages.last())
        .and_then(|message| message["content"].as_str())
        .is_some_and(|text| text.starts_with(INSTRUCTION_MARKER))
}

/// Keep `n` responders queued on the endpoint, all sharing `script`.
pub fn push_responders(endpoint: &ModelEndpoint, script: &Arc<Mutex<Script>>, n: usize) {
    for _ in 0..n {
        let script = script.clone();
        endpoint.push(Reply::from_fn(move |request| {
            script.lock().expect("script lock").reply(request)
        }));
    }
}

/// Collects what the loop tells the user about compaction.
#[derive(Clone, Default)]
pub struct Notices(pub Arc<Mutex<Vec<String>>>);

impl TurnUi for Notices {
    fn event(&mut self, event: &AgentEvent<'_>) {
        if let AgentEvent::Compaction { outcome, .. } = event
            && let Some(line) = agent_lsp::compaction::describe_outcome(outcome)
        {
            self.0.lock().expect("notices lock").push(line);
        }
    }
}

/// A workspace with `files` text files of about `bytes` bytes each, a session store, a session
/// and an agent pointed at `endpoint`.
pub struct Harness {
    pub workspace: tempfile::TempDir,
    pub state: tempfile::TempDir,
    pub session: Session,
    pub agent: Agent,
    pub notices: Notices,
}

impl Harness {
    pub fn new(endpoint: &ModelEndpoint, preset: Preset, files: usize, bytes: usize) -> Harness {
        let workspace = tempfile::tempdir().expect("workspace");
        write_files(workspace.path(), files, bytes);
        std::fs::create_dir_all(workspace.path().join(".git")).expect(".git");
        set_branch(workspace.path(), "main");
        let state = tempfile::tempdir().expect("state");
        let store = Store::for_workspace_in(state.path(), workspace.path()).expect("store");
        let session = store
            .create_session(&preset, Durability::Batched)
            .expect("session");
        let agent = agent_for(endpoint, preset, workspace.path());
        Harness {
            workspace,
            state,
            session,
            agent,
            notices: Notices::default(),
        }
    }

    /// Replace the agent by a new one, as a new process continuing the session would make.
    pub fn new_process(&mut self, endpoint: &ModelEndpoint, preset: Preset) {
        self.agent = agent_for(endpoint, preset, self.workspace.path());
    }

    pub async fn turn(&mut self, prompt: &str) -> TurnOutcome {
        let mut ui = self.notices.clone();
        self.agent
            .run_turn(
                &mut self.session,
                prompt,
                &CancellationToken::new(),
                &mut ui,
            )
            .await
            .expect("the turn runs")
    }

    pub fn store(&self) -> Store {
        Store::for_workspace_in(self.state.path(), self.workspace.path()).expect("store")
    }

    pub fn session_path(&self) -> PathBuf {
        self.session.path().to_owned()
    }
}

/// An agent of `preset` on `workspace`, whose model is `endpoint`.
fn agent_for(endpoint: &ModelEndpoint, preset: Preset, workspace: &Path) -> Agent {
    let options = ProviderOptions {
        base_url: Some(endpoint.base_url()),
        model: Some("deepseek-v4-flash".into()),
        backoff_base_ms: Some(10),
        backoff_cap_ms: Some(100),
        ..ProviderOptions::default()
    };
    let config = ProviderConfig::resolve(&options, |_| None).expect("provider config");
    let provider = Provider::new(config).expect("provider");
    let host = crate::plugin_host(&preset, workspace, Some(provider.clone()));
    let assembly =
        agent_lsp::host::assembly::assemble(&preset, &host).expect("the preset's plugins");
    let mut registry = ToolRegistry::standard();
    for tool in assembly.tools {
        registry.register_shared(tool);
    }
    let registry = registry
        .only(&preset.file.tools.enabled)
        .expect("tools of the preset");
    let tools = ToolRuntime::new(Workspace::new(workspace).expect("ws"), registry);
    Agent::new(provider, tools, preset, assembly.plugins)
}

/// `src/file{i}.txt` for `i < files`, each about `bytes` bytes of distinct words.
pub fn write_files(root: &Path, files: usize, bytes: usize) {
    std::fs::create_dir_all(root.join("src")).expect("src");
    for i in 0..files {
        let mut text = String::with_capacity(bytes + 64);
        let mut line = 0;
        while text.len() < bytes {
            text.push_str(&format!(
                "file {i} line {line}: alpha beta gamma delta {}\n",
                line * 7 + i
            ));
            line += 1;
        }
        std::fs::write(root.join(format!("src/file{i}.txt")), text).expect("file");
    }
}

/// Point the workspace's `.git/HEAD` at `branch` (the runtime context reads it).
pub fn set_branch(root: &Path, branch: &str) {
    std::fs::write(
        root.join(".git/HEAD"),
        format!("ref: refs/heads/{branch}\n"),
    )
    .expect("HEAD");
}
