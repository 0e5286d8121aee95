//! What a FIM prompt is made of: the buffer's text around the cursor in bounded windows, and
//! the signatures the language servers give for the identifiers used near the cursor.
//!
//! The signatures go first, as comments in the document's language, sorted by symbol name and
//! then by text: the next keystroke usually looks up the same identifiers, so its prompt starts
//! with the same bytes and the provider serves that part from its prefix cache. They are cut
//! to an estimated token budget (4 characters a token, as the token meter's default).

use std::path::Path;

/// The buffer split at the cursor, and the windows of it the model sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Windows {
    /// The whole text before the cursor (the cache key, and what trimming reads).
    pub before: String,
    /// The whole text after the cursor.
    pub after: String,
    /// At most `prefix_chars` of `before`, from a line start when it is cut.
    pub prefix: String,
    /// At most `suffix_chars` of `after`, up to a line end when it is cut.
    pub suffix: String,
}

/// Split `text` at byte `cursor` and cut the windows.
pub fn windows(text: &str, cursor: usize, prefix_chars: usize, suffix_chars: usize) -> Windows {
    let (before, after) = text.split_at(cursor);
    let prefix = match before
        .char_indices()
        .rev()
        .nth(prefix_chars.saturating_sub(1))
    {
        Some((start, _)) if start > 0 => {
            let tail = &before[start..];
            // A cut line is noise: start at the next whole line when there is one.
            match tail.find('\n') {
                Some(newline) if newline + 1 < tail.len() => &tail[newline + 1..],
                _ => tail,
            }
        }
        _ => before,
    };
    let suffix = match after.char_indices().nth(suffix_chars) {
        Some((end, _)) => {
            let head = &after[..end];
            match head.rfind('\n') {
                Some(newline) if newline > 0 => &head[..newline + 1],
                _ => head,
            }
        }
        None => after,
    };
    Windows {
        before: before.to_owned(),
        after: after.to_owned(),
        prefix: prefix.to_owned(),
        suffix: suffix.to_owned(),
    }
}

/// An identifier near the cursor to ask the servers about: 0-based line, 0-based character
/// column, and its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identifier {
    pub line: u32,
    pub column: u32,
    pub name: String,
}

/// The identifiers used on the cursor's line before the cursor and on the `lines` lines above
/// it, nearest the cursor first, each name once, at most `limit`. Keywords, numbers and the
/// word being typed at the cursor (the model is to complete it, and the server knows nothing
/// of it yet) are left out.
pub fn identifiers_near(before: &str, lines: usize, limit: usize) -> Vec<Identifier> {
    let cursor_line = before.matches('\n').count();
    let first = cursor_line.saturating_sub(lines);
    let mut found = Vec::new();
    for (line, text) in before.split('\n').enumerate().skip(first) {
        let mut words = words(text);
        if line == cursor_line
            && let Some(last) = words.last()
            && last.1 + last.2.len() == text.len()
        {
            words.pop();
        }
        for (column, _, word) in words {
            found.push(Identifier {
                line: line as u32,
                column: column as u32,
                name: word.to_owned(),
            });
        }
    }
    found.reverse();
    let mut seen = std::collections::HashSet::new();
    found.retain(|identifier| seen.insert(identifier.name.clone()));
    found.truncate(limit);
    found
}

/// The words of a line outside string literals and comments: (character column, byte
/// offset, word).
fn words(line: &str) -> Vec<(usize, usize, &str)> {
    let mut words = Vec::new();
    let mut start: Option<(usize, usize)> = None;
    let mut quote: Option<char> = None;
    let mut chars = line.char_indices().enumerate().peekable();
    while let Some((column, (byte, ch))) = chars.next() {
        if let Some(open) = quote {
            if ch == '\\' {
                chars.next();
            } else if ch == open {
                quote = None;
            }
            continue;
        }
        let word_char = ch == '_' || ch.is_alphanumeric();
        match (word_char, start) {
            (true, None) => start = Some((column, byte)),
            (false, Some((column, from))) => {
                words.push((column, from, &line[from..byte]));
                start = None;
            }
            _ => {}
        }
        if !word_char {
            let next = chars.peek().map(|(_, (_, next))| *next);
            if ch == '#' || (ch == '/' && next == Some('/')) {
                return keep_names(words);
            }
            if matches!(ch, '"' | '\'' | '`') {
                quote = Some(ch);
            }
        }
    }
    if let Some((column, from)) = start {
        words.push((column, from, &line[from..]));
    }
    keep_names(words)
}

fn keep_names(mut words: Vec<(usize, usize, &str)>) -> Vec<(usize, usize, &str)> {
    words.retain(|(_, _, word)| {
        !word.starts_with(|ch: char| ch.is_ascii_digit()) && !KEYWORDS.contains(word)
    });
    words
}

/// Keywords of the languages the built-in servers serve: never worth a lookup.
const KEYWORDS: &[&str] = &[
    "and",
    "as",
    "assert",
    "async",
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "def",
    "default",
    "del",
    "do",
    "elif",
    "else",
    "enum",
    "except",
    "export",
    "extends",
    "false",
    "False",
    "finally",
    "fn",
    "for",
    "from",
    "func",
    "function",
    "go",
    "if",
    "impl",
    "import",
    "in",
    "interface",
    "is",
    "lambda",
    "let",
    "match",
    "mod",
    "mut",
    "new",
    "nonlocal",
    "None",
    "not",
    "null",
    "or",
    "package",
    "pass",
    "pub",
    "raise",
    "return",
    "self",
    "Self",
    "static",
    "struct",
    "switch",
    "this",
    "throw",
    "true",
    "True",
    "try",
    "type",
    "use",
    "var",
    "void",
    "where",
    "while",
    "with",
    "yield",
    "int",
    "str",
    "float",
    "bool",
    "char",
];

/// One signature a server gave: for which symbol, from which server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grounding {
    pub symbol: String,
    pub server: String,
    /// The hover's code, and the first line of its documentation.
    pub text: String,
}

/// The part of a hover worth a prompt: its code blocks (the signature) and the first line of
/// the documentation after them, at most `MAX_LINES` lines; `None` when it says nothing.
pub fn signature_of(hover: &str) -> Option<String> {
    const MAX_LINES: usize = 6;
    let mut code = Vec::new();
    let mut doc = None;
    let mut in_code = false;
    // Servers break long signatures into a line per parameter; one line reads the same and
    // costs fewer tokens.
    let mut open_call = String::new();
    for line in hover.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            if trimmed.is_empty() {
                continue;
            }
            if !open_call.is_empty() {
                if !open_call.ends_with('(') && !trimmed.starts_with(')') {
                    open_call.push(' ');
                }
                open_call.push_str(trimmed.trim_end_matches(',').trim_end());
                if !trimmed.ends_with(')') && !trimmed.starts_with(')') {
                    open_call.push(',');
                }
                if trimmed.starts_with(')') {
                    code.push(std::mem::take(&mut open_call).replace(",)", ")"));
                }
            } else if trimmed.ends_with('(') {
                open_call = line.trim_end().to_owned();
            } else {
                code.push(line.trim_end().to_owned());
            }
        } else if doc.is_none() && !trimmed.is_empty() && trimmed != "---" && !code.is_empty() {
            doc = Some(trimmed.to_owned());
        }
    }
    if !open_call.is_empty() {
        code.push(open_call);
    }
    if code.is_empty() {
        // A server that answers in plain text: its first line.
        code.extend(
            hover
                .lines()
                .find(|line| !line.trim().is_empty())
                .map(str::to_owned),
        );
    }
    code.truncate(MAX_LINES);
    code.extend(doc);
    let text = code.join("\n");
    (!text.trim().is_empty()).then_some(text)
}

/// The comment that starts a line in the document's language.
pub fn comment_prefix(path: &Path) -> &'static str {
    let extension = path
        .extension()
        .and_then(|extension| extension.to_str())
        .unwrap_or("");
    match extension {
        "py" | "pyi" | "sh" | "bash" | "rb" | "toml" | "yaml" | "yml" | "r" | "pl" => "#",
        "lua" | "sql" | "hs" => "--",
        _ => "//",
    }
}

/// The signatures as a comment block for the start of the prompt, sorted, cut to `budget`
/// estimated tokens (whole signatures only), with the ones kept. Empty when none fit.
pub fn grounding_block(
    mut found: Vec<Grounding>,
    comment: &str,
    budget_tokens: usize,
) -> (String, Vec<Grounding>) {
    found.sort_by(|a, b| (&a.symbol, &a.text).cmp(&(&b.symbol, &b.text)));
    // Two names for one thing (an alias, a re-export) give the same signature: once is enough.
    let mut seen = std::collections::HashSet::new();
    found.retain(|grounding| seen.insert(grounding.text.clone()));
    let budget = budget_tokens * 4;
    let header =
        format!("{comment} Signatures of the symbols used below, from the language servers:\n");
    let mut block = String::new();
    let mut kept = Vec::new();
    for grounding in found {
        let mut entry = String::new();
        for line in grounding.text.lines() {
            entry.push_str(comment);
            entry.push(' ');
            entry.push_str(line);
            entry.push('\n');
        }
        if header.len() + block.len() + entry.len() > budget {
            continue;
        }
        block.push_str(&entry);
        kept.push(grounding);
    }
    if kept.is_empty() {
        return (String::new(), kept);
    }
    (format!("{header}{block}\n"), kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_bounded_and_cut_at_line_boundaries() {
        let text = "line one\nline two\nresult = ar|ea\nnext line\nlast";
        let cursor = text.find('|').unwrap();
        let text = text.replace('|', "");
        let whole = windows(&text, cursor, 1000, 1000);
        assert_eq!(whole.prefix, "line one\nline two\nresult = ar");
        assert_eq!(whole.suffix, "ea\nnext line\nlast");
        let cut = windows(&text, cursor, 15, 8);
        assert_eq!(cut.prefix, "result = ar");
        assert_eq!(cut.suffix, "ea\n");
        assert_eq!(cut.before.len(), cursor);
    }

    #[test]
    fn identifiers_near_the_cursor_skip_keywords_strings_and_the_word_being_typed() {
        let before = "import os\nfrom geometry import area\nw = 3  # width in cm\nprint(\"size\", area(w, heig";
        let names: Vec<String> = identifiers_near(before, 2, 10)
            .into_iter()
            .map(|identifier| identifier.name)
            .collect();
        assert_eq!(names, ["w", "area", "print", "geometry"]);
        let near = identifiers_near(before, 0, 10);
        let area = near
            .iter()
            .find(|identifier| identifier.name == "area")
            .unwrap();
        assert_eq!(
            (area.line, area.column, area.name.as_str()),
            (3, 14, "area")
        );
    }

    #[test]
    fn a_hover_becomes_its_signature_and_first_doc_line() {
        let hover = "```python\n(function) def area(width: float, height: float) -> float\n```\n---\nThe area of a rectangle.\n\nMore.";
        assert_eq!(
            signature_of(hover).unwrap(),
            "(function) def area(width: float, height: float) -> float\nThe area of a rectangle."
        );
        assert_eq!(signature_of("").as_deref(), None);
        let broken = "```python\n(function) def area(\n    width: float,\n    height: float\n) -> float\n```";
        assert_eq!(
            signature_of(broken).unwrap(),
            "(function) def area(width: float, height: float) -> float"
        );
    }

    #[test]
    fn the_block_is_sorted_deduplicated_and_within_budget() {
        let grounding = |symbol: &str, text: &str| Grounding {
            symbol: symbol.into(),
            server: "pyright".into(),
            text: text.into(),
        };
        let found = vec![
            grounding("zeta", "def zeta() -> int"),
            grounding("alpha", "def alpha(x: int) -> str"),
            grounding("alias", "def alpha(x: int) -> str"),
        ];
        let (block, kept) = grounding_block(found.clone(), "#", 400);
        assert_eq!(
            block,
            "# Signatures of the symbols used below, from the language servers:\n# def alpha(x: int) -> str\n# def zeta() -> int\n\n"
        );
        assert_eq!(kept.len(), 2);
        let (small, kept) = grounding_block(found, "#", 25);
        assert_eq!(kept.len(), 1, "{small}");
        assert_eq!(grounding_block(Vec::new(), "#", 400).0, "");
    }
}
