//! Which files a server handles, compiled once per server.
//!
//! Every `didOpen`, every agent query and every file of a workspace walk asks "which server
//! serves this path"; building a glob matcher per pattern per question made `initialize` take
//! seconds on a tree the size of the Linux kernel. A [`FileMatcher`] holds one [`GlobSet`] for
//! the patterns matched against the file name and one for those matched against the whole
//! path, so a question costs two set lookups and a languageId comparison.

use std::path::Path;

use globset::{Glob, GlobSet, GlobSetBuilder};

use super::{ServerConfig, language_id};

/// A server's `file_patterns` and `languages`, ready to match paths.
#[derive(Clone, Debug)]
pub struct FileMatcher {
    /// Patterns without a `/`, matched against the file name.
    names: GlobSet,
    /// Patterns with a `/`, matched against the whole path.
    paths: GlobSet,
    languages: Vec<String>,
}

impl FileMatcher {
    /// Compile `config`'s patterns. A pattern that is not a valid glob matches nothing (and is
    /// logged), as before: one bad pattern must not take the server's other files away.
    pub fn new(config: &ServerConfig) -> FileMatcher {
        let mut names = GlobSetBuilder::new();
        let mut paths = GlobSetBuilder::new();
        for pattern in &config.file_patterns {
            match Glob::new(pattern) {
                Ok(glob) if pattern.contains('/') => {
                    paths.add(glob);
                }
                Ok(glob) => {
                    names.add(glob);
                }
                Err(error) => {
                    tracing::warn!(server = %config.name, pattern, "file pattern ignored: {error}")
                }
            }
        }
        let build = |builder: GlobSetBuilder| builder.build().unwrap_or_else(|_| GlobSet::empty());
        FileMatcher {
            names: build(names),
            paths: build(paths),
            languages: config.languages.clone(),
        }
    }

    /// Whether the server handles `path`, by file pattern or by its languageId.
    pub fn is_match(&self, path: &Path) -> bool {
        if !self.names.is_empty()
            && let Some(name) = path.file_name()
            && self.names.is_match(name)
        {
            return true;
        }
        if !self.paths.is_empty() && self.paths.is_match(path) {
            return true;
        }
        language_id(path).is_some_and(|id| self.languages.iter().any(|language| language == id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_paths_and_languages_match_and_bad_patterns_match_nothing() {
        let config = ServerConfig {
            file_patterns: vec!["*.foo".into(), "gen/**/*.bar".into(), "[oops".into()],
            languages: vec!["python".into()],
            ..ServerConfig::new("x", "x")
        };
        let matcher = FileMatcher::new(&config);
        assert!(matcher.is_match(Path::new("/w/a/b.foo")));
        assert!(matcher.is_match(Path::new("gen/deep/er/c.bar")));
        assert!(!matcher.is_match(Path::new("src/c.bar")), "the whole path");
        assert!(matcher.is_match(Path::new("/w/x.py")), "by languageId");
        assert!(!matcher.is_match(Path::new("/w/[oops")));
        assert!(!matcher.is_match(Path::new("/w/README")));
    }
}
