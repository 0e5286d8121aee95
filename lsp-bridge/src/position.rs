//! Positions: the model's view (1-based line, 1-based column counted in characters) and the
//! server's (0-based line, 0-based offset in the negotiated encoding's code units).
//!
//! Models count columns badly and think in characters; servers count UTF-16 code units unless
//! they negotiated UTF-8 or UTF-32 (`positionEncoding`, LSP 3.17). Every conversion happens here,
//! once, against the actual line text, so non-ASCII identifiers and strings land on the right
//! character whatever the encoding.

use serde::{Deserialize, Serialize};

/// A position encoding a server may use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PositionEncoding {
    /// Columns in bytes: what the agent prefers, since its text is UTF-8 and needs no counting.
    Utf8,
    /// The LSP default when nothing was negotiated.
    #[default]
    Utf16,
    /// Columns in characters (code points), the model's own unit.
    Utf32,
}

impl PositionEncoding {
    /// The encoding a server announced in `capabilities.positionEncoding` (`None`: UTF-16).
    pub fn from_lsp(kind: Option<&lsp_types::PositionEncodingKind>) -> PositionEncoding {
        match kind.map(|kind| kind.as_str()) {
            Some("utf-8") => PositionEncoding::Utf8,
            Some("utf-32") => PositionEncoding::Utf32,
            _ => PositionEncoding::Utf16,
        }
    }

    /// The name to offer in `general.positionEncodings` of the client capabilities.
    pub(crate) fn to_lsp(self) -> lsp_types::PositionEncodingKind {
        match self {
            PositionEncoding::Utf8 => lsp_types::PositionEncodingKind::UTF8,
            PositionEncoding::Utf16 => lsp_types::PositionEncodingKind::UTF16,
            PositionEncoding::Utf32 => lsp_types::PositionEncodingKind::UTF32,
        }
    }

    fn units(self, ch: char) -> usize {
        match self {
            PositionEncoding::Utf8 => ch.len_utf8(),
            PositionEncoding::Utf16 => ch.len_utf16(),
            PositionEncoding::Utf32 => 1,
        }
    }
}

/// The server offset of the character at 0-based `char_index` in `line` (clamped to the end).
pub fn to_server_offset(line: &str, char_index: usize, encoding: PositionEncoding) -> u32 {
    line.chars()
        .take(char_index)
        .map(|ch| encoding.units(ch))
        .sum::<usize>() as u32
}

/// The 0-based character index of server offset `offset` in `line`. An offset inside a
/// character (a lone surrogate half, a byte inside UTF-8) counts as that character; an offset
/// past the end clamps to the end.
pub fn to_char_index(line: &str, offset: u32, encoding: PositionEncoding) -> usize {
    let mut units = 0usize;
    for (index, ch) in line.chars().enumerate() {
        let next = units + encoding.units(ch);
        if offset as usize <= units || (offset as usize) < next {
            return index;
        }
        units = next;
    }
    line.chars().count()
}

/// Byte offset in `line` of the 0-based character index (clamped), for slicing.
pub fn char_to_byte(line: &str, char_index: usize) -> usize {
    line.char_indices()
        .nth(char_index)
        .map_or(line.len(), |(byte, _)| byte)
}

/// Convert a server position in `text` from one encoding to another (the proxy's job when the
/// editor and a child negotiated different encodings).
pub fn convert(
    text: &str,
    position: lsp_types::Position,
    from: PositionEncoding,
    to: PositionEncoding,
) -> lsp_types::Position {
    if from == to {
        return position;
    }
    let line = text.lines().nth(position.line as usize).unwrap_or("");
    let index = to_char_index(line, position.character, from);
    lsp_types::Position {
        line: position.line,
        character: to_server_offset(line, index, to),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use PositionEncoding::*;

    const LINE: &str = "let café = \"😀\"; ü";

    #[test]
    fn offsets_count_code_units_of_each_encoding() {
        // `=` is character 9: "let café " has 9 characters, `é` is 2 bytes / 1 UTF-16 unit.
        assert_eq!(to_server_offset(LINE, 9, Utf32), 9);
        assert_eq!(to_server_offset(LINE, 9, Utf16), 9);
        assert_eq!(to_server_offset(LINE, 9, Utf8), 10);
        // After the emoji (character 12): 2 UTF-16 units, 4 bytes.
        assert_eq!(to_server_offset(LINE, 13, Utf16), 14);
        assert_eq!(to_server_offset(LINE, 13, Utf8), 17);
    }

    #[test]
    fn conversion_round_trips_on_every_character() {
        for encoding in [Utf8, Utf16, Utf32] {
            for index in 0..=LINE.chars().count() {
                let offset = to_server_offset(LINE, index, encoding);
                assert_eq!(
                    to_char_index(LINE, offset, encoding),
                    index,
                    "{encoding:?} at {index}"
                );
            }
        }
    }

    #[test]
    fn offsets_inside_a_character_or_past_the_end_are_tolerated() {
        // Offset 13 in UTF-16 is the second half of the emoji's surrogate pair.
        assert_eq!(to_char_index(LINE, 13, Utf16), 12);
        assert_eq!(to_char_index(LINE, 999, Utf8), LINE.chars().count());
        assert_eq!(
            to_server_offset(LINE, 999, Utf16),
            LINE.encode_utf16().count() as u32
        );
    }

    #[test]
    fn converts_between_encodings() {
        let text = format!("first\n{LINE}\n");
        let utf16 = lsp_types::Position {
            line: 1,
            character: 14,
        };
        let utf8 = convert(&text, utf16, Utf16, Utf8);
        assert_eq!(
            utf8,
            lsp_types::Position {
                line: 1,
                character: 17
            }
        );
        assert_eq!(convert(&text, utf8, Utf8, Utf16), utf16);
    }
}
