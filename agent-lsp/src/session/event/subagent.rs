//! The records of a sub-agent: the link a child session's header keeps to its parent, and the
//! two events the parent's log gets around the `task` call that ran it. They live only in the
//! log (no surface op): the parent's model sees the child only through the call's result.

use serde::{Deserialize, Serialize};

/// Where a sub-agent's session came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParentLink {
    /// The parent session's id.
    pub session_id: String,
    /// The id of the parent's `task` tool call this session answers.
    pub call_id: String,
    /// The agent type the call asked for (`explore`, `general` or a preset's name).
    pub agent_type: String,
    /// 1 for a child of a top-level session, 2 for a grandchild, …
    pub depth: u32,
}

/// `subagent/start`, in the parent's log, between the `task` call and its result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentStart {
    /// The id of the `task` call that started the child; its `tool/result` carries the child's
    /// answer.
    pub call_id: String,
    /// The child session's id.
    pub child: String,
    /// Which kind of sub-agent it is (`explore`, `general` or a preset's name), as the call asked.
    pub agent_type: String,
    /// The preset the child runs with.
    pub preset: String,
    /// How deep the child is: 1 for a child of a top-level session, 2 for a grandchild, …
    pub depth: u32,
}

/// `subagent/end`, in the parent's log, before the `task` call's result.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentEnd {
    /// The id of the `task` call, matching the `subagent/start`.
    pub call_id: String,
    /// The child session's id, so a view can open its log.
    pub child: String,
    /// `answered`, `step_budget`, `token_budget`, `time_budget`, `cancelled` or `error`.
    pub outcome: String,
    /// What went wrong, for `error`; the budget's limit, for the budgets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Model steps the child took.
    pub steps: u32,
    /// Model requests the child made.
    pub requests: u64,
    /// Prompt tokens over all the child's requests, as the provider reported them.
    pub prompt_tokens: u64,
    /// Completion tokens over all the child's requests, as the provider reported them.
    pub completion_tokens: u64,
    /// Prompt tokens the provider served from its prefix cache.
    pub cache_read: u64,
    /// Wall-clock time from start to end.
    pub duration_ms: u64,
}
