//! `workspace/symbol` over every server the workspace has files for.
//!
//! Two things made an agent's first workspace-wide query come back empty. The servers it
//! needs may not be running (children start when a document of theirs is opened), so they are
//! started here, one per (server, root) the workspace has files for. And a server that has
//! just started answers before it has indexed: pyright answers `[]` until its first analysis
//! is done, about a second after `initialized` on a small project, and reports no progress
//! while it works. So an empty answer from a server that has not yet given a non-empty one,
//! and has not reported the end of its indexing progress, is checked with a canary: the name
//! of a symbol tree-sitter finds in one of the server's own files. A server that finds the
//! canary has indexed, and its empty answer stands. One that does not is asked again, with
//! growing pauses, until `index_wait` after its start; if it is still empty then, the answer
//! says the server may still be indexing instead of "no results".

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::{FileCache, Location, Queries, location_of, symbol_kind};
use crate::child::Child;
use crate::error::Result;

/// At most this many files are walked to find the servers the workspace has files for.
const MAX_SAMPLED_FILES: usize = 20_000;
/// The first pause before asking an empty-handed server again; it doubles up to the cap.
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// A workspace symbol.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct WorkspaceSymbol {
    /// The symbol's name.
    pub name: String,
    /// Its kind in words (`class`, `function`).
    pub kind: String,
    /// The enclosing symbol or module, when the server says, to tell same-named symbols apart.
    pub container: Option<String>,
    /// Where it is defined.
    pub location: Location,
    /// The server that found it, since a workspace query asks every running server.
    pub server: String,
}

/// One server's answer to a workspace-wide query.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerSymbols {
    /// The server that answered.
    pub server: String,
    /// What it found.
    pub symbols: Vec<WorkspaceSymbol>,
    /// Empty, and the server may not have finished indexing: "no results" would be a guess.
    pub still_indexing: bool,
}

impl Queries {
    /// Symbols matching `query` from every server the workspace has files for (started if
    /// need be), one answer per server instance; see the module doc for servers that are
    /// still indexing.
    pub async fn workspace_symbols(&self, query: &str) -> Vec<Result<ServerSymbols>> {
        let answers = self.workspace_symbols_once(query).await;
        if answers
            .iter()
            .any(|answer| answer.as_ref().is_err_and(|error| error.is_server_gone()))
        {
            // A server died under the query: once more, which restarts it.
            tracing::info!("a language server was gone during workspace/symbol: asking again");
            return self.workspace_symbols_once(query).await;
        }
        answers
    }

    async fn workspace_symbols_once(&self, query: &str) -> Vec<Result<ServerSymbols>> {
        let (mut answers, started) = self.start_workspace_servers().await;
        let children = self.bridge.running();
        let asked = children
            .iter()
            // The raw capability: lsp-types reads `false` as an offer too.
            .filter(|child| {
                let offered = &child.initialize_result()["capabilities"]["workspaceSymbolProvider"];
                !offered.is_null() && *offered != Value::Bool(false)
            })
            .map(|child| {
                // A file of this very instance, for the canary.
                let sample = started
                    .iter()
                    .find(|(started, _)| Arc::ptr_eq(started, child))
                    .map(|(_, path)| path.as_path());
                self.symbols_of(child, query, sample)
            });
        answers.extend(futures_util::future::join_all(asked).await);
        answers
    }

    /// Start a child for each (server, root) the workspace has files for, in parallel, each
    /// bounded by `wait`: the failures, as answers to report, and each child with the file it
    /// was started for.
    async fn start_workspace_servers(
        &self,
    ) -> (Vec<Result<ServerSymbols>>, Vec<(Arc<Child>, PathBuf)>) {
        let bridge = self.bridge.clone();
        let samples = tokio::task::spawn_blocking(move || bridge.sample_files(MAX_SAMPLED_FILES))
            .await
            .unwrap_or_default();
        let starts = samples.iter().map(|path| async move {
            match tokio::time::timeout(self.wait, self.bridge.child_for(path)).await {
                Ok(Ok(child)) => Ok(Some((child, path.clone()))),
                Ok(Err(error)) => Err(error),
                Err(_) => {
                    tracing::info!(path = %path.display(), "a language server is still starting: not asked");
                    Ok(None)
                }
            }
        });
        let mut failures = Vec::new();
        let mut started = Vec::new();
        for outcome in futures_util::future::join_all(starts).await {
            match outcome {
                Ok(Some(child)) => started.push(child),
                Ok(None) => {}
                Err(error) => failures.push(Err(error)),
            }
        }
        (failures, started)
    }

    async fn symbols_of(
        &self,
        child: &Child,
        query: &str,
        sample: Option<&Path>,
    ) -> Result<ServerSymbols> {
        child.wait_ready(self.wait).await;
        let warm_until = child
            .initialized_at()
            .map_or_else(Instant::now, |at| at + self.index_wait);
        let mut pause = FIRST_PAUSE;
        loop {
            let value = child
                .request("workspace/symbol", json!({ "query": query }))
                .await?;
            let symbols = self.convert(child, &value);
            if !symbols.is_empty() {
                child.set_workspace_indexed();
            }
            let settled = !symbols.is_empty() || child.workspace_indexed() || child.progress_done();
            if !settled && let Some(canary) = sample.and_then(canary_name) {
                let found = child
                    .request("workspace/symbol", json!({ "query": canary }))
                    .await?;
                if !self.convert(child, &found).is_empty() {
                    // Indexed, maybe just now, between the two questions: ask again.
                    child.set_workspace_indexed();
                    continue;
                }
            }
            let now = Instant::now();
            if settled || now >= warm_until {
                return Ok(ServerSymbols {
                    server: child.name().to_owned(),
                    symbols,
                    still_indexing: !settled,
                });
            }
            tracing::debug!(
                server = child.name(),
                ?pause,
                "workspace/symbol came back empty from a server that may be indexing: asking again"
            );
            tokio::time::sleep(pause.min(warm_until - now)).await;
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }

    fn convert(&self, child: &Child, value: &Value) -> Vec<WorkspaceSymbol> {
        convert(&self.documents, child, value)
    }
}

/// At most this many files next to the sample are looked at for a canary.
const CANARY_FILES: usize = 20;

/// The name of a symbol tree-sitter finds in `sample`, or in a file of the same kind next
/// to it (a `main.py` may define nothing), if it has a grammar for them.
fn canary_name(sample: &Path) -> Option<String> {
    let from = |path: &Path| {
        let text = std::fs::read_to_string(path).ok()?;
        crate::syntax::document_symbols(path, &text)?
            .into_iter()
            .map(|symbol| symbol.name)
            .find(|name| name.chars().count() >= 3)
    };
    from(sample).or_else(|| {
        let extension = sample.extension()?;
        std::fs::read_dir(sample.parent()?)
            .ok()?
            .filter_map(std::result::Result::ok)
            .map(|entry| entry.path())
            .filter(|path| path.extension() == Some(extension) && path != sample)
            .take(CANARY_FILES)
            .find_map(|path| from(&path))
    })
}

/// `workspace/symbol`'s answer in the model's terms.
fn convert(
    documents: &crate::documents::DocumentMirror,
    child: &Child,
    value: &Value,
) -> Vec<WorkspaceSymbol> {
    let mut files = FileCache::new(documents);
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|symbol| {
            let (uri, range) = location_of(&symbol["location"])?;
            let location = files.location(&uri, range.start, child.encoding());
            Some(WorkspaceSymbol {
                name: symbol["name"].as_str()?.to_owned(),
                kind: symbol_kind(symbol["kind"].as_u64().unwrap_or(0)).to_owned(),
                container: symbol["containerName"]
                    .as_str()
                    .filter(|c| !c.is_empty())
                    .map(str::to_owned),
                location,
                server: child.name().to_owned(),
            })
        })
        .collect()
}
