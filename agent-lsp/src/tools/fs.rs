//! The `read`, `list` and `write` tools, and the atomic write shared with `edit`.
//!
//! `list` and `write` take their path through [`ToolContext::resolve`], so they never reach
//! outside the workspace; `read` takes it through [`ToolContext::resolve_read`], which also
//! opens the files of a skill the session loaded (and only for reading). Their outputs are sized for a model's
//! context: `read` (in `fs/read.rs`) numbers lines and stops at a line count or a byte budget,
//! saying how to get the rest; `list` caps its entries.

use std::io;
use std::path::Path;

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use super::blocking;

use crate::plugin::outcomes::ToolOutput;

use crate::plugin::tool::ToolContext;

use crate::plugin::typed::TypedTool;

mod read;

pub use read::{READ_DEFAULT_LINES, READ_MAX_BYTES, READ_MAX_LINE_CHARS, Read, ReadArgs};
pub(crate) use read::{SNIFF_BYTES, binary_kind};

/// Entries `list` shows.
pub const LIST_MAX_ENTRIES: usize = 1000;

fn io_error(shown: &str, err: &io::Error) -> ToolOutput {
    match err.kind() {
        io::ErrorKind::NotFound => ToolOutput::error(format!(
            "`{shown}` does not exist; use `list` or `glob` to find the right path"
        )),
        // A refusal of our own (a link swapped in) says why; the system's says only this.
        io::ErrorKind::PermissionDenied if err.get_ref().is_some() => {
            ToolOutput::error(format!("`{shown}` cannot be accessed: {err}"))
        }
        io::ErrorKind::PermissionDenied => {
            ToolOutput::error(format!("`{shown}` cannot be accessed: permission denied"))
        }
        io::ErrorKind::NotADirectory => ToolOutput::error(format!(
            "`{shown}` does not exist: a part of the path is a file, not a directory"
        )),
        _ => ToolOutput::error(format!("`{shown}` could not be accessed: {err}")),
    }
}

/// `list {path?}`: the entries of a directory.
pub struct List;

/// The arguments of `list`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// Directory relative to the workspace root. Default: the root.
    #[serde(default)]
    path: Option<String>,
}

impl TypedTool for List {
    type Args = ListArgs;

    fn name(&self) -> &str {
        "list"
    }

    fn description(&self) -> String {
        format!(
            "List the entries of a workspace directory, sorted by name; directories end with `/`, symlinks show \
             their target. At most {LIST_MAX_ENTRIES} entries. Use `glob` to find files at any depth."
        )
    }

    fn read_only(&self) -> bool {
        true
    }

    fn run(&self, ctx: ToolContext, args: ListArgs) -> BoxFuture<'static, ToolOutput> {
        Box::pin(blocking(move || {
            list(&ctx, args.path.as_deref().unwrap_or(".")).unwrap_or_else(|output| output)
        }))
    }
}

fn list(ctx: &ToolContext, user_path: &str) -> Result<ToolOutput, ToolOutput> {
    let path = ctx.resolve(user_path)?;
    let shown = ctx.workspace.display(&path);
    let source = |output: ToolOutput| output.with_meta("source", shown.as_str());
    let metadata = std::fs::metadata(&path).map_err(|err| source(io_error(&shown, &err)))?;
    if !metadata.is_dir() {
        return Err(source(ToolOutput::error(format!(
            "`{shown}` is a file, not a directory; use `read` to see its content"
        ))));
    }
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(&path).map_err(|err| source(io_error(&shown, &err)))? {
        let entry = entry.map_err(|err| source(io_error(&shown, &err)))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let file_type = entry
            .file_type()
            .map_err(|err| source(io_error(&shown, &err)))?;
        let rendered = if file_type.is_dir() {
            format!("{name}/")
        } else if file_type.is_symlink() {
            let target = std::fs::read_link(entry.path())
                .map(|target| target.to_string_lossy().into_owned())
                .unwrap_or_else(|_| "?".to_owned());
            format!("{name} -> {target}")
        } else {
            name.clone()
        };
        entries.push((name, rendered));
    }
    entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let n_entries = entries.len();
    let mut text = String::new();
    if n_entries == 0 {
        text.push_str(&format!("`{shown}` is an empty directory\n"));
    }
    for (_, rendered) in entries.iter().take(LIST_MAX_ENTRIES) {
        text.push_str(rendered);
        text.push('\n');
    }
    if n_entries > LIST_MAX_ENTRIES {
        text.push_str(&format!(
            "[{} more entries not shown; use `glob` with a pattern to narrow down]\n",
            n_entries - LIST_MAX_ENTRIES
        ));
    }
    Ok(source(ToolOutput::ok(text).with_meta("entries", n_entries)))
}

/// `write {path, content}`: create or replace a file, atomically.
pub struct Write;

/// The arguments of `write`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// File path relative to the workspace root.
    path: String,
    /// The complete new content of the file.
    content: String,
}

impl TypedTool for Write {
    type Args = WriteArgs;

    fn name(&self) -> &str {
        "write"
    }

    fn description(&self) -> String {
        format!(
            "Create a file in the workspace, or replace its whole content. Missing parent directories are \
             created. The file is replaced atomically. Prefer `edit` to change part of an existing file. {}",
            super::protected::DESCRIPTION_NOTE
        )
    }

    fn read_only(&self) -> bool {
        false
    }

    fn writes_unnamed(&self) -> bool {
        // It names the file it wrote in `meta.source`.
        false
    }

    fn run(&self, ctx: ToolContext, args: WriteArgs) -> BoxFuture<'static, ToolOutput> {
        Box::pin(async move {
            // A file open in the editor is replaced in its buffer (see `buffers`).
            let open = match (ctx.buffers.clone(), ctx.workspace.resolve(&args.path)) {
                (Some(buffers), Ok(path)) => {
                    buffers.text(&path).await.map(|text| (text, buffers, path))
                }
                _ => None,
            };
            let Some((before, buffers, path)) = open else {
                return blocking(move || write(&ctx, &args).unwrap_or_else(|output| output)).await;
            };
            let shown = ctx.workspace.display(&path);
            let n_bytes = args.content.len();
            let n_lines = args.content.lines().count();
            let output = match buffers.replace(&path, &before, &args.content).await {
                Ok(()) => ToolOutput::ok(format!(
                    "replaced `{shown}` {} ({n_bytes} bytes, {n_lines} lines; it had {} bytes)",
                    buffers.lands(),
                    before.len()
                ))
                .with_meta("bytes", n_bytes)
                .with_meta("created", false)
                .with_meta("buffer", true),
                Err(reason) => ToolOutput::error(format!(
                    "the editor refused the change to `{shown}`: {reason}"
                )),
            };
            output.with_meta("source", shown.as_str())
        })
    }
}

fn write(ctx: &ToolContext, args: &WriteArgs) -> Result<ToolOutput, ToolOutput> {
    let path = ctx.resolve(&args.path)?;
    let shown = ctx.workspace.display(&path);
    let source = |output: ToolOutput| output.with_meta("source", shown.as_str());
    if path == ctx.workspace.root() || path.is_dir() {
        return Err(source(ToolOutput::error(format!(
            "`{shown}` is a directory; give the path of a file"
        ))));
    }
    let previous_len = std::fs::metadata(&path).ok().map(|metadata| metadata.len());
    let parent = path.parent().expect("a resolved file path has a parent");
    std::fs::create_dir_all(parent).map_err(|err| {
        source(ToolOutput::error(format!(
            "the directory of `{shown}` could not be created: {err}"
        )))
    })?;
    if ctx.cancel.is_cancelled() {
        return Err(source(ToolOutput::error(
            "cancelled before the file was written",
        )));
    }
    ctx.workspace
        .write_atomically(&path, args.content.as_bytes())
        .map_err(|err| {
            source(ToolOutput::error(format!(
                "`{shown}` could not be written: {err}"
            )))
        })?;
    let n_bytes = args.content.len();
    let n_lines = args.content.lines().count();
    tracing::info!(path = %shown, n_bytes, "wrote file");
    let text = match previous_len {
        None => format!("created `{shown}` ({n_bytes} bytes, {n_lines} lines)"),
        Some(previous) => format!(
            "overwrote `{shown}` ({n_bytes} bytes, {n_lines} lines; it had {previous} bytes)"
        ),
    };
    Ok(source(
        ToolOutput::ok(text)
            .with_meta("bytes", n_bytes)
            .with_meta("created", previous_len.is_none()),
    ))
}

/// Replace `path`'s content with `bytes` atomically, for files the server writes itself (a
/// prompt document the editor does not have open), which may lie outside the workspace: the
/// same write as [`crate::workspace::Workspace::write_atomically`], confined to the file's own
/// directory.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::other("the path has no parent directory"))?;
    crate::workspace::Workspace::new(dir)
        .map_err(io::Error::other)?
        .write_atomically(path, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testing::{Fixture, run};
    use serde_json::json;
    use std::fs::Permissions;
    use std::os::unix::fs::PermissionsExt;

    #[tokio::test]
    async fn read_numbers_lines_and_says_what_remains() {
        let fx = Fixture::new();
        let content: String = (1..=10).map(|n| format!("line {n}\n")).collect();
        fx.file("f.txt", &content);
        let out = run(
            &Read,
            &fx,
            json!({"path": "f.txt", "offset": 3, "limit": 2}),
        )
        .await;
        assert!(!out.is_error, "{}", out.text);
        assert_eq!(
            out.text,
            "     3\tline 3\n     4\tline 4\n\n[showing lines 3-4 of 10; more lines remain: call read with offset=5]\n"
        );
        assert_eq!(out.meta["source"], "f.txt");
        assert_eq!(out.meta["total_lines"], 10);

        let out = run(&Read, &fx, json!({"path": "f.txt", "offset": 9})).await;
        assert_eq!(out.text, "     9\tline 9\n    10\tline 10\n");

        let out = run(&Read, &fx, json!({"path": "f.txt", "offset": 11})).await;
        assert!(out.is_error);
        assert!(out.text.contains("past the end"), "{}", out.text);
    }

    #[tokio::test]
    async fn read_handles_crlf_missing_final_newline_and_long_lines() {
        let fx = Fixture::new();
        fx.file("crlf.txt", "a\r\nb");
        let out = run(&Read, &fx, json!({"path": "crlf.txt"})).await;
        assert_eq!(out.text, "     1\ta\n     2\tb\n");
        fx.file("long.txt", &"x".repeat(READ_MAX_LINE_CHARS + 5));
        let out = run(&Read, &fx, json!({"path": "long.txt"})).await;
        assert!(
            out.text.ends_with("… [line cut: 5 more characters]\n"),
            "{}",
            &out.text[out.text.len() - 60..]
        );
    }

    #[tokio::test]
    async fn read_stops_at_its_byte_budget() {
        let fx = Fixture::new();
        let line = "y".repeat(999);
        let content: String = (0..400).map(|_| format!("{line}\n")).collect();
        fx.file("big.txt", &content);
        let out = run(&Read, &fx, json!({"path": "big.txt"})).await;
        assert!(out.text.len() <= READ_MAX_BYTES + 200);
        assert!(
            out.text.contains("output limit was reached"),
            "{}",
            &out.text[out.text.len() - 200..]
        );
        let end = out.meta["end_line"].as_u64().unwrap();
        assert!(out.text.contains(&format!("offset={}", end + 1)));
        assert!(end > 200 && end < 400, "{end}");
    }

    #[tokio::test]
    async fn read_describes_binary_files_empty_files_directories_and_missing_files() {
        let fx = Fixture::new();
        std::fs::write(fx.root().join("img.png"), b"\x89PNG\r\n\x1a\n\0\0\0").unwrap();
        std::fs::write(fx.root().join("blob"), b"abc\0def").unwrap();
        fx.file("empty.txt", "");
        let out = run(&Read, &fx, json!({"path": "img.png"})).await;
        assert!(
            out.text.contains("binary file (PNG image, 11 bytes)"),
            "{}",
            out.text
        );
        assert!(!out.is_error);
        let out = run(&Read, &fx, json!({"path": "blob"})).await;
        assert!(out.text.contains("contains NUL bytes"), "{}", out.text);
        let out = run(&Read, &fx, json!({"path": "empty.txt"})).await;
        assert_eq!(out.text, "`empty.txt` is empty (0 bytes)");
        let out = run(&Read, &fx, json!({"path": "sub"})).await;
        assert!(
            out.is_error && out.text.contains("is a directory; use `list`"),
            "{}",
            out.text
        );
        let out = run(&Read, &fx, json!({"path": "nope.txt"})).await;
        assert!(
            out.is_error && out.text.contains("does not exist"),
            "{}",
            out.text
        );
        let out = run(&Read, &fx, json!({"path": "f", "offset": 0})).await;
        assert!(out.text.contains("at least 1"), "{}", out.text);
        let out = run(&Read, &fx, json!({"path": "f", "bogus": 1})).await;
        assert!(out.text.contains("unknown field `bogus`"), "{}", out.text);
        let out = run(&Read, &fx, json!({})).await;
        assert!(out.text.contains("missing field `path`"), "{}", out.text);
    }

    #[tokio::test]
    async fn list_marks_directories_and_symlinks_and_sorts() {
        let fx = Fixture::new();
        fx.file("b.txt", "");
        fx.file("sub/inner.txt", "");
        std::os::unix::fs::symlink("b.txt", fx.root().join("c_link")).unwrap();
        let out = run(&List, &fx, json!({})).await;
        assert!(!out.is_error, "{}", out.text);
        let names: Vec<&str> = out.text.lines().collect();
        assert!(names.windows(2).all(|w| w[0] < w[1]), "{names:?}");
        assert!(
            names.contains(&"b.txt") && names.contains(&"sub/"),
            "{names:?}"
        );
        assert!(names.contains(&"c_link -> b.txt"), "{names:?}");
        let out = run(&List, &fx, json!({"path": "sub"})).await;
        assert_eq!(out.text, "inner.txt\n");
        let out = run(&List, &fx, json!({"path": "b.txt"})).await;
        assert!(
            out.is_error && out.text.contains("not a directory"),
            "{}",
            out.text
        );
    }

    #[tokio::test]
    async fn list_caps_its_entries() {
        let fx = Fixture::new();
        for i in 0..LIST_MAX_ENTRIES + 5 {
            fx.file(&format!("many/f{i:05}"), "");
        }
        let out = run(&List, &fx, json!({"path": "many"})).await;
        assert_eq!(out.text.lines().count(), LIST_MAX_ENTRIES + 1);
        assert!(
            out.text.ends_with(
                "[5 more entries not shown; use `glob` with a pattern to narrow down]\n"
            )
        );
        assert_eq!(out.meta["entries"], LIST_MAX_ENTRIES + 5);
    }

    #[tokio::test]
    async fn write_creates_parents_overwrites_and_keeps_permissions() {
        let fx = Fixture::new();
        let out = run(
            &Write,
            &fx,
            json!({"path": "new/dir/f.txt", "content": "one\ntwo\n"}),
        )
        .await;
        assert_eq!(out.text, "created `new/dir/f.txt` (8 bytes, 2 lines)");
        assert_eq!(out.meta["created"], true);
        let path = fx.root().join("new/dir/f.txt");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\ntwo\n");
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o644
        );

        std::fs::set_permissions(&path, Permissions::from_mode(0o755)).unwrap();
        let out = run(
            &Write,
            &fx,
            json!({"path": "new/dir/f.txt", "content": "x"}),
        )
        .await;
        assert_eq!(
            out.text,
            "overwrote `new/dir/f.txt` (1 bytes, 1 lines; it had 8 bytes)"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "x");
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o755
        );
        // No temporary file is left behind.
        let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(leftovers.len(), 1);

        let out = run(&Write, &fx, json!({"path": "sub", "content": "x"})).await;
        assert!(
            out.is_error && out.text.contains("is a directory"),
            "{}",
            out.text
        );
        let out = run(&Write, &fx, json!({"path": "f.txt"})).await;
        assert!(out.text.contains("missing field `content`"), "{}", out.text);
    }

    #[tokio::test]
    async fn write_through_a_symlink_inside_replaces_the_target() {
        let fx = Fixture::new();
        fx.file("target.txt", "old");
        std::os::unix::fs::symlink("target.txt", fx.root().join("alias")).unwrap();
        let out = run(&Write, &fx, json!({"path": "alias", "content": "new"})).await;
        assert_eq!(out.meta["source"], "target.txt", "{}", out.text);
        assert_eq!(
            std::fs::read_to_string(fx.root().join("target.txt")).unwrap(),
            "new"
        );
        assert!(
            std::fs::symlink_metadata(fx.root().join("alias"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }
}
