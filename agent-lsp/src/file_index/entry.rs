//! An index entry: its key, its kind, and how a mention spells its path.
//!
//! Everything else in the file index builds on these: the store keys entries by
//! [`key_of`], the ranker splits keys back with [`split_key`], and completion and mention
//! parsing agree on one spelling ([`mention_spelling`], [`insert_text`]), so that what a
//! completion inserts always parses back to the same path.

use serde::Serialize;

use crate::workspace::check_syntax;

/// Whether a path is a file or a directory (a symlink counts as what it points to).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    /// A file (or a link to one): a mention inserts its path.
    File,
    /// A directory (or a link to one): a mention inserts its path with a trailing `/`, so
    /// completion can go on inside it.
    Directory,
}

/// `relative` as a mention spells it: unchanged, or behind `./` when its first component
/// would otherwise be taken for something else (`~name` for a home directory, `c:` for a
/// drive letter); [`Workspace::resolve`](crate::workspace::Workspace::resolve) accepts both spellings for the same file.
pub(crate) fn mention_spelling(relative: &str) -> std::borrow::Cow<'_, str> {
    if check_syntax(relative).is_err() {
        let dotted = format!("./{relative}");
        if check_syntax(&dotted).is_ok() {
            return dotted.into();
        }
    }
    relative.into()
}

/// Whether some spelling of `relative` passes the workspace's syntax rules.
pub(super) fn is_nameable(relative: &str) -> bool {
    check_syntax(relative).is_ok() || check_syntax(&format!("./{relative}")).is_ok()
}

/// The index key of `relative`: the path, and a directory with a trailing `/`.
pub(super) fn key_of(relative: &str, kind: EntryKind) -> Box<str> {
    match kind {
        EntryKind::File => relative.into(),
        EntryKind::Directory => {
            // Sized exactly, so that turning it into a box does not reallocate.
            let mut key = String::with_capacity(relative.len() + 1);
            key.push_str(relative);
            key.push('/');
            key.into_boxed_str()
        }
    }
}

/// Split an index key into the path (no trailing `/`) and its kind.
pub(crate) fn split_key(key: &str) -> (&str, EntryKind) {
    match key.strip_suffix('/') {
        Some(path) => (path, EntryKind::Directory),
        None => (key, EntryKind::File),
    }
}

/// Characters dropped from the end of a plain mention: sentence punctuation, closers.
pub(super) const TRAILING: [char; 13] = [
    '.', ',', ';', ':', '!', '?', ')', ']', '}', '>', '"', '\'', '`',
];

/// The text a completion inserts for `path` (a `/`-separated path from the workspace root).
pub fn insert_text(path: &str, kind: EntryKind) -> String {
    let mut spelled = mention_spelling(path).into_owned();
    if kind == EntryKind::Directory && !spelled.ends_with('/') {
        spelled.push('/');
    }
    if needs_quotes(&spelled) {
        let mut quoted = String::with_capacity(spelled.len() + 4);
        quoted.push_str("@\"");
        for c in spelled.chars() {
            if matches!(c, '"' | '\\') {
                quoted.push('\\');
            }
            quoted.push(c);
        }
        quoted.push('"');
        quoted
    } else {
        format!("@{spelled}")
    }
}

fn needs_quotes(path: &str) -> bool {
    path.is_empty()
        || path.starts_with('@')
        || path.ends_with(TRAILING)
        || path
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '\\'))
}
