//! Code queries answered by the child servers, in the model's terms.
//!
//! A position comes in as path + 1-based line + symbol name (+ optional 1-based column),
//! because models name symbols well and count columns badly: [`resolve_position`] finds the
//! symbol on the line (or a line or two away) and says when it corrected the column or line.
//! Answers come out as [`Location`]s with 1-based character columns and the code line, stamped
//! with the document versions they were computed on.
//!
//! Files no editor has open are leased from the [`DocumentMirror`] for the length of the query.
//! Diagnostics after an edit are those of *that* version: a pull result, or a
//! `publishDiagnostics` carrying the version (or arriving after the change when the server
//! sends no versions); when none come within the bound the answer says "pending" instead of
//! serving stale ones as current.
//!
//! Each family of queries (navigation and hover, document symbols, workspace symbols, call
//! hierarchy, rename, diagnostics) lives in its own submodule with its answer types; this module
//! holds what they share: the [`Queries`] handle, leasing a document, retrying a query whose
//! server was gone, and reading locations out of answers.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use lsp_types::Url;
use serde_json::Value;

use crate::child::Child;
use crate::config::language_id;
use crate::documents::{DocumentMirror, Lease};
use crate::error::{Error, Result};
use crate::position::{PositionEncoding, to_char_index};
use crate::registry::Bridge;

mod call_hierarchy;
mod diagnostics;
mod document_symbols;
mod navigation;
mod rename;
mod resolve;
#[cfg(test)]
mod tests;
mod workspace_symbols;

pub use call_hierarchy::{Call, CallDirection};
pub use diagnostics::{Diagnostic, DocumentDiagnostics};
pub use document_symbols::OutlineSymbol;
pub use navigation::Navigation;
pub use rename::{FileEdit, apply_text_edits};
pub use resolve::{ResolvedPosition, resolve_position};
pub use workspace_symbols::{ServerSymbols, WorkspaceSymbol};

/// A position as the model gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SymbolPosition {
    /// The file, absolute (the tool layer resolved it inside the workspace).
    pub path: PathBuf,
    /// 1-based.
    pub line: u32,
    /// The symbol's name as it appears on the line.
    pub symbol: String,
    /// 1-based, in characters; optional.
    pub column: Option<u32>,
}

/// A place in a file, in the model's terms.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Location {
    /// The file, absolute.
    pub path: PathBuf,
    /// 1-based.
    pub line: u32,
    /// 1-based, in characters.
    pub column: u32,
    /// The code on that line, trimmed.
    pub code: String,
}

/// An answer and what it was computed on.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer<T> {
    /// The answer itself.
    pub value: T,
    /// Server that answered.
    pub server: String,
    /// `(path, version)` of each document the answer was computed on.
    pub versions: Vec<(PathBuf, i32)>,
    /// Corrections and caveats for the model.
    pub notes: Vec<String>,
}

/// Queries over a bridge and its document mirror.
#[derive(Clone)]
pub struct Queries {
    /// Where the children come from (started on first use, restarted when gone).
    pub bridge: Arc<Bridge>,
    /// The editor's buffers and the agent's transient opens: a query sees what the editor
    /// sees.
    pub documents: Arc<DocumentMirror>,
    /// How long to wait for a server to get ready, and for diagnostics of a new version.
    pub wait: Duration,
    /// How long after its start a server that answers a workspace-wide query with nothing,
    /// and reports no indexing progress, is asked again (see the `workspace_symbols` module).
    pub index_wait: Duration,
}

impl Queries {
    /// Queries with the default waits (20 s for a server to get ready, 10 s for a new one's
    /// index).
    pub fn new(bridge: Arc<Bridge>, documents: Arc<DocumentMirror>) -> Queries {
        Queries {
            bridge,
            documents,
            wait: Duration::from_secs(20),
            index_wait: Duration::from_secs(10),
        }
    }

    /// Run `query`, and once more if the server was gone (died before or while answering):
    /// the second run restarts it. The agent's queries only read, so asking again is safe,
    /// and the model gets the answer instead of "it is restarted on the next request".
    async fn once_more<T, Fut>(&self, what: &str, query: impl Fn() -> Fut) -> Result<T>
    where
        Fut: std::future::Future<Output = Result<T>>,
    {
        match query().await {
            Err(error) if error.is_server_gone() => {
                tracing::info!(
                    query = what,
                    "the language server was gone ({error}): restarting it and asking again"
                );
                query().await
            }
            outcome => outcome,
        }
    }

    async fn lease(&self, path: &Path) -> Result<Lease> {
        let child = self.bridge.child_for(path).await?;
        child.wait_ready(self.wait).await;
        let language = language_id(path).unwrap_or("plaintext");
        let first_document = child.diagnostics().all().is_empty();
        let lease = self.documents.lease(&child, path, language).await?;
        if first_document {
            // Servers such as typescript-language-server and pyright load the project when the
            // first file opens and answer from that file alone until then; their first
            // diagnostics for it say the project is loaded.
            let uri = lease.snapshot.uri.clone();
            let mut changes = child.diagnostics().subscribe();
            let deadline = tokio::time::Instant::now() + self.wait;
            while child.diagnostics().get(&uri).is_none() {
                match tokio::time::timeout_at(deadline, changes.changed()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) | Err(_) => break,
                }
            }
        }
        Ok(lease)
    }

    fn answer<T>(
        &self,
        value: T,
        child: &Child,
        lease: &Lease,
        correction: Option<String>,
    ) -> Answer<T> {
        Answer {
            value,
            server: child.name().to_owned(),
            versions: vec![(lease.snapshot.path.clone(), lease.snapshot.version)],
            notes: correction.into_iter().collect(),
        }
    }
}

fn require(child: &Child, capability: &str, method: &str) -> Result<()> {
    let capabilities = serde_json::to_value(child.capabilities()).unwrap_or(Value::Null);
    match &capabilities[capability] {
        Value::Null | Value::Bool(false) => Err(Error::Response {
            server: child.name().to_owned(),
            code: crate::jsonrpc::code::METHOD_NOT_FOUND,
            message: format!("{} does not support {method}", child.name()),
        }),
        _ => Ok(()),
    }
}

fn range_of(value: &Value) -> Option<lsp_types::Range> {
    serde_json::from_value(value.clone()).ok()
}

fn location_of(value: &Value) -> Option<(Url, lsp_types::Range)> {
    let uri = Url::parse(value["uri"].as_str()?).ok()?;
    Some((uri, range_of(&value["range"])?))
}

/// Locations from a `Location | Location[] | LocationLink[] | null` answer.
fn locations_of(value: &Value) -> Vec<(Url, lsp_types::Range)> {
    let items = match value {
        Value::Array(items) => items.clone(),
        Value::Null => Vec::new(),
        single => vec![single.clone()],
    };
    items
        .iter()
        .filter_map(|item| {
            if let Some(target) = item["targetUri"].as_str() {
                let range = range_of(&item["targetSelectionRange"])
                    .or_else(|| range_of(&item["targetRange"]))?;
                return Some((Url::parse(target).ok()?, range));
            }
            location_of(item)
        })
        .collect()
}

/// Reads the lines of answer files once per query, preferring the mirror's text (the
/// editor's unsaved buffer) over the disk.
struct FileCache<'a> {
    documents: &'a DocumentMirror,
    files: HashMap<Url, Vec<String>>,
}

impl<'a> FileCache<'a> {
    fn new(documents: &'a DocumentMirror) -> FileCache<'a> {
        FileCache {
            documents,
            files: HashMap::new(),
        }
    }

    fn lines(&mut self, uri: &Url) -> &[String] {
        if !self.files.contains_key(uri) {
            let lines = self.text(uri).lines().map(str::to_owned).collect();
            self.files.insert(uri.clone(), lines);
        }
        &self.files[uri]
    }

    fn text(&mut self, uri: &Url) -> String {
        match self.documents.snapshot(uri) {
            Some(snapshot) => snapshot.text,
            None => uri
                .to_file_path()
                .ok()
                .and_then(|path| std::fs::read_to_string(path).ok())
                .unwrap_or_default(),
        }
    }

    fn location(
        &mut self,
        uri: &Url,
        position: lsp_types::Position,
        encoding: PositionEncoding,
    ) -> Location {
        let path = uri
            .to_file_path()
            .unwrap_or_else(|()| PathBuf::from(uri.as_str()));
        let line = self
            .lines(uri)
            .get(position.line as usize)
            .cloned()
            .unwrap_or_default();
        let column = to_char_index(&line, position.character, encoding) as u32 + 1;
        Location {
            path,
            line: position.line + 1,
            column,
            code: line.trim().to_owned(),
        }
    }
}

/// The name of an LSP `SymbolKind` number.
pub fn symbol_kind(kind: u64) -> &'static str {
    match kind {
        1 => "file",
        2 => "module",
        3 => "namespace",
        4 => "package",
        5 => "class",
        6 => "method",
        7 => "property",
        8 => "field",
        9 => "constructor",
        10 => "enum",
        11 => "interface",
        12 => "function",
        13 => "variable",
        14 => "constant",
        15 => "string",
        16 => "number",
        17 => "boolean",
        18 => "array",
        19 => "object",
        20 => "key",
        21 => "null",
        22 => "enum member",
        23 => "struct",
        24 => "event",
        25 => "operator",
        26 => "type parameter",
        _ => "symbol",
    }
}
