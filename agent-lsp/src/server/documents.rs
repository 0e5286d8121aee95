//! Document sync from the editor: the mirror keeps every buffer (so the agent's tools see the
//! unsaved text), and the document's child gets the same open/change/close.
//!
//! We announce full-text sync, so a change carries the whole buffer; a client that sends
//! ranged changes anyway has them applied here. A child that already had the document open for
//! the agent gets the editor's text as a change instead of a second `didOpen`.

use std::sync::Arc;

use lsp_bridge::lsp_types::{self as lsp, Url};
use lsp_bridge::position::PositionEncoding;
use lsp_bridge::queries::apply_text_edits;
use serde_json::{Value, json};

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

    pub(super) fn method(&self) -> &'static str {
        match self {
            DocumentEvent::Open(_) => "textDocument/didOpen",
            DocumentEvent::Change(_) => "textDocument/didChange",
            DocumentEvent::Close(_) => "textDocument/didClose",
            DocumentEvent::Save(_) => "textDocument/didSave",
        }
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

pub(super) async fn sync(shared: &Arc<Shared>, event: DocumentEvent) -> Result<(), ResponseError> {
    shared.bridge()?;
    let documents = shared.documents();
    let method = event.method();
    let child = match event.path() {
        // Children start here, when the editor opens a document one serves.
        Some(path) => match shared.child_for(&path).await {
            Ok(child) => Some(child),
            Err(lsp_bridge::Error::NoServer { .. }) => None,
            Err(error) => {
                tracing::warn!(path = %path.display(), "language server unavailable: {error}");
                let server = error.server().unwrap_or_default().to_owned();
                if shared
                    .start_failures_shown
                    .lock()
                    .expect("start failures shown")
                    .insert(server)
                {
                    shared.show_error(&format!(
                        "a language server for {} failed to start: {}",
                        path.display(),
                        error.brief()
                    ));
                }
                None
            }
        },
        None => None,
    };
    let notify = |child: Arc<lsp_bridge::Child>, method: &'static str, params: Value| async move {
        child
            .notify(method, params)
            .await
            .map_err(|error| ResponseError::new(codes::INTERNAL_ERROR, error.to_string()))
    };
    match event {
        DocumentEvent::Open(params) => {
            let document = &params.text_document;
            let (uri, version, text) = (&document.uri, document.version, &document.text);
            let Some(child) = child else {
                documents.editor_opened(
                    None,
                    uri.clone(),
                    &document.language_id,
                    version,
                    text.clone(),
                );
                return Ok(());
            };
            let already_open = documents.editor_opened(
                Some(&child),
                uri.clone(),
                &document.language_id,
                version,
                text.clone(),
            );
            if already_open {
                notify(
                    child,
                    "textDocument/didChange",
                    full_change(uri, version, text),
                )
                .await
            } else {
                notify(child, method, json!(params)).await
            }
        }
        DocumentEvent::Change(params) => {
            let (uri, version) = (&params.text_document.uri, params.text_document.version);
            let mut text = documents
                .snapshot(uri)
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
            documents.editor_changed(uri, version, text.clone());
            match child {
                Some(child) => notify(child, method, full_change(uri, version, &text)).await,
                None => Ok(()),
            }
        }
        DocumentEvent::Close(params) => {
            documents.editor_closed(&params.text_document.uri);
            shared.forget_routes(&params.text_document.uri);
            match child {
                Some(child) => notify(child, method, json!(params)).await,
                None => Ok(()),
            }
        }
        DocumentEvent::Save(params) => match child {
            Some(child) => notify(child, method, json!(params)).await,
            None => Ok(()),
        },
    }
}

/// A full-text change: what every child gets, since we keep the whole buffer.
fn full_change(uri: &Url, version: i32, text: &str) -> Value {
    json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]})
}
