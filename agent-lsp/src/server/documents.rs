//! Document sync from the editor: the mirror keeps every buffer (so the agent's tools see the
//! unsaved text), and the document's child gets the same open/change/close.
//!
//! We announce full-text sync, so a change carries the whole buffer; a client that sends
//! ranged changes anyway has them applied here. A child that already had the document open for
//! the agent gets the editor's text as a change instead of a second `didOpen`.

use std::sync::Arc;

use lsp_bridge::lsp_types::Url;
use lsp_bridge::position::PositionEncoding;
use lsp_bridge::queries::apply_text_edits;
use serde_json::{Value, json};

use super::{Shared, codes, routing};

pub(super) async fn sync(
    shared: &Arc<Shared>,
    method: &str,
    params: Value,
) -> Result<(), (i64, String)> {
    shared.bridge()?;
    let uri_text = params["textDocument"]["uri"].as_str().ok_or((
        codes::INVALID_PARAMS,
        format!("`{method}` without textDocument.uri"),
    ))?;
    let uri = Url::parse(uri_text).map_err(|error| {
        (
            codes::INVALID_PARAMS,
            format!("bad uri {uri_text:?}: {error}"),
        )
    })?;
    let documents = shared.documents();
    let child = match routing::document_path(&params) {
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
    match method {
        "textDocument/didOpen" => {
            let document = &params["textDocument"];
            let text = document["text"].as_str().unwrap_or_default().to_owned();
            let version = document["version"].as_i64().unwrap_or(0) as i32;
            let language = document["languageId"].as_str().unwrap_or("plaintext");
            let Some(child) = child else {
                documents.editor_opened(None, uri, language, version, text);
                return Ok(());
            };
            let already_open =
                documents.editor_opened(Some(&child), uri.clone(), language, version, text.clone());
            if already_open {
                let change = json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]});
                child.notify("textDocument/didChange", change).await
            } else {
                child.notify(method, params).await
            }
            .map_err(|error| (codes::INTERNAL_ERROR, error.to_string()))
        }
        "textDocument/didChange" => {
            let version = params["textDocument"]["version"].as_i64().unwrap_or(0) as i32;
            let mut text = documents
                .snapshot(&uri)
                .map(|snapshot| snapshot.text)
                .unwrap_or_default();
            for change in params["contentChanges"].as_array().into_iter().flatten() {
                match change.get("range") {
                    Some(_) => {
                        text = apply_text_edits(
                            &text,
                            &[json!({"range": change["range"], "newText": change["text"]})],
                            PositionEncoding::Utf16,
                        )
                    }
                    None => text = change["text"].as_str().unwrap_or_default().to_owned(),
                }
            }
            documents.editor_changed(&uri, version, text.clone());
            if let Some(child) = child {
                let change = json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]});
                child
                    .notify(method, change)
                    .await
                    .map_err(|error| (codes::INTERNAL_ERROR, error.to_string()))?;
            }
            Ok(())
        }
        "textDocument/didClose" => {
            documents.editor_closed(&uri);
            if let Some(child) = child {
                child
                    .notify(method, params)
                    .await
                    .map_err(|error| (codes::INTERNAL_ERROR, error.to_string()))?;
            }
            Ok(())
        }
        _ => {
            if let Some(child) = child {
                child
                    .notify(method, params)
                    .await
                    .map_err(|error| (codes::INTERNAL_ERROR, error.to_string()))?;
            }
            Ok(())
        }
    }
}
