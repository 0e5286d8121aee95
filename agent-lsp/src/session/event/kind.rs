//! The kinds of events, as the log names them (`tool/result`, `compaction/end`, …), and which of
//! them may carry surface ops: the one list every reader and writer of the log agrees on.

use serde::{Deserialize, Serialize};

/// The kind of an event, as written in its `kind` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum EventKind {
    /// The first event of every session: schema, workspace, preset (see [`SessionHeader`](super::SessionHeader)).
    #[serde(rename = "session/header")]
    SessionHeader,
    /// A user-role message on the surface: a prompt, a compaction checkpoint or a context-editor
    /// fold.
    #[serde(rename = "user/message")]
    UserMessage,
    /// What the model answered in one step: text, reasoning and tool calls, as it came.
    #[serde(rename = "assistant/message")]
    AssistantMessage,
    /// The start of a tool execution, with the raw arguments (log only: the model sees the call in
    /// its own assistant message).
    #[serde(rename = "tool/call")]
    ToolCall,
    /// The text a tool call produced, on the surface exactly as the model sees it.
    #[serde(rename = "tool/result")]
    ToolResult,
    /// Volatile facts (cwd, open documents, date, a plugin's facts) on the surface when they
    /// changed.
    #[serde(rename = "context/runtime")]
    RuntimeContext,
    /// The carrier of the content-free surface ops `remove` and `restore`.
    #[serde(rename = "surface/edit")]
    SurfaceEdit,
    /// What a model request was built from (model, parameters, prompt and tool digests), written
    /// before it is sent, so a replay can rebuild the request.
    #[serde(rename = "request/header")]
    RequestHeader,
    /// Which surface events went into a model request, for replay and audits.
    #[serde(rename = "request/context")]
    RequestContext,
    /// The token counts the provider reported for a request.
    #[serde(rename = "usage")]
    Usage,
    /// A model request that got no answer, with its error class; kept so a resumed session knows
    /// what it learned (a stated context window).
    #[serde(rename = "request/error")]
    RequestError,
    /// A compaction began: it holds the session's compaction lock until the matching
    /// `compaction/end` (log only).
    #[serde(rename = "compaction/start")]
    CompactionStart,
    /// The summary a compaction produced, before it was framed as a checkpoint (log only).
    #[serde(rename = "compaction/summary")]
    CompactionSummary,
    /// A compaction ended, committed or not, releasing the lock (log only).
    #[serde(rename = "compaction/end")]
    CompactionEnd,
    /// A context-editor batch began: who asked for which ops, and the snapshot to roll back to (log
    /// only).
    #[serde(rename = "context-edit/begin")]
    ContextEditBegin,
    /// A context-editor batch ended, applied or refused (log only).
    #[serde(rename = "context-edit/end")]
    ContextEditEnd,
    /// What a plugin read or decided that must stay fixed for the session's life, so a resumed
    /// session rebuilds the same prompt (log only).
    #[serde(rename = "plugin/state")]
    PluginState,
    /// A sub-agent started in a session of its own, for the `task` call named in it (log only).
    #[serde(rename = "subagent/start")]
    SubagentStart,
    /// A sub-agent ended, with its answer or why it stopped (log only).
    #[serde(rename = "subagent/end")]
    SubagentEnd,
    /// A tool call made by a `run_code` program, recorded in the parent session under the
    /// `run_code` call (log only).
    #[serde(rename = "subtool/call")]
    SubtoolCall,
    /// The result of a `run_code` program's tool call (log only).
    #[serde(rename = "subtool/result")]
    SubtoolResult,
    /// What the workspace's files held at a moment of a turn: a checkpoint in the workspace's
    /// store (log only).
    #[serde(rename = "files/checkpoint")]
    FileCheckpoint,
    /// A rewind's plan, before any file changed (log only).
    #[serde(rename = "rewind/begin")]
    RewindBegin,
    /// What a rewind did (log only).
    #[serde(rename = "rewind/end")]
    RewindEnd,
    /// One of the user's hook commands ran (log only).
    #[serde(rename = "hook/run")]
    HookRun,
}

impl EventKind {
    /// Every kind, in declaration order: for tests and views that must cover them all.
    pub const ALL: [EventKind; 25] = [
        EventKind::SessionHeader,
        EventKind::UserMessage,
        EventKind::AssistantMessage,
        EventKind::ToolCall,
        EventKind::ToolResult,
        EventKind::RuntimeContext,
        EventKind::SurfaceEdit,
        EventKind::RequestHeader,
        EventKind::RequestContext,
        EventKind::Usage,
        EventKind::RequestError,
        EventKind::CompactionStart,
        EventKind::CompactionSummary,
        EventKind::CompactionEnd,
        EventKind::ContextEditBegin,
        EventKind::ContextEditEnd,
        EventKind::PluginState,
        EventKind::SubagentStart,
        EventKind::SubagentEnd,
        EventKind::SubtoolCall,
        EventKind::SubtoolResult,
        EventKind::FileCheckpoint,
        EventKind::RewindBegin,
        EventKind::RewindEnd,
        EventKind::HookRun,
    ];

    /// The `kind` string written to disk; the inverse of the serde rename.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::SessionHeader => "session/header",
            EventKind::UserMessage => "user/message",
            EventKind::AssistantMessage => "assistant/message",
            EventKind::ToolCall => "tool/call",
            EventKind::ToolResult => "tool/result",
            EventKind::RuntimeContext => "context/runtime",
            EventKind::SurfaceEdit => "surface/edit",
            EventKind::RequestHeader => "request/header",
            EventKind::RequestContext => "request/context",
            EventKind::Usage => "usage",
            EventKind::RequestError => "request/error",
            EventKind::CompactionStart => "compaction/start",
            EventKind::CompactionSummary => "compaction/summary",
            EventKind::CompactionEnd => "compaction/end",
            EventKind::ContextEditBegin => "context-edit/begin",
            EventKind::ContextEditEnd => "context-edit/end",
            EventKind::PluginState => "plugin/state",
            EventKind::SubagentStart => "subagent/start",
            EventKind::SubagentEnd => "subagent/end",
            EventKind::SubtoolCall => "subtool/call",
            EventKind::SubtoolResult => "subtool/result",
            EventKind::FileCheckpoint => "files/checkpoint",
            EventKind::RewindBegin => "rewind/begin",
            EventKind::RewindEnd => "rewind/end",
            EventKind::HookRun => "hook/run",
        }
    }

    /// Kinds that put content on the surface (the model's history). They may carry `append`
    /// (the default) or `replace`.
    pub fn carries_content(self) -> bool {
        matches!(
            self,
            EventKind::UserMessage
                | EventKind::AssistantMessage
                | EventKind::ToolResult
                | EventKind::RuntimeContext
        )
    }

    /// Kinds that may carry a surface op at all. `surface/edit` carries the content-free ops
    /// (`remove`, `restore`); everything else lives only in the log.
    pub fn is_surface_bearing(self) -> bool {
        self.carries_content() || self == EventKind::SurfaceEdit
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
