//! Document sync from the editor: the mirror keeps every buffer (so the agent's tools see the
//! unsaved text) and takes each change at once; the document's child gets the same
//! open/change/close through its lane, in order with the editor's requests about it.
//!
//! We announce full-text sync, so a change carries the whole buffer; a client that sends
//! ranged changes anyway has them applied here. A child that already had the document open for
//! the agent gets the editor's text as a change instead of a second `didOpen`.

use std::sync::Arc;

use lsp_bridge::Child;
use lsp_bridge::lsp_types::{self as lsp, Url};
use lsp_bridge::position::PositionEncoding;
use lsp_bridge::queries::apply_text_edits;
use serde_json::{Value, json};

use super::lanes::{Job, Target};
use super::router::{self, Kind, Lookup, Route};
use super::{ResponseError, Shared, codes};

/// A document sync notification, decoded: a malformed one (a `didOpen` without `text`, a
/// version that is not a number) is refused whole, never read with defaults, since a default
/// text would silently empty the agent's copy of the buffer and the child's.
pub(super) enum DocumentEvent {
    Open(lsp::DidOpenTextDocumentParams),
    Change(lsp::DidChangeTextDocumentParams),
    Close(lsp::DidCloseTextDocumentParams),
    Save(lsp::DidSaveTextDocumentParams),
}

impl DocumentEvent {
    pub(super) fn decode(method: &str, params: Value) -> Result<DocumentEvent, ResponseError> {
        use lsp_bridge::jsonrpc::decode_params as typed;
        Ok(match method {
            "textDocument/didOpen" => DocumentEvent::Open(typed(method, params)?),
            "textDocument/didChange" => DocumentEvent::Change(typed(method, params)?),
            "textDocument/didClose" => DocumentEvent::Close(typed(method, params)?),
            "textDocument/didSave" => DocumentEvent::Save(typed(method, params)?),
            other => {
                return Err(ResponseError::new(
                    codes::METHOD_NOT_FOUND,
                    format!("`{other}` is not document sync"),
                ));
            }
        })
    }

    pub(super) fn uri(&self) -> &Url {
        match self {
            DocumentEvent::Open(params) => &params.text_document.uri,
            DocumentEvent::Change(params) => &params.text_document.uri,
            DocumentEvent::Close(params) => &params.text_document.uri,
            DocumentEvent::Save(params) => &params.text_document.uri,
        }
    }

    pub(super) fn path(&self) -> Option<std::path::PathBuf> {
        self.uri().to_file_path().ok()
    }
}

/// What a child is to be told of the editor's document sync, once its lane delivers it: the
/// text as it was when the editor sent it (the mirror may be further on by then).
pub(super) enum Delivery {
    Open {
        uri: Url,
        language_id: String,
        version: i32,
        text: String,
    },
    /// The whole text after the change (ranged changes are applied here).
    Change {
        uri: Url,
        version: i32,
        text: String,
    },
    Close(lsp::DidCloseTextDocumentParams),
    Save(lsp::DidSaveTextDocumentParams),
}

/// Document sync, on the loop: the mirror takes the change now (the agent's tools and inline
/// completion see the buffer as the editor has it), and the document's lane delivers it to the
/// child in order with the editor's requests about it, starting the child on the first
/// document it serves.
pub(super) async fn sync(shared: &Arc<Shared>, event: DocumentEvent) -> Result<(), ResponseError> {
    shared.bridge()?;
    let path = event.path();
    let documents = shared.documents();
    let delivery = match event {
        DocumentEvent::Open(params) => {
            let document = params.text_document;
            documents.editor_opened(
                None,
                document.uri.clone(),
                &document.language_id,
                document.version,
                document.text.clone(),
            );
            Delivery::Open {
                uri: document.uri,
                language_id: document.language_id,
                version: document.version,
                text: document.text,
            }
        }
        DocumentEvent::Change(params) => {
            let (uri, version) = (params.text_document.uri, params.text_document.version);
            let mut text = documents
                .snapshot(&uri)
                .map(|snapshot| snapshot.text)
                .unwrap_or_default();
            for change in params.content_changes {
                match change.range {
                    Some(range) => {
                        text = apply_text_edits(
                            &text,
                            &[json!({"range": range, "newText": change.text})],
                            PositionEncoding::Utf16,
                        )
                    }
                    None => text = change.text,
                }
            }
            documents.editor_changed(&uri, version, text.clone());
            Delivery::Change { uri, version, text }
        }
        DocumentEvent::Close(params) => {
            documents.editor_closed(&params.text_document.uri);
            Delivery::Close(params)
        }
        DocumentEvent::Save(params) => Delivery::Save(params),
    };
    let lane = match &path {
        Some(path) => shared.lane_for(path).await,
        None => None,
    };
    if let Delivery::Close(params) = &delivery {
        shared.forget_routes(&params.text_document.uri);
    }
    if let (Some(lane), Some(path)) = (lane, path) {
        lane.push(Job::Sync { path, delivery }).await;
    }
    Ok(())
}

/// Tell `child` of the editor's document sync (its lane decides when).
pub(super) async fn deliver(
    shared: &Shared,
    child: &Arc<Child>,
    delivery: &Delivery,
) -> Result<(), lsp_bridge::Error> {
    let documents = shared.documents();
    match delivery {
        Delivery::Open {
            uri,
            language_id,
            version,
            text,
        } => {
            // A child that has the document open for the agent gets the editor's text as a
            // change instead of a second `didOpen`.
            if documents.delivered_open(child, uri) {
                child
                    .notify("textDocument/didChange", full_change(uri, *version, text))
                    .await
            } else {
                let params = json!({"textDocument": {
                    "uri": uri, "languageId": language_id, "version": version, "text": text}});
                child.notify("textDocument/didOpen", params).await
            }
        }
        Delivery::Change { uri, version, text } => {
            child
                .notify("textDocument/didChange", full_change(uri, *version, text))
                .await
        }
        Delivery::Close(params) => {
            documents.delivered_close(child, &params.text_document.uri);
            child.notify("textDocument/didClose", json!(params)).await
        }
        Delivery::Save(params) => child.notify("textDocument/didSave", json!(params)).await,
    }
}

/// Forward an editor notification other than document sync: to the lane of the document it
/// names, or to every running child's.
pub(super) async fn forward_notification(shared: &Arc<Shared>, method: &str, params: Value) {
    let route = router::route(shared, Kind::Notification, method, &params, Lookup::Lane).await;
    match route {
        Some(Route::Child(to)) => {
            let Target::Document(path) = to.target else {
                return;
            };
            let job = Job::Notify {
                path,
                method: method.to_owned(),
                params,
            };
            to.lane.push(job).await;
        }
        Some(Route::FanOut(members)) => {
            for (lane, child) in members {
                let job = Job::Broadcast {
                    child,
                    method: method.to_owned(),
                    params: params.clone(),
                };
                lane.push(job).await;
            }
        }
        _ => {}
    }
}

/// A full-text change: what every child gets, since we keep the whole buffer.
fn full_change(uri: &Url, version: i32, text: &str) -> Value {
    json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]})
}
