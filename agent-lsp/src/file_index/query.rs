//! How the file index answers a query: the query checked like a path, the keys scanned on
//! a few threads (or only the last query's matches, while the programmer keeps typing), and
//! the boosts of open and recently edited files.

use std::path::{Component, Path};

use super::flat::LastQuery;
use super::rank::{self, Candidate, Scorer};
use super::store::FileIndex;
use crate::workspace::{PathError, check_syntax};

impl FileIndex {
    /// The ranked candidates for `query` (fuzzy, see `file_index::rank`), at most `limit` and at
    /// most the configured candidate cap. A query that names something outside the workspace
    /// (`..`, an absolute path elsewhere, a NUL byte, ...) is refused with the same reasons
    /// as a path; an absolute path inside the root is matched as the path under it.
    pub fn query(&self, query: &str, limit: usize) -> Result<Vec<Candidate>, PathError> {
        let query = self.normalize_query(query)?;
        let limit = limit.min(self.config.max_candidates);
        // Taken out, not held: queries from other threads must not wait for this one.
        let narrowed = self
            .last_query
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
            .filter(|last| last.narrows_to(self.generation, &query))
            .map(|last| last.matched);
        let n_keys = narrowed.as_ref().map_or(self.flat.slots.len(), Vec::len);
        let threads = (n_keys / rank::MIN_KEYS_PER_THREAD).clamp(1, ranking_threads());
        let scorer = Scorer::new(&query);
        let ranked = rank::rank(
            &scorer,
            self.flat
                .chunks(narrowed.as_deref(), threads, scorer.mask()),
            &self.boosts,
            limit,
        );
        if !query.is_empty() && limit > 0 {
            *self
                .last_query
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(LastQuery {
                generation: self.generation,
                query,
                matched: ranked.matched,
            });
        }
        Ok(ranked.candidates)
    }

    /// [`FileIndex::query`] without the previous query's matches to start from.
    #[cfg(test)]
    pub(super) fn query_from_scratch(
        &self,
        query: &str,
        limit: usize,
    ) -> Result<Vec<Candidate>, PathError> {
        *self.last_query.lock().unwrap() = None;
        self.query(query, limit)
    }

    /// The query as the matcher sees it, or why it is refused. Each whitespace-separated word
    /// is checked as a path (fzf-style prefixes `!`, `^` and `'` aside): a query is not a path,
    /// but a query naming the outside has no answer the programmer should get.
    fn normalize_query(&self, query: &str) -> Result<String, PathError> {
        if query.contains('\0') {
            return Err(PathError::NulByte);
        }
        let mut words = Vec::new();
        for word in query.split_whitespace() {
            let bare = word.trim_start_matches(['!', '^', '\'']);
            if bare.is_empty() {
                words.push(word.to_owned());
                continue;
            }
            check_syntax(bare)?;
            let path = Path::new(bare);
            let relative = if path.is_absolute() {
                self.workspace
                    .strip_root(path)
                    .ok_or_else(|| PathError::AbsoluteOutside {
                        path: bare.to_owned(),
                        root: self.workspace.root().display().to_string(),
                    })?
            } else {
                path
            };
            if relative.components().any(|c| c == Component::ParentDir) {
                return Err(PathError::EscapesRoot {
                    path: bare.to_owned(),
                });
            }
            let prefix = &word[..word.len() - bare.len()];
            let relative = relative.to_string_lossy();
            let relative = relative.strip_prefix("./").unwrap_or(&relative);
            if !relative.is_empty() {
                words.push(format!("{prefix}{relative}"));
            }
        }
        Ok(words.join(" "))
    }

    /// Mark `path` as just edited: it ranks higher for a while (the most recent most).
    pub fn boost_recent(&mut self, path: impl AsRef<Path>) {
        if let Some(relative) = self.relative(path.as_ref()) {
            self.boosts.touch(&relative);
        }
    }

    /// The files open in the editor now: they rank higher while open.
    pub fn set_open<P: AsRef<Path>>(&mut self, paths: impl IntoIterator<Item = P>) {
        let open = paths
            .into_iter()
            .filter_map(|path| self.relative(path.as_ref()))
            .collect();
        self.boosts.set_open(open);
    }
}

/// Threads a query may use: the cores this process may run on (looked up once).
fn ranking_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| {
        std::thread::available_parallelism()
            .map(usize::from)
            .unwrap_or(1)
            .min(8)
    })
}
