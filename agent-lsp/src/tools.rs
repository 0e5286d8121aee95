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

pub mod buffers;
pub mod edit;
pub mod fs;
pub mod lsp;
mod nested;
mod protected;
pub mod search;
pub mod shell;
pub mod web;

#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use futures_util::future::{BoxFuture, join_all};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::canonical::canonical_json;
use crate::llm::ToolDef;
pub use crate::permissions::{POLICY_KEYS, Permission, PermissionPolicy};
use crate::plugin::outcomes::{ToolCallOutcome, ToolOutput};
use crate::plugin::tool::{CallArgs, EventSink, Tool, ToolContext};
use crate::session::event::{AssistantMessage, EventBody, ToolCallEvent, ToolCallRef, ToolResult};
use crate::session::{NewEvent, Session};
use crate::workspace::Workspace;

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

#[derive(Clone)]
struct Registered {
    tool: Arc<dyn Tool>,
    def: ToolDef,
}

/// The tools of a session, by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Registered>,
}

/// Names of the standard tools, sorted.
pub const STANDARD_TOOLS: [&str; 7] = ["edit", "glob", "grep", "list", "read", "shell", "write"];

impl ToolRegistry {
    /// A registry without tools; `host::catalog` fills a session's.
    pub fn new() -> ToolRegistry {
        ToolRegistry::default()
    }

    /// The workspace file tools and the shell ([`STANDARD_TOOLS`]).
    pub fn standard() -> ToolRegistry {
        let mut registry = ToolRegistry::new();
        registry
            .register(fs::Read)
            .register(fs::List)
            .register(fs::Write)
            .register(search::Glob)
            .register(search::Grep)
            .register(edit::Edit)
            .register(shell::Shell);
        registry
    }

    /// Only the named tools, e.g. a preset's `tools.enabled`; naming an unknown tool is an error
    /// rather than a silently shorter catalog.
    pub fn only(mut self, names: &[impl AsRef<str>]) -> anyhow::Result<ToolRegistry> {
        for name in names {
            let name = name.as_ref();
            if !self.tools.contains_key(name) {
                anyhow::bail!(
                    "no tool named `{name}`; the tools are {} (a tool that comes with a plugin, like `recall_history` with `compaction`, needs the plugin's [plugins.NAME] table enabled)",
                    self.names().collect::<Vec<_>>().join(", ")
                );
            }
        }
        self.tools
            .retain(|name, _| names.iter().any(|wanted| wanted.as_ref() == name));
        Ok(self)
    }

    /// Add a tool. Its schema is normalized to canonical JSON (sorted keys) so the catalog is
    /// byte-stable whatever the map type.
    ///
    /// # Panics
    /// When a tool of that name is registered already: nothing replaces a tool. A session's
    /// catalog is built by `host::catalog`, which names the two sources of a clash instead.
    pub fn register(&mut self, tool: impl Tool) -> &mut Self {
        self.register_shared(Arc::new(tool))
    }

    /// [`ToolRegistry::register`] for a tool a plugin brought.
    pub fn register_shared(&mut self, tool: Arc<dyn Tool>) -> &mut Self {
        let mut def = tool.def();
        def.parameters = serde_json::from_str(&canonical_json(&def.parameters))
            .expect("canonical JSON parses back");
        let name = def.name.clone();
        let earlier = self.tools.insert(name.clone(), Registered { tool, def });
        assert!(earlier.is_none(), "two tools are named `{name}`");
        self
    }

    /// The tool named `name`, if the catalog has it.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name).map(|registered| &registered.tool)
    }

    /// Tool names in catalog order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// The catalog: every registered tool, sorted by name, whatever the permissions.
    pub fn catalog(&self) -> Vec<ToolDef> {
        self.tools
            .values()
            .map(|registered| registered.def.clone())
            .collect()
    }
}

/// Who answers an `ask` permission: the editor (a prompt to the programmer) or the terminal.
pub trait Asker: Send + Sync {
    /// Whether this call may run. The call carries the raw arguments, to show to the person.
    fn ask(&self, call: &ToolCallRef) -> BoxFuture<'static, bool>;

    /// Whether this call may run, where it needs approval for a reason of its own
    /// ([`Tool::approval_reason`]), which the question shows; an asker that shows nothing asks
    /// as [`Asker::ask`].
    fn ask_because(&self, call: &ToolCallRef, reason: &str) -> BoxFuture<'static, bool> {
        let _ = reason;
        self.ask(call)
    }

    /// How a refusal is explained to the model.
    fn refusal(&self, call: &ToolCallRef) -> String {
        format!(
            "the call to `{}` was refused: its permission is `ask` in the preset's permission policy and the user declined it; do not retry the same call, ask the user or take another way",
            call.name
        )
    }
}

/// The asker of a session with nobody to ask: `ask` means deny, unless `yes` (`--yes`) was given.
#[derive(Clone, Copy, Debug, Default)]
pub struct HeadlessAsker {
    /// Whether `ask` means allow (`--yes`) rather than deny.
    pub yes: bool,
}

impl Asker for HeadlessAsker {
    fn ask(&self, call: &ToolCallRef) -> BoxFuture<'static, bool> {
        tracing::info!(tool = %call.name, approved = self.yes, "headless permission `ask`");
        let yes = self.yes;
        Box::pin(async move { yes })
    }

    fn refusal(&self, call: &ToolCallRef) -> String {
        format!(
            "the call to `{}` was refused by the preset's permission policy: it needs approval (`ask`) and this session runs without anyone to ask (run with --yes to approve such calls); do not retry it, find another way or tell the user",
            call.name
        )
    }
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
    limits: Limits,
}

/// What a call turned into before anything runs.
enum Prepared {
    /// Answered without running: invalid arguments, unknown tool, refused.
    Done(ToolOutput),
    Run {
        tool: Arc<dyn Tool>,
        args: CallArgs,
    },
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

    /// Run one tool outside a model turn (`agent-lsp tool NAME --args JSON`) and record it.
    ///
    /// The session only accepts a tool result that answers a call on its surface, so the run is
    /// recorded as a turn of its own (the last turn + 1, step 0, "outside of model steps"): an
    /// `assistant/message` with empty text carrying the one call (id `user-<seq>`), then the
    /// `tool/call` and `tool/result` events as [`ToolRuntime::execute`] writes them. The result's
    /// meta has `"origin": "user"`, saying the call came from the user rather than the model.
    /// The pair stays on the surface, so the model later sees what the user ran.
    pub async fn run_one(
        &self,
        session: &mut Session,
        name: &str,
        arguments: &str,
        cancel: &CancellationToken,
    ) -> anyhow::Result<ToolCallOutcome> {
        let history = session.history();
        let turn = history.next_turn();
        let call = ToolCallRef {
            id: format!("user-{}", history.last_seq() + 1),
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        };
        session.append(NewEvent::new(
            turn,
            0,
            EventBody::AssistantMessage(AssistantMessage {
                text: String::new(),
                reasoning: None,
                tool_calls: vec![call.clone()],
            }),
        ))?;
        let mut outcomes = self
            .execute_inner(
                session,
                turn,
                0,
                &[call],
                &HashMap::new(),
                cancel,
                Some("user"),
            )
            .await?;
        Ok(outcomes.pop().expect("one call, one outcome"))
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
        for call in calls {
            for observer in &self.observers {
                observer.before_call(call);
            }
            let event = session.append(NewEvent::new(
                turn,
                step,
                EventBody::ToolCall(ToolCallEvent {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                }),
            ))?;
            call_seqs.push(event.seq);
        }

        // Permission questions are asked one at a time, in call order, before anything runs.
        let mut prepared = Vec::with_capacity(calls.len());
        for call in calls {
            prepared.push(match not_run.get(&call.id) {
                Some(output) => Prepared::Done(output.clone()),
                None => self.prepare(call, cancel).await,
            });
        }

        let session_path = session.path().to_owned();
        let session_id = session.id().to_owned();
        let (sink, mut recorded) = EventSink::channel();
        let mut outputs: Vec<Option<(ToolOutput, Duration)>> = vec![None; calls.len()];
        let mut index = 0;
        while index < calls.len() {
            let batch_end = batch_end(&prepared, calls, index);
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
                        Prepared::Run { tool, args } => {
                            let session = CallSession {
                                path: session_path,
                                id: session_id,
                                call_seq: call_seqs[i],
                                events: sink,
                            };
                            self.run_guarded(call, tool, args, cancel, session).await
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

    /// The `path` argument of a call, when it names a protected path: as shown to the model,
    /// and why it is protected. Judged on the physical path, so `a/../.git/config` and a link
    /// into `.git/` count too; a path that does not resolve is refused by the tool itself.
    fn protected_path(&self, args: &Value) -> Option<(String, &'static str)> {
        let path = self.workspace.resolve(args.get("path")?.as_str()?).ok()?;
        let relative = path.strip_prefix(self.workspace.root()).ok()?;
        let why = match protected::protected_reason(relative) {
            Some((_, why)) => why,
            None if protected::in_configured_hooks(self.workspace.root(), &path) => {
                protected::HOOKS_REASON
            }
            None => return None,
        };
        Some((self.workspace.display(&path), why))
    }

    /// Parse the arguments, find the tool, apply the permission policy.
    async fn prepare(&self, call: &ToolCallRef, cancel: &CancellationToken) -> Prepared {
        let args = match parse_raw_arguments(&call.arguments) {
            Ok(args) => CallArgs::from(args),
            Err(output) => return Prepared::Done(output),
        };
        let Some(tool) = self.registry.get(&call.name) else {
            return Prepared::Done(
                ToolOutput::error(format!(
                    "there is no tool named `{}`; the tools are {}",
                    call.name,
                    self.registry.names().collect::<Vec<_>>().join(", ")
                ))
                .with_meta("unknown_tool", true),
            );
        };
        let mut permission = self.policy.permission(&call.name);
        let protected = (!tool.read_only())
            .then(|| self.protected_path(args.json()))
            .flatten();
        if let Some((shown, _)) = &protected
            && self.policy.protected_paths > permission
        {
            tracing::info!(tool = %call.name, path = %shown, "a protected path: {}", self.policy.protected_paths.as_str());
            permission = self.policy.protected_paths;
        }
        // A call that does more than its tool's permission covers is asked for.
        let reason = (permission != Permission::Deny)
            .then(|| tool.approval_reason(&self.workspace, &args))
            .flatten();
        if let Some(reason) = &reason
            && permission == Permission::Allow
        {
            tracing::info!(tool = %call.name, reason, "the call needs the user's approval");
            permission = Permission::Ask;
        }
        let refused = |default: String| match &protected {
            Some((shown, why)) => format!(
                "`{shown}` is a protected path ({why}), and this session may not write it without the user's approval; do not retry, tell the user what you wanted to change there"
            ),
            None => default,
        };
        let allowed = match permission {
            Permission::Allow => true,
            Permission::Deny => {
                tracing::info!(tool = %call.name, call_id = %call.id, "call denied by policy");
                return Prepared::Done(
                    ToolOutput::error(refused(format!(
                        "the call to `{}` was refused by the preset's permission policy (`{}` is denied in this session); do not retry it, find another way or tell the user",
                        call.name, call.name
                    )))
                    .with_meta("refused", permission.as_str()),
                );
            }
            Permission::Ask => {
                let asked = match &reason {
                    Some(reason) => self.asker.ask_because(call, reason),
                    None => self.asker.ask(call),
                };
                tokio::select! {
                    approved = asked => approved,
                    () = cancel.cancelled() => return Prepared::Done(cancelled_before_start(&call.name)),
                }
            }
        };
        if !allowed {
            tracing::info!(tool = %call.name, call_id = %call.id, "call not approved");
            let refusal = match &reason {
                Some(reason) => format!(
                    "this call needs the user's approval whatever the preset allows, because {reason}. {}",
                    self.asker.refusal(call)
                ),
                None => self.asker.refusal(call),
            };
            return Prepared::Done(
                ToolOutput::error(refused(refusal)).with_meta("refused", permission.as_str()),
            );
        }
        Prepared::Run {
            tool: tool.clone(),
            args,
        }
    }

    /// Run one call with its timeout, stopping it when the turn is cancelled.
    async fn run_guarded(
        &self,
        call: &ToolCallRef,
        tool: Arc<dyn Tool>,
        args: CallArgs,
        cancel: &CancellationToken,
        session: CallSession<'_>,
    ) -> (ToolOutput, Duration) {
        if cancel.is_cancelled() {
            return (cancelled_before_start(&call.name), Duration::ZERO);
        }
        let timeout = tool.timeout(&args).unwrap_or(self.limits.timeout);
        let call_cancel = cancel.child_token();
        let ctx = ToolContext {
            workspace: self.workspace.clone(),
            cancel: call_cancel.clone(),
            call_id: call.id.clone(),
            session_path: Some(session.path.to_owned()),
            session_id: Some(session.id.to_owned()),
            call_seq: Some(session.call_seq),
            buffers: self.buffers.clone(),
            events: Some(session.events.clone()),
            calls: tool.calls_tools().then(|| {
                Arc::new(nested::Nested::new(
                    self.clone(),
                    call,
                    session,
                    call_cancel.clone(),
                )) as Arc<dyn crate::plugin::tool::NestedCalls>
            }),
        };
        let read_only = tool.read_only();
        let started = Instant::now();
        let span = tracing::info_span!("tool", name = %call.name, call_id = %call.id);
        // A tool's panic, in the call that makes its future or in the future itself, is the
        // call's result: the turn, the other calls of the batch and the session go on.
        let name = call.name.clone();
        let run = match std::panic::catch_unwind(AssertUnwindSafe(|| tool.run(ctx, args))) {
            Ok(run) => AssertUnwindSafe(run)
                .catch_unwind()
                .map(move |result| result.unwrap_or_else(|panic| panicked(&name, &*panic)))
                .boxed(),
            Err(panic) => {
                let output = panicked(&name, &*panic);
                async move { output }.boxed()
            }
        }
        .instrument(span.clone());
        let output = tokio::select! {
            biased;
            result = tokio::time::timeout(timeout, run) => match result {
                Ok(output) => output,
                Err(_) => {
                    call_cancel.cancel();
                    ToolOutput::error(format!(
                        "`{}` did not finish within {} s and was stopped{}; try a smaller request",
                        call.name,
                        timeout.as_secs_f64(),
                        if read_only { "" } else { " (it may have taken effect partly: check before retrying)" },
                    ))
                    .with_meta("timed_out", true)
                }
            },
            () = cancel.cancelled() => {
                call_cancel.cancel();
                let effect = if read_only {
                    "it had no effect"
                } else {
                    "it may or may not have taken effect: check before retrying"
                };
                ToolOutput::error(format!(
                    "cancelled: the user cancelled the turn while `{}` was running; {effect}",
                    call.name
                ))
                .with_meta("cancelled", true)
            }
        };
        let output = match &self.write_observer {
            Some(observer) if !read_only && !output.is_error => {
                self.after_write(observer.as_ref(), output).await
            }
            _ => output,
        };
        let duration = started.elapsed();
        tracing::info!(
            parent: &span,
            duration_ms = duration.as_millis() as u64,
            is_error = output.is_error,
            "tool call finished"
        );
        (output, duration)
    }

    /// Tell the write observer about the file a successful mutating call changed, and append
    /// what it says (the file's fresh diagnostics) to the result.
    async fn after_write(&self, observer: &dyn WriteObserver, output: ToolOutput) -> ToolOutput {
        let Some(source) = output.meta.get("source").and_then(Value::as_str) else {
            return output;
        };
        let Ok(path) = self.workspace.resolve(source) else {
            return output;
        };
        match observer.after_write(&self.workspace, &path).await {
            Some(report) => {
                let text = format!("{}\n\n{report}", output.text.trim_end());
                ToolOutput { text, ..output }.with_meta("after_write", report)
            }
            None => output,
        }
    }

    /// Cap the text and complete the meta the log records.
    fn finish(&self, output: ToolOutput, duration: Duration, origin: Option<&str>) -> ToolOutput {
        let original_len = output.text.len();
        let (text, truncated) = cap_text(&output.text, self.limits.max_output_bytes);
        // A tool that cut its content itself (a fetched page) has said so already.
        let truncated = truncated || output.meta.get("truncated") == Some(&Value::Bool(true));
        let mut output = ToolOutput {
            text,
            meta: output.meta,
            is_error: output.is_error,
        }
        .with_meta("truncated", truncated)
        .with_meta("original_len", original_len)
        .with_meta("duration_ms", duration.as_millis() as u64)
        .with_meta("is_error", output.is_error);
        if let Some(origin) = origin {
            output = output.with_meta("origin", origin);
        }
        output
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

/// `text` cut to at most about `max_bytes`: the head and the tail are kept, and a marker in
/// the middle says how much was cut. Returns whether anything was cut.
pub fn cap_text(text: &str, max_bytes: usize) -> (String, bool) {
    if text.len() <= max_bytes {
        return (text.to_owned(), false);
    }
    // Room for the marker, so the result stays within `max_bytes`.
    let budget = max_bytes.saturating_sub(200);
    let window = budget / 16;
    let head_end = snap_to_line(text, floor_char_boundary(text, budget / 2), window, true);
    let tail_start = snap_to_line(
        text,
        ceil_char_boundary(text, text.len() - (budget - budget / 2)),
        window,
        false,
    )
    .max(head_end);
    let cut = &text[head_end..tail_start];
    let marker = format!(
        "\n[… {} of {} bytes ({} lines) cut from the middle of this output; ask for less at a time (a narrower path, offset/limit, a more specific pattern) to see them …]\n",
        cut.len(),
        text.len(),
        cut.lines().count()
    );
    (
        format!("{}{marker}{}", &text[..head_end], &text[tail_start..]),
        true,
    )
}

/// Move a cut point to a line boundary if one is within `window` bytes (inward, so the kept
/// part only shrinks), so that lines are not split when they do not have to be.
fn snap_to_line(text: &str, at: usize, window: usize, head: bool) -> usize {
    if head {
        let from = at.saturating_sub(window);
        match text[..at].rfind('\n') {
            Some(newline) if newline >= from => newline + 1,
            _ => at,
        }
    } else {
        let to = (at + window).min(text.len());
        match text[at..].find('\n') {
            Some(offset) if at + offset < to => at + offset + 1,
            _ => at,
        }
    }
}

fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil_char_boundary(text: &str, mut at: usize) -> usize {
    while at < text.len() && !text.is_char_boundary(at) {
        at += 1;
    }
    at
}
