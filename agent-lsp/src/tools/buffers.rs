//! Where the file tools find the text of a file the editor has open.
//!
//! On the terminal there is no editor: tools read and write the disk. Under `agent-lsp serve`
//! the editor owns the files it has open, and the disk may be behind its unsaved buffer. The
//! agent must then read the buffer (what the programmer sees) and change it the way an editor
//! feature would: a `WorkspaceEdit` through `workspace/applyEdit`, which lands in the buffer as
//! one undoable change and leaves saving to the programmer. Files the editor does not have open
//! are still read and written on disk.

use lsp_bridge::position::{PositionEncoding, to_server_offset};
use serde_json::{Value, json};

pub use crate::plugin::tool::Buffers;

/// The smallest single LSP text edit turning `before` into `after`: the common prefix and
/// suffix stay (so the editor keeps cursors, marks and folds outside the change), the middle is
/// replaced. Positions are counted in `encoding` units.
///
/// When both texts end with a line break, that line break stays out of the edit, so the edit
/// never touches the position after the last line break. Editors disagree there: Neovim keeps
/// a buffer as lines with an implied final line break, and text inserted at that position
/// becomes new lines of their own (`"x\n"` inserted at the end of `"a\n"` gives `"a\nx\n\n"`),
/// while VS Code inserts exactly the text. Every other position means the same to both.
pub fn minimal_text_edit(before: &str, after: &str, encoding: PositionEncoding) -> Value {
    let kept_newline = usize::from(before.ends_with('\n') && after.ends_with('\n'));
    let (head_before, head_after) = (
        &before[..before.len() - kept_newline],
        &after[..after.len() - kept_newline],
    );
    let prefix = common_prefix(head_before, head_after);
    let suffix = kept_newline + common_suffix(&head_before[prefix..], &head_after[prefix..]);
    let start = position_at(before, prefix, encoding);
    let end = position_at(before, before.len() - suffix, encoding);
    json!({
        "range": {"start": start, "end": end},
        "newText": &after[prefix..after.len() - suffix],
    })
}

/// Bytes shared at the start, cut back to a char boundary of both.
fn common_prefix(a: &str, b: &str) -> usize {
    let mut length = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    while !(a.is_char_boundary(length) && b.is_char_boundary(length)) {
        length -= 1;
    }
    length
}

/// Bytes shared at the end, cut back to a char boundary of both.
fn common_suffix(a: &str, b: &str) -> usize {
    let mut length = a
        .bytes()
        .rev()
        .zip(b.bytes().rev())
        .take_while(|(x, y)| x == y)
        .count();
    while !(a.is_char_boundary(a.len() - length) && b.is_char_boundary(b.len() - length)) {
        length -= 1;
    }
    length
}

/// The LSP position of byte `offset` of `text`.
pub fn position_at(text: &str, offset: usize, encoding: PositionEncoding) -> Value {
    let before = &text[..offset];
    let line = before.matches('\n').count();
    let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
    let column_text = &text[line_start..offset];
    let character = to_server_offset(column_text, column_text.chars().count(), encoding);
    json!({"line": line, "character": character})
}

#[cfg(test)]
mod tests {
    use super::*;
    use lsp_bridge::position::PositionEncoding::Utf16;

    fn apply(before: &str, edit: &Value) -> String {
        lsp_bridge::queries::apply_text_edits(before, std::slice::from_ref(edit), Utf16)
    }

    #[test]
    fn the_edit_covers_only_what_changed() {
        let before = "def f():\n    return 1\n";
        let after = "def f():\n    return 2\n";
        let edit = minimal_text_edit(before, after, Utf16);
        assert_eq!(
            edit,
            json!({"range": {"start": {"line": 1, "character": 11}, "end": {"line": 1, "character": 12}}, "newText": "2"})
        );
        assert_eq!(apply(before, &edit), after);
    }

    #[test]
    fn positions_count_utf16_units_and_stay_on_char_boundaries() {
        // 😀 is two UTF-16 units; é and è share their first UTF-8 byte.
        let before = "x = \"😀é\"\n";
        let after = "x = \"😀è\"\n";
        let edit = minimal_text_edit(before, after, Utf16);
        assert_eq!(edit["range"]["start"], json!({"line": 0, "character": 7}));
        assert_eq!(edit["newText"], "è");
        assert_eq!(apply(before, &edit), after);
    }

    #[test]
    fn an_edit_never_reaches_past_the_last_line_break_both_texts_end_with() {
        // Appending a section: inserted before the final line break, not after it.
        let edit = minimal_text_edit("a\nb\n", "a\nb\n\n## agent\n", Utf16);
        assert_eq!(
            edit,
            json!({"range": {"start": {"line": 1, "character": 1}, "end": {"line": 1, "character": 1}}, "newText": "\n\n## agent"})
        );
        // A whole new last line, likewise.
        let edit = minimal_text_edit("a\n", "a\nb\n", Utf16);
        assert_eq!(edit["range"]["end"], json!({"line": 0, "character": 1}));
        assert_eq!(edit["newText"], "\nb");
        // Only when both end with one: removing the final line break must reach it.
        let edit = minimal_text_edit("a\n", "a", Utf16);
        assert_eq!(edit["range"]["end"], json!({"line": 1, "character": 0}));
    }

    #[test]
    fn insertions_deletions_and_whole_rewrites_round_trip() {
        for (before, after) in [
            ("", "new file\n"),
            ("a\nb\nc\n", "a\nc\n"),
            ("a\nc\n", "a\nb\nc\n"),
            ("same", "same"),
            ("aaa", "aa"),
            ("line one\r\nline two\r\n", "line one\r\nline 2\r\n"),
            ("abc", "xyz"),
            ("\n", "\n\n"),
            ("x\n", "\n"),
            ("a\n", "a\nb\n"),
            ("é\n", "é\n😀\n"),
        ] {
            let edit = minimal_text_edit(before, after, Utf16);
            assert_eq!(apply(before, &edit), after, "{before:?} → {after:?}");
        }
    }
}
