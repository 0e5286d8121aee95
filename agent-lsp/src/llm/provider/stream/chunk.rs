//! The wire shapes of an answer as the endpoint sends it: a streamed chunk, a whole JSON answer,
//! and the usage figures in either.
//!
//! Apart from the assembler because these only mirror the JSON (every field optional, since
//! OpenAI-compatible servers differ in what they leave out); the assembler decides what the
//! fields mean.

use serde::Deserialize;

use super::UsageFigures;

#[derive(Debug, Deserialize)]
pub(super) struct Chunk {
    /// `Option` because some servers send `"choices": null` in the usage chunk.
    #[serde(default)]
    pub(super) choices: Option<Vec<ChunkChoice>>,
    #[serde(default)]
    pub(super) usage: Option<RawUsage>,
}

#[derive(Debug, Deserialize)]
pub(super) struct ChunkChoice {
    #[serde(default)]
    pub(super) delta: Delta,
    #[serde(default)]
    pub(super) finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct Delta {
    #[serde(default)]
    pub(super) content: Option<String>,
    #[serde(default)]
    pub(super) reasoning_content: Option<String>,
    #[serde(default)]
    pub(super) reasoning: Option<String>,
    #[serde(default)]
    pub(super) tool_calls: Option<Vec<ToolCallFragment>>,
}

#[derive(Debug, Deserialize)]
pub(super) struct ToolCallFragment {
    #[serde(default)]
    pub(super) index: Option<u32>,
    #[serde(default)]
    pub(super) id: Option<String>,
    #[serde(default)]
    pub(super) function: Option<FunctionFragment>,
}

#[derive(Debug, Deserialize)]
pub(super) struct FunctionFragment {
    #[serde(default)]
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) arguments: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct WholeAnswer {
    #[serde(default)]
    pub(super) choices: Vec<WholeChoice>,
    #[serde(default)]
    pub(super) usage: Option<RawUsage>,
}

#[derive(Debug, Deserialize)]
pub(super) struct WholeChoice {
    #[serde(default)]
    pub(super) message: Delta,
    #[serde(default)]
    pub(super) finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct RawUsage {
    #[serde(default)]
    pub(super) prompt_tokens: u64,
    #[serde(default)]
    pub(super) completion_tokens: u64,
    #[serde(default)]
    pub(super) prompt_cache_hit_tokens: Option<u64>,
    #[serde(default)]
    pub(super) prompt_tokens_details: Option<PromptTokensDetails>,
}

#[derive(Debug, Deserialize)]
pub(super) struct PromptTokensDetails {
    #[serde(default)]
    pub(super) cached_tokens: Option<u64>,
}

impl RawUsage {
    pub(super) fn figures(&self) -> UsageFigures {
        let cache_read = self
            .prompt_cache_hit_tokens
            .or_else(|| self.prompt_tokens_details.as_ref()?.cached_tokens)
            .unwrap_or(0);
        UsageFigures {
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.completion_tokens,
            cache_read,
            input: self.prompt_tokens.saturating_sub(cache_read),
        }
    }
}
