//! The tool runtime: the catalog the model sees, the permission guard, and the execution of a
//! step's tool calls into `tool/call` and `tool/result` events.
//!
//! Three things hold here that the rest of the agent relies on:
//!
//! - **Every call gets exactly one result, in call order.** Invalid JSON arguments, an unknown
//!   tool, a refused permission, a bad path, a timeout, a panic, a cancelled turn: each becomes a
//!   [`ToolOutput`] the model reads (`error: …` with what to do next), never a Rust error that
//!   ends the turn. The session refuses anything but results between an assistant message's
//!   calls and their results, so this is also what keeps the session writable. The only errors
//!   [`ToolRuntime::execute`] returns are failures to append to the session log.
//! - **The catalog does not depend on permissions.** A denied tool is still listed, sorted by
//!   name with canonical JSON schemas, and refused when called. Keeping the catalog byte-stable
//!   across modes keeps the provider's prefix cache warm (docs/architecture.md, "Context
//!   assembly and the prefix cache").
//! - **What the model saw is what the log keeps.** The text is capped (head and tail kept, a
//!   marker says how much was cut) before it is recorded, and `meta` records the facts about it
//!   (`truncated`, `original_len`, `source`, `duration_ms`, `is_error`, …).
//!
//! Scheduling: the calls of one step run in batches, in call order. Consecutive read-only calls
//! form one batch and run concurrently; so do consecutive `task` calls (each sub-agent works in
//! a session of its own); any other mutating call runs alone. So a `read` that follows a
//! `write` in the same step sees the write, and independent reads do not wait for each other.
//! While a batch runs, the log-only events its calls record ([`EventSink`]) are appended as
//! they come.

mod asker;
pub mod buffers;
mod by_hand;
mod call;
mod cap;
pub mod checkpoints;
pub mod edit;
pub mod fs;
mod guard;
mod hooked;
pub mod lsp;
mod nested;
mod protected;
mod registry;
pub mod search;
pub mod shell;
pub mod web;

#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{BoxFuture, join_all};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::llm::ToolDef;
pub use crate::permissions::{POLICY_KEYS, Permission, PermissionPolicy};
use crate::plugin::outcomes::{ToolCallOutcome, ToolOutput};
use crate::plugin::tool::{CallArgs, EventSink, Tool};
use crate::session::event::{EventBody, ToolCallEvent, ToolCallRef, ToolResult};
use crate::session::{NewEvent, Session};
use crate::workspace::Workspace;
pub use asker::{Asker, HeadlessAsker};
pub use cap::cap_text;
pub use registry::{STANDARD_TOOLS, ToolRegistry};

/// The result of a call whose tool panicked: what it said, and that nothing is known of what it
/// did.
fn panicked(name: &str, panic: &(dyn std::any::Any + Send)) -> ToolOutput {
    let message = crate::logging::panic_message(panic);
    tracing::error!(tool = %name, "the tool panicked: {message}");
    ToolOutput::error(format!(
        "`{name}` failed unexpectedly (an internal error: {message}); it may have taken effect partly, check before retrying"
    ))
    .with_meta("panicked", true)
}

/// Run blocking file work off the async threads; a panic becomes an error output.
pub(crate) async fn blocking<F>(work: F) -> ToolOutput
where
    F: FnOnce() -> ToolOutput + Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(output) => output,
        Err(err) => ToolOutput::error(format!("the tool failed unexpectedly: {err}")),
    }
}

/// Where the batch that starts at `index` ends: consecutive read-only calls run together, and
/// so do consecutive calls of one tool that [`Tool::runs_beside_itself`]; any other call runs
/// alone.
fn batch_end(prepared: &[Prepared], calls: &[ToolCallRef], index: usize) -> usize {
    let joins = |first: &Arc<dyn Tool>, other: &Prepared, name: &str| match other {
        Prepared::Run { tool, .. } if first.read_only() => tool.read_only(),
        Prepared::Run { tool, .. } if first.runs_beside_itself() => {
            tool.runs_beside_itself() && name == calls[index].name
        }
        _ => false,
    };
    let Prepared::Run { tool: first, .. } = &prepared[index] else {
        return index + 1;
    };
    let mut end = index + 1;
    while end < calls.len() && joins(first, &prepared[end], &calls[end].name) {
        end += 1;
    }
    end
}

/// The session a call runs in, as its [`ToolContext`] names it.
#[derive(Clone, Copy)]
struct CallSession<'a> {
    path: &'a Path,
    id: &'a str,
    call_seq: u64,
    events: &'a EventSink,
}

/// Plugins that watch tool calls (progress reporting, audit, tests).
pub trait ToolObserver: Send + Sync {
    /// Before the call's `tool/call` event is appended.
    fn before_call(&self, _call: &ToolCallRef) {}
    /// After the call's `tool/result` event is appended; `output` is what was recorded.
    fn after_result(&self, _call: &ToolCallRef, _output: &ToolOutput) {}
}

/// Told when a mutating tool changed a file (the `source` in its meta), e.g. so language
/// servers see the new text; what it returns is appended to the tool's result (fresh
/// diagnostics), so the model learns at once whether its edit broke something.
pub trait WriteObserver: Send + Sync {
    /// Called after `path` was written: tell whoever must know, and return what the tool's
    /// result should add (`None`: nothing).
    fn after_write(&self, workspace: &Workspace, path: &Path)
    -> BoxFuture<'static, Option<String>>;
}

/// Time and size limits applied to every call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// How long a call may run unless its tool asks for more ([`Tool::timeout`]).
    pub timeout: Duration,
    /// The most text a result gives the model, in bytes; longer text keeps its head and tail.
    pub max_output_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            timeout: Duration::from_secs(60),
            max_output_bytes: 256 * 1024,
        }
    }
}

/// Runs tool calls against a workspace and records them in a session.
#[derive(Clone)]
pub struct ToolRuntime {
    workspace: Arc<Workspace>,
    registry: ToolRegistry,
    policy: PermissionPolicy,
    asker: Arc<dyn Asker>,
    observers: Vec<Arc<dyn ToolObserver>>,
    write_observer: Option<Arc<dyn WriteObserver>>,
    buffers: Option<Arc<dyn buffers::Buffers>>,
    /// What the commands of the calls may touch; `None`: no sandbox.
    sandbox: Option<Arc<crate::sandbox::Sandbox>>,
    /// Where the file checkpoints go (`checkpoints.rs`); `None`: none are taken.
    checkpoints: Option<Arc<crate::snapshots::Snapshots>>,
    /// The user's hooks (`crate::hooks`); `None`: none run.
    hooks: Option<Arc<crate::hooks::Hooks>>,
    limits: Limits,
}

/// What a call turned into before anything runs.
enum Prepared {
    /// Answered without running: invalid arguments, unknown tool, refused.
    Done(ToolOutput),
    Run {
        tool: Arc<dyn Tool>,
        args: CallArgs,
        grant: Grant,
    },
}

impl Prepared {
    /// This, with what the call's `PreToolUse` hooks reported carried to its result.
    fn with_hook_notices(self, notices: Vec<String>) -> Prepared {
        match self {
            _ if notices.is_empty() => self,
            Prepared::Run {
                tool,
                args,
                mut grant,
            } => {
                grant.hook_notices = notices;
                Prepared::Run { tool, args, grant }
            }
            Prepared::Done(output) => Prepared::Done(output.with_meta("hook_notices", notices)),
        }
    }
}

/// What the guard granted a call that runs: the sandbox its commands run in, and what the
/// user was asked and answered (for the call's result record; `None` when nobody was asked).
struct Grant {
    sandbox: Option<Arc<crate::sandbox::Sandbox>>,
    asked: Option<Value>,
    /// What the call's `PreToolUse` hooks reported without blocking it (a failure), for its
    /// result's record and the user.
    hook_notices: Vec<String>,
}

impl ToolRuntime {
    /// A runtime with the default policy ([`PermissionPolicy::default`]), a headless asker
    /// without `--yes`, no observers and default limits.
    pub fn new(workspace: Workspace, registry: ToolRegistry) -> ToolRuntime {
        ToolRuntime {
            workspace: Arc::new(workspace),
            registry,
            policy: PermissionPolicy::default(),
            asker: Arc::new(HeadlessAsker::default()),
            observers: Vec::new(),
            write_observer: None,
            buffers: None,
            sandbox: None,
            checkpoints: None,
            hooks: None,
            limits: Limits::default(),
        }
    }

    /// Allow, ask or deny each tool as `policy` says (a preset's `[permissions]`).
    pub fn with_policy(mut self, policy: PermissionPolicy) -> ToolRuntime {
        self.policy = policy;
        self
    }

    /// Ask `asker` about calls whose permission is `ask`: the terminal, the editor, or nobody.
    pub fn with_asker(mut self, asker: Arc<dyn Asker>) -> ToolRuntime {
        self.asker = asker;
        self
    }

    /// Tell `observer` of every call's start and end, beside the ones already told.
    pub fn with_observer(mut self, observer: Arc<dyn ToolObserver>) -> ToolRuntime {
        self.observers.push(observer);
        self
    }

    /// Tell `observer` of every file a tool wrote (the language servers, whose fresh
    /// diagnostics join the result).
    pub fn with_write_observer(mut self, observer: Arc<dyn WriteObserver>) -> ToolRuntime {
        self.write_observer = Some(observer);
        self
    }

    /// Run the calls' commands in `sandbox` (the preset's `[sandbox]`).
    pub fn with_sandbox(mut self, sandbox: Arc<crate::sandbox::Sandbox>) -> ToolRuntime {
        self.sandbox = Some(sandbox);
        self
    }

    /// What holds the calls' commands; `None` for a runtime made without one (a test).
    pub fn sandbox(&self) -> Option<&crate::sandbox::Sandbox> {
        self.sandbox.as_deref()
    }

    /// Run the user's `hooks` around every call (the agent's loop runs the others from
    /// [`ToolRuntime::hooks`]).
    pub fn with_hooks(mut self, hooks: Arc<crate::hooks::Hooks>) -> ToolRuntime {
        self.hooks = Some(hooks);
        self
    }

    /// The user's hooks, when the session has any.
    pub fn hooks(&self) -> Option<&Arc<crate::hooks::Hooks>> {
        self.hooks.as_ref()
    }

    /// Read and change the editor's open buffers instead of the disk for the files it has open.
    pub fn with_buffers(mut self, buffers: Arc<dyn buffers::Buffers>) -> ToolRuntime {
        self.buffers = Some(buffers);
        self
    }

    /// Hold every call to `limits` (its timeout and output cap) instead of the defaults.
    pub fn with_limits(mut self, limits: Limits) -> ToolRuntime {
        self.limits = limits;
        self
    }

    /// The workspace the tools are confined to.
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// The session's tools by name.
    pub fn registry(&self) -> &ToolRegistry {
        &self.registry
    }

    /// Which tools are allowed, asked about or denied.
    pub fn policy(&self) -> &PermissionPolicy {
        &self.policy
    }

    /// The tool catalog for `SystemPrompt::tool`, sorted by name, the same whatever the policy.
    pub fn catalog(&self) -> Vec<ToolDef> {
        self.registry.catalog()
    }

    /// Run the calls of one model step and record them: a `tool/call` event per call (raw
    /// arguments as the model sent them), then, once all have run, a `tool/result` per call in
    /// call order. Every call gets a result, also when `cancel` fires (it then says the call was
    /// cancelled). Errors are only failures to append to the session.
    pub async fn execute(
        &self,
        session: &mut Session,
        turn: u32,
        step: u32,
        calls: &[ToolCallRef],
        cancel: &CancellationToken,
    ) -> anyhow::Result<Vec<ToolCallOutcome>> {
        self.execute_inner(session, turn, step, calls, &HashMap::new(), cancel, None)
            .await
    }

    /// [`ToolRuntime::execute`], with the calls named in `not_run` answered by the output given
    /// for them instead of running (the agent refuses a call whose arguments it had to cut).
    /// They are recorded like every other call: a `tool/call`, then their result in call order.
    pub async fn execute_answering(
        &self,
        session: &mut Session,
        turn: u32,
        step: u32,
        calls: &[ToolCallRef],
        not_run: &HashMap<String, ToolOutput>,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Vec<ToolCallOutcome>> {
        self.execute_inner(session, turn, step, calls, not_run, cancel, None)
            .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn execute_inner(
        &self,
        session: &mut Session,
        turn: u32,
        step: u32,
        calls: &[ToolCallRef],
        not_run: &HashMap<String, ToolOutput>,
        cancel: &CancellationToken,
        origin: Option<&str>,
    ) -> anyhow::Result<Vec<ToolCallOutcome>> {
        let mut call_seqs = Vec::with_capacity(calls.len());
        let mut resolved = Vec::with_capacity(calls.len());
        for call in calls {
            for observer in &self.observers {
                observer.before_call(call);
            }
            let found = self.resolve(call);
            let event = session.append(NewEvent::new(
                turn,
                step,
                EventBody::ToolCall(ToolCallEvent {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                    sandbox: self.sandbox_record(&found),
                }),
            ))?;
            call_seqs.push(event.seq);
            resolved.push(found);
        }

        // The `PreToolUse` hooks and the permission questions run one call at a time, in call
        // order, before anything runs.
        let session_path = session.path().to_owned();
        let session_id = session.id().to_owned();
        let mut prepared = Vec::with_capacity(calls.len());
        for (call, found) in calls.iter().zip(resolved) {
            if let Some(output) = not_run.get(&call.id) {
                prepared.push(Prepared::Done(output.clone()));
                continue;
            }
            let record = |run| {
                session.append(NewEvent::new(turn, step, EventBody::HookRun(run)))?;
                Ok(())
            };
            prepared.push(
                self.guard(call, found, (&session_id, &session_path), record, cancel)
                    .await?,
            );
        }

        let (sink, mut recorded) = EventSink::channel();
        let mut outputs: Vec<Option<(ToolOutput, Duration)>> = vec![None; calls.len()];
        let mut index = 0;
        while index < calls.len() {
            let batch_end = batch_end(&prepared, calls, index);
            let window = self
                .open_window(
                    session,
                    (turn, step),
                    &prepared[index..batch_end],
                    &calls[index..batch_end],
                )
                .await?;
            let (session_path, session_id, call_seqs) = (&session_path, &session_id, &call_seqs);
            let sink = &sink;
            let runs = (index..batch_end).map(|i| {
                let call = &calls[i];
                let prepared = std::mem::replace(
                    &mut prepared[i],
                    Prepared::Done(ToolOutput::ok(String::new())),
                );
                async move {
                    match prepared {
                        Prepared::Done(output) => (output, Duration::ZERO),
                        Prepared::Run { tool, args, grant } => {
                            let session = CallSession {
                                path: session_path,
                                id: session_id,
                                call_seq: call_seqs[i],
                                events: sink,
                            };
                            self.run_guarded(call, tool, args, grant, cancel, session)
                                .await
                        }
                    }
                }
            });
            // What the calls record while they run is appended as it comes.
            let mut batch = std::pin::pin!(join_all(runs));
            let results = loop {
                tokio::select! {
                    biased;
                    Some(body) = recorded.recv() => {
                        session.append(NewEvent::new(turn, step, body))?;
                    }
                    results = &mut batch => break results,
                }
            };
            while let Ok(body) = recorded.try_recv() {
                session.append(NewEvent::new(turn, step, body))?;
            }
            for (offset, result) in results.into_iter().enumerate() {
                outputs[index + offset] = Some(result);
            }
            self.close_window(session, (turn, step), window).await?;
            index = batch_end;
        }

        let mut outcomes = Vec::with_capacity(calls.len());
        for (call, output) in calls.iter().zip(outputs) {
            let (output, duration) = output.expect("every call ran or was answered");
            let output = self.finish(output, duration, origin);
            let event = session.append(NewEvent::new(
                turn,
                step,
                EventBody::ToolResult(ToolResult {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    text: output.text.clone(),
                    meta: output.meta.clone(),
                }),
            ))?;
            let result_seq = event.seq;
            for observer in &self.observers {
                observer.after_result(call, &output);
            }
            outcomes.push(ToolCallOutcome {
                call: call.clone(),
                output,
                result_seq,
            });
        }
        Ok(outcomes)
    }
}

/// The model's raw argument string as a JSON object. An empty string means no arguments,
/// which some providers send for parameterless calls.
fn parse_raw_arguments(raw: &str) -> Result<Value, ToolOutput> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err(ToolOutput::error(
            "the arguments must be a JSON object with the tool's parameters",
        )
        .with_meta("invalid_arguments", true)),
        Err(err) => Err(ToolOutput::error(format!(
            "the arguments were not valid JSON ({err}); send the call again with a JSON object"
        ))
        .with_meta("invalid_arguments", true)),
    }
}

fn cancelled_before_start(name: &str) -> ToolOutput {
    ToolOutput::error(format!(
        "cancelled: the user cancelled the turn before `{name}` ran; it had no effect"
    ))
    .with_meta("cancelled", true)
}
