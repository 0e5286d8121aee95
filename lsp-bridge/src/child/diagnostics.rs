//! What a server's `publishDiagnostics` told us, per document, with the version it was computed
//! on: the store the agent's diagnostics queries read and wait on.

use std::collections::HashMap;
use std::sync::Mutex;

use lsp_types::{Diagnostic, Url};
use tokio::sync::watch;

/// The diagnostics a server last published for one document.
#[derive(Clone, Debug, PartialEq)]
pub struct DiagnosticsEntry {
    /// The document version they were computed on, when the server says (`versionSupport`).
    pub version: Option<i32>,
    /// The diagnostics as the server sent them, in its encoding's positions.
    pub diagnostics: Vec<Diagnostic>,
    /// The store's generation when they arrived: compare with [`DiagnosticsStore::subscribe`]
    /// to tell fresh from stale.
    pub generation: u64,
}

/// Pushed diagnostics of one child, per document, with a generation counter to wait on.
#[derive(Debug)]
pub struct DiagnosticsStore {
    entries: Mutex<HashMap<Url, DiagnosticsEntry>>,
    generation: watch::Sender<u64>,
    /// Whether the server has ever put a document version on a publish. Such a server's
    /// unversioned publishes (clangd clears a closed document's diagnostics that way) never
    /// describe an open version.
    sends_versions: std::sync::atomic::AtomicBool,
}

impl DiagnosticsStore {
    pub(super) fn new() -> Self {
        DiagnosticsStore {
            sends_versions: std::sync::atomic::AtomicBool::new(false),
            entries: Mutex::new(HashMap::new()),
            generation: watch::channel(0).0,
        }
    }

    /// The latest diagnostics for `uri`. Servers do not all spell file URIs alike (percent
    /// encoding of non-ASCII names), so a miss falls back to comparing file paths.
    pub fn get(&self, uri: &Url) -> Option<DiagnosticsEntry> {
        let entries = self.entries.lock().unwrap();
        if let Some(entry) = entries.get(uri) {
            return Some(entry.clone());
        }
        let path = uri.to_file_path().ok()?;
        entries
            .iter()
            .find(|(key, _)| key.to_file_path().is_ok_and(|key| key == path))
            .map(|(_, entry)| entry.clone())
    }

    /// Bumps on every `publishDiagnostics`.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Every document's latest diagnostics, sorted by URI so listings are stable.
    pub fn all(&self) -> Vec<(Url, DiagnosticsEntry)> {
        let mut all: Vec<_> = self
            .entries
            .lock()
            .unwrap()
            .iter()
            .map(|(uri, entry)| (uri.clone(), entry.clone()))
            .collect();
        all.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        all
    }

    /// Whether the server puts versions on its publishes (see the field).
    pub fn sends_versions(&self) -> bool {
        self.sends_versions
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(super) fn publish(&self, params: lsp_types::PublishDiagnosticsParams) {
        if params.version.is_some() {
            self.sends_versions
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        tracing::debug!(uri = %params.uri, version = ?params.version, n = params.diagnostics.len(), "publishDiagnostics");
        let mut entries = self.entries.lock().unwrap();
        let generation = *self.generation.borrow() + 1;
        entries.insert(
            params.uri,
            DiagnosticsEntry {
                version: params.version,
                diagnostics: params.diagnostics,
                generation,
            },
        );
        self.generation.send_replace(generation);
    }
}
