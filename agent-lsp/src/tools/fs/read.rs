//! The `read` tool: a text file's lines, numbered, stopping at a line count or a byte budget
//! and saying how to get the rest; binary files are described, not shown.

use std::io::{BufRead, BufReader};

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use super::io_error;
use crate::plugin::outcomes::ToolOutput;
use crate::plugin::tool::ToolContext;
use crate::plugin::typed::TypedTool;
use crate::tools::blocking;

/// Lines `read` returns when no `limit` is given.
pub const READ_DEFAULT_LINES: u64 = 2000;
/// Most bytes of rendered text one `read` returns (the runtime's cap is a little above it, so
/// `read` stops first and says how to continue).
pub const READ_MAX_BYTES: usize = 250 * 1024;
/// Longest line `read` shows in full, in characters.
pub const READ_MAX_LINE_CHARS: usize = 2000;
/// Lines past the shown window are counted only within this many bytes, so a huge log file
/// does not cost a full scan.
const READ_COUNT_LIMIT_BYTES: u64 = 64 * 1024 * 1024;
/// How much of the start of a file is looked at to decide that it is binary.
pub(crate) const SNIFF_BYTES: usize = 8192;

/// `read {path, offset?, limit?}`: a text file's lines, numbered.
pub struct Read;

/// The arguments of `read`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// File path relative to the workspace root.
    path: String,
    /// First line to show (1-based). Default 1.
    #[serde(default)]
    #[schemars(range(min = 1))]
    offset: Option<u64>,
    /// How many lines to show. Default 2000.
    #[serde(default)]
    #[schemars(range(min = 1))]
    limit: Option<u64>,
}

// The doc comment of `ReadArgs::limit` is what the model reads; it states this number.
const _: () = assert!(READ_DEFAULT_LINES == 2000);

impl TypedTool for Read {
    type Args = ReadArgs;

    fn name(&self) -> &str {
        "read"
    }

    fn description(&self) -> String {
        format!(
            "Read a text file of the workspace. Lines are numbered from 1 (`cat -n` style: number, tab, text). \
             At most `limit` lines (default {READ_DEFAULT_LINES}) or about {} KiB are returned; the output says when more \
             lines remain and which `offset` continues. Binary files are described, not shown.",
            READ_MAX_BYTES / 1024
        )
    }

    fn read_only(&self) -> bool {
        true
    }

    fn run(&self, ctx: ToolContext, args: ReadArgs) -> BoxFuture<'static, ToolOutput> {
        Box::pin(async move {
            // A file open in the editor is read from its buffer, unsaved changes included.
            let buffer = match (&ctx.buffers, ctx.resolve_read(&args.path)) {
                (Some(buffers), Ok(path)) => buffers.text(&path).await,
                _ => None,
            };
            blocking(move || read(&ctx, &args, buffer).unwrap_or_else(|output| output)).await
        })
    }
}

/// Read what `args` names: from `buffer`, the editor's text of the file when it has it open,
/// else from the disk.
fn read(
    ctx: &ToolContext,
    args: &ReadArgs,
    buffer: Option<String>,
) -> Result<ToolOutput, ToolOutput> {
    let offset = args.offset.unwrap_or(1);
    let limit = args.limit.unwrap_or(READ_DEFAULT_LINES);
    if offset == 0 {
        return Err(ToolOutput::error(
            "`offset` must be at least 1: lines are numbered from 1",
        ));
    }
    if limit == 0 {
        return Err(ToolOutput::error("`limit` must be at least 1"));
    }
    // Also a file of a skill the session loaded, read-only (`skill`, `workspace::read_roots`).
    let path = ctx.resolve_read(&args.path)?;
    let shown = ctx.workspace.display(&path);
    let source = |output: ToolOutput| output.with_meta("source", shown.as_str());
    if let Some(text) = buffer {
        let length = text.len() as u64;
        let reader = std::io::Cursor::new(text.into_bytes());
        return read_lines(reader, length, &shown, args)
            .map(|output| source(output.with_meta("buffer", true)))
            .map_err(source);
    }
    // Opened first, then looked at: what is read is what was checked.
    let file = ctx
        .workspace
        .open_read(&path)
        .map_err(|err| source(io_error(&shown, &err)))?;
    let metadata = file
        .metadata()
        .map_err(|err| source(io_error(&shown, &err)))?;
    if metadata.is_dir() {
        return Err(source(ToolOutput::error(format!(
            "`{shown}` is a directory; use `list` to see its entries"
        ))));
    }
    if !metadata.is_file() {
        // A FIFO or a device would block or never end.
        return Err(source(ToolOutput::error(format!(
            "`{shown}` is not a regular file (a device, socket or pipe) and cannot be read"
        ))));
    }
    read_lines(BufReader::new(file), metadata.len(), &shown, args)
        .map(source)
        .map_err(source)
}

/// The numbered lines `args` asks for, from a file's reader (disk or buffer) of `length` bytes.
fn read_lines(
    mut reader: impl BufRead,
    length: u64,
    shown: &str,
    args: &ReadArgs,
) -> Result<ToolOutput, ToolOutput> {
    let offset = args.offset.unwrap_or(1);
    let limit = args.limit.unwrap_or(READ_DEFAULT_LINES);
    let head = reader.fill_buf().map_err(|err| io_error(shown, &err))?;
    if let Some(kind) = binary_kind(&head[..head.len().min(SNIFF_BYTES)]) {
        return Ok(ToolOutput::ok(format!(
            "`{shown}` is a binary file ({kind}, {} bytes); its content is not shown. \
                 Use `shell` (e.g. `file` or `xxd | head`) if you need to inspect it.",
            length
        ))
        .with_meta("binary", true)
        .with_meta("file_bytes", length));
    }
    if length == 0 {
        return Ok(
            ToolOutput::ok(format!("`{shown}` is empty (0 bytes)")).with_meta("total_lines", 0)
        );
    }

    let mut text = String::new();
    let mut line = Vec::new();
    let mut number: u64 = 0;
    let mut last_shown: u64 = 0;
    let mut bytes_read: u64 = 0;
    let mut hit_byte_cap = false;
    let mut count_complete = true;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|err| io_error(shown, &err))?;
        if n == 0 {
            break;
        }
        number += 1;
        bytes_read += n as u64;
        let in_window = number >= offset && number < offset.saturating_add(limit);
        if in_window && !hit_byte_cap {
            let rendered = render_line(number, &line);
            if text.len() + rendered.len() > READ_MAX_BYTES {
                hit_byte_cap = true;
            } else {
                text.push_str(&rendered);
                last_shown = number;
                continue;
            }
        }
        if number >= offset && bytes_read > READ_COUNT_LIMIT_BYTES {
            count_complete = false;
            break;
        }
    }
    let total = number;
    if offset > total {
        return Err(ToolOutput::error(format!(
            "`offset` {offset} is past the end of `{shown}`, which has {total} lines"
        ))
        .with_meta("total_lines", total));
    }
    let total_text = if count_complete {
        total.to_string()
    } else {
        format!("more than {total}")
    };
    if last_shown < total || !count_complete {
        let reason = if hit_byte_cap {
            format!(
                " (the {} KiB output limit was reached)",
                READ_MAX_BYTES / 1024
            )
        } else {
            String::new()
        };
        if last_shown < offset {
            // Not even one line fitted: a single enormous line.
            text.push_str(&format!(
                "[line {offset} alone is longer than the output limit; use `grep` or `shell` to look into it]\n"
            ));
        } else {
            text.push_str(&format!(
                "\n[showing lines {offset}-{last_shown} of {total_text}{reason}; more lines remain: call read with offset={}]\n",
                last_shown + 1
            ));
        }
    }
    let mut output = ToolOutput::ok(text)
        .with_meta("start_line", offset)
        .with_meta("end_line", last_shown)
        .with_meta("file_bytes", length);
    if count_complete {
        output = output.with_meta("total_lines", total);
    }
    Ok(output)
}

/// One line as `read` shows it: the number right-aligned, a tab, the text without its line
/// ending, long lines shortened.
fn render_line(number: u64, raw: &[u8]) -> String {
    let mut raw = raw;
    if let Some(rest) = raw.strip_suffix(b"\n") {
        raw = rest;
    }
    if let Some(rest) = raw.strip_suffix(b"\r") {
        raw = rest;
    }
    let text = String::from_utf8_lossy(raw);
    let n_chars = text.chars().count();
    if n_chars > READ_MAX_LINE_CHARS {
        let kept: String = text.chars().take(READ_MAX_LINE_CHARS).collect();
        format!(
            "{number:>6}\t{kept}… [line cut: {} more characters]\n",
            n_chars - READ_MAX_LINE_CHARS
        )
    } else {
        format!("{number:>6}\t{text}\n")
    }
}

/// What a binary file looks like, if the sniffed start says it is one (a NUL byte, as git and
/// ripgrep decide, or a well-known magic number).
pub(crate) fn binary_kind(head: &[u8]) -> Option<&'static str> {
    const MAGIC: [(&[u8], &str); 9] = [
        (b"\x89PNG", "PNG image"),
        (b"\xff\xd8\xff", "JPEG image"),
        (b"GIF8", "GIF image"),
        (b"%PDF", "PDF document"),
        (b"\x7fELF", "ELF executable"),
        (b"PK\x03\x04", "zip archive"),
        (b"\x1f\x8b", "gzip data"),
        (b"\0asm", "WebAssembly module"),
        (b"\xfd7zXZ", "xz data"),
    ];
    if let Some((_, kind)) = MAGIC.iter().find(|(magic, _)| head.starts_with(magic)) {
        return Some(kind);
    }
    head.contains(&0).then_some("contains NUL bytes")
}
