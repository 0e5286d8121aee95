//! The session log's event types: the one serialized contract of a session.
//!
//! Every line of a session file is one [`Event`]. Changing these types changes the file format,
//! so every change here must keep old files readable or bump [`SCHEMA_VERSION`]
//! (rust-analyzer treats its serialized types the same way).
//!
//! On disk an event is a flat JSON object:
//! `{"seq":7,"kind":"tool/result","turn":1,"step":2,"ts":"…","payload":{…},"surface_op":{…},"source_event_seqs":[…]}`
//! with `surface_op` and `source_event_seqs` omitted when absent.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod compaction;
mod files;
mod hook;
mod kind;
mod request;
mod subagent;
mod subtool;
pub use compaction::{
    CompactionEnd, CompactionStart, CompactionSummary, ContextEditBegin, ContextEditEnd,
    ContextEditOp, ContextEditResult,
};
pub use files::{
    CheckpointReason, Conflict, FileCheckpoint, MAX_CHANGED_LISTED, PlannedPath, Restored,
    RewindBegin, RewindEnd, RewindScope, last_checkpoint,
};
pub use hook::HookRun;
pub use kind::EventKind;
pub use request::{RequestContext, RequestError, RequestHeader, SectionRecord};
pub use subagent::{ParentLink, SubagentEnd, SubagentStart};
pub use subtool::{SubtoolCall, SubtoolResult};
// What the model answers is the model's type (`llm`), recorded here as it came.
pub use crate::llm::{AssistantMessage, ToolCallRef, Usage};

/// Version of the on-disk event format, written into every `session/header`.
pub const SCHEMA_VERSION: u32 = 1;

/// One entry of the append-only log.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Strictly increasing position in the log, starting at 1.
    pub seq: u64,
    /// The user turn this event belongs to (0 before the first prompt).
    pub turn: u32,
    /// The model step within the turn (0 outside of model steps).
    pub step: u32,
    /// Wall-clock time of the append, RFC 3339 with milliseconds, UTC.
    pub ts: String,
    /// What happened; its variant decides the `kind` written to disk.
    pub body: EventBody,
    /// How the event changes the surface; `None` means "append" for surface-bearing kinds and
    /// "not on the surface" for the others.
    pub surface_op: Option<SurfaceOp>,
    /// Events this one was derived from (a compaction checkpoint names what it shadows).
    pub source_event_seqs: Vec<u64>,
}

/// A change to the surface. `start` and `end` name surface entries by their event seq; the range
/// is the contiguous run of surface entries from `start` to `end` in surface order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum SurfaceOp {
    /// Add the event's content at the end of the surface (the default for content-bearing kinds).
    Append,
    /// Put the event's content in place of the run `start..=end`: a compaction checkpoint or a
    /// context-editor fold or replace.
    Replace {
        /// Seq of the first surface entry replaced.
        start: u64,
        /// Seq of the last surface entry replaced.
        end: u64,
    },
    /// Take the run `start..=end` off the surface; the events stay in the log.
    Remove {
        /// Seq of the first surface entry removed.
        start: u64,
        /// Seq of the last surface entry removed.
        end: u64,
    },
    /// Make an earlier surface generation the current surface again: a context-editor rollback.
    Restore {
        /// The generation to go back to, as a snapshot recorded it.
        generation: u64,
    },
    /// End the current generation without changing the entries: the snapshot a context-editor
    /// batch takes before its first op, so a batch that only appends (a pin) can be rolled back.
    Snapshot,
}

impl SurfaceOp {
    /// The `op` tag as written to disk, for messages and views.
    pub fn name(&self) -> &'static str {
        match self {
            SurfaceOp::Append => "append",
            SurfaceOp::Replace { .. } => "replace",
            SurfaceOp::Remove { .. } => "remove",
            SurfaceOp::Restore { .. } => "restore",
            SurfaceOp::Snapshot => "snapshot",
        }
    }
}

/// The typed payload of an event; the variant decides the `kind`.
#[derive(Clone, Debug, PartialEq)]
pub enum EventBody {
    /// The payload of `session/header`.
    SessionHeader(SessionHeader),
    /// The payload of `user/message`.
    UserMessage(UserMessage),
    /// The payload of `assistant/message`: the model's own type, recorded as it came.
    AssistantMessage(AssistantMessage),
    /// The payload of `tool/call`.
    ToolCall(ToolCallEvent),
    /// The payload of `tool/result`.
    ToolResult(ToolResult),
    /// The payload of `context/runtime`.
    RuntimeContext(RuntimeContext),
    /// The payload of `surface/edit`.
    SurfaceEdit(SurfaceEdit),
    /// The payload of `request/header`.
    RequestHeader(RequestHeader),
    /// The payload of `request/context`.
    RequestContext(RequestContext),
    /// The payload of `usage`: the model's own type, recorded as the provider reported it.
    Usage(Usage),
    /// The payload of `request/error`.
    RequestError(RequestError),
    /// The payload of `compaction/start`.
    CompactionStart(CompactionStart),
    /// The payload of `compaction/summary`.
    CompactionSummary(CompactionSummary),
    /// The payload of `compaction/end`.
    CompactionEnd(CompactionEnd),
    /// The payload of `context-edit/begin`.
    ContextEditBegin(ContextEditBegin),
    /// The payload of `context-edit/end`.
    ContextEditEnd(ContextEditEnd),
    /// The payload of `plugin/state`.
    PluginState(PluginState),
    /// The payload of `subagent/start`.
    SubagentStart(SubagentStart),
    /// The payload of `subagent/end`.
    SubagentEnd(SubagentEnd),
    /// The payload of `subtool/call`.
    SubtoolCall(SubtoolCall),
    /// The payload of `subtool/result`.
    SubtoolResult(SubtoolResult),
    /// The payload of `files/checkpoint`.
    FileCheckpoint(FileCheckpoint),
    /// The payload of `rewind/begin`.
    RewindBegin(RewindBegin),
    /// The payload of `rewind/end`.
    RewindEnd(RewindEnd),
    /// The payload of `hook/run`.
    HookRun(HookRun),
}

impl EventBody {
    /// The kind this body is written as; the variant decides it, so the two cannot disagree.
    pub fn kind(&self) -> EventKind {
        match self {
            EventBody::SessionHeader(_) => EventKind::SessionHeader,
            EventBody::UserMessage(_) => EventKind::UserMessage,
            EventBody::AssistantMessage(_) => EventKind::AssistantMessage,
            EventBody::ToolCall(_) => EventKind::ToolCall,
            EventBody::ToolResult(_) => EventKind::ToolResult,
            EventBody::RuntimeContext(_) => EventKind::RuntimeContext,
            EventBody::SurfaceEdit(_) => EventKind::SurfaceEdit,
            EventBody::RequestHeader(_) => EventKind::RequestHeader,
            EventBody::RequestContext(_) => EventKind::RequestContext,
            EventBody::Usage(_) => EventKind::Usage,
            EventBody::RequestError(_) => EventKind::RequestError,
            EventBody::CompactionStart(_) => EventKind::CompactionStart,
            EventBody::CompactionSummary(_) => EventKind::CompactionSummary,
            EventBody::CompactionEnd(_) => EventKind::CompactionEnd,
            EventBody::ContextEditBegin(_) => EventKind::ContextEditBegin,
            EventBody::ContextEditEnd(_) => EventKind::ContextEditEnd,
            EventBody::PluginState(_) => EventKind::PluginState,
            EventBody::SubagentStart(_) => EventKind::SubagentStart,
            EventBody::SubagentEnd(_) => EventKind::SubagentEnd,
            EventBody::SubtoolCall(_) => EventKind::SubtoolCall,
            EventBody::SubtoolResult(_) => EventKind::SubtoolResult,
            EventBody::FileCheckpoint(_) => EventKind::FileCheckpoint,
            EventBody::RewindBegin(_) => EventKind::RewindBegin,
            EventBody::RewindEnd(_) => EventKind::RewindEnd,
            EventBody::HookRun(_) => EventKind::HookRun,
        }
    }

    fn to_payload(&self) -> serde_json::Result<Value> {
        match self {
            EventBody::SessionHeader(p) => serde_json::to_value(p),
            EventBody::UserMessage(p) => serde_json::to_value(p),
            EventBody::AssistantMessage(p) => serde_json::to_value(p),
            EventBody::ToolCall(p) => serde_json::to_value(p),
            EventBody::ToolResult(p) => serde_json::to_value(p),
            EventBody::RuntimeContext(p) => serde_json::to_value(p),
            EventBody::SurfaceEdit(p) => serde_json::to_value(p),
            EventBody::RequestHeader(p) => serde_json::to_value(p),
            EventBody::RequestContext(p) => serde_json::to_value(p),
            EventBody::Usage(p) => serde_json::to_value(p),
            EventBody::RequestError(p) => serde_json::to_value(p),
            EventBody::CompactionStart(p) => serde_json::to_value(p),
            EventBody::CompactionSummary(p) => serde_json::to_value(p),
            EventBody::CompactionEnd(p) => serde_json::to_value(p),
            EventBody::ContextEditBegin(p) => serde_json::to_value(p),
            EventBody::ContextEditEnd(p) => serde_json::to_value(p),
            EventBody::PluginState(p) => serde_json::to_value(p),
            EventBody::SubagentStart(p) => serde_json::to_value(p),
            EventBody::SubagentEnd(p) => serde_json::to_value(p),
            EventBody::SubtoolCall(p) => serde_json::to_value(p),
            EventBody::SubtoolResult(p) => serde_json::to_value(p),
            EventBody::FileCheckpoint(p) => serde_json::to_value(p),
            EventBody::RewindBegin(p) => serde_json::to_value(p),
            EventBody::RewindEnd(p) => serde_json::to_value(p),
            EventBody::HookRun(p) => serde_json::to_value(p),
        }
    }

    fn from_payload(kind: EventKind, payload: Value) -> serde_json::Result<EventBody> {
        Ok(match kind {
            EventKind::SessionHeader => EventBody::SessionHeader(serde_json::from_value(payload)?),
            EventKind::UserMessage => EventBody::UserMessage(serde_json::from_value(payload)?),
            EventKind::AssistantMessage => {
                EventBody::AssistantMessage(serde_json::from_value(payload)?)
            }
            EventKind::ToolCall => EventBody::ToolCall(serde_json::from_value(payload)?),
            EventKind::ToolResult => EventBody::ToolResult(serde_json::from_value(payload)?),
            EventKind::RuntimeContext => {
                EventBody::RuntimeContext(serde_json::from_value(payload)?)
            }
            EventKind::SurfaceEdit => EventBody::SurfaceEdit(serde_json::from_value(payload)?),
            EventKind::RequestHeader => EventBody::RequestHeader(serde_json::from_value(payload)?),
            EventKind::RequestContext => {
                EventBody::RequestContext(serde_json::from_value(payload)?)
            }
            EventKind::Usage => EventBody::Usage(serde_json::from_value(payload)?),
            EventKind::RequestError => EventBody::RequestError(serde_json::from_value(payload)?),
            EventKind::CompactionStart => {
                EventBody::CompactionStart(serde_json::from_value(payload)?)
            }
            EventKind::CompactionSummary => {
                EventBody::CompactionSummary(serde_json::from_value(payload)?)
            }
            EventKind::CompactionEnd => EventBody::CompactionEnd(serde_json::from_value(payload)?),
            EventKind::ContextEditBegin => {
                EventBody::ContextEditBegin(serde_json::from_value(payload)?)
            }
            EventKind::ContextEditEnd => {
                EventBody::ContextEditEnd(serde_json::from_value(payload)?)
            }
            EventKind::PluginState => EventBody::PluginState(serde_json::from_value(payload)?),
            EventKind::SubagentStart => EventBody::SubagentStart(serde_json::from_value(payload)?),
            EventKind::SubagentEnd => EventBody::SubagentEnd(serde_json::from_value(payload)?),
            EventKind::SubtoolCall => EventBody::SubtoolCall(serde_json::from_value(payload)?),
            EventKind::SubtoolResult => EventBody::SubtoolResult(serde_json::from_value(payload)?),
            EventKind::FileCheckpoint => {
                EventBody::FileCheckpoint(serde_json::from_value(payload)?)
            }
            EventKind::RewindBegin => EventBody::RewindBegin(serde_json::from_value(payload)?),
            EventKind::RewindEnd => EventBody::RewindEnd(serde_json::from_value(payload)?),
            EventKind::HookRun => EventBody::HookRun(serde_json::from_value(payload)?),
        })
    }
}

/// First event of every session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionHeader {
    /// The [`SCHEMA_VERSION`] the file was written with, so a later format can tell old files
    /// apart.
    pub schema: u32,
    /// The session's id, which is also its file name in the store.
    pub session_id: String,
    /// Canonical path of the workspace root the session works in.
    pub workspace: String,
    /// The preset the session started with; a session keeps it for its whole life.
    pub preset: String,
    /// The preset's full text at the start, used when the session is resumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset_text: Option<String>,
    /// The version of agent-lsp that started the session, for bug reports on old logs.
    pub agent_version: String,
    /// For a sub-agent's session: the session and the `task` call that started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentLink>,
}

#[cfg(test)]
impl SessionHeader {
    /// The header unit tests give their sessions: workspace `/w`, no preset text.
    pub(crate) fn for_test(session_id: &str, preset: &str) -> SessionHeader {
        SessionHeader {
            schema: SCHEMA_VERSION,
            session_id: session_id.into(),
            workspace: "/w".into(),
            preset: preset.into(),
            preset_text: None,
            agent_version: "test".into(),
            parent: None,
        }
    }
}

/// A user-role message: a prompt, a compaction checkpoint, a context-editor fold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UserMessage {
    /// What the model reads, verbatim.
    pub text: String,
    /// Where the text came from: `prompt` for the programmer's own words, otherwise the name of
    /// the mechanism that wrote it (`compaction`, `context-edit`, …).
    #[serde(default = "default_origin")]
    pub origin: String,
}

fn default_origin() -> String {
    "prompt".to_owned()
}

/// The start of one tool execution (log only): the raw arguments as the model sent them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCallEvent {
    /// The id the model gave the call, which its `tool/result` repeats.
    pub call_id: String,
    /// The tool's name as the model called it.
    pub name: String,
    /// The arguments as the model sent them: a JSON text that may not parse, kept as is so a replay
    /// sees what the model wrote.
    pub arguments: String,
    /// For a command (`shell`), what held it: the sandbox's policy and mechanism, and what
    /// the call asked beyond them (`leave`); whether the user allowed that is in the call's
    /// `tool/result` (`meta.asked`). Absent for every other call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Value>,
}

/// The rendered text a tool call produced, exactly as the model sees it, plus facts about it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The id of the call this answers.
    pub call_id: String,
    /// The tool's name, so a view needs not look the call up.
    pub name: String,
    /// What the model reads, after truncation.
    pub text: String,
    /// Truncation, original length, source path or URL, duration…: free-form, never sent.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub meta: Value,
}

/// Volatile state (cwd, open documents, date…) as injected into the history when it changed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RuntimeContext {
    /// The plugin whose facts these are; absent for the environment (cwd, date, branch, …),
    /// which is how every session before plugins could contribute runtime context was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The facts by name, compared with the last snapshot to decide whether anything changed.
    pub snapshot: BTreeMap<String, String>,
    /// The message text the model sees.
    pub text: String,
}

/// Carrier of the content-free surface ops (`remove`, `restore`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SurfaceEdit {
    /// Who asked for the edit and why, for the audit trail.
    pub reason: String,
}

/// What a plugin read or decided that must stay fixed for the session's life (the memories and
/// project instructions its system prompt was built from), so a resumed session rebuilds the
/// same prompt. Lives only in the log, never on the model's surface.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PluginState {
    /// The plugin's name, as in presets; a plugin reads back the records under its own name.
    pub plugin: String,
    /// Whatever the plugin needs to rebuild the same state on resume; only the plugin reads it.
    pub data: Value,
}

/// The flat on-disk form of an event.
#[derive(Serialize, Deserialize)]
struct RawEvent {
    seq: u64,
    kind: EventKind,
    turn: u32,
    step: u32,
    ts: String,
    payload: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    surface_op: Option<SurfaceOp>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    source_event_seqs: Vec<u64>,
}

impl Event {
    /// The kind of the body; see [`EventBody::kind`].
    pub fn kind(&self) -> EventKind {
        self.body.kind()
    }

    /// The op this event applies to the surface, if it is on the surface at all.
    pub fn effective_surface_op(&self) -> Option<SurfaceOp> {
        match &self.surface_op {
            Some(op) => Some(op.clone()),
            None if self.kind().carries_content() => Some(SurfaceOp::Append),
            None => None,
        }
    }

    /// One JSON line, without the trailing newline.
    pub fn to_json_line(&self) -> serde_json::Result<String> {
        let raw = RawEvent {
            seq: self.seq,
            kind: self.kind(),
            turn: self.turn,
            step: self.step,
            ts: self.ts.clone(),
            payload: self.body.to_payload()?,
            surface_op: self.surface_op.clone(),
            source_event_seqs: self.source_event_seqs.clone(),
        };
        serde_json::to_string(&raw)
    }

    /// Parse one line of a session file. The error names the line's seq and kind when only the
    /// payload is wrong, so a reader can say which event of which file is broken.
    pub fn from_json_line(line: &str) -> anyhow::Result<Event> {
        let raw: RawEvent = serde_json::from_str(line)
            .map_err(|error| anyhow::anyhow!("the line is not an event ({error})"))?;
        let kind = raw.kind;
        Ok(Event {
            seq: raw.seq,
            turn: raw.turn,
            step: raw.step,
            ts: raw.ts,
            body: EventBody::from_payload(kind, raw.payload).map_err(|error| {
                anyhow::anyhow!(
                    "the payload of event {} (`{kind}`) does not parse ({error})",
                    raw.seq
                )
            })?,
            surface_op: raw.surface_op,
            source_event_seqs: raw.source_event_seqs,
        })
    }

    /// The payload as generic JSON, for views and exports.
    pub fn payload_json(&self) -> Value {
        self.body.to_payload().unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_one_json_line() {
        let event = Event {
            seq: 3,
            turn: 1,
            step: 2,
            ts: "2026-11-29T21:00:00.000Z".into(),
            body: EventBody::AssistantMessage(AssistantMessage {
                text: "hé 你好".into(),
                reasoning: Some(String::new()),
                tool_calls: vec![ToolCallRef {
                    id: "c1".into(),
                    name: "read".into(),
                    arguments: "{\"path\":".into(),
                }],
            }),
            surface_op: Some(SurfaceOp::Replace { start: 1, end: 2 }),
            source_event_seqs: vec![1, 2],
        };
        let line = event.to_json_line().unwrap();
        assert!(!line.contains('\n'));
        assert!(line.contains(r#""kind":"assistant/message""#), "{line}");
        assert!(
            line.contains(r#""surface_op":{"op":"replace","start":1,"end":2}"#),
            "{line}"
        );
        assert_eq!(Event::from_json_line(&line).unwrap(), event);
    }

    #[test]
    fn unknown_kind_is_an_error_naming_it() {
        let err = Event::from_json_line(
            r#"{"seq":1,"kind":"future/thing","turn":0,"step":0,"ts":"x","payload":{}}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("future/thing"), "{err}");
    }

    #[test]
    fn only_surface_kinds_default_to_append() {
        for kind in EventKind::ALL {
            assert_eq!(
                kind.carries_content() || kind == EventKind::SurfaceEdit,
                kind.is_surface_bearing()
            );
        }
    }
}
