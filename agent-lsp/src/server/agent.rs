//! The agent as `agent-lsp serve` hosts it: one session at a time (a new one on
//! `agent.session.new`), one turn at a time, over the same bridge, document mirror and buffers
//! as the editor.
//!
//! A turn shows itself through `$/progress` (cancellable: the editor's cancel button, the
//! `agent.cancel` command and `$/cancelRequest` of the command all stop it cleanly), streams its
//! answer into a prompt document when it has one (see `prompts` and `ui::AnswerWriter`), and
//! reports what it changed. Its edits reach open files through `workspace/applyEdit`
//! ([`buffers`]). The jobs and sub-agents running beside it are shown as `$/progress` of their
//! own ([`activity`]). Failures the programmer can act on (no model configured, the endpoint
//! is down, the key is refused) are shown with `window/showMessage`; the server keeps serving.

pub(crate) mod activity;
pub(crate) mod buffers;
mod hooks_approval;
mod mcp_approval;
mod setup;
mod ui;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Reply, ResponseError, Shared, codes, internal};
use crate::agent::TurnOutcome;
use crate::llm::provider::{Provider, ProviderError};
use crate::preset::{DEFAULT_PRESET, Preset, PresetDirs};
use crate::session::store::Store;
pub(crate) use setup::EditorOptions;
use ui::{AnswerWriter, HostUi, Progress};

use super::codes::REQUEST_FAILED;

/// How often streamed text is written into the prompt document.
const STREAM_EVERY: Duration = Duration::from_millis(100);

/// The agent state of one editor connection.
#[derive(Default)]
pub(crate) struct Host {
    workspace: OnceLock<PathBuf>,
    options: OnceLock<EditorOptions>,
    state: tokio::sync::Mutex<Option<State>>,
    running: Mutex<Option<Running>>,
    next_progress: AtomicU64,
    /// The model of the current session, readable while a turn holds the state.
    provider: Mutex<Option<Provider>>,
    /// The id of the current session, readable while a turn holds the state.
    session_id: Mutex<Option<String>>,
    /// The jobs and sub-agents running beside the turn, shown in `agent.status` and
    /// `$/progress`; one board for the connection, whichever session posts into it.
    pub(crate) activity: Arc<crate::activity::Activity>,
    /// The board's entries the editor was shown as `$/progress`.
    shown: activity::Shown,
    /// The `.mcp.json` contents this connection asked the programmer about.
    mcp_asked: mcp_approval::Asked,
    /// The hooks files' contents this connection asked the programmer about.
    hooks_asked: mcp_approval::Asked,
}

/// The session and what runs in it; made on first use.
pub(crate) type State = crate::host::Conversation;

struct Running {
    cancel: CancellationToken,
    progress: Option<Value>,
    /// The turn's progress title, which the jobs and sub-agents started in it name.
    title: String,
}

/// Clears the running turn when the turn ends, however it ends.
struct RunningGuard<'a>(&'a Host);

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        *self.0.running.lock().expect("running turn") = None;
    }
}

/// Where a turn's answer goes.
pub(crate) struct AnswerTarget {
    /// The prompt document.
    pub path: PathBuf,
    /// Byte offset in its current text where the answer starts.
    pub insert_at: usize,
    /// Whether a fresh `## you` follows the answer.
    pub at_end: bool,
}

/// What a command asks of a turn.
pub(crate) struct TurnRequest {
    pub prompt: String,
    /// Shown as the progress title.
    pub title: String,
    pub answer: Option<AnswerTarget>,
}

/// How a turn went, for the command's result.
pub(crate) struct TurnReport {
    pub outcome: TurnOutcome,
    pub session: String,
    /// Workspace-relative paths the turn's edits and writes changed.
    pub changed: Vec<String>,
    /// The session's goal and plan when the turn ended (`plans::view`): its `open` items are
    /// what the turn left undone.
    pub plan: Value,
}

impl Host {
    pub(crate) fn set_workspace(&self, workspace: PathBuf) {
        let _ = self.workspace.set(workspace);
    }

    pub(crate) fn set_options(&self, options: EditorOptions) {
        let _ = self.options.set(options);
    }

    pub(crate) fn workspace(&self) -> Result<&Path, ResponseError> {
        self.workspace
            .get()
            .map(PathBuf::as_path)
            .ok_or(ResponseError::new(
                codes::SERVER_NOT_INITIALIZED,
                "no workspace yet".to_owned(),
            ))
    }

    pub(crate) fn store(&self) -> Result<Store, ResponseError> {
        Store::for_workspace(self.workspace()?).map_err(internal)
    }

    /// Whether a turn is running.
    pub(crate) fn is_running(&self) -> bool {
        self.running.lock().expect("running turn").is_some()
    }

    /// Refuse to start anything that needs the session while a turn runs (commands check this
    /// before they touch a document, so a refused command changes nothing).
    pub(crate) fn ensure_idle(&self) -> Result<(), ResponseError> {
        if self.is_running() {
            Err(turn_running())
        } else {
            Ok(())
        }
    }

    /// Stop the running turn, if any. Returns whether there was one.
    pub(crate) fn cancel(&self) -> bool {
        match &*self.running.lock().expect("running turn") {
            Some(running) => {
                running.cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// The editor pressed cancel on a progress notification: the turn's, or a job's or a
    /// sub-agent's.
    pub(crate) fn cancel_progress(&self, token: &Value) {
        if let Some(running) = &*self.running.lock().expect("running turn")
            && running.progress.as_ref() == Some(token)
        {
            running.cancel.cancel();
            return;
        }
        self.shown.cancel(self, token);
    }

    /// The running turn's progress title.
    fn turn_title(&self) -> Option<String> {
        let running = self.running.lock().expect("running turn");
        running.as_ref().map(|running| running.title.clone())
    }

    /// The id of the server's current session, `None` before it has one (nothing is made for
    /// asking).
    pub(crate) fn session_id(&self) -> Option<String> {
        self.session_id.lock().expect("session id").clone()
    }

    /// The caps memories are held to: those of the preset new sessions use here.
    pub(crate) fn memory_caps(&self, shared: &Arc<Shared>) -> anyhow::Result<crate::memory::Caps> {
        let preset = Preset::load(
            &self.preset_name(shared),
            &PresetDirs::for_workspace(
                self.workspace()
                    .map_err(|error| anyhow::anyhow!("{}", error.message))?,
            ),
        )?;
        crate::memory::plugin::caps_of(&preset)
    }

    /// The preset of new sessions: `initializationOptions`, the config file, or the default.
    fn preset_name(&self, shared: &Arc<Shared>) -> String {
        self.options
            .get()
            .and_then(|options| options.preset.clone())
            .or_else(|| shared.config.preset.clone())
            .unwrap_or_else(|| DEFAULT_PRESET.to_owned())
    }

    /// The session state, made on first use.
    pub(crate) async fn state(
        &self,
        shared: &Arc<Shared>,
    ) -> Result<tokio::sync::MutexGuard<'_, Option<State>>, ResponseError> {
        if self.state.lock().await.is_none() {
            // Asked without the session's lock; another caller may make the session meanwhile,
            // which only makes the question moot.
            self.offer_mcp_approval(shared, None).await;
            self.offer_hooks_approval(shared).await;
        }
        let mut state = self.state.lock().await;
        if state.is_none() {
            *state = Some(self.make_state(shared, None)?);
        }
        Ok(state)
    }

    /// The model the server's turns use (from `initializationOptions`, the config file or the
    /// environment), for other model calls such as context-editor folds; `None` without one.
    pub(crate) async fn provider(&self, shared: &Arc<Shared>) -> Option<Provider> {
        if let Some(provider) = self.provider.lock().expect("provider").clone() {
            return Some(provider);
        }
        if !self.is_running() {
            let _ = self.state(shared).await;
        }
        self.provider.lock().expect("provider").clone()
    }

    /// Refuse a turn before anything is changed for it (a chat document made, a prompt
    /// appended) when there is no model to run it.
    pub(crate) async fn ensure_model(&self, shared: &Arc<Shared>) -> Result<(), ResponseError> {
        match self.provider(shared).await {
            Some(_) => Ok(()),
            None => Err(not_configured()),
        }
    }

    /// Start a new session (the next turns continue it). Refused while a turn runs.
    pub(crate) async fn new_session(&self, shared: &Arc<Shared>) -> Reply {
        if self.is_running() {
            return Err(ResponseError::new(
                REQUEST_FAILED,
                "a turn is running; cancel it (agent.cancel) before starting a new session",
            ));
        }
        let preset = self
            .state
            .lock()
            .await
            .as_ref()
            .map(|state| state.preset().clone());
        self.offer_mcp_approval(shared, preset.as_ref()).await;
        self.offer_hooks_approval(shared).await;
        let mut state = self.state.lock().await;
        let fresh = self.make_state(shared, preset)?;
        let id = fresh.session.id().to_owned();
        *state = Some(fresh);
        Ok(json!({"session": id}))
    }

    /// Run one turn to its end. `request_cancel` is the command request's own cancellation.
    pub(crate) async fn run_turn(
        &self,
        shared: &Arc<Shared>,
        request: TurnRequest,
        request_cancel: &CancellationToken,
    ) -> Result<TurnReport, ResponseError> {
        let cancel = CancellationToken::new();
        {
            let mut running = self.running.lock().expect("running turn");
            if running.is_some() {
                return Err(turn_running());
            }
            *running = Some(Running {
                cancel: cancel.clone(),
                progress: None,
                title: request.title.clone(),
            });
        }
        let _guard = RunningGuard(self);
        let link = {
            let (request_cancel, cancel) = (request_cancel.clone(), cancel.clone());
            tokio::spawn(async move {
                request_cancel.cancelled().await;
                cancel.cancel();
            })
        };
        let result = self.turn(shared, request, &cancel).await;
        link.abort();
        result
    }

    async fn turn(
        &self,
        shared: &Arc<Shared>,
        request: TurnRequest,
        cancel: &CancellationToken,
    ) -> Result<TurnReport, ResponseError> {
        let mut guard = self.state(shared).await?;
        let state = guard.as_mut().expect("made by state()");
        if !state.has_model() {
            return Err(not_configured());
        }
        let turn = state.session.history().next_turn();
        let progress = Progress::begin(shared, self, &request.title).await;
        let (deltas, writer) = match request.answer {
            Some(target) => {
                let (sender, receiver) = mpsc::unbounded_channel();
                let writer = AnswerWriter::new(shared, target, turn);
                (Some(sender), Some(tokio::spawn(writer.run(receiver))))
            }
            None => (None, None),
        };
        let mut ui = HostUi {
            progress: progress.clone(),
            deltas,
            changed: Vec::new(),
            text_in_step: false,
            plan: crate::plans::Watch::new(state.session.history()),
        };
        let before = state.session.history().last_seq();
        let outcome = state.submit(&request.prompt, cancel, &mut ui).await;
        ui::show_hook_failures(shared, state.session.history(), before);
        let changed = std::mem::take(&mut ui.changed);
        drop(ui);
        let trailer = match &outcome {
            Ok(TurnOutcome::Answered { .. }) => String::new(),
            Ok(TurnOutcome::StepLimit { steps }) => {
                format!(
                    "_(stopped after {steps} steps: the preset's limit; send again to continue)_\n"
                )
            }
            Ok(TurnOutcome::Cancelled { .. }) => "_(cancelled)_\n".to_owned(),
            Err(error) => format!("_(failed: {})_\n", explain(error)),
        };
        if let Some(writer) = writer {
            match writer.await {
                Ok(finish) => {
                    if let Err(problem) = finish.finish(&trailer).await {
                        shared.show_error(&format!(
                            "the answer could not be written into the prompt document ({problem}); \
                             it is in the session log (agent-lsp session show last)"
                        ));
                    }
                }
                Err(error) => tracing::error!("the answer writer failed: {error}"),
            }
        }
        let session = state.session.id().to_owned();
        let plan = crate::plans::view(state.session.history());
        match outcome {
            Ok(outcome) => {
                let mut message = match &outcome {
                    TurnOutcome::Answered { steps, .. } => format!("done in {steps} steps"),
                    TurnOutcome::StepLimit { steps } => format!("stopped after {steps} steps"),
                    TurnOutcome::Cancelled { .. } => "cancelled".into(),
                };
                match plan["open"].as_u64().unwrap_or(0) {
                    0 => {}
                    1 => message.push_str("; 1 plan item is still open"),
                    open => message.push_str(&format!("; {open} plan items are still open")),
                }
                progress.end(&message);
                Ok(TurnReport {
                    outcome,
                    session,
                    changed,
                    plan,
                })
            }
            Err(error) => {
                let message = explain(&error);
                progress.end("failed");
                Err(ResponseError::new(REQUEST_FAILED, message))
            }
        }
    }
}

impl Host {
    /// `agent.compact`: compact the server's session now (refused while a turn runs; the turn's
    /// own pressure check compacts when needed).
    pub(crate) async fn compact(&self, shared: &Arc<Shared>, cancel: &CancellationToken) -> Reply {
        if self.is_running() {
            return Err(ResponseError::new(
                REQUEST_FAILED,
                "a turn is running; compact after it ends (it compacts by itself when the context is full)",
            ));
        }
        let mut guard = self.state(shared).await?;
        let state = guard.as_mut().expect("made by state()");
        let Some(provider) = state.provider().cloned() else {
            let message = "no model is configured, and compaction asks the model for the summary";
            return Err(ResponseError::new(REQUEST_FAILED, message));
        };
        let preset = state.preset().clone();
        let crate::host::Compacted {
            shrank: committed,
            message,
        } = crate::host::compact_now(
            &mut state.session,
            &preset,
            &provider,
            None,
            state.tools.hooks().cloned().as_deref(),
            cancel,
        )
        .await
        .map_err(|error| ResponseError::new(REQUEST_FAILED, format!("{error:#}")))?;
        shared.notify_editor(
            "window/showMessage",
            json!({"type": if committed { 3 } else { 2 }, "message": format!("agent-lsp: {message}")}),
        );
        Ok(json!({"compacted": committed, "message": message, "session": state.session.id()}))
    }
}

/// What a turn without a model answers. It is not also shown with `window/showMessage`: a
/// command's error is what the editor shows of a failed request (see `docs/lsp-extensions.md`).
fn not_configured() -> ResponseError {
    let message = format!(
        "no model is configured: set DEEPSEEK_API_KEY in the environment that starts the editor \
         (or the API key in the editor's agent-lsp settings), or a [provider] base_url in {}",
        crate::config::Config::path_for_messages()
    );
    ResponseError::new(REQUEST_FAILED, message)
}

fn turn_running() -> ResponseError {
    ResponseError::new(
        REQUEST_FAILED,
        "a turn is already running; wait for it or cancel it (agent.cancel)",
    )
}

/// What went wrong in a turn, said so the programmer knows what to do.
fn explain(error: &anyhow::Error) -> String {
    if let Some(blocked) = error
        .chain()
        .find_map(|cause| cause.downcast_ref::<crate::agent::PromptBlocked>())
    {
        return blocked.to_string();
    }
    let provider = error
        .chain()
        .find_map(|cause| cause.downcast_ref::<ProviderError>());
    match provider {
        Some(ProviderError::Auth { .. }) => format!(
            "the model endpoint refused the API key ({}); check the key in the editor's agent-lsp settings or DEEPSEEK_API_KEY",
            provider.expect("matched")
        ),
        Some(ProviderError::Network { .. } | ProviderError::Timeout { .. }) => format!(
            "the model endpoint cannot be reached ({}); check that it is up and the base URL is right",
            provider.expect("matched")
        ),
        Some(ProviderError::Balance { .. }) => format!(
            "the model provider says the account has no balance left ({})",
            provider.expect("matched")
        ),
        _ => format!("the turn failed: {error:#}"),
    }
}
