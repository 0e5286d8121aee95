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

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use lsp_types::Url;
use serde_json::{Value, json};

use crate::child::Child;
use crate::config::language_id;
use crate::documents::{DocumentMirror, Lease, Snapshot};
use crate::error::{Error, Result};
use crate::position::{PositionEncoding, to_char_index, to_server_offset};
use crate::registry::Bridge;

mod workspace_symbols;
pub use workspace_symbols::ServerSymbols;

/// A position as the model gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SymbolPosition {
    pub path: PathBuf,
    /// 1-based.
    pub line: u32,
    /// The symbol's name as it appears on the line.
    pub symbol: String,
    /// 1-based, in characters; optional.
    pub column: Option<u32>,
}

/// Where a symbol was found, in server terms, and what was corrected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedPosition {
    /// 0-based line.
    pub line: u32,
    /// 0-based character index of the symbol's first character.
    pub char_index: usize,
    /// Set when the line or column given was not where the symbol is.
    pub correction: Option<String>,
}

/// A place in a file, in the model's terms.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Location {
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
    pub value: T,
    /// Server that answered.
    pub server: String,
    /// `(path, version)` of each document the answer was computed on.
    pub versions: Vec<(PathBuf, i32)>,
    /// Corrections and caveats for the model.
    pub notes: Vec<String>,
}

/// Diagnostics of one document, or why there are none to show.
#[derive(Clone, Debug, PartialEq)]
pub enum DocumentDiagnostics {
    Current {
        version: i32,
        diagnostics: Vec<Diagnostic>,
    },
    /// Nothing arrived for this version within the bound.
    Pending { version: i32 },
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Diagnostic {
    pub line: u32,
    pub column: u32,
    pub severity: String,
    pub message: String,
    pub source: Option<String>,
    pub code: Option<String>,
}

/// One symbol of a document's outline.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct OutlineSymbol {
    pub name: String,
    pub kind: String,
    pub line: u32,
    pub column: u32,
    pub detail: Option<String>,
    pub children: Vec<OutlineSymbol>,
}

/// A workspace symbol.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct WorkspaceSymbol {
    pub name: String,
    pub kind: String,
    pub container: Option<String>,
    pub location: Location,
    pub server: String,
}

/// Which way a call hierarchy goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallDirection {
    Incoming,
    Outgoing,
}

/// One edge of a call hierarchy.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Call {
    pub name: String,
    pub kind: String,
    pub location: Location,
    /// Where the calls happen (in the caller for incoming, in the item for outgoing).
    pub call_sites: Vec<Location>,
}

/// The navigation requests that share one shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Navigation {
    Definition,
    Declaration,
    TypeDefinition,
    Implementation,
    References,
}

impl Navigation {
    pub fn method(self) -> &'static str {
        match self {
            Navigation::Definition => "textDocument/definition",
            Navigation::Declaration => "textDocument/declaration",
            Navigation::TypeDefinition => "textDocument/typeDefinition",
            Navigation::Implementation => "textDocument/implementation",
            Navigation::References => "textDocument/references",
        }
    }

    fn capability(self) -> &'static str {
        match self {
            Navigation::Definition => "definitionProvider",
            Navigation::Declaration => "declarationProvider",
            Navigation::TypeDefinition => "typeDefinitionProvider",
            Navigation::Implementation => "implementationProvider",
            Navigation::References => "referencesProvider",
        }
    }
}

/// Queries over a bridge and its document mirror.
#[derive(Clone)]
pub struct Queries {
    pub bridge: Arc<Bridge>,
    pub documents: Arc<DocumentMirror>,
    /// How long to wait for a server to get ready, and for diagnostics of a new version.
    pub wait: Duration,
    /// How long after its start a server that answers a workspace-wide query with nothing,
    /// and reports no indexing progress, is asked again (see [`workspace_symbols`]).
    pub index_wait: Duration,
}

impl Queries {
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

    /// Definition, declaration, type definition, implementation or references of a symbol.
    pub async fn navigate(
        &self,
        kind: Navigation,
        position: &SymbolPosition,
    ) -> Result<Answer<Vec<Location>>> {
        self.once_more("navigate", || self.navigate_once(kind, position))
            .await
    }

    async fn navigate_once(
        &self,
        kind: Navigation,
        position: &SymbolPosition,
    ) -> Result<Answer<Vec<Location>>> {
        let lease = self.lease(&position.path).await?;
        let result = self.navigate_leased(kind, position, &lease).await;
        self.documents.release(lease).await?;
        result
    }

    async fn navigate_leased(
        &self,
        kind: Navigation,
        position: &SymbolPosition,
        lease: &Lease,
    ) -> Result<Answer<Vec<Location>>> {
        let child = lease.child();
        require(child, kind.capability(), kind.method())?;
        let resolved = resolve_position(&lease.snapshot, position)?;
        let mut params = text_document_position(&lease.snapshot, &resolved, child.encoding());
        if kind == Navigation::References {
            params["context"] = json!({ "includeDeclaration": true });
        }
        let value = child.request(kind.method(), params).await?;
        let mut files = FileCache::new(&self.documents);
        let mut locations = Vec::new();
        for (uri, range) in locations_of(&value) {
            locations.push(files.location(&uri, range.start, child.encoding()));
        }
        locations.sort();
        locations.dedup();
        Ok(self.answer(locations, child, lease, resolved.correction))
    }

    /// Hover text (types, docs) at a symbol.
    pub async fn hover(&self, position: &SymbolPosition) -> Result<Answer<String>> {
        self.once_more("hover", || self.hover_once(position)).await
    }

    async fn hover_once(&self, position: &SymbolPosition) -> Result<Answer<String>> {
        let lease = self.lease(&position.path).await?;
        let result = async {
            let child = lease.child();
            require(child, "hoverProvider", "textDocument/hover")?;
            let resolved = resolve_position(&lease.snapshot, position)?;
            let params = text_document_position(&lease.snapshot, &resolved, child.encoding());
            let value = child.request("textDocument/hover", params).await?;
            Ok(self.answer(
                hover_text(&value["contents"]),
                child,
                &lease,
                resolved.correction,
            ))
        }
        .await;
        self.documents.release(lease).await?;
        result
    }

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

    /// Incoming or outgoing calls of the symbol at a position.
    pub async fn call_hierarchy(
        &self,
        position: &SymbolPosition,
        direction: CallDirection,
    ) -> Result<Answer<Vec<Call>>> {
        self.once_more("call_hierarchy", || {
            self.call_hierarchy_once(position, direction)
        })
        .await
    }

    async fn call_hierarchy_once(
        &self,
        position: &SymbolPosition,
        direction: CallDirection,
    ) -> Result<Answer<Vec<Call>>> {
        let lease = self.lease(&position.path).await?;
        let result = async {
            let child = lease.child();
            require(
                child,
                "callHierarchyProvider",
                "textDocument/prepareCallHierarchy",
            )?;
            let resolved = resolve_position(&lease.snapshot, position)?;
            let params = text_document_position(&lease.snapshot, &resolved, child.encoding());
            let items = child
                .request("textDocument/prepareCallHierarchy", params)
                .await?;
            let mut files = FileCache::new(&self.documents);
            let mut calls = Vec::new();
            for item in items.as_array().into_iter().flatten() {
                let (method, peer) = match direction {
                    CallDirection::Incoming => ("callHierarchy/incomingCalls", "from"),
                    CallDirection::Outgoing => ("callHierarchy/outgoingCalls", "to"),
                };
                let edges = child.request(method, json!({ "item": item })).await?;
                for edge in edges.as_array().into_iter().flatten() {
                    let target = &edge[peer];
                    let Some(uri) = target["uri"].as_str().and_then(|uri| Url::parse(uri).ok())
                    else {
                        continue;
                    };
                    let Some(range) = range_of(&target["selectionRange"]) else {
                        continue;
                    };
                    // Call sites are in the caller's file for incoming calls, in the item's for outgoing.
                    let site_uri = match direction {
                        CallDirection::Incoming => uri.clone(),
                        CallDirection::Outgoing => item["uri"]
                            .as_str()
                            .and_then(|u| Url::parse(u).ok())
                            .unwrap_or(uri.clone()),
                    };
                    let call_sites = edge["fromRanges"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(range_of)
                        .map(|range| files.location(&site_uri, range.start, child.encoding()))
                        .collect();
                    calls.push(Call {
                        name: target["name"].as_str().unwrap_or_default().to_owned(),
                        kind: symbol_kind(target["kind"].as_u64().unwrap_or(0)).to_owned(),
                        location: files.location(&uri, range.start, child.encoding()),
                        call_sites,
                    });
                }
            }
            Ok(self.answer(calls, child, &lease, resolved.correction))
        }
        .await;
        self.documents.release(lease).await?;
        result
    }

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

    /// Diagnostics of a file as it is now (on disk, or in the editor's buffer). Waits for the
    /// diagnostics of the current version, up to the bound.
    pub async fn diagnostics(&self, path: &Path) -> Result<Answer<DocumentDiagnostics>> {
        self.once_more("diagnostics", || self.diagnostics_once(path))
            .await
    }

    async fn diagnostics_once(&self, path: &Path) -> Result<Answer<DocumentDiagnostics>> {
        let since = *self
            .bridge
            .child_for(path)
            .await?
            .diagnostics()
            .subscribe()
            .borrow();
        let lease = self.lease(path).await?;
        let result = async {
            let child = lease.child();
            let diagnostics = self
                .current_diagnostics(child, &lease.snapshot, since)
                .await?;
            Ok(self.answer(diagnostics, child, &lease, None))
        }
        .await;
        self.documents.release(lease).await?;
        result
    }

    /// After the agent changed `path` on disk: tell the servers, then return the diagnostics of
    /// the new version (or "pending").
    pub async fn after_write(&self, path: &Path) -> Result<Answer<DocumentDiagnostics>> {
        self.once_more("after_write", || self.after_write_once(path))
            .await
    }

    async fn after_write_once(&self, path: &Path) -> Result<Answer<DocumentDiagnostics>> {
        let child = self.bridge.child_for(path).await?;
        let generation = *child.diagnostics().subscribe().borrow();
        let running = self.bridge.running();
        self.documents.changed_on_disk(&running, path).await?;
        let lease = self.lease(path).await?;
        let result = async {
            let diagnostics = self
                .current_diagnostics(&child, &lease.snapshot, generation)
                .await?;
            Ok(self.answer(diagnostics, &child, &lease, None))
        }
        .await;
        self.documents.release(lease).await?;
        result
    }

    /// Pull diagnostics where the server supports it; otherwise wait for a push of this version
    /// (or, from a server that sends no versions, one that arrives after `since_generation`).
    async fn current_diagnostics(
        &self,
        child: &Child,
        snapshot: &Snapshot,
        since_generation: u64,
    ) -> Result<DocumentDiagnostics> {
        let version = snapshot.version;
        if child.capabilities().diagnostic_provider.is_some() {
            let params = json!({ "textDocument": { "uri": snapshot.uri } });
            let report = child.request("textDocument/diagnostic", params).await?;
            if report["kind"] == "full" {
                let items = report["items"].as_array().cloned().unwrap_or_default();
                return Ok(DocumentDiagnostics::Current {
                    version,
                    diagnostics: convert_diagnostics(&items, snapshot, child.encoding()),
                });
            }
        }
        let mut changes = child.diagnostics().subscribe();
        let deadline = tokio::time::Instant::now() + self.wait;
        loop {
            if let Some(entry) = child.diagnostics().get(&snapshot.uri) {
                let current = match entry.version {
                    Some(published) => published == version,
                    // Only a server that never sends versions is trusted with an unversioned
                    // publish, and only one that came after the document was (re)sent.
                    None => {
                        !child.diagnostics().sends_versions() && entry.generation > since_generation
                    }
                };
                if current {
                    let items = serde_json::to_value(&entry.diagnostics).unwrap_or(Value::Null);
                    let items = items.as_array().cloned().unwrap_or_default();
                    return Ok(DocumentDiagnostics::Current {
                        version,
                        diagnostics: convert_diagnostics(&items, snapshot, child.encoding()),
                    });
                }
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => continue,
                Ok(Err(_)) | Err(_) => return Ok(DocumentDiagnostics::Pending { version }),
            }
        }
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

/// The new text of one file under a rename, with the old one for a diff.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileEdit {
    pub path: PathBuf,
    pub old_text: String,
    pub new_text: String,
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

fn is_identifier_char(ch: char) -> bool {
    ch.is_alphanumeric() || ch == '_' || ch == '$'
}

/// Character indices where `symbol` occurs on `line`, as a whole word when it is an identifier.
fn occurrences(line: &str, symbol: &str) -> Vec<usize> {
    if symbol.is_empty() {
        return Vec::new();
    }
    let whole_word = symbol.chars().all(is_identifier_char);
    let chars = line.chars().collect::<Vec<_>>();
    let needle = symbol.chars().collect::<Vec<_>>();
    (0..chars.len().saturating_sub(needle.len() - 1))
        .filter(|&start| chars[start..].starts_with(&needle))
        .filter(|&start| {
            !whole_word
                || ((start == 0 || !is_identifier_char(chars[start - 1]))
                    && chars
                        .get(start + needle.len())
                        .is_none_or(|ch| !is_identifier_char(*ch)))
        })
        .collect()
}

/// Find the symbol the model means: on the given line at the given column, else the nearest
/// occurrence on that line, else on the nearest line within three lines.
pub fn resolve_position(
    snapshot: &Snapshot,
    position: &SymbolPosition,
) -> Result<ResolvedPosition> {
    let not_found = |reason: String| Error::NoServer {
        path: position.path.clone(),
        reason,
    };
    if position.line == 0 {
        return Err(not_found("lines are numbered from 1".into()));
    }
    let line = position.line - 1;
    let wanted = position
        .column
        .map(|column| column.saturating_sub(1) as usize);
    if position.symbol.is_empty() {
        let Some(column) = wanted else {
            return Err(not_found(
                "give the symbol's name (or at least a column)".into(),
            ));
        };
        return Ok(ResolvedPosition {
            line,
            char_index: column,
            correction: None,
        });
    }
    let on_line = occurrences(snapshot.line(line), &position.symbol);
    if let Some(&first) = on_line.first() {
        let (best, exact) = match wanted {
            Some(column) => {
                let hit = on_line.iter().find(|&&start| {
                    column >= start && column < start + position.symbol.chars().count()
                });
                match hit {
                    Some(&start) => (start, true),
                    None => (
                        *on_line
                            .iter()
                            .min_by_key(|&&start| start.abs_diff(column))
                            .expect("not empty"),
                        false,
                    ),
                }
            }
            None => (first, true),
        };
        let correction = (!exact).then(|| {
            format!(
                "column corrected: `{}` is at line {} column {}, not column {}",
                position.symbol,
                position.line,
                best + 1,
                wanted.map_or(0, |column| column + 1)
            )
        });
        return Ok(ResolvedPosition {
            line,
            char_index: best,
            correction,
        });
    }
    for distance in 1..=3u32 {
        for candidate in [line.checked_sub(distance), line.checked_add(distance)]
            .into_iter()
            .flatten()
        {
            if let Some(&start) = occurrences(snapshot.line(candidate), &position.symbol).first() {
                let correction = format!(
                    "line corrected: `{}` is not on line {}; used line {} column {}",
                    position.symbol,
                    position.line,
                    candidate + 1,
                    start + 1
                );
                return Ok(ResolvedPosition {
                    line: candidate,
                    char_index: start,
                    correction: Some(correction),
                });
            }
        }
    }
    Err(not_found(format!(
        "`{}` does not occur on line {} or within 3 lines of it; line {} reads: {}",
        position.symbol,
        position.line,
        position.line,
        snapshot.line(line).trim()
    )))
}

fn text_document_position(
    snapshot: &Snapshot,
    resolved: &ResolvedPosition,
    encoding: PositionEncoding,
) -> Value {
    let character = to_server_offset(snapshot.line(resolved.line), resolved.char_index, encoding);
    json!({
        "textDocument": { "uri": snapshot.uri },
        "position": { "line": resolved.line, "character": character },
    })
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

fn hover_text(contents: &Value) -> String {
    match contents {
        Value::String(text) => text.clone(),
        Value::Array(items) => items
            .iter()
            .map(hover_text)
            .collect::<Vec<_>>()
            .join("\n\n"),
        Value::Object(object) => match (object.get("language"), object.get("value")) {
            (Some(language), Some(Value::String(value))) => {
                format!("```{}\n{value}\n```", language.as_str().unwrap_or_default())
            }
            (_, Some(Value::String(value))) => value.clone(),
            _ => String::new(),
        },
        _ => String::new(),
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

fn convert_diagnostics(
    items: &[Value],
    snapshot: &Snapshot,
    encoding: PositionEncoding,
) -> Vec<Diagnostic> {
    let mut diagnostics = items
        .iter()
        .filter_map(|item| {
            let start: lsp_types::Position =
                serde_json::from_value(item["range"]["start"].clone()).ok()?;
            let severity = match item["severity"].as_u64() {
                Some(1) => "error",
                Some(2) => "warning",
                Some(3) => "info",
                Some(4) => "hint",
                _ => "error",
            };
            let code = match &item["code"] {
                Value::String(code) => Some(code.clone()),
                Value::Number(code) => Some(code.to_string()),
                _ => None,
            };
            Some(Diagnostic {
                line: start.line + 1,
                column: to_char_index(snapshot.line(start.line), start.character, encoding) as u32
                    + 1,
                severity: severity.to_owned(),
                message: item["message"].as_str().unwrap_or_default().to_owned(),
                source: item["source"].as_str().map(str::to_owned),
                code,
            })
        })
        .collect::<Vec<_>>();
    diagnostics.sort_by_key(|diagnostic| (diagnostic.line, diagnostic.column));
    diagnostics
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

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(text: &str) -> Snapshot {
        Snapshot {
            uri: Url::parse("file:///w/a.py").unwrap(),
            path: "/w/a.py".into(),
            text: text.into(),
            version: 1,
        }
    }

    fn position(line: u32, symbol: &str, column: Option<u32>) -> SymbolPosition {
        SymbolPosition {
            path: "/w/a.py".into(),
            line,
            symbol: symbol.into(),
            column,
        }
    }

    #[test]
    fn finds_the_symbol_on_its_line_and_corrects_near_misses() {
        let doc = snapshot("x = größe(größe_max)\ny = 1\nz = größe(2)\n");
        let exact = resolve_position(&doc, &position(1, "größe", Some(5))).unwrap();
        assert_eq!(
            (exact.line, exact.char_index, exact.correction),
            (0, 4, None)
        );
        // Whole words only: `größe_max` is another identifier.
        let near = resolve_position(&doc, &position(1, "größe", Some(12))).unwrap();
        assert_eq!(near.char_index, 4);
        assert!(near.correction.unwrap().contains("column corrected"));
        let no_column = resolve_position(&doc, &position(1, "größe_max", None)).unwrap();
        assert_eq!((no_column.char_index, no_column.correction), (10, None));
        let moved = resolve_position(&doc, &position(2, "größe", None)).unwrap();
        assert_eq!((moved.line, moved.char_index), (0, 4));
        assert!(moved.correction.unwrap().contains("line corrected"));
        let err = resolve_position(&doc, &position(2, "nope", None))
            .unwrap_err()
            .to_string();
        assert!(err.contains("`nope` does not occur on line 2"), "{err}");
    }

    #[test]
    fn text_edits_apply_in_the_servers_encoding() {
        let text = "let café = 1;\nlet b = café;\n";
        let edits = vec![
            json!({"range": {"start": {"line": 0, "character": 4}, "end": {"line": 0, "character": 8}}, "newText": "tea"}),
            json!({"range": {"start": {"line": 1, "character": 8}, "end": {"line": 1, "character": 12}}, "newText": "tea"}),
        ];
        assert_eq!(
            apply_text_edits(text, &edits, PositionEncoding::Utf16),
            "let tea = 1;\nlet b = tea;\n"
        );
        let utf8 = vec![
            json!({"range": {"start": {"line": 0, "character": 4}, "end": {"line": 0, "character": 9}}, "newText": "tea"}),
        ];
        assert_eq!(
            apply_text_edits(text, &utf8, PositionEncoding::Utf8),
            "let tea = 1;\nlet b = café;\n"
        );
    }

    #[test]
    fn location_answers_of_every_shape_are_read() {
        let location = json!({"uri": "file:///w/a.py", "range": {"start": {"line": 1, "character": 2}, "end": {"line": 1, "character": 3}}});
        let link = json!({"targetUri": "file:///w/b.py", "targetRange": {"start": {"line": 0, "character": 0}, "end": {"line": 5, "character": 0}}, "targetSelectionRange": {"start": {"line": 2, "character": 4}, "end": {"line": 2, "character": 5}}});
        assert_eq!(locations_of(&location).len(), 1);
        assert_eq!(locations_of(&json!([location, link]))[1].1.start.line, 2);
        assert!(locations_of(&Value::Null).is_empty());
    }
}
