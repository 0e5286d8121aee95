//! What each model request was made of, recorded before it is sent: its header (the model, the
//! parameters, the digests and, when they changed, the full system prompt and tool catalog), the
//! context it added, and how it failed when it did. `replay_request` rebuilds the exact body
//! from these records alone.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a model request was built from, recorded before it is sent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestHeader {
    /// 1-based number of the request within the session.
    pub index: u64,
    /// The wire format the body was serialized with, e.g. `openai-chat/1`.
    pub wire: String,
    /// The model name as sent to the provider.
    pub model: String,
    /// Provider-neutral model parameters (temperature, thinking, …).
    pub params: Value,
    /// sha256 of the system prompt, so a request that reuses the previous prompt need not repeat
    /// it.
    pub system_digest: String,
    /// sha256 of the tool catalog, so a request that reuses the previous catalog need not repeat
    /// it.
    pub tools_digest: String,
    /// The full system prompt, present whenever its digest differs from the previous request's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The full tool catalog, present whenever its digest differs from the previous request's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<crate::llm::ToolDef>>,
    /// The system-prompt sections read from somewhere (a project's `AGENTS.md`, the memories),
    /// with their source and digest, so an audit sees which text of which file went in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sections: Vec<SectionRecord>,
}

/// One sourced system-prompt section of a request (see [`RequestHeader::sections`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SectionRecord {
    /// The section's id in the system prompt (`instructions`, `memory`, …).
    pub id: String,
    /// Where the text came from: a file path, or a name such as `memory`.
    pub source: String,
    /// sha256 of the section's text as it went into the system prompt.
    pub digest: String,
}

/// Which part of the log went into a model request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestContext {
    /// The number of the request, matching its `request/header`.
    pub index: u64,
    /// Surface generation the messages were derived from.
    pub generation: u64,
    /// The last event seq the request saw; the surface is `derive_at(through_seq)`.
    pub through_seq: u64,
    /// Seqs of the surface events, as inclusive `[first, last]` runs.
    pub event_seqs: Vec<[u64; 2]>,
    /// The token meter's estimate of the whole request.
    pub estimated_tokens: u64,
}

/// A model request that got no answer: what failed and whether the turn went on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestError {
    /// The number of the request, matching its `request/header`.
    pub index: u64,
    /// The error class (`auth`, `rate_limit`, `context_overflow`, `cancelled`, …).
    pub class: String,
    /// The provider's error text, for the user and the log.
    pub message: String,
    /// The context window a `context_overflow` message states, in tokens: what the session
    /// learned about its model, kept here so that every later process that continues the
    /// session compacts before the provider refuses, instead of overflowing once first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
}
