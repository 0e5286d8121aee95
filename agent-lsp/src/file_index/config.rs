//! The `[files]` table of the configuration, and what the file index makes of it.

use serde::Deserialize;

/// Paths indexed before the index reports itself truncated.
pub const DEFAULT_MAX_ENTRIES: usize = 200_000;
/// Candidates one query returns at most, whatever limit the caller asks for.
pub const DEFAULT_MAX_CANDIDATES: usize = 200;

/// The `[files]` table of the configuration file, as written (every key optional).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilesOptions {
    /// Globs of paths to leave out of `@path` completion, on top of the ignore files.
    pub exclude: Option<Vec<String>>,
    /// Paths indexed at most (default 200000).
    pub max_entries: Option<usize>,
    /// Candidates a query returns at most (default 200).
    pub max_candidates: Option<usize>,
}

/// What the file index is allowed to do, resolved from [`FilesOptions`].
#[derive(Clone, Debug)]
pub struct FilesConfig {
    /// Globs pruned from the walk: without `/` they match a name at any depth, with `/` the
    /// path from the workspace root. A pruned directory is not descended into.
    pub exclude: Vec<String>,
    /// Paths (files and directories) kept at most; the walk stops there and the index says
    /// it is truncated.
    pub max_entries: usize,
    /// Candidates a query returns at most.
    pub max_candidates: usize,
}

impl Default for FilesConfig {
    fn default() -> FilesConfig {
        FilesConfig {
            exclude: Vec::new(),
            max_entries: DEFAULT_MAX_ENTRIES,
            max_candidates: DEFAULT_MAX_CANDIDATES,
        }
    }
}

impl FilesConfig {
    /// The config the user's `[files]` options make, defaults for what they leave out.
    pub fn from_options(options: &FilesOptions) -> FilesConfig {
        let defaults = FilesConfig::default();
        FilesConfig {
            exclude: options.exclude.clone().unwrap_or_default(),
            max_entries: options.max_entries.unwrap_or(defaults.max_entries),
            max_candidates: options.max_candidates.unwrap_or(defaults.max_candidates),
        }
    }
}
