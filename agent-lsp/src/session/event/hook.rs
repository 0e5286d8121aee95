//! `hook/run`: one of the user's hook commands ran (`crate::hooks`). Log only: what a hook gave
//! the model reaches it through the events that carry it (a call's `tool/result`, a
//! `context/runtime` message), so a request built from the log, or replayed, is the same with or
//! without these records; they are the audit of what ran, what it said and what it changed.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `hook/run`: what one hook command was run for and what came of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HookRun {
    /// The event it ran on, as the configuration names it (`PreToolUse`, `Stop`, …).
    pub event: String,
    /// Where it was configured: `config`, or the file's path.
    pub source: String,
    /// The command line, as configured.
    pub command: String,
    /// The matcher it was chosen by, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    /// The tool call it ran for (`PreToolUse`, `PostToolUse`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The command's exit code; `None` when it did not exit by itself (killed at its timeout,
    /// the turn cancelled, never started).
    pub exit_code: Option<i32>,
    /// How long it ran.
    pub duration_ms: u64,
    /// `continued` (the agent went on as it would have), `blocked` (the hook stopped the call,
    /// the prompt or the end of the turn) or `failed` (a reported failure that blocks nothing).
    pub outcome: String,
    /// Why it blocked, or why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What it added for the model to read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// The arguments it gave the call in place of the model's (`PreToolUse`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_input: Option<Value>,
    /// What it said to the user (its `systemMessage`, or the stderr of an event it cannot
    /// block).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The permission it decided (`allow`, `deny`, `ask`; `PreToolUse`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission: Option<String>,
    /// The workspace files it changed (the file a `PostToolUse` hook's call wrote).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<String>,
    /// The head of what it printed on stdout.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stdout: String,
    /// The head of what it printed on stderr.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stderr: String,
}
