//! Diagnostics of the version of a document the agent asks about, pulled or pushed.
//!
//! The hard part is knowing that diagnostics belong to *this* version: a pull result, or a
//! `publishDiagnostics` carrying the version (or arriving after the change when the server sends
//! no versions). When none come within the bound the answer says "pending" instead of serving
//! stale ones as current.

use std::path::Path;

use serde_json::{Value, json};

use super::{Answer, Queries};
use crate::child::Child;
use crate::documents::Snapshot;
use crate::error::Result;
use crate::position::{PositionEncoding, to_char_index};

/// Diagnostics of one document, or why there are none to show.
#[derive(Clone, Debug, PartialEq)]
pub enum DocumentDiagnostics {
    /// The server published diagnostics for the version the caller has: they describe the
    /// text as it is, and an empty list means the file is clean.
    Current {
        /// The document version they were computed on.
        version: i32,
        /// Sorted by line and column.
        diagnostics: Vec<Diagnostic>,
    },
    /// Nothing arrived for this version within the bound.
    Pending {
        /// The version still waited for, so the caller can say what it could not check.
        version: i32,
    },
}

/// One diagnostic in the model's terms: 1-based line and character column, severity in words.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Diagnostic {
    /// 1-based line of its start.
    pub line: u32,
    /// 1-based column of its start, in characters (converted from the server's encoding).
    pub column: u32,
    /// `error`, `warning`, `info` or `hint`; a server that gives none counts as `error`.
    pub severity: String,
    /// The server's message as it is.
    pub message: String,
    /// Which checker said it (`Pyright`, `clang`), when the server says.
    pub source: Option<String>,
    /// The rule's code (a number is written as text), for looking it up or silencing it.
    pub code: Option<String>,
}

impl Queries {
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
