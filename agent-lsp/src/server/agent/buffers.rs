//! The editor's buffers as the agent's file tools see them (see `tools::buffers`): the text of
//! an open document comes from the document mirror, and a change is a `workspace/applyEdit`.

use std::path::Path;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::future::BoxFuture;
use lsp_bridge::documents::uri_of;
use lsp_bridge::position::PositionEncoding;
use serde_json::json;

use super::Shared;
use crate::tools::buffers::{Buffers, minimal_text_edit};

/// How long a change may take to come back as the editor's `didChange` before the tool
/// reports success without it (the editor said it applied the edit; only our mirror lags).
const ECHO_WAIT: Duration = Duration::from_secs(3);

pub(crate) struct EditorBuffers {
    /// Weak: the server owns the agent, which owns its tools, which own this.
    shared: Weak<Shared>,
}

impl std::fmt::Debug for EditorBuffers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EditorBuffers")
    }
}

impl EditorBuffers {
    pub(crate) fn new(shared: &Arc<Shared>) -> EditorBuffers {
        EditorBuffers {
            shared: Arc::downgrade(shared),
        }
    }

    /// The editor's text of `path` when it has the document open, read from the mirror now.
    pub(crate) fn editor_text(&self, path: &Path) -> Option<String> {
        self.shared.upgrade()?.editor_text(path)
    }
}

impl Buffers for EditorBuffers {
    fn text(&self, path: &Path) -> BoxFuture<'static, Option<String>> {
        let text = self.editor_text(path);
        Box::pin(std::future::ready(text))
    }

    fn open(&self) -> Vec<(std::path::PathBuf, String)> {
        let Some(shared) = self.shared.upgrade() else {
            return Vec::new();
        };
        shared
            .documents()
            .editor_open_paths()
            .into_iter()
            .filter_map(|path| {
                let text = shared.editor_text(&path)?;
                Some((path, text))
            })
            .collect()
    }

    fn replace(
        &self,
        path: &Path,
        before: &str,
        after: &str,
    ) -> BoxFuture<'static, Result<(), String>> {
        let name = path
            .file_name()
            .map_or(String::new(), |name| name.to_string_lossy().into_owned());
        self.apply(path, before, after, Some(format!("agent: edit {name}")))
    }
}

impl EditorBuffers {
    /// Replace the editor's buffer of `path` (with text `before`) by `after` through
    /// `workspace/applyEdit`, labelled as `label` (editors show a label: Neovim prints each
    /// one, so a streamed answer's many small edits go without). Resolves once the editor has
    /// applied it and its `didChange` for it has arrived, or after [`ECHO_WAIT`] without one.
    pub(crate) fn apply(
        &self,
        path: &Path,
        before: &str,
        after: &str,
        label: Option<String>,
    ) -> BoxFuture<'static, Result<(), String>> {
        let shared = self.shared.clone();
        let path = path.to_owned();
        let edit = minimal_text_edit(before, after, PositionEncoding::Utf16);
        let before = before.to_owned();
        let after = after.to_owned();
        Box::pin(async move {
            let shared = shared.upgrade().ok_or("the editor connection is closed")?;
            let uri = uri_of(&path).map_err(|error| error.to_string())?;
            // The version the edit is computed against: that of `before`, or the buffer has
            // moved on and the edit would land in the wrong place.
            let version = match shared.documents().snapshot(&uri) {
                Some(snapshot) if snapshot.text != before => {
                    return Err("the buffer changed meanwhile; read the file again".into());
                }
                Some(snapshot) => Some(snapshot.version),
                None => None,
            };
            // With versioned document changes the editor refuses an edit computed against a
            // buffer that changed meanwhile, instead of applying it in the wrong place.
            let workspace_edit = match version {
                Some(version)
                    if shared.client_supports("/workspace/workspaceEdit/documentChanges") =>
                {
                    json!({"documentChanges": [{"textDocument": {"uri": uri, "version": version}, "edits": [edit]}]})
                }
                _ => json!({"changes": {uri.as_str(): [edit]}}),
            };
            let mut params = json!({"edit": workspace_edit});
            if let Some(label) = label {
                params["label"] = label.into();
            }
            let answer = shared
                .request_editor("workspace/applyEdit", params)
                .await
                .map_err(|error| error.message)?;
            if answer["applied"] != true {
                let reason = answer["failureReason"]
                    .as_str()
                    .unwrap_or("the editor did not apply it (the buffer may have changed; read the file again)");
                return Err(reason.to_owned());
            }
            // The editor's didChange follows; wait for it, so the diagnostics checked after the
            // write and the next `read` see the new text. It is recognised by its version, not
            // its text: an editor may normalise what it applied (a final line break, line
            // endings), and the next edit must be computed against the editor's text anyway.
            let echoed = |snapshot: &lsp_bridge::documents::Snapshot| match version {
                Some(version) => snapshot.version > version,
                None => snapshot.text == after,
            };
            let deadline = tokio::time::Instant::now() + ECHO_WAIT;
            while tokio::time::Instant::now() < deadline {
                if let Some(snapshot) = shared.documents().snapshot(&uri)
                    && echoed(&snapshot)
                {
                    if snapshot.text != after {
                        tracing::debug!(path = %path.display(), "the editor's text after the edit differs from the one computed");
                    }
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            tracing::warn!(path = %path.display(), "the editor applied the edit but sent no didChange for it within {ECHO_WAIT:?}");
            Ok(())
        })
    }
}
