//! Rename previews: what `textDocument/rename` would change, applied in memory, never on disk.
//!
//! Applying text edits in the server's position encoding is also what the editor-facing code
//! needs for buffer edits, which is why [`apply_text_edits`] is public.

use std::collections::BTreeMap;
use std::path::PathBuf;

use lsp_types::Url;
use serde_json::{Value, json};

use super::resolve::{resolve_position, text_document_position};
use super::{Answer, FileCache, Queries, SymbolPosition, require};
use crate::error::Result;
use crate::position::{PositionEncoding, to_char_index};

/// The new text of one file under a rename, with the old one for a diff.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileEdit {
    /// The file the rename changes.
    pub path: PathBuf,
    /// Its text before, as the server computed the edits on (the editor's buffer if open).
    pub old_text: String,
    /// Its text with the server's edits applied.
    pub new_text: String,
}

impl Queries {
    /// What renaming the symbol would change, as new file contents per file; nothing is applied.
    pub async fn rename_preview(
        &self,
        position: &SymbolPosition,
        new_name: &str,
    ) -> Result<Answer<Vec<FileEdit>>> {
        self.once_more("rename_preview", || {
            self.rename_preview_once(position, new_name)
        })
        .await
    }

    async fn rename_preview_once(
        &self,
        position: &SymbolPosition,
        new_name: &str,
    ) -> Result<Answer<Vec<FileEdit>>> {
        let lease = self.lease(&position.path).await?;
        let result = async {
            let child = lease.child();
            require(child, "renameProvider", "textDocument/rename")?;
            let resolved = resolve_position(&lease.snapshot, position)?;
            let mut params = text_document_position(&lease.snapshot, &resolved, child.encoding());
            params["newName"] = json!(new_name);
            let edit = child.request("textDocument/rename", params).await?;
            let mut files = FileCache::new(&self.documents);
            let edits = workspace_edit(&edit, &mut files, child.encoding());
            Ok(self.answer(edits, child, &lease, resolved.correction))
        }
        .await;
        self.documents.release(lease).await?;
        result
    }
}

/// Apply a `WorkspaceEdit` (`changes` or `documentChanges`) in memory, file by file.
fn workspace_edit(
    edit: &Value,
    files: &mut FileCache<'_>,
    encoding: PositionEncoding,
) -> Vec<FileEdit> {
    let mut per_file: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    if let Some(changes) = edit["changes"].as_object() {
        for (uri, edits) in changes {
            per_file
                .entry(uri.clone())
                .or_default()
                .extend(edits.as_array().cloned().unwrap_or_default());
        }
    }
    for change in edit["documentChanges"].as_array().into_iter().flatten() {
        if let Some(uri) = change["textDocument"]["uri"].as_str() {
            per_file
                .entry(uri.to_owned())
                .or_default()
                .extend(change["edits"].as_array().cloned().unwrap_or_default());
        }
    }
    per_file
        .into_iter()
        .filter_map(|(uri, edits)| {
            let uri = Url::parse(&uri).ok()?;
            let old_text = files.text(&uri);
            let new_text = apply_text_edits(&old_text, &edits, encoding);
            Some(FileEdit {
                path: uri.to_file_path().ok()?,
                old_text,
                new_text,
            })
        })
        .collect()
}

/// Apply LSP text edits to `text` (edits never overlap; applied from the end).
pub fn apply_text_edits(text: &str, edits: &[Value], encoding: PositionEncoding) -> String {
    let line_starts = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(index, _)| index + 1))
        .collect::<Vec<_>>();
    let byte_of = |position: &lsp_types::Position| -> usize {
        let Some(&start) = line_starts.get(position.line as usize) else {
            return text.len();
        };
        let end = line_starts
            .get(position.line as usize + 1)
            .map_or(text.len(), |next| next - 1);
        let line = &text[start..end];
        start
            + crate::position::char_to_byte(line, to_char_index(line, position.character, encoding))
    };
    let mut spans = edits
        .iter()
        .filter_map(|edit| {
            let range: lsp_types::Range = serde_json::from_value(edit["range"].clone()).ok()?;
            Some((
                byte_of(&range.start),
                byte_of(&range.end),
                edit["newText"].as_str()?.to_owned(),
            ))
        })
        .collect::<Vec<_>>();
    spans.sort_by_key(|span| std::cmp::Reverse(span.0));
    let mut out = text.to_owned();
    for (start, end, new_text) in spans {
        out.replace_range(start..end.max(start), &new_text);
    }
    out
}
