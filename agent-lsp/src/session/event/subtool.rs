//! The calls a tool makes itself: a `run_code` program's `await tools.NAME(…)`. Each is a pair
//! of log-only events naming the call that made it (its parent), recorded while that call runs,
//! between its `tool/call` and its `tool/result`.
//!
//! Why not `tool/call` and `tool/result`: a `tool/result` is on the surface and must answer a
//! call the model made (providers refuse a history where it does not), and every reader of the
//! log (recovery, the pruner, the context editor, recall) pairs them so. A nested call is not
//! the model's; only its parent's result, the program's output, reaches the model. So the
//! nested pair lives in the log alone, and a request built from the log, or replayed, is the
//! same with or without it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `subtool/call`: a call a running tool made, with the arguments exactly as it passed them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubtoolCall {
    /// The id of the model's call whose tool made this one (`run_code`'s).
    pub parent_call_id: String,
    /// `PARENT.N`: unique in the session.
    pub call_id: String,
    /// The tool called, as the program named it.
    pub name: String,
    /// The arguments as the program passed them, a JSON text.
    pub arguments: String,
    /// For a command, what held it, as in `tool/call` (`ToolCallEvent::sandbox`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<serde_json::Value>,
}

/// `subtool/result`: what that call returned to the tool, capped as any result is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SubtoolResult {
    /// The id of the model's call whose tool made this one, as in its `subtool/call`.
    pub parent_call_id: String,
    /// The id of its `subtool/call`.
    pub call_id: String,
    /// The tool called, so a view needs not look the call up.
    pub name: String,
    /// What the tool returned, capped as any tool result is.
    pub text: String,
    /// Truncation, original length and the like, as a `tool/result`'s meta: never sent to the
    /// model.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub meta: Value,
}
