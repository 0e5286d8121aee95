//! The outline of one document from `textDocument/documentSymbol`, as a tree.
//!
//! Servers answer in two shapes (nested `DocumentSymbol`s or flat `SymbolInformation`s); turning
//! either into one tree is this module's work, separate from the workspace-wide search.

use std::path::Path;

use serde_json::{Value, json};

use super::{Answer, Queries, require, symbol_kind};
use crate::documents::Snapshot;
use crate::error::Result;
use crate::position::{PositionEncoding, to_char_index};

/// One symbol of a document's outline.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct OutlineSymbol {
    /// The symbol's name as the server gives it.
    pub name: String,
    /// Its kind in words (`class`, `function`).
    pub kind: String,
    /// 1-based line where it starts.
    pub line: u32,
    /// 1-based column in characters where it starts.
    pub column: u32,
    /// The server's extra text (a signature, a type), when it gives one.
    pub detail: Option<String>,
    /// The symbols nested in it (methods of a class), so the outline keeps its shape.
    pub children: Vec<OutlineSymbol>,
}

impl Queries {
    /// The outline of a document, as a tree.
    pub async fn document_symbols(&self, path: &Path) -> Result<Answer<Vec<OutlineSymbol>>> {
        self.once_more("document_symbols", || self.document_symbols_once(path))
            .await
    }

    async fn document_symbols_once(&self, path: &Path) -> Result<Answer<Vec<OutlineSymbol>>> {
        let lease = self.lease(path).await?;
        let result = async {
            let child = lease.child();
            require(
                child,
                "documentSymbolProvider",
                "textDocument/documentSymbol",
            )?;
            let params = json!({ "textDocument": { "uri": lease.snapshot.uri } });
            let value = child.request("textDocument/documentSymbol", params).await?;
            let symbols = outline(&value, &lease.snapshot, child.encoding());
            Ok(self.answer(symbols, child, &lease, None))
        }
        .await;
        self.documents.release(lease).await?;
        result
    }
}

fn outline(value: &Value, snapshot: &Snapshot, encoding: PositionEncoding) -> Vec<OutlineSymbol> {
    let symbol = |item: &Value, range: &Value| -> Option<OutlineSymbol> {
        let start: lsp_types::Position = serde_json::from_value(range["start"].clone()).ok()?;
        let line = snapshot.line(start.line);
        Some(OutlineSymbol {
            name: item["name"].as_str()?.to_owned(),
            kind: symbol_kind(item["kind"].as_u64().unwrap_or(0)).to_owned(),
            line: start.line + 1,
            column: to_char_index(line, start.character, encoding) as u32 + 1,
            detail: item["detail"]
                .as_str()
                .filter(|d| !d.is_empty())
                .map(str::to_owned),
            children: item["children"]
                .as_array()
                .map(|children| outline(&Value::Array(children.clone()), snapshot, encoding))
                .unwrap_or_default(),
        })
    };
    let items = value.as_array().cloned().unwrap_or_default();
    if items
        .first()
        .is_some_and(|item| item.get("location").is_some())
    {
        // Flat SymbolInformation[]: nest by containerName where it names an earlier symbol.
        let mut roots: Vec<OutlineSymbol> = Vec::new();
        for item in &items {
            let Some(symbol) = symbol(item, &item["location"]["range"]) else {
                continue;
            };
            let container = item["containerName"].as_str().unwrap_or_default();
            match roots
                .iter_mut()
                .rev()
                .find(|root| !container.is_empty() && root.name == container)
            {
                Some(parent) => parent.children.push(symbol),
                None => roots.push(symbol),
            }
        }
        return roots;
    }
    items
        .iter()
        .filter_map(|item| symbol(item, &item["selectionRange"]))
        .collect()
}
