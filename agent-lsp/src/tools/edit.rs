//! The `edit` tool: replace one exact occurrence of a string in a file, and show the diff.
//!
//! Exactly-once is the rule because it makes the model say precisely where the change goes:
//! a string that is not found means the model's picture of the file is stale (it should read
//! again); a string found several times means the change is ambiguous (it should include more
//! context). Both come back as errors that say which, with the lines involved. Occurrences are
//! counted overlapping (`aa` occurs twice in `aaa`), since either placement would be a guess.

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use similar::{ChangeTag, TextDiff};

use super::blocking;

use crate::plugin::outcomes::ToolOutput;

use crate::plugin::tool::ToolContext;

use crate::plugin::typed::TypedTool;

/// Matches listed by line in the "found several times" error.
const MAX_LISTED_MATCHES: usize = 20;
/// Characters of a line shown in that list.
const MAX_LISTED_CHARS: usize = 200;

/// `edit {path, old_string, new_string}`.
pub struct Edit;

/// The arguments of `edit`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArgs {
    /// File path relative to the workspace root.
    path: String,
    /// The exact text to replace; it must occur exactly once.
    old_string: String,
    /// The text to put in its place.
    new_string: String,
}

impl TypedTool for Edit {
    type Args = EditArgs;

    fn name(&self) -> &str {
        "edit"
    }

    fn description(&self) -> String {
        "Replace text in a workspace file: `old_string` must occur exactly once in the file, \
                          character for character (whitespace and indentation included), and is replaced by \
                          `new_string`. Include enough surrounding lines to make `old_string` unique. Returns a \
                          unified diff of the change. Use `write` to create a file. "
                .to_owned()
                + super::protected::DESCRIPTION_NOTE
    }

    fn read_only(&self) -> bool {
        false
    }

    fn writes_unnamed(&self) -> bool {
        // It names the file it changed in `meta.source`.
        false
    }

    fn run(&self, ctx: ToolContext, args: EditArgs) -> BoxFuture<'static, ToolOutput> {
        Box::pin(async move {
            // A file open in the editor is changed in its buffer (see `buffers`).
            let open = match (ctx.buffers.clone(), ctx.workspace.resolve(&args.path)) {
                (Some(buffers), Ok(path)) => {
                    buffers.text(&path).await.map(|text| (text, buffers, path))
                }
                _ => None,
            };
            match open {
                Some((text, buffers, path)) => {
                    let planned = match plan(&ctx, &args, &path, text) {
                        Ok(planned) => planned,
                        Err(output) => return output,
                    };
                    match buffers
                        .replace(&path, &planned.content, &planned.updated)
                        .await
                    {
                        Ok(()) => planned.report(buffers.lands()).with_meta("buffer", true),
                        Err(reason) => planned.source(ToolOutput::error(format!(
                            "the editor refused the change to `{}`: {reason}",
                            planned.shown
                        ))),
                    }
                }
                None => {
                    blocking(move || edit_on_disk(&ctx, &args).unwrap_or_else(|output| output))
                        .await
                }
            }
        })
    }
}

fn edit_on_disk(ctx: &ToolContext, args: &EditArgs) -> Result<ToolOutput, ToolOutput> {
    let path = ctx.resolve(&args.path)?;
    let shown = ctx.workspace.display(&path);
    let source = |output: ToolOutput| output.with_meta("source", shown.as_str());
    if path.is_dir() {
        return Err(source(ToolOutput::error(format!(
            "`{shown}` is a directory; give the path of a file"
        ))));
    }
    let bytes = ctx.workspace.open_read(&path).and_then(|mut file| {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut bytes).map(|_| bytes)
    });
    let bytes = bytes.map_err(|err| {
        source(ToolOutput::error(match err.kind() {
            std::io::ErrorKind::NotFound => {
                format!("`{shown}` does not exist; use `write` to create it")
            }
            _ => format!("`{shown}` could not be read: {err}"),
        }))
    })?;
    let content = String::from_utf8(bytes).map_err(|_| {
        source(ToolOutput::error(format!(
            "`{shown}` is not UTF-8 text; `edit` only changes text files"
        )))
    })?;
    let planned = plan(ctx, args, &path, content)?;
    ctx.workspace
        .write_atomically(&path, planned.updated.as_bytes())
        .map_err(|err| {
            planned.source(ToolOutput::error(format!(
                "`{}` could not be written: {err}",
                planned.shown
            )))
        })?;
    Ok(planned.report(""))
}

/// A checked replacement, not yet written.
struct Planned {
    shown: String,
    content: String,
    updated: String,
    start: usize,
}

impl Planned {
    fn source(&self, output: ToolOutput) -> ToolOutput {
        output.with_meta("source", self.shown.as_str())
    }

    /// The result the model reads: where, how much, and the diff. `place` says where the
    /// change landed when it is not the file on disk.
    fn report(&self, place: &str) -> ToolOutput {
        let shown = &self.shown;
        let diff = TextDiff::from_lines(&self.content, &self.updated);
        let (mut added, mut removed) = (0usize, 0usize);
        for change in diff.iter_all_changes() {
            match change.tag() {
                ChangeTag::Insert => added += 1,
                ChangeTag::Delete => removed += 1,
                ChangeTag::Equal => {}
            }
        }
        let unified = diff
            .unified_diff()
            .context_radius(3)
            .header(&format!("a/{shown}"), &format!("b/{shown}"))
            .to_string();
        let first_line = line_of(&self.content, self.start);
        tracing::info!(path = %shown, added, removed, place, "edited file");
        let place = if place.is_empty() {
            String::new()
        } else {
            format!(" ({place})")
        };
        self.source(
            ToolOutput::ok(format!(
                "edited `{shown}`{place} at line {first_line} (+{added} -{removed} lines):\n{unified}"
            ))
            .with_meta("line", first_line)
            .with_meta("lines_added", added)
            .with_meta("lines_removed", removed),
        )
    }
}

/// Check the replacement against the file's text: `old_string` must occur exactly once.
fn plan(
    ctx: &ToolContext,
    args: &EditArgs,
    path: &std::path::Path,
    content: String,
) -> Result<Planned, ToolOutput> {
    let shown = ctx.workspace.display(path);
    let source = |output: ToolOutput| output.with_meta("source", shown.as_str());
    if args.old_string.is_empty() {
        return Err(source(ToolOutput::error(
            "`old_string` is empty; give the exact text to replace (use `write` to create a file or replace it whole)",
        )));
    }
    if args.old_string == args.new_string {
        return Err(source(ToolOutput::error(
            "`old_string` and `new_string` are identical; there is nothing to change",
        )));
    }
    let starts = occurrences(&content, &args.old_string);
    match starts.len() {
        0 => return Err(source(not_found(&shown, &content, &args.old_string))),
        1 => {}
        n => {
            let mut listed = String::new();
            for &start in starts.iter().take(MAX_LISTED_MATCHES) {
                let line = line_of(&content, start);
                let text = content.lines().nth(line - 1).unwrap_or("");
                let text: String = text.chars().take(MAX_LISTED_CHARS).collect();
                listed.push_str(&format!("\n  line {line}: {text}"));
            }
            if n > MAX_LISTED_MATCHES {
                listed.push_str(&format!("\n  … and {} more", n - MAX_LISTED_MATCHES));
            }
            return Err(source(
                ToolOutput::error(format!(
                    "`old_string` occurs {n} times in `{shown}`; it must occur exactly once. Include more of the \
                     surrounding lines in `old_string` so that it matches only the place to change. The occurrences \
                     start at:{listed}"
                ))
                .with_meta("matches", n),
            ));
        }
    }
    let start = starts[0];
    let updated = format!(
        "{}{}{}",
        &content[..start],
        args.new_string,
        &content[start + args.old_string.len()..]
    );
    if ctx.cancel.is_cancelled() {
        return Err(source(ToolOutput::error(
            "cancelled before the file was changed",
        )));
    }
    Ok(Planned {
        shown: shown.clone(),
        content,
        updated,
        start,
    })
}

/// Byte offsets of every occurrence of `needle`, overlapping ones included.
fn occurrences(haystack: &str, needle: &str) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut from = 0;
    while let Some(offset) = haystack[from..].find(needle) {
        let start = from + offset;
        starts.push(start);
        // Step one character, not one byte, to stay on a char boundary.
        from = start + haystack[start..].chars().next().map_or(1, char::len_utf8);
    }
    starts
}

/// The 1-based line a byte offset is on.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset].matches('\n').count() + 1
}

/// The "not found" error, with a hint when the text is there but differs in whitespace or
/// line endings, which is the usual reason.
fn not_found(shown: &str, content: &str, old: &str) -> ToolOutput {
    let mut hint = String::new();
    if content.contains("\r\n") && !old.contains("\r\n") && old.contains('\n') {
        let crlf = old.replace('\n', "\r\n");
        if content.contains(&crlf) {
            hint = " The file uses CRLF (`\\r\\n`) line endings; `old_string` must use them too."
                .into();
        }
    }
    if hint.is_empty() {
        let squeeze = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
        let wanted = squeeze(old);
        if !wanted.is_empty() && squeeze(content).contains(&wanted) {
            hint = " The same words occur with different whitespace or indentation.".into();
        }
    }
    ToolOutput::error(format!(
        "`old_string` was not found in `{shown}`: it must match the file exactly, including whitespace, \
         indentation and line breaks.{hint} Read the file again and copy the text to replace from it."
    ))
    .with_meta("matches", 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testing::{Fixture, run};
    use serde_json::json;

    #[tokio::test]
    async fn replaces_exactly_one_occurrence_and_returns_the_diff() {
        let fx = Fixture::new();
        fx.file("f.py", "def a():\n    return 1\n\ndef b():\n    return 2\n");
        let out = run(
            &Edit,
            &fx,
            json!({"path": "f.py", "old_string": "    return 2\n", "new_string": "    x = 2\n    return x\n"}),
        )
        .await;
        assert!(!out.is_error, "{}", out.text);
        assert_eq!(
            std::fs::read_to_string(fx.root().join("f.py")).unwrap(),
            "def a():\n    return 1\n\ndef b():\n    x = 2\n    return x\n"
        );
        assert_eq!(
            out.text,
            "edited `f.py` at line 5 (+2 -1 lines):\n\
             --- a/f.py\n\
             +++ b/f.py\n\
             @@ -2,4 +2,5 @@\n\
             \x20    return 1\n\
             \x20\n\
             \x20def b():\n\
             -    return 2\n\
             +    x = 2\n\
             +    return x\n"
        );
        assert_eq!(out.meta["source"], "f.py");
        assert_eq!(out.meta["lines_added"], 2);
    }

    #[tokio::test]
    async fn zero_matches_is_an_error_that_explains_and_changes_nothing() {
        let fx = Fixture::new();
        fx.file("f.py", "def a():\n    return 1\n");
        let out = run(
            &Edit,
            &fx,
            json!({"path": "f.py", "old_string": "return 2", "new_string": "x"}),
        )
        .await;
        assert!(out.is_error);
        assert!(
            out.text
                .starts_with("error: `old_string` was not found in `f.py`"),
            "{}",
            out.text
        );
        assert!(out.text.contains("Read the file again"), "{}", out.text);
        let out = run(
            &Edit,
            &fx,
            json!({"path": "f.py", "old_string": "def a():\n  return 1", "new_string": "x"}),
        )
        .await;
        assert!(out.text.contains("different whitespace"), "{}", out.text);
        assert_eq!(
            std::fs::read_to_string(fx.root().join("f.py")).unwrap(),
            "def a():\n    return 1\n"
        );

        fx.file("crlf.txt", "one\r\ntwo\r\n");
        let out = run(
            &Edit,
            &fx,
            json!({"path": "crlf.txt", "old_string": "one\ntwo", "new_string": "x"}),
        )
        .await;
        assert!(out.text.contains("CRLF"), "{}", out.text);
    }

    #[tokio::test]
    async fn several_matches_is_an_error_with_the_count_and_lines() {
        let fx = Fixture::new();
        fx.file(
            "f.rs",
            "let x = 1;\nfoo();\nlet x = 1;\nbar();\n    let x = 1; // again\n",
        );
        let out = run(
            &Edit,
            &fx,
            json!({"path": "f.rs", "old_string": "let x = 1;", "new_string": "let x = 2;"}),
        )
        .await;
        assert!(out.is_error);
        assert!(
            out.text.contains("occurs 3 times in `f.rs`"),
            "{}",
            out.text
        );
        assert!(
            out.text.contains("Include more of the surrounding lines"),
            "{}",
            out.text
        );
        assert!(
            out.text.ends_with(
                "\n  line 1: let x = 1;\n  line 3: let x = 1;\n  line 5:     let x = 1; // again"
            ),
            "{}",
            out.text
        );
        assert_eq!(out.meta["matches"], 3);
        // Overlapping occurrences count too.
        fx.file("a.txt", "aaa");
        let out = run(
            &Edit,
            &fx,
            json!({"path": "a.txt", "old_string": "aa", "new_string": "b"}),
        )
        .await;
        assert!(out.text.contains("occurs 2 times"), "{}", out.text);
    }

    #[tokio::test]
    async fn refuses_empty_identical_missing_and_non_text() {
        let fx = Fixture::new();
        fx.file("f.txt", "x");
        let out = run(
            &Edit,
            &fx,
            json!({"path": "f.txt", "old_string": "", "new_string": "y"}),
        )
        .await;
        assert!(out.text.contains("`old_string` is empty"), "{}", out.text);
        let out = run(
            &Edit,
            &fx,
            json!({"path": "f.txt", "old_string": "x", "new_string": "x"}),
        )
        .await;
        assert!(out.text.contains("identical"), "{}", out.text);
        let out = run(
            &Edit,
            &fx,
            json!({"path": "nope.txt", "old_string": "x", "new_string": "y"}),
        )
        .await;
        assert!(
            out.text.contains("does not exist; use `write`"),
            "{}",
            out.text
        );
        std::fs::write(fx.root().join("latin1.txt"), b"caf\xe9").unwrap();
        let out = run(
            &Edit,
            &fx,
            json!({"path": "latin1.txt", "old_string": "caf", "new_string": "y"}),
        )
        .await;
        assert!(out.text.contains("not UTF-8"), "{}", out.text);
    }

    #[test]
    fn occurrences_step_over_multibyte_characters() {
        assert_eq!(occurrences("ééé", "éé"), vec![0, 2]);
        assert_eq!(occurrences("abc", "d"), Vec::<usize>::new());
    }
}
