//! Tests for the text work behind the queries: resolving positions, applying edits and reading
//! location answers. Queries against real servers are tested end to end in `agent-tests`.

use lsp_types::Url;
use serde_json::{Value, json};

use super::*;
use crate::documents::Snapshot;
use crate::position::PositionEncoding;

fn snapshot(text: &str) -> Snapshot {
    Snapshot {
        uri: Url::parse("file:///w/a.py").unwrap(),
        path: "/w/a.py".into(),
        text: text.into(),
        version: 1,
    }
}

fn position(line: u32, symbol: &str, column: Option<u32>) -> SymbolPosition {
    SymbolPosition {
        path: "/w/a.py".into(),
        line,
        symbol: symbol.into(),
        column,
    }
}

#[test]
fn finds_the_symbol_on_its_line_and_corrects_near_misses() {
    let doc = snapshot("x = größe(größe_max)\ny = 1\nz = größe(2)\n");
    let exact = resolve_position(&doc, &position(1, "größe", Some(5))).unwrap();
    assert_eq!(
        (exact.line, exact.char_index, exact.correction),
        (0, 4, None)
    );
    // Whole words only: `größe_max` is another identifier.
    let near = resolve_position(&doc, &position(1, "größe", Some(12))).unwrap();
    assert_eq!(near.char_index, 4);
    assert!(near.correction.unwrap().contains("column corrected"));
    let no_column = resolve_position(&doc, &position(1, "größe_max", None)).unwrap();
    assert_eq!((no_column.char_index, no_column.correction), (10, None));
    let moved = resolve_position(&doc, &position(2, "größe", None)).unwrap();
    assert_eq!((moved.line, moved.char_index), (0, 4));
    assert!(moved.correction.unwrap().contains("line corrected"));
    let err = resolve_position(&doc, &position(2, "nope", None))
        .unwrap_err()
        .to_string();
    assert!(err.contains("`nope` does not occur on line 2"), "{err}");
}

#[test]
fn text_edits_apply_in_the_servers_encoding() {
    let text = "let café = 1;\nlet b = café;\n";
    let edits = vec![
        json!({"range": {"start": {"line": 0, "character": 4}, "end": {"line": 0, "character": 8}}, "newText": "tea"}),
        json!({"range": {"start": {"line": 1, "character": 8}, "end": {"line": 1, "character": 12}}, "newText": "tea"}),
    ];
    assert_eq!(
        apply_text_edits(text, &edits, PositionEncoding::Utf16),
        "let tea = 1;\nlet b = tea;\n"
    );
    let utf8 = vec![
        json!({"range": {"start": {"line": 0, "character": 4}, "end": {"line": 0, "character": 9}}, "newText": "tea"}),
    ];
    assert_eq!(
        apply_text_edits(text, &utf8, PositionEncoding::Utf8),
        "let tea = 1;\nlet b = café;\n"
    );
}

#[test]
fn location_answers_of_every_shape_are_read() {
    let location = json!({"uri": "file:///w/a.py", "range": {"start": {"line": 1, "character": 2}, "end": {"line": 1, "character": 3}}});
    let link = json!({"targetUri": "file:///w/b.py", "targetRange": {"start": {"line": 0, "character": 0}, "end": {"line": 5, "character": 0}}, "targetSelectionRange": {"start": {"line": 2, "character": 4}, "end": {"line": 2, "character": 5}}});
    assert_eq!(locations_of(&location).len(), 1);
    assert_eq!(locations_of(&json!([location, link]))[1].1.start.line, 2);
    assert!(locations_of(&Value::Null).is_empty());
}
