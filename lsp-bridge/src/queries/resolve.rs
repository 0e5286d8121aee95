//! Finding the symbol the model means from a path, a 1-based line and the symbol's name.
//!
//! Models name symbols well and count columns badly, so every position-taking query starts here:
//! the symbol is looked for on the line (or a line or two away), and the answer says what was
//! corrected. Kept apart from the queries because it is pure text work, tested without a server.

use serde_json::{Value, json};

use super::SymbolPosition;
use crate::documents::Snapshot;
use crate::error::{Error, Result};
use crate::position::{PositionEncoding, to_server_offset};

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

pub(super) fn text_document_position(
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
