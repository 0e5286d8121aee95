//! `@path` completion in prompt documents, and the file index it ranks from, kept current by
//! the editor's file events and open documents.

use std::sync::Arc;

use lsp_bridge::jsonrpc;
use lsp_bridge::lsp_types::{Position, TextDocumentIdentifier};
use lsp_bridge::position::PositionEncoding;
use serde_json::{Value, json};

use super::offset_of;
use crate::file_index::mentions::{bare_mention_at, completion_entries};
use crate::file_index::{Candidate, ChangeKind, EntryKind, FileChange};
use crate::server::{Reply, Shared, items};

/// Candidates offered per `@` completion.
const COMPLETION_LIMIT: usize = 50;
/// How long `@` completion waits for the file index's first walk (about a second on 100,000
/// files), which `initialize` starts and no longer outlasts.
const MENTION_INDEX_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// What `@path` completion reads of `textDocument/completion` (lsp-types' `CompletionParams`
/// flattens these, and a flattened field's error loses its name).
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct MentionParams {
    text_document: TextDocumentIdentifier,
    position: Position,
}

/// `@path` completion in a prompt document, from the workspace's file index.
pub(crate) async fn complete_mention(shared: &Arc<Shared>, params: &Value) -> Reply {
    let empty = || Ok(json!({"isIncomplete": false, "items": []}));
    let MentionParams {
        text_document,
        position,
    } = jsonrpc::decode_params("textDocument/completion", params.clone())?;
    let Ok(path) = text_document.uri.to_file_path() else {
        return empty();
    };
    if shared.files.get().is_none() {
        return empty();
    }
    let text = shared.text_or_disk(&path).unwrap_or_default();
    let (line, character) = (position.line, position.character);
    let line_text = text.lines().nth(line as usize).unwrap_or("");
    let cursor = offset_of(line_text, 0, character, PositionEncoding::Utf16);
    let Some(typed) = bare_mention_at(line_text, cursor) else {
        return empty();
    };
    // Ranking 100k paths takes milliseconds: off the proxy's thread.
    let query = {
        let (shared, query, document) = (shared.clone(), typed.query.clone(), path.clone());
        tokio::task::spawn_blocking(move || {
            let index = shared.files.get().expect("checked above");
            // Right after `initialize` the first walk may still run; the answer is marked
            // incomplete, so the next keystroke asks again if it is not done by then.
            index.wait_ready(MENTION_INDEX_WAIT);
            let document = index.read().relative(&document);
            let mut candidates = index.query(&query, COMPLETION_LIMIT + 2)?;
            candidates.retain(|candidate| !needless(candidate, document.as_deref(), &query));
            candidates.truncate(COMPLETION_LIMIT);
            Ok::<_, crate::workspace::PathError>(candidates)
        })
        .await
    };
    let Ok(query) = query else { return empty() };
    let candidates = match query {
        Ok(candidates) => candidates,
        // A query that would leave the workspace gets no candidates (and says why in the log).
        Err(error) => {
            tracing::info!(query = %typed.query, "@path query refused: {error}");
            return empty();
        }
    };
    let start = lsp_bridge::position::to_server_offset(
        line_text,
        line_text[..typed.start].chars().count(),
        PositionEncoding::Utf16,
    );
    let range = json!({"start": {"line": line, "character": start}, "end": {"line": line, "character": character}});
    // An editor that pairs quotes has put a `"` right after the cursor of `@"…` (and a folder
    // chosen before left one there): an item that closes the mention leaves its own closing
    // quote out and lets that one close it. Replacing the quote with a range past the cursor
    // is not enough: Neovim expands a snippet at the cursor whatever its range says, which
    // left the mention ending in two quotes.
    let paired_quote = typed.typed.starts_with("@\"") && line_text[cursor..].starts_with('"');
    // A quoted mention is a snippet where the editor takes snippets: a folder can then be
    // closed with the cursor inside it, and Neovim's own completion inserts a snippet whole
    // (a plain item it cuts at the first space). Plain mentions stay plain text, which every
    // completion front end inserts as it is (Neovim's bare omnifunc expands no snippet).
    let snippets = shared.client_supports("/textDocument/completion/completionItem/snippetSupport");
    let items: Vec<Value> = completion_entries(&typed, &candidates)
        .into_iter()
        .map(|entry| {
            let snippet = snippets && entry.insert_text.starts_with("@\"");
            let mut text = if snippet {
                entry.snippet
            } else {
                entry.insert_text
            };
            if paired_quote && text.starts_with("@\"") {
                if let Some(open) = text.strip_suffix("$0\"") {
                    text = format!("{open}$0");
                } else if text.len() > 2 && text.ends_with('"') {
                    text.pop();
                }
            }
            json!({
                "label": entry.label,
                "kind": match entry.kind { EntryKind::File => 17, EntryKind::Directory => 19 },
                "filterText": entry.filter_text,
                "sortText": entry.sort_text,
                "insertTextFormat": if snippet { 2 } else { 1 },
                "textEdit": {"range": range, "newText": text},
                "data": {items::OWN_ITEM_KEY: "mention"},
            })
        })
        .collect();
    // Incomplete: each keystroke asks again, so the index ranks, not the editor's filter.
    Ok(json!({"isIncomplete": true, "items": items}))
}

/// Whether offering `candidate` would serve no purpose: it is the prompt document being edited
/// (with Neovim's default `completeopt` the first item is inserted as the user types, and the
/// document itself, open and just changed, ranks first), or the folder the mention already
/// names in full (accepting it would change nothing, or close a quote a second time).
fn needless(candidate: &Candidate, document: Option<&str>, query: &str) -> bool {
    match candidate.kind {
        EntryKind::File => document == Some(candidate.path.as_str()),
        EntryKind::Directory => query.strip_suffix('/') == Some(candidate.path.as_str()),
    }
}

/// `workspace/didChangeWatchedFiles` into the file index (the watcher may have seen them too;
/// applying twice is harmless).
pub(crate) fn watched_files_changed(shared: &Arc<Shared>, params: &Value) {
    let Some(index) = shared.files.get() else {
        return;
    };
    let changes: Vec<FileChange> = params["changes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|change| {
            let path = lsp_bridge::lsp_types::Url::parse(change["uri"].as_str()?)
                .ok()?
                .to_file_path()
                .ok()?;
            let kind = match change["type"].as_u64()? {
                1 => ChangeKind::Created,
                2 => ChangeKind::Changed,
                3 => ChangeKind::Deleted,
                _ => return None,
            };
            Some(FileChange::new(path, kind))
        })
        .collect();
    if !changes.is_empty() {
        index.apply(&changes);
    }
}

/// Open documents and the ones being edited rank higher in `@path` completion.
pub(crate) fn document_event(
    shared: &Arc<Shared>,
    event: &crate::server::documents::DocumentEvent,
) {
    use crate::server::documents::DocumentEvent;
    let Some(index) = shared.files.get() else {
        return;
    };
    let Some(path) = event.path() else {
        return;
    };
    match event {
        DocumentEvent::Change(_) | DocumentEvent::Save(_) => index.boost_recent(&path),
        DocumentEvent::Open(_) | DocumentEvent::Close(_) => {
            // The mirror is updated after this, so the document itself is added or removed.
            let mut open = shared.documents().editor_open_paths();
            open.retain(|open| *open != path);
            if matches!(event, DocumentEvent::Open(_)) {
                open.push(path);
            }
            index.set_open(open);
        }
    }
}
