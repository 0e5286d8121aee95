//! `textDocument/inlineCompletion` (LSP 3.18), the editor's ghost text: the LSP edge of
//! [`crate::completion`]. The router sends every such request here, never to a child, so the
//! answer is always ours: an `InlineCompletionList` whose items replace the cursor and the
//! part of the rest of its line the suggestion repeats.
//!
//! Nothing is suggested in a prompt document, in a document the editor has not opened, or
//! when `[completion]` is off; a failing endpoint is an empty list too (the engine logs why),
//! never an error: editors show failed requests, and this one is sent on every keystroke.

use std::sync::Arc;

use lsp_bridge::jsonrpc;
use lsp_bridge::lsp_types::{Position, Url};
use lsp_bridge::position::{PositionEncoding, char_to_byte, to_char_index, to_server_offset};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{Reply, ResponseError, Shared, codes};
use crate::completion::{Outcome, Request};

const METHOD: &str = "textDocument/inlineCompletion";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InlineCompletionParams {
    text_document: TextDocument,
    position: Position,
    /// `triggerKind` and `selectedCompletionInfo`: read by nothing yet, but part of the
    /// request's shape.
    #[serde(default)]
    #[allow(dead_code)]
    context: Option<Value>,
}

#[derive(Deserialize)]
struct TextDocument {
    uri: Url,
}

/// The capability `initialize` announces when inline completion is on.
pub(super) fn capability() -> Value {
    json!({})
}

fn empty() -> Reply {
    Ok(json!({"items": []}))
}

/// Answer one request.
pub(super) async fn complete(
    shared: &Arc<Shared>,
    params: &Value,
    cancel: &CancellationToken,
) -> Reply {
    let params: InlineCompletionParams = jsonrpc::decode_params(METHOD, params.clone())?;
    let Some(engine) = shared.inline.get() else {
        return empty();
    };
    let uri = params.text_document.uri;
    let Ok(path) = uri.to_file_path() else {
        return empty();
    };
    if shared.prompt_documents.matches(&path) {
        return empty();
    }
    let Some(snapshot) = shared.documents().snapshot(&uri) else {
        tracing::debug!(%uri, "inline completion for a document the editor has not opened");
        return empty();
    };
    let Some(cursor) = byte_offset(&snapshot.text, params.position) else {
        return Err(ResponseError::invalid_params(format!(
            "`{METHOD}`: position {}:{} is outside the document",
            params.position.line, params.position.character
        )));
    };
    let label = shared
        .host
        .workspace()
        .ok()
        .and_then(|root| path.strip_prefix(root).ok())
        .unwrap_or(&path)
        .display()
        .to_string();
    let request = Request {
        document: uri.to_string(),
        path,
        label,
        text: snapshot.text,
        cursor,
    };
    match engine.complete(&request, cancel).await {
        Outcome::Suggested(suggestion) => {
            let rest = &request.text[cursor..];
            let replaced = &rest[..suggestion.replaced.min(rest.len())];
            let end = Position {
                line: params.position.line,
                character: params.position.character
                    + to_server_offset(replaced, usize::MAX, PositionEncoding::Utf16),
            };
            Ok(json!({"items": [{
                "insertText": suggestion.insert,
                "range": {"start": params.position, "end": end},
            }]}))
        }
        Outcome::Nothing => empty(),
        Outcome::Cancelled if cancel.is_cancelled() => Err(ResponseError::new(
            codes::REQUEST_CANCELLED,
            format!("`{METHOD}` was cancelled"),
        )),
        // Superseded by the document's next request: the editor has moved on.
        Outcome::Cancelled => empty(),
    }
}

/// The byte offset of a UTF-16 position in `text`; `None` past the last line.
fn byte_offset(text: &str, position: Position) -> Option<usize> {
    let mut start = 0;
    for _ in 0..position.line {
        start += text[start..].find('\n')? + 1;
    }
    let line = text[start..].split('\n').next().unwrap_or("");
    let line = line.strip_suffix('\r').unwrap_or(line);
    let index = to_char_index(line, position.character, PositionEncoding::Utf16);
    Some(start + char_to_byte(line, index))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_utf16_and_clamped_to_the_line() {
        let text = "é😀x\r\nsecond\n";
        let at = |line, character| byte_offset(text, Position { line, character });
        assert_eq!(at(0, 0), Some(0));
        assert_eq!(at(0, 1), Some(2));
        assert_eq!(at(0, 3), Some(6));
        assert_eq!(at(0, 99), Some(7));
        assert_eq!(at(1, 3), Some(12));
        assert_eq!(at(2, 0), Some(text.len()));
        assert_eq!(at(3, 0), None);
    }
}
