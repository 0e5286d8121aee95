//! Model-written fold summaries, and the next request they (and the editor's views) start from.
//!
//! Apart from the ops because this is the one part of editing that talks to the model: it is
//! async, needs the session's provider, and runs before the batch is applied.

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::EditOp;
use crate::context::request::replay_request;
use crate::llm::provider::Provider;
use crate::llm::{Message, ModelRequest};
use crate::session::History;

/// The request the session's next step would send before its new messages: the last recorded
/// request's system prompt, tool catalog and parameters with the current surface. What an edit
/// changes for the model, and what a rollback must give back byte for byte.
pub fn next_request(history: &History) -> anyhow::Result<ModelRequest> {
    let n = history.n_requests();
    anyhow::ensure!(
        n > 0,
        "the session has made no model request yet: there is no prompt prefix to show"
    );
    let last = replay_request(history, n)?;
    let mut history = history.clone();
    Ok(ModelRequest {
        index: n + 1,
        messages: history.derive_messages().to_vec(),
        ..last
    })
}

/// First line of the fold instruction; a test endpoint recognises fold summary calls by it.
pub const FOLD_INSTRUCTION_MARKER: &str = "<fold-request>";

/// Ask the session's model for the summaries of the folds that have none. The request replays
/// the last request's prefix up to the end of the folded range (served from the provider's
/// cache) and asks for a short summary of the range.
pub async fn write_fold_summaries(
    history: &History,
    ops: &mut [EditOp],
    provider: &Provider,
    cancel: &CancellationToken,
) -> anyhow::Result<()> {
    for op in ops.iter_mut() {
        let (start, end) = op.range();
        let EditOp::Fold { summary, .. } = op else {
            continue;
        };
        if summary.is_some() {
            continue;
        }
        let base = next_request(history)?;
        let entries = history.surface().entries();
        let first = entries
            .iter()
            .position(|entry| entry.seq == start)
            .with_context(|| format!("segment #{start} is not on the surface"))?;
        let last = entries
            .iter()
            .position(|entry| entry.seq == end)
            .with_context(|| format!("segment #{end} is not on the surface"))?;
        anyhow::ensure!(first <= last, "range #{start}-#{end} runs backwards");
        let mut messages = base.messages[..=last].to_vec();
        messages.push(Message::User {
            text: format!(
                "{FOLD_INSTRUCTION_MARKER}\nThe last {} message(s) before this one are about to be folded out of the conversation. \
                 Write the summary that will take their place: at most 150 words, keeping file paths, symbol names, \
                 exact errors, decisions and results you still need. Answer with the summary only; do not call tools.\n</fold-request>",
                last - first + 1
            ),
        });
        let mut params = base.params.clone();
        params.max_tokens = Some(1024);
        let request = ModelRequest {
            index: 0,
            messages,
            params,
            ..base
        };
        let completion = provider
            .stream(&request, cancel, |_| {})
            .await
            .with_context(|| format!("the fold summary call for #{start}-#{end} failed"))?;
        anyhow::ensure!(
            completion.tool_calls.is_empty(),
            "the fold summary call answered with tool calls instead of a summary"
        );
        let text = completion.text.trim();
        anyhow::ensure!(!text.is_empty(), "the fold summary call returned no text");
        *summary = Some(text.to_owned());
    }
    Ok(())
}
