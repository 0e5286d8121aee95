//! The paths a source file names outside its own module, read from its tokens: `crate::…`
//! paths, the names of `use crate::{…}` groups, and `super::` chains that climb above the
//! file's top-level module. Comments, strings and character literals are skipped.

/// A path of a file that names something outside its own module.
#[derive(Debug)]
pub enum Found {
    /// `crate::MODULE…`, or a name of a `use crate::{…}` group, on `line`.
    Crate { module: String, line: usize },
    /// A `super::` chain that climbs above the top-level module.
    Escape { line: usize },
}

/// The paths of `text`, a file `depth` folders deep under `src` counting the file itself
/// (`src/a.rs` is 1, `src/a/b.rs` 2), whose `super` is its parent module; every inline `mod
/// NAME {` adds one level. Comments, strings and character literals are skipped.
pub fn paths(text: &str, depth: usize) -> Vec<Found> {
    let tokens = tokens(text);
    let mut found = Vec::new();
    // The brace depths at which inline modules opened: each adds a level for `super`.
    let mut inline_mods: Vec<usize> = Vec::new();
    let mut braces = 0usize;
    let mut i = 0;
    let word = |i: usize| tokens.get(i).map_or("", |(token, _)| token.as_str());
    while i < tokens.len() {
        let (token, line) = (&tokens[i].0, tokens[i].1);
        match token.as_str() {
            "{" => {
                if word(i.wrapping_sub(2)) == "mod" && i >= 2 {
                    inline_mods.push(braces);
                }
                braces += 1;
            }
            "}" => {
                braces = braces.saturating_sub(1);
                if inline_mods.last() == Some(&braces) {
                    inline_mods.pop();
                }
            }
            "crate" if word(i + 1) == "::" && (i == 0 || word(i - 1) != "::") => {
                let next = word(i + 2);
                if next == "{" {
                    found.extend(group(&tokens, i + 2));
                } else if is_ident(next) {
                    found.push(Found::Crate {
                        module: next.to_owned(),
                        line,
                    });
                }
            }
            "super" if i == 0 || word(i - 1) != "::" => {
                let mut climbs = 0;
                let mut j = i;
                while word(j) == "super" && word(j + 1) == "::" {
                    climbs += 1;
                    j += 2;
                }
                if climbs >= depth + inline_mods.len() {
                    found.push(Found::Escape { line });
                }
                i = j.max(i + 1);
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// The first name of each element of the `use crate::{…}` group whose `{` is at `open`.
fn group(tokens: &[(String, usize)], open: usize) -> Vec<Found> {
    let mut found = Vec::new();
    let mut depth = 0;
    let mut at_start = true;
    for (token, line) in &tokens[open..] {
        match token.as_str() {
            "{" => {
                depth += 1;
                at_start = depth == 1;
            }
            "}" => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            "," if depth == 1 => at_start = true,
            name if at_start && depth == 1 && is_ident(name) => {
                if name != "self" {
                    found.push(Found::Crate {
                        module: name.to_owned(),
                        line: *line,
                    });
                }
                at_start = false;
            }
            _ => at_start = false,
        }
    }
    found
}

/// The number of `#` of the raw string that starts at `i`, if one does.
fn raw_string_start(chars: &[char], i: usize) -> Option<usize> {
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let mut j = match (at(i), at(i + 1)) {
        ('r', _) => i + 1,
        ('b', 'r') => i + 2,
        _ => return None,
    };
    let mut hashes = 0;
    while at(j) == '#' {
        hashes += 1;
        j += 1;
    }
    (at(j) == '"').then_some(hashes)
}

fn is_ident(token: &str) -> bool {
    token
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// The identifiers, `::` and single punctuation of `text` with their lines, without comments,
/// strings and character literals.
fn tokens(text: &str) -> Vec<(String, usize)> {
    let chars = text.chars().collect::<Vec<_>>();
    let mut tokens = Vec::new();
    let (mut i, mut line) = (0, 1);
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut nesting = 0;
            loop {
                if i >= chars.len() {
                    break;
                } else if chars[i] == '/' && at(i + 1) == '*' {
                    nesting += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    nesting -= 1;
                    i += 2;
                    if nesting == 0 {
                        break;
                    }
                } else {
                    line += usize::from(chars[i] == '\n');
                    i += 1;
                }
            }
        } else if c == '"' || ((c == 'b' || c == 'c') && at(i + 1) == '"') {
            i += if c == '"' { 1 } else { 2 };
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                line += usize::from(at(i) == '\n');
                i += 1;
            }
            i += 1;
        } else if let Some(hashes) = raw_string_start(&chars, i) {
            // A raw string: r"…", r#"…"#, br"…" (a raw identifier, r#type, is none).
            i += usize::from(c == 'b') + 1 + hashes + 1;
            loop {
                if i >= chars.len() {
                    break;
                }
                if chars[i] == '"' && (1..=hashes).all(|k| at(i + k) == '#') {
                    i += 1 + hashes;
                    break;
                }
                line += usize::from(chars[i] == '\n');
                i += 1;
            }
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{1F600}'), or else a lifetime.
            if at(i + 1) == '\\' {
                i += 3;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
            }
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push((chars[start..i].iter().collect(), line));
        } else if c == ':' && at(i + 1) == ':' {
            tokens.push(("::".to_owned(), line));
            i += 2;
        } else if c.is_whitespace() {
            i += 1;
        } else {
            tokens.push((c.to_string(), line));
            i += 1;
        }
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_strings_are_no_imports_and_groups_are_read_name_by_name() {
        let text = r##"
            // crate::cli in a comment
            /* crate::server, /* nested crate::server */ */
            const A: &str = "crate::cli";
            const B: &str = r#"crate::cli "quoted" "#;
            const C: char = '"';
            fn f<'a>(x: &'a str) {}
            use crate::{llm::{Message, ToolDef}, session, tokens::estimate_text};
            fn g() { crate::workspace::Workspace::new("."); }
        "##;
        let found = paths(text, 1)
            .into_iter()
            .map(|path| match path {
                Found::Crate { module, .. } => module,
                Found::Escape { .. } => "escape".to_owned(),
            })
            .collect::<Vec<_>>();
        assert_eq!(found, ["llm", "session", "tokens", "workspace"]);
    }

    #[test]
    fn super_paths_that_leave_their_module_are_refused_and_others_are_not() {
        // In `src/a/b.rs`: `super` is `a`, `super::super` the crate root.
        let inside = "use super::sibling; mod tests { use super::super::other; }";
        assert!(paths(inside, 2).is_empty());
        let escaping = "use super::super::cli;";
        assert!(matches!(
            paths(escaping, 2).as_slice(),
            [Found::Escape { line: 1 }]
        ));
    }
}
