//! Turning what the model filled in into an edit the editor can apply as it is.
//!
//! A FIM model does not know where to stop: it goes on past the statement, and it often
//! repeats the text after the cursor (the `)` it knows comes next, the following line). So the
//! text is cut to the syntactic end of what is being written:
//!
//! - with code after the cursor on its line, to that one line;
//! - at the end of a line, to the statement it writes, or, when that line opens a block (it
//!   ends with `:`, `{`, `(`, `[` or `=>`), to the block: the lines indented deeper than it,
//!   and the line that closes it at its own indentation when that starts with a closer;
//! - before a line that repeats the next line of the suffix.
//!
//! Indentation and the last character of a line are what every language the built-in servers
//! serve shares, and they are all a suggestion needs: a parse of the half-typed buffer (what
//! tree-sitter would give) is mostly error nodes right at the cursor.
//!
//! What the kept text ends with of the rest of the cursor's line (the `)` the model repeated) is
//! replaced rather than inserted again: [`Shaped::replaced`] is its length in bytes.

/// The most lines a suggestion keeps, whatever the block.
const MAX_LINES: usize = 40;

/// The most bytes a suggestion holds: ghost text is read at a glance, and a model that streams
/// megabytes on one line is not finishing a statement. The stream is not read past it, and a
/// suggestion whose first line alone is longer is none.
pub const MAX_BYTES: usize = 16 * 1024;

/// A suggestion ready for the editor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shaped {
    /// What replaces the range: the text from the cursor on.
    pub insert: String,
    /// Bytes of the rest of the cursor's line that the insert replaces (it ends with them).
    pub replaced: usize,
}

/// Cut `text` (what the model filled in at the cursor) to its syntactic end, given the text
/// `before` and `after` the cursor. `None` when nothing new is left.
pub fn shape(text: &str, before: &str, after: &str) -> Option<Shaped> {
    let line_before = before.rsplit('\n').next().unwrap_or("");
    let (rest, following) = after.split_once('\n').unwrap_or((after, ""));
    let rest = rest.trim_end_matches('\r');
    let text = text.replace("\r\n", "\n");
    let insert = if rest.trim().is_empty() {
        block_end(&text, line_before, following)
    } else {
        text.split('\n').next().unwrap_or("").trim_end().to_owned()
    };
    let insert = within_bytes(insert.trim_end())?;
    let replaced = if rest.trim().is_empty() || insert.contains('\n') {
        0
    } else {
        overlap(&insert, rest)
    };
    if insert.trim().is_empty() || insert.len() == replaced {
        return None;
    }
    Some(Shaped { insert, replaced })
}

/// Whether the model is still inside what [`shape`] keeps: used to stop reading the stream
/// once the suggestion is whole. True while the text could still grow the suggestion.
pub fn wants_more(text: &str, before: &str, after: &str) -> bool {
    if text.len() > MAX_BYTES {
        return false;
    }
    let rest = after.split('\n').next().unwrap_or("");
    if !rest.trim().is_empty() {
        return !text.contains('\n');
    }
    // Past the kept part by two lines: it can no longer change.
    let kept = shape(text, before, after).map_or(0, |shaped| shaped.insert.matches('\n').count());
    text.matches('\n').count() <= kept + 1
}

/// `insert`'s whole lines that fit in [`MAX_BYTES`]; `None` when the first line does not.
fn within_bytes(insert: &str) -> Option<String> {
    if insert.len() <= MAX_BYTES {
        return Some(insert.to_owned());
    }
    let mut kept = String::new();
    for (n, line) in insert.split('\n').enumerate() {
        if kept.len() + line.len() + usize::from(n > 0) > MAX_BYTES {
            if n == 0 {
                return None;
            }
            break;
        }
        if n > 0 {
            kept.push('\n');
        }
        kept.push_str(line);
    }
    Some(kept.trim_end().to_owned())
}

/// The lines of `text` that finish the statement or block started on the cursor's line.
fn block_end(text: &str, line_before: &str, following: &str) -> String {
    let mut lines = text.split('\n');
    let first = lines.next().unwrap_or("");
    let opened = format!("{line_before}{first}");
    let next_code = following.lines().find(|line| !line.trim().is_empty());
    let mut kept = vec![first.to_owned()];
    let (mut head, mut head_indent) = (opened.clone(), indent(&opened));
    if opened.trim().is_empty() {
        // The cursor is on an empty line and the model starts on the next one: the statement
        // begins at the first line with code.
        head.clear();
    }
    for line in lines {
        if kept.len() >= MAX_LINES
            || next_code
                .is_some_and(|next| next.trim_end() == line.trim_end() && !line.trim().is_empty())
        {
            break;
        }
        if head.trim().is_empty() {
            kept.push(line.to_owned());
            if !line.trim().is_empty() {
                head = line.to_owned();
                head_indent = indent(line);
            }
            continue;
        }
        if !opens_block(&head) {
            break;
        }
        if line.trim().is_empty() {
            kept.push(line.to_owned());
            continue;
        }
        let depth = indent(line);
        if depth > head_indent {
            kept.push(line.to_owned());
        } else {
            if depth == head_indent && line.trim_start().starts_with(['}', ')', ']']) {
                kept.push(line.to_owned());
            }
            break;
        }
    }
    kept.join("\n")
}

fn opens_block(line: &str) -> bool {
    let code = line.trim_end();
    code.ends_with([':', '{', '(', '[']) || code.ends_with("=>")
}

fn indent(line: &str) -> usize {
    line.chars()
        .take_while(|ch| ch.is_whitespace())
        .map(|ch| if ch == '\t' { 4 } else { 1 })
        .sum()
}

/// The longest start of `rest` that `insert` ends with, in bytes.
fn overlap(insert: &str, rest: &str) -> usize {
    rest.char_indices()
        .map(|(at, ch)| at + ch.len_utf8())
        .filter(|&end| insert.ends_with(&rest[..end]))
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_suggestion_is_cut_to_whole_lines_within_the_byte_bound_and_one_long_line_is_none() {
        let huge_line = "x".repeat(MAX_BYTES + 1);
        assert_eq!(shape(&huge_line, "total = f(", ")\n"), None);
        assert!(!wants_more(&huge_line, "total = f(", ")\n"));
        let line = "    y = 1";
        let many = format!("if x:\n{}", vec![line; 5000].join("\n"));
        assert!(wants_more("if x:\n", "", "\n"));
        let kept = within_bytes(&many).unwrap();
        assert!(kept.len() <= MAX_BYTES && kept.starts_with("if x:\n    y = 1"));
        assert!(kept.lines().all(|kept| kept == "if x:" || kept == line));
    }

    /// `code` with `|` at the cursor; the shaped insert and replaced length.
    fn check(code: &str, model: &str, expected: Option<(&str, usize)>) {
        let (before, after) = code.split_once('|').unwrap();
        let shaped = shape(model, before, after);
        assert_eq!(
            shaped
                .as_ref()
                .map(|shaped| (shaped.insert.as_str(), shaped.replaced)),
            expected,
            "{code:?} + {model:?}"
        );
    }

    #[test]
    fn mid_line_keeps_one_line_and_replaces_what_it_repeats() {
        check(
            "total = area(|)\n",
            "width, height)\nprint(total)",
            Some(("width, height)", 1)),
        );
        check(
            "total = area(|)\n",
            "width, height",
            Some(("width, height", 0)),
        );
        check("f(|a, b)\n", "x, a, b)", Some(("x, a, b)", 5)));
        // Repeating the rest and nothing else is no suggestion.
        check("total = area(|)\n", ")", None);
    }

    #[test]
    fn end_of_line_keeps_the_statement() {
        check(
            "x = |\ny = 2\n",
            "compute(1)\nz = 3\n",
            Some(("compute(1)", 0)),
        );
        check("x = |\n", "   \n\n", None);
    }

    #[test]
    fn a_line_that_opens_a_block_keeps_the_block() {
        check(
            "def area(w, h):|\n",
            "\n    \"\"\"The area.\"\"\"\n    return w * h\n\ndef other():\n    pass",
            Some(("\n    \"\"\"The area.\"\"\"\n    return w * h", 0)),
        );
        check(
            "    if (x) {|\n",
            "\n        y();\n    }\n    z();",
            Some(("\n        y();\n    }", 0)),
        );
        // The closing brace the buffer has already is not suggested again.
        check(
            "    if (x) {|\n    }\n",
            "\n        y();\n    }\n    z();",
            Some(("\n        y();", 0)),
        );
        // On an empty line, the block begins at the model's first line with code.
        check(
            "def f():\n    |\n",
            "for x in xs:\n        print(x)\n    return 1\n",
            Some(("for x in xs:\n        print(x)", 0)),
        );
    }

    #[test]
    fn a_line_repeating_the_suffix_ends_the_suggestion() {
        check(
            "def f():|\n    return 1\n",
            "\n    x = 2\n    return 1\n",
            Some(("\n    x = 2", 0)),
        );
    }

    #[test]
    fn the_stream_is_read_only_while_it_can_change_the_suggestion() {
        assert!(wants_more("width", "f(", ")\n"));
        assert!(!wants_more("width)\n", "f(", ")\n"));
        assert!(wants_more("\n    return 1", "def f():", "\n"));
        assert!(!wants_more(
            "\n    return 1\n\ndef g():\n",
            "def f():",
            "\n"
        ));
    }
}
