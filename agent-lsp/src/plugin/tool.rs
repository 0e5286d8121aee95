//! The tool seam: what a tool is and what it is given for one call. It sits in the plugin
//! layer so a plugin can contribute tools (the compaction plugin's `recall_history`, the memory
//! and plan tools) without importing the tool runtime that runs them. This is the one path to
//! them: `crate::tools` is the runtime and the built-in tools, and re-exports none of it.

use std::any::Any;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::outcomes::ToolOutput;
use crate::llm::ToolDef;
use crate::session::event::EventBody;
use crate::workspace::Workspace;

/// What a tool is given for one call.
#[derive(Clone, Debug)]
pub struct ToolContext {
    /// The workspace every path argument is resolved in and confined to.
    pub workspace: Arc<Workspace>,
    /// Cancelled when the turn is cancelled or the call timed out; long-running tools (walkers,
    /// processes) watch it and stop.
    pub cancel: CancellationToken,
    /// The model's id of this call, which names the call's processes and jobs (`shell`) and
    /// the events it records.
    pub call_id: String,
    /// The session's log file, for tools that read the session's own history
    /// (`recall_history`); `None` outside of a session.
    pub session_path: Option<PathBuf>,
    /// The session's id and the seq of this call's `tool/call` event, for tools that record
    /// where something came from (a memory's provenance); `None` outside of a session.
    pub session_id: Option<String>,
    /// See `session_id`.
    pub call_seq: Option<u64>,
    /// The editor's open buffers under `agent-lsp serve`; `None` on the terminal.
    pub buffers: Option<Arc<dyn Buffers>>,
    /// What the commands of this call may touch: the preset's `[sandbox]`, or what the user
    /// allowed this call beyond it ([`Tool::confinement`]); `None`: no sandbox.
    pub sandbox: Option<Arc<crate::sandbox::Sandbox>>,
    /// Where a call records log-only events in its session while it runs (a sub-agent's start
    /// and end); `None` outside of a session.
    pub events: Option<EventSink>,
    /// The session's other tools, for a tool that calls them itself ([`Tool::calls_tools`]);
    /// `None` for every other tool.
    pub calls: Option<Arc<dyn NestedCalls>>,
}

/// Runs the session's other tools for a tool that calls them itself (`run_code`'s program):
/// each call goes through the runtime as a model's call does (its permission, its timeout, its
/// output cap) and is recorded as a `subtool/call` and `subtool/result` pair naming the
/// calling call.
pub trait NestedCalls: Send + Sync + std::fmt::Debug {
    /// Run `name` with `arguments` (JSON text, as a model would send them).
    fn call(&self, name: &str, arguments: String) -> BoxFuture<'static, ToolOutput>;

    /// The tools that can be called, as the catalog lists them.
    fn catalog(&self) -> Vec<ToolDef>;
}

/// Log-only events a running call records in its session: the runtime appends them as they
/// come, between the call's `tool/call` and its result, so the log shows when a long call did
/// what (a sub-agent started, a sub-agent ended) and not only that it did.
///
/// Only kinds that live in the log alone are taken: anything the model's history is made of
/// must come from the loop, in order (a tool result's pairing depends on it).
#[derive(Clone, Debug)]
pub struct EventSink(tokio::sync::mpsc::UnboundedSender<EventBody>);

impl EventSink {
    /// A sink and the receiver the runtime drains into the session.
    pub fn channel() -> (EventSink, tokio::sync::mpsc::UnboundedReceiver<EventBody>) {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        (EventSink(sender), receiver)
    }

    /// Record `body` in the call's session. A kind that would go on the surface is refused
    /// (and logged): a tool cannot add to the model's history behind the loop.
    pub fn record(&self, body: EventBody) {
        if body.kind().is_surface_bearing() {
            tracing::error!(kind = %body.kind(), "a tool tried to record a surface event; dropped");
            return;
        }
        // The receiver goes away only when the runtime stopped waiting for the call.
        let _ = self.0.send(body);
    }
}

impl ToolContext {
    /// A call outside any session (no log, no editor buffers, no nested calls): the shared
    /// bridge's owner running a client's query, and the tools' tests. Set what differs on
    /// the result.
    pub fn outside_session(
        workspace: Arc<Workspace>,
        cancel: CancellationToken,
        call_id: impl Into<String>,
    ) -> ToolContext {
        ToolContext {
            workspace,
            cancel,
            call_id: call_id.into(),
            session_path: None,
            session_id: None,
            call_seq: None,
            buffers: None,
            sandbox: None,
            events: None,
            calls: None,
        }
    }

    /// Resolve a path argument inside the workspace, or the error output saying why it was
    /// refused. Every file tool goes through this.
    pub fn resolve(&self, user_path: &str) -> Result<PathBuf, ToolOutput> {
        let resolved = self.workspace.resolve(user_path);
        resolved.map_err(|err| refused(user_path, err))
    }

    /// [`ToolContext::resolve`] for a tool that only reads (`read`): a path inside a folder
    /// this call's session was granted (a loaded skill's, see `Workspace::grant_read`)
    /// resolves too, confined to that folder.
    pub fn resolve_read(&self, user_path: &str) -> Result<PathBuf, ToolOutput> {
        let session = self.session_id.as_deref();
        let resolved = self.workspace.resolve_read(session, user_path);
        resolved.map_err(|err| refused(user_path, err))
    }
}

/// The error output of a refused path.
fn refused(user_path: &str, err: crate::workspace::PathError) -> ToolOutput {
    tracing::warn!(path = user_path, %err, "path refused");
    ToolOutput::error(format!(
        "path refused: {err}. Tools only work inside the workspace; give a path relative to its root"
    ))
    .with_meta("refused_path", user_path)
}

/// The arguments of one call on their way to its tool: the JSON the model sent and, once a
/// typed tool read them, their parse. The runtime hands the same `CallArgs` to the hooks
/// ([`Tool::approval_reason`], [`Tool::timeout`]) and to [`Tool::run`], so a typed tool's
/// arguments are deserialized once per call, by whichever asks first.
pub struct CallArgs {
    json: Value,
    parsed: OnceLock<Result<Box<dyn Any + Send + Sync>, ToolOutput>>,
}

impl From<Value> for CallArgs {
    fn from(json: Value) -> CallArgs {
        CallArgs {
            json,
            parsed: OnceLock::new(),
        }
    }
}

impl CallArgs {
    /// The arguments as the model sent them (the runtime reads `path` from them to guard
    /// protected paths; a tool with a schema known only at run time takes them as they are).
    pub fn json(&self) -> &Value {
        &self.json
    }

    /// [`CallArgs::json`], owned.
    pub fn into_json(self) -> Value {
        self.json
    }

    /// The arguments as `T`, parsed on first use for `tool` (whose name the error output
    /// gives), or that error output.
    pub fn parsed<T>(&self, tool: &str) -> Result<&T, &ToolOutput>
    where
        T: DeserializeOwned + Send + Sync + 'static,
    {
        let parsed = self.parsed.get_or_init(|| {
            let parsed = T::deserialize(&self.json).map_err(|err| invalid_arguments(tool, err));
            parsed.map(|args| Box::new(args) as Box<dyn Any + Send + Sync>)
        });
        match parsed {
            Ok(args) => Ok(args
                .downcast_ref::<T>()
                .expect("one call's arguments are parsed as one type")),
            Err(output) => Err(output),
        }
    }

    /// [`CallArgs::parsed`], owned: the parse a hook made, or the one parse now.
    pub fn into_parsed<T>(self, tool: &str) -> Result<T, ToolOutput>
    where
        T: DeserializeOwned + Send + Sync + 'static,
    {
        let CallArgs { json, parsed } = self;
        match parsed.into_inner() {
            Some(Ok(args)) => Ok(*args
                .downcast::<T>()
                .expect("one call's arguments are parsed as one type")),
            Some(Err(output)) => Err(output),
            None => serde_json::from_value(json).map_err(|err| invalid_arguments(tool, err)),
        }
    }
}

/// The error output of arguments that do not deserialize: the tool, serde's reason and where
/// to look (the model reads it and retries).
fn invalid_arguments(tool: &str, err: serde_json::Error) -> ToolOutput {
    ToolOutput::error(format!(
        "invalid arguments for `{tool}`: {err}; see the tool's parameter schema"
    ))
}

/// A tool the model can call.
pub trait Tool: Send + Sync + 'static {
    /// Name, description and JSON schema, as listed in the catalog.
    fn def(&self) -> ToolDef;

    /// Whether the tool only reads, so that it may run concurrently with the other read-only
    /// calls of the same step.
    fn read_only(&self) -> bool;

    /// Whether consecutive calls of this tool in one step run together although it may write:
    /// `task`, whose sub-agents each work in a session of their own. The batch holds only calls
    /// of this tool, so a `read` after it still sees what it did.
    fn runs_beside_itself(&self) -> bool {
        false
    }

    /// Whether the tool calls other tools itself and so needs [`ToolContext::calls`].
    fn calls_tools(&self) -> bool {
        false
    }

    /// How long this call may take, when it is not the runtime's default (e.g. the shell's
    /// own `timeout_secs` plus a grace period).
    fn timeout(&self, _args: &CallArgs) -> Option<Duration> {
        None
    }

    /// Why this call needs the user's approval although the preset allows the tool, or `None`:
    /// a call that does more than the tool's permission can have meant to cover
    /// (`preset_write` saving a preset that allows more than the running one). The runtime
    /// then asks as for `ask` (a denied tool stays denied), and the question names the reason.
    fn approval_reason(&self, _workspace: &Workspace, _args: &CallArgs) -> Option<String> {
        None
    }

    /// Whether this call runs a command the sandbox holds, or asks to leave it: the runtime
    /// then grants the preset's `sandboxed` permission, or asks the user, and runs the command
    /// in the sandbox the answer gives ([`ToolContext::sandbox`]).
    fn confinement(&self, _args: &CallArgs) -> crate::sandbox::Confinement {
        crate::sandbox::Confinement::NotACommand
    }

    /// Whether a call may change workspace files it does not name in its result's
    /// `meta.source` (a command, a sub-agent, a program): the runtime then takes a file
    /// checkpoint right before and right after it, so a rewind knows what it changed. The
    /// file tools, which name what they write, and tools that write nothing in the workspace
    /// say `false`.
    fn writes_unnamed(&self) -> bool {
        !self.read_only()
    }

    /// Run one call. Failures are outputs with `is_error`, never panics: the model reads them.
    fn run(&self, ctx: ToolContext, args: CallArgs) -> BoxFuture<'static, ToolOutput>;
}

/// The editor's open buffers, as the file tools see them.
pub trait Buffers: Send + Sync + std::fmt::Debug {
    /// The editor's current text of `path`, unsaved changes included, when it has the file
    /// open; `None` means "read the disk". A future because some editors are asked (an ACP
    /// client's `fs/read_text_file`) where others are read from a mirror.
    fn text(&self, path: &Path) -> BoxFuture<'static, Option<String>>;

    /// Where a change made with [`Buffers::replace`] lands, as a tool reports it: under
    /// `serve` the editor's buffer, unsaved; an ACP client writes the file itself.
    fn lands(&self) -> &'static str {
        "in the editor's buffer, unsaved"
    }

    /// Every document the editor has open, with its current text: what a file checkpoint
    /// keeps beside the disk, so a rewind knows what the user saw.
    fn open(&self) -> Vec<(std::path::PathBuf, String)> {
        Vec::new()
    }

    /// Replace the buffer of `path` (open in the editor, with text `before`) by `after`.
    /// Resolves once the editor applied the change and the buffer shows it, or with the reason
    /// the editor refused it.
    fn replace(
        &self,
        path: &Path,
        before: &str,
        after: &str,
    ) -> BoxFuture<'static, Result<(), String>>;
}
