//! The workspace-wide symbol index: every definition of every file, flat, kept current as files
//! change.
//!
//! Separate from the per-file extraction because it owns what only a workspace needs: parallel
//! building over many files, size limits, paths relative to the root, and name matching.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio_util::sync::CancellationToken;
use tree_sitter::Parser;

use super::{Language, MAX_FILE_SIZE, SyntaxSymbol, symbols};

/// Every definition in a workspace, flat, for workspace symbols and definition-by-name where no
/// language server answers. Approximate: see the module docs.
///
/// Paths are kept relative to the workspace root. Building parses every file, so it belongs on a
/// blocking thread; afterwards the editor's changes are applied file by file.
#[derive(Clone, Debug, Default)]
pub struct SymbolIndex {
    root: PathBuf,
    pub(super) files: BTreeMap<PathBuf, Vec<IndexedSymbol>>,
}

#[derive(Clone, Debug)]
pub(super) struct IndexedSymbol {
    pub(super) symbol: SyntaxSymbol,
    /// The lowercase name, computed once for case-insensitive matching.
    folded_name: String,
}

/// How well a name matches a workspace-symbol query: lower is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum MatchQuality {
    Exact,
    Prefix,
    Substring,
}

impl SymbolIndex {
    /// Parses `files` (absolute, or relative to `root`) that have a grammar here and are at most
    /// [`MAX_FILE_SIZE`] bytes; unreadable files are skipped. The work is spread over the
    /// machine's cores.
    ///
    /// `cancel` is checked between files: a cancelled build returns the files parsed so far,
    /// which is still a correct (if partial) index.
    pub fn build(
        root: &Path,
        files: impl IntoIterator<Item = PathBuf>,
        cancel: &CancellationToken,
    ) -> SymbolIndex {
        let files: Vec<PathBuf> = files
            .into_iter()
            .filter(|path| Language::from_path(path).is_some())
            .collect();
        let next = AtomicUsize::new(0);
        let n_threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(files.len())
            .max(1);
        let parsed: Vec<(PathBuf, Vec<IndexedSymbol>)> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..n_threads)
                .map(|_| {
                    scope.spawn(|| {
                        let mut parser = Parser::new();
                        let mut parsed = Vec::new();
                        while !cancel.is_cancelled() {
                            let Some(path) = files.get(next.fetch_add(1, Ordering::Relaxed)) else {
                                break;
                            };
                            if let Some(entry) = index_file(&mut parser, root, path) {
                                parsed.push(entry);
                            }
                        }
                        parsed
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|worker| {
                    worker
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect()
        });
        SymbolIndex {
            root: root.to_path_buf(),
            files: parsed.into_iter().collect(),
        }
    }

    /// Re-indexes one file from its current text (an editor buffer or a fresh write). A file
    /// without a grammar here or over [`MAX_FILE_SIZE`] is dropped from the index instead.
    pub fn update_file(&mut self, root: &Path, path: &Path, text: &str) {
        let key = relative_to(root, path);
        let symbols = Language::from_path(path)
            .filter(|_| text.len() as u64 <= MAX_FILE_SIZE)
            .and_then(|language| symbols(&mut Parser::new(), language, text));
        match symbols {
            Some(symbols) => {
                self.files.insert(key, flatten(symbols));
            }
            None => {
                self.files.remove(&key);
            }
        }
    }

    /// Forgets a deleted file; `path` is absolute or relative to the root the index was built on.
    pub fn remove_file(&mut self, path: &Path) {
        self.files.remove(&relative_to(&self.root, path));
    }

    /// The number of files indexed.
    pub fn file_count(&self) -> usize {
        self.files.len()
    }

    /// The number of definitions indexed.
    pub fn len(&self) -> usize {
        self.files.values().map(Vec::len).sum()
    }

    /// Whether no definition is indexed (no file, or only files without definitions).
    pub fn is_empty(&self) -> bool {
        self.files.values().all(Vec::is_empty)
    }

    /// Definitions whose name contains `query`, ignoring case: exact names first, then names
    /// starting with it, then the rest, each group by path and line. At most `limit`.
    /// An empty query matches everything.
    pub fn workspace_symbols(&self, query: &str, limit: usize) -> Vec<(PathBuf, SyntaxSymbol)> {
        let query = query.trim().to_lowercase();
        let mut found: Vec<(MatchQuality, &Path, &SyntaxSymbol)> = Vec::new();
        for (path, symbols) in &self.files {
            for indexed in symbols {
                let quality = if indexed.folded_name == query {
                    MatchQuality::Exact
                } else if indexed.folded_name.starts_with(&query) {
                    MatchQuality::Prefix
                } else if indexed.folded_name.contains(&query) {
                    MatchQuality::Substring
                } else {
                    continue;
                };
                found.push((quality, path, &indexed.symbol));
            }
        }
        // Stable and total, so that a paginated answer means the same thing on every call.
        found.sort_by(|(a_quality, a_path, a), (b_quality, b_path, b)| {
            (a_quality, a_path, a.line, a.column, &a.name)
                .cmp(&(b_quality, b_path, b.line, b.column, &b.name))
        });
        found
            .into_iter()
            .take(limit)
            .map(|(_, path, symbol)| (path.to_path_buf(), symbol.clone()))
            .collect()
    }

    /// Every definition named exactly `name` (case-sensitive, as code is), by path and line.
    ///
    /// A qualified name (`Point::new`, `Circle.area`) keeps only definitions whose container is
    /// the qualifier's last segment, which is what lets the model tell two `new`s apart; when
    /// none has that container, all definitions of the bare name are returned.
    pub fn definitions(&self, name: &str) -> Vec<(PathBuf, SyntaxSymbol)> {
        let name = name.trim();
        let (container, name) = match name.rsplit_once("::").or_else(|| name.rsplit_once('.')) {
            Some((qualifier, last)) if !last.is_empty() => {
                let container = qualifier
                    .rsplit(['.', ':'])
                    .next()
                    .filter(|segment| !segment.is_empty());
                (container, last)
            }
            _ => (None, name),
        };
        let qualified = self.definitions_in(name, container);
        if qualified.is_empty() && container.is_some() {
            // The qualifier may be a module or package (`utils.parse`, `crate::Parser`), which
            // is not a container here: the bare name is still the best guess.
            return self.definitions_in(name, None);
        }
        qualified
    }

    fn definitions_in(&self, name: &str, container: Option<&str>) -> Vec<(PathBuf, SyntaxSymbol)> {
        // `files` is ordered by path and each file's symbols by line, so no sort is needed.
        self.files
            .iter()
            .flat_map(|(path, symbols)| symbols.iter().map(move |indexed| (path, &indexed.symbol)))
            .filter(|(_, symbol)| {
                symbol.name == name
                    && container
                        .is_none_or(|container| symbol.container.as_deref() == Some(container))
            })
            .map(|(path, symbol)| (path.clone(), symbol.clone()))
            .collect()
    }
}

/// Reads and parses one file for [`SymbolIndex::build`]; `None` to leave it out.
fn index_file(
    parser: &mut Parser,
    root: &Path,
    path: &Path,
) -> Option<(PathBuf, Vec<IndexedSymbol>)> {
    let language = Language::from_path(path)?;
    let absolute = root.join(path);
    let size = std::fs::metadata(&absolute).ok()?.len();
    if size > MAX_FILE_SIZE {
        tracing::debug!(path = %absolute.display(), size, "not indexing a file over 1 MiB");
        return None;
    }
    let bytes = match std::fs::read(&absolute) {
        Ok(bytes) => bytes,
        Err(error) => {
            tracing::debug!(path = %absolute.display(), %error, "not indexing an unreadable file");
            return None;
        }
    };
    // A stray Latin-1 byte in a comment should not cost the file its symbols.
    let text = String::from_utf8_lossy(&bytes);
    let symbols = symbols(parser, language, &text)?;
    Some((relative_to(root, path), flatten(symbols)))
}

fn relative_to(root: &Path, path: &Path) -> PathBuf {
    path.strip_prefix(root).unwrap_or(path).to_path_buf()
}

/// The tree's symbols without their children, in source order.
fn flatten(symbols: Vec<SyntaxSymbol>) -> Vec<IndexedSymbol> {
    fn walk(symbols: Vec<SyntaxSymbol>, out: &mut Vec<IndexedSymbol>) {
        for mut symbol in symbols {
            let children = std::mem::take(&mut symbol.children);
            out.push(IndexedSymbol {
                folded_name: symbol.name.to_lowercase(),
                symbol,
            });
            walk(children, out);
        }
    }
    let mut out = Vec::new();
    walk(symbols, &mut out);
    // Members attached to a type defined after their `impl` would otherwise come before it.
    out.sort_by_key(|indexed| (indexed.symbol.line, indexed.symbol.column));
    out
}
