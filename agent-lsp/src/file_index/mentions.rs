//! `@path` mentions in prompts: how completion spells them, how a prompt's mentions are found,
//! and how they become references for the model.
//!
//! A mention is a *reference*, never the content: the model is told which workspace paths
//! the programmer pointed at, and reads them through the `read` tool, so every read is recorded
//! in the session log and guarded like any other. Resolution goes through
//! [`Workspace::resolve`], so a mention can name nothing a tool could not.
//!
//! The syntax, chosen so that completion output always parses back to the same path:
//!
//! - `@` starts a mention at the start of the text, after whitespace, or after an opening
//!   bracket or quote (`(`, `[`, `{`, `<`, `"`, `'`, `` ` ``), so `me@example.com` is not one.
//! - `@path` runs to the next whitespace; trailing sentence punctuation (`.,;:!?` and closing
//!   brackets and quotes) is not part of it, so "see @src/main.rs." works.
//! - `@"path"` holds anything; inside, `\"` is a quote and `\\` a backslash.
//! - [`insert_text`](super::entry::insert_text) quotes exactly when the plain form would not parse back: whitespace,
//!   quotes, backslashes, control characters, a leading `@`, or a trailing punctuation mark.
//!   Directories end in `/` (`@src/`), so typing can continue into them.

use std::ops::Range;

use serde::Serialize;
use thiserror::Error;

use super::entry::{EntryKind, TRAILING};
use super::rank::Candidate;
use crate::workspace::Workspace;

/// Characters after which an `@` starts a mention (besides whitespace and the text start).
const OPENERS: [char; 7] = ['(', '[', '{', '<', '"', '\'', '`'];

/// Why a mention could not even be read.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum MentionError {
    #[error("the quoted mention has no closing `\"`")]
    UnterminatedQuote,
}

/// One `@` mention found in a text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mention {
    /// Byte range of the mention in the text, `@` included, trailing punctuation excluded.
    pub span: Range<usize>,
    /// The path it names (quotes and escapes undone), or why it cannot be read.
    pub path: Result<String, MentionError>,
}

/// A mention as scanned, before trailing punctuation is dropped.
struct Scanned {
    start: usize,
    /// End of the raw token (for completion: where the mention being typed ends).
    raw_end: usize,
    quoted: bool,
    path: Result<String, MentionError>,
    /// End of the mention once trailing punctuation is dropped.
    end: usize,
}

fn scan(text: &str) -> Vec<Scanned> {
    let mut found = Vec::new();
    let mut previous: Option<char> = None;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let starts = c == '@' && previous.is_none_or(|p| p.is_whitespace() || OPENERS.contains(&p));
        previous = Some(c);
        if !starts {
            continue;
        }
        let body = at + 1;
        if text[body..].starts_with('"') {
            // Quoted: up to the first unescaped quote.
            let inner = &text[body + 1..];
            let mut escaped = false;
            let mut close = None;
            for (offset, c) in inner.char_indices() {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == '"' {
                    close = Some(offset);
                    break;
                }
            }
            let (raw_end, path) = match close {
                Some(close) => (body + 1 + close + 1, Ok(unescape(&inner[..close]))),
                None => (text.len(), Err(MentionError::UnterminatedQuote)),
            };
            found.push(Scanned {
                start: at,
                raw_end,
                quoted: true,
                path,
                end: raw_end,
            });
            while chars.peek().is_some_and(|&(index, _)| index < raw_end) {
                previous = chars.next().map(|(_, c)| c);
            }
        } else {
            let raw_end = text[body..]
                .find(char::is_whitespace)
                .map_or(text.len(), |offset| body + offset);
            let raw = &text[body..raw_end];
            let mut token = raw.trim_end_matches(TRAILING);
            // `@..` must reach the resolver (and be refused there), not vanish as punctuation.
            if token.is_empty() && raw.len() >= 2 && raw.chars().all(|c| c == '.') {
                token = raw;
            }
            if !token.is_empty() {
                found.push(Scanned {
                    start: at,
                    raw_end,
                    quoted: false,
                    path: Ok(token.to_owned()),
                    end: body + token.len(),
                });
            }
            while chars.peek().is_some_and(|&(index, _)| index < raw_end) {
                previous = chars.next().map(|(_, c)| c);
            }
        }
    }
    found
}

/// The inside of a quoted mention with `\"` and `\\` undone (any other backslash is kept).
fn unescape(inner: &str) -> String {
    let mut path = String::with_capacity(inner.len());
    let mut escaped = false;
    for c in inner.chars() {
        if escaped {
            if !matches!(c, '"' | '\\') {
                path.push('\\');
            }
            path.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else {
            path.push(c);
        }
    }
    if escaped {
        path.push('\\');
    }
    path
}

/// Every `@` mention in `text`, in order.
pub fn parse_mentions(text: &str) -> Vec<Mention> {
    scan(text)
        .into_iter()
        .map(|scanned| Mention {
            span: scanned.start..scanned.end,
            path: scanned.path,
        })
        .collect()
}

/// A workspace path the prompt refers to, for the model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Reference {
    /// The physical path from the workspace root (`/`-separated; symlinks inside resolved),
    /// which is what the `read` tool should be given.
    pub path: String,
    pub kind: EntryKind,
    /// The mention as written in the prompt.
    pub mention: String,
}

/// A mention that does not become a reference, and why (shown to the programmer and model).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RefusedMention {
    pub mention: String,
    pub reason: String,
}

/// What a prompt's mentions resolve to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MentionReferences {
    /// In order of first mention, each path once.
    pub references: Vec<Reference>,
    pub refused: Vec<RefusedMention>,
}

impl MentionReferences {
    /// The references as a note for the model (paths and kinds, never contents), or `None`
    /// when the prompt has no mentions.
    pub fn render(&self) -> Option<String> {
        if self.references.is_empty() && self.refused.is_empty() {
            return None;
        }
        let mut out = String::new();
        if !self.references.is_empty() {
            out.push_str(
                "The programmer referenced these workspace paths (contents not included; read them with the `read` tool when needed):\n",
            );
            for reference in &self.references {
                let shown = match reference.kind {
                    EntryKind::File => reference.path.clone(),
                    EntryKind::Directory if reference.path == "." => "./".to_owned(),
                    EntryKind::Directory => format!("{}/", reference.path),
                };
                let kind = match reference.kind {
                    EntryKind::File => "file",
                    EntryKind::Directory => "directory",
                };
                out.push_str(&format!("- `{shown}` ({kind})\n"));
            }
        }
        if !self.refused.is_empty() {
            out.push_str("These mentions were refused:\n");
            for refused in &self.refused {
                out.push_str(&format!("- `{}`: {}\n", refused.mention, refused.reason));
            }
        }
        Some(out)
    }
}

/// Resolve the `@` mentions of `prompt` inside `workspace`. Nothing is read: a reference says
/// that a path exists and what it is. A mention is refused when [`Workspace::resolve`] refuses
/// its path (outside, `..`, symlinks pointing out, NUL, ...), when nothing is there, or when it
/// is neither a file nor a directory.
pub fn resolve_mentions(workspace: &Workspace, prompt: &str) -> MentionReferences {
    let mut result = MentionReferences::default();
    for mention in parse_mentions(prompt) {
        let written = prompt[mention.span.clone()].to_owned();
        let refuse = |reason: String| RefusedMention {
            mention: written.clone(),
            reason,
        };
        let path = match mention.path {
            Ok(path) => path,
            Err(error) => {
                result.refused.push(refuse(error.to_string()));
                continue;
            }
        };
        let physical = match workspace.resolve(&path) {
            Ok(physical) => physical,
            Err(error) => {
                result.refused.push(refuse(error.to_string()));
                continue;
            }
        };
        let kind = match std::fs::metadata(&physical) {
            Ok(metadata) if metadata.is_dir() => EntryKind::Directory,
            Ok(metadata) if metadata.is_file() => EntryKind::File,
            Ok(_) => {
                result.refused.push(refuse(format!(
                    "`{path}` is neither a file nor a directory"
                )));
                continue;
            }
            Err(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                result
                    .refused
                    .push(refuse(format!("`{path}` does not exist in the workspace")));
                continue;
            }
            Err(error) => {
                result
                    .refused
                    .push(refuse(format!("`{path}` could not be checked: {error}")));
                continue;
            }
        };
        let shown = workspace.display(&physical);
        if result.references.iter().all(|known| known.path != shown) {
            result.references.push(Reference {
                path: shown,
                kind,
                mention: written,
            });
        }
    }
    result
}

/// The mention being typed at a cursor: what completion should search for and replace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MentionQuery {
    /// Byte offset of the `@`; a completion replaces `start..cursor`.
    pub start: usize,
    /// The text typed so far, `@` included (what an editor filters completion items by).
    pub typed: String,
    /// The path typed so far, quotes and escapes undone: the query for the index.
    pub query: String,
}

/// The mention that `cursor` (a byte offset in `line`) is at the end of, if any.
pub fn mention_at(line: &str, cursor: usize) -> Option<MentionQuery> {
    let before = line.get(..cursor)?;
    let last = scan(before).pop()?;
    if last.raw_end != cursor {
        return None;
    }
    let query = match (last.quoted, last.path) {
        // A closed quote is a finished mention.
        (true, Ok(_)) => return None,
        (true, Err(MentionError::UnterminatedQuote)) => unescape(&before[last.start + 2..]),
        (false, _) => before[last.start + 1..].to_owned(),
    };
    Some(MentionQuery {
        start: last.start,
        typed: before[last.start..].to_owned(),
        query,
    })
}

/// `@` or `@"` with nothing typed yet is also a mention being typed (the scanner drops it).
pub fn bare_mention_at(line: &str, cursor: usize) -> Option<MentionQuery> {
    if let Some(found) = mention_at(line, cursor) {
        return Some(found);
    }
    let before = line.get(..cursor)?;
    let start = before
        .strip_suffix("@\"")
        .map(str::len)
        .or_else(|| before.strip_suffix('@').map(str::len))?;
    let previous = before[..start].chars().next_back();
    previous
        .is_none_or(|p| p.is_whitespace() || OPENERS.contains(&p))
        .then(|| MentionQuery {
            start,
            typed: before[start..].to_owned(),
            query: String::new(),
        })
}

/// What the editor-facing server needs for one completion item (no LSP types here).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CompletionEntry {
    /// Shown in the list: the path, directories ending in `/`.
    pub label: String,
    /// Replaces the typed mention (`MentionQuery::start..cursor`).
    pub insert_text: String,
    /// The same as an LSP snippet, for editors that take snippets (see `completion_texts`).
    pub snippet: String,
    /// The typed text itself, so that the editor's own filtering keeps every item: the index
    /// has already matched them, and editors filter by prefix, not fuzzily.
    pub filter_text: String,
    /// Zero-padded rank, so that the editor keeps the index's order.
    pub sort_text: String,
    pub kind: EntryKind,
}

/// What accepting `candidate` inserts, as plain text and as an LSP snippet. A folder in quotes
/// must leave the cursor inside the mention, so the next completion offers what is in the
/// folder (choosing a file there closes it): as a snippet the cursor goes before the closing
/// quote (`@"my docs/$0"`); as plain text, where the cursor always ends up after the inserted
/// text, the quote is left open (`@"my docs/`).
fn completion_texts(candidate: &Candidate) -> (String, String) {
    let text = candidate.insert_text();
    match text.strip_suffix('"') {
        Some(open) if candidate.kind == EntryKind::Directory && text.starts_with("@\"") => {
            (open.to_owned(), format!("{}$0\"", snippet_escape(open)))
        }
        _ => {
            let snippet = snippet_escape(&text);
            (text, snippet)
        }
    }
}

/// `text` as literal text of an LSP snippet: `\`, `$` and `}` escaped.
fn snippet_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\\' | '$' | '}') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// Completion items for `candidates` (best first) answering the mention being typed.
pub fn completion_entries(typed: &MentionQuery, candidates: &[Candidate]) -> Vec<CompletionEntry> {
    candidates
        .iter()
        .enumerate()
        .map(|(rank, candidate)| {
            let (insert_text, snippet) = completion_texts(candidate);
            CompletionEntry {
                label: candidate.label(),
                insert_text,
                snippet,
                filter_text: typed.typed.clone(),
                sort_text: format!("{rank:05}"),
                kind: candidate.kind,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
