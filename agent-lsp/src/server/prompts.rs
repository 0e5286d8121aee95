//! Prompt documents: chat with the agent in a Markdown file (`*.agent.md` by default).
//!
//! The format is plain Markdown with two reserved headings, so the file stays readable and
//! diffable and the programmer can edit anything in it:
//!
//! ```markdown
//! Why does @src/app.py call `load` twice?
//!
//! ## agent (turn 1)
//! Because …
//!
//! ## you
//! And how do I fix it?
//! ```
//!
//! A line `## agent…` starts an answer; a line `## you…` (or the start of the file) starts a
//! prompt. The prompt under the cursor is the prompt block that contains it; its answer is
//! written right after it (before the next reserved heading), so re-sending an earlier prompt
//! puts its new answer next to it. Other headings are ordinary Markdown inside a block.

pub(super) mod mentions;

use std::path::Path;

use globset::{Glob, GlobMatcher};
use lsp_bridge::position::{PositionEncoding, char_to_byte, to_char_index};

/// The heading that starts an answer, followed by ` (turn N)`.
pub(crate) const ANSWER_HEADING: &str = "## agent";
/// The heading that starts a prompt.
pub(crate) const PROMPT_HEADING: &str = "## you";

/// Which documents are prompt documents.
pub(crate) struct PromptDocuments {
    matcher: GlobMatcher,
}

impl PromptDocuments {
    pub(crate) fn new(pattern: &str) -> anyhow::Result<PromptDocuments> {
        let glob = Glob::new(pattern)
            .map_err(|error| anyhow::anyhow!("prompt document pattern `{pattern}`: {error}"))?;
        Ok(PromptDocuments {
            matcher: glob.compile_matcher(),
        })
    }

    /// Whether `path` is a prompt document (the pattern is matched against the file name when
    /// it has no `/`, else against the whole path).
    pub(crate) fn matches(&self, path: &Path) -> bool {
        self.matcher.is_match(path)
            || path
                .file_name()
                .is_some_and(|name| self.matcher.is_match(Path::new(name)))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BlockKind {
    Prompt,
    Answer,
}

fn heading_kind(line: &str) -> Option<BlockKind> {
    let line = line.trim_end();
    let starts = |heading: &str| {
        line.get(..heading.len())
            .is_some_and(|start| start.eq_ignore_ascii_case(heading))
            && line[heading.len()..]
                .chars()
                .next()
                .is_none_or(|next| !next.is_alphanumeric())
    };
    if starts(ANSWER_HEADING) {
        Some(BlockKind::Answer)
    } else if starts(PROMPT_HEADING) {
        Some(BlockKind::Prompt)
    } else {
        None
    }
}

/// The prompt under a cursor and where its answer goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PromptAt {
    /// The prompt's text, trimmed (headings excluded).
    pub text: String,
    /// Byte offset where the answer is inserted: the end of the prompt block.
    pub insert_at: usize,
    /// Whether the block is the last one (the answer then ends with a fresh `## you`).
    pub at_end: bool,
}

/// The prompt block containing 0-based line `line` of `text`.
pub(crate) fn prompt_at(text: &str, line: usize) -> Result<PromptAt, String> {
    // Blocks as (kind, start of content, end) in bytes; the first block is a prompt.
    let mut blocks: Vec<(BlockKind, usize, usize, usize)> = Vec::new(); // kind, heading start, content start, first line
    let mut offset = 0;
    blocks.push((BlockKind::Prompt, 0, 0, 0));
    for (number, raw) in text.split_inclusive('\n').enumerate() {
        if let Some(kind) = heading_kind(raw) {
            blocks.push((kind, offset, offset + raw.len(), number));
        }
        offset += raw.len();
    }
    let index = blocks
        .iter()
        .rposition(|&(_, _, _, first)| first <= line)
        .unwrap_or(0);
    let (kind, _, content_start, _) = blocks[index];
    if kind == BlockKind::Answer {
        return Err(
            "the cursor is in an answer; put it in a prompt (below a `## you` heading)".into(),
        );
    }
    let end = blocks.get(index + 1).map_or(text.len(), |block| block.1);
    let prompt = text[content_start..end].trim();
    if prompt.is_empty() {
        return Err("the prompt under the cursor is empty; write what to ask first".into());
    }
    Ok(PromptAt {
        text: prompt.to_owned(),
        insert_at: end,
        at_end: index + 1 == blocks.len(),
    })
}

/// The heading of the answer to turn `turn`; unique in the document, so the answer being
/// streamed can be found again after the programmer edits elsewhere.
pub(crate) fn answer_heading(turn: u32) -> String {
    format!("{ANSWER_HEADING} (turn {turn})\n")
}

/// The byte offset of an LSP position (`line`, `character` in `encoding` units) in `text`;
/// past the end of a line or of the text clamps.
pub(crate) fn offset_of(
    text: &str,
    line: usize,
    character: u32,
    encoding: PositionEncoding,
) -> usize {
    let mut start = 0;
    for (number, raw) in text.split_inclusive('\n').enumerate() {
        if number == line {
            let content = raw.trim_end_matches(['\n', '\r']);
            let chars = to_char_index(content, character, encoding);
            return start + char_to_byte(content, chars);
        }
        start += raw.len();
    }
    text.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str =
        "Why is @src/app.py slow?\n\n## agent (turn 1)\nBecause.\n\n## you\nAnd the fix?\n";

    #[test]
    fn the_prompt_under_the_cursor_and_where_its_answer_goes() {
        let first = prompt_at(DOC, 0).unwrap();
        assert_eq!(first.text, "Why is @src/app.py slow?");
        assert_eq!(
            &DOC[first.insert_at..],
            "## agent (turn 1)\nBecause.\n\n## you\nAnd the fix?\n"
        );
        assert!(!first.at_end);
        let last = prompt_at(DOC, 6).unwrap();
        assert_eq!(last.text, "And the fix?");
        assert_eq!(last.insert_at, DOC.len());
        assert!(last.at_end);
        assert!(prompt_at(DOC, 3).unwrap_err().contains("in an answer"));
    }

    #[test]
    fn other_headings_are_part_of_the_prompt_and_empty_prompts_are_refused() {
        let doc = "## Context\nsome notes\n## youth is not a heading\n";
        assert_eq!(prompt_at(doc, 2).unwrap().text, doc.trim());
        assert!(
            prompt_at("\n\n## you\n\n", 3)
                .unwrap_err()
                .contains("empty")
        );
    }

    #[test]
    fn prompt_documents_match_by_file_name_or_path() {
        let documents = PromptDocuments::new("*.agent.md").unwrap();
        assert!(documents.matches(Path::new("/w/notes/todo.agent.md")));
        assert!(!documents.matches(Path::new("/w/README.md")));
    }

    #[test]
    fn offsets_count_utf16_units() {
        let text = "a😀b\nsecond";
        assert_eq!(offset_of(text, 0, 3, PositionEncoding::Utf16), "a😀".len());
        assert_eq!(offset_of(text, 1, 99, PositionEncoding::Utf16), text.len());
        assert_eq!(offset_of(text, 5, 0, PositionEncoding::Utf16), text.len());
    }
}
