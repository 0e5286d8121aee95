//! The `glob` and `grep` tools: find files by name and text by regex, the way ripgrep walks.
//!
//! Both walk with the `ignore` crate, so `.gitignore`, `.ignore` and `.git/info/exclude` are
//! honoured (also outside a git repository: a workspace that is not a checkout yet still has
//! its ignore files), hidden files are included (`.github/` matters to a coding agent) but
//! `.git/` is not, and symlinks are not followed while walking. A symlinked *file* is searched
//! only if its target resolves inside the workspace ([`crate::workspace::Workspace::resolve`]),
//! so a link pointing out cannot leak the outside through a search. Walks are sorted by file
//! name, so the same tree gives the same output, and they stop when the call is cancelled.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use futures_util::future::BoxFuture;
use globset::{GlobBuilder, GlobMatcher};
use regex::bytes::{Regex, RegexBuilder};
use schemars::JsonSchema;
use serde::Deserialize;

use super::blocking;
use super::fs::{SNIFF_BYTES, binary_kind};
use crate::plugin::outcomes::ToolOutput;
use crate::plugin::tool::ToolContext;
use crate::plugin::typed::TypedTool;

/// Paths `glob` returns.
pub const GLOB_MAX_RESULTS: usize = 1000;
/// Matching lines `grep` returns.
pub const GREP_MAX_MATCHES: usize = 200;
/// Characters of a matching line `grep` shows.
pub const GREP_MAX_LINE_CHARS: usize = 300;
/// Files larger than this are skipped by `grep` (and counted in a note).
pub const GREP_MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// A glob that matches file names when it has no `/`, and paths relative to the searched
/// directory when it has one: `*.rs` finds Rust files at any depth, `src/*.rs` only directly
/// under `src`. `*` never crosses a `/`; `**` does.
struct PathGlob {
    matcher: GlobMatcher,
    by_name: bool,
}

impl PathGlob {
    fn new(pattern: &str) -> Result<PathGlob, ToolOutput> {
        let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
        if pattern.is_empty() {
            return Err(ToolOutput::error("the glob pattern is empty"));
        }
        let glob = GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|err| ToolOutput::error(format!("invalid glob pattern: {err}")))?;
        Ok(PathGlob {
            matcher: glob.compile_matcher(),
            by_name: !pattern.contains('/'),
        })
    }

    fn is_match(&self, relative: &Path) -> bool {
        if self.by_name {
            relative
                .file_name()
                .is_some_and(|name| self.matcher.is_match(name))
        } else {
            self.matcher.is_match(relative)
        }
    }
}

/// The files under `base` (or `base` itself if it is a file), ignore-aware, sorted; symlinks
/// to files inside the workspace are yielded as the link's path with the target to read.
fn walk_files(ctx: &ToolContext, base: &Path) -> Result<Vec<(PathBuf, PathBuf)>, ToolOutput> {
    let mut builder = ignore::WalkBuilder::new(base);
    builder
        .hidden(false)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|entry| entry.file_name() != ".git")
        .sort_by_file_name(|a, b| a.cmp(b));
    let mut files = Vec::new();
    for entry in builder.build() {
        if ctx.cancel.is_cancelled() {
            return Err(ToolOutput::error("cancelled"));
        }
        // Unreadable directories and the like are skipped, as ripgrep does.
        let Ok(entry) = entry else { continue };
        let Some(file_type) = entry.file_type() else {
            continue;
        };
        if file_type.is_file() {
            files.push((entry.path().to_owned(), entry.path().to_owned()));
        } else if file_type.is_symlink() {
            let shown = ctx.workspace.display(entry.path());
            if let Ok(target) = ctx.workspace.resolve(&shown)
                && target.is_file()
            {
                files.push((entry.path().to_owned(), target));
            }
        }
    }
    Ok(files)
}

/// `glob {pattern, path?}`: workspace files whose name or path matches a glob.
pub struct Glob;

/// The arguments of `glob`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobArgs {
    /// Glob pattern, e.g. `*.rs` or `src/**/test_*.py`.
    pattern: String,
    /// Directory to search, relative to the workspace root. Default: the root.
    #[serde(default)]
    path: Option<String>,
}

impl TypedTool for Glob {
    type Args = GlobArgs;

    fn name(&self) -> &str {
        "glob"
    }

    fn description(&self) -> String {
        format!(
            "Find workspace files by glob, honouring .gitignore. A pattern without `/` matches file names at any \
                 depth (`*.rs`); a pattern with `/` matches paths relative to `path` (`src/**/*.rs`); `*` does not \
                 cross `/`, `**` does. Returns paths relative to the workspace root, sorted, at most {GLOB_MAX_RESULTS}."
        )
    }

    fn read_only(&self) -> bool {
        true
    }

    fn run(&self, ctx: ToolContext, args: GlobArgs) -> BoxFuture<'static, ToolOutput> {
        Box::pin(blocking(move || {
            glob(&ctx, &args).unwrap_or_else(|output| output)
        }))
    }
}

fn glob(ctx: &ToolContext, args: &GlobArgs) -> Result<ToolOutput, ToolOutput> {
    let base = ctx.resolve(args.path.as_deref().unwrap_or("."))?;
    let shown_base = ctx.workspace.display(&base);
    let source = |output: ToolOutput| output.with_meta("source", shown_base.as_str());
    if !base.is_dir() {
        return Err(source(ToolOutput::error(format!(
            "`{shown_base}` is not a directory; `path` names the directory to search"
        ))));
    }
    let pattern = PathGlob::new(&args.pattern).map_err(source)?;
    let mut matches = walk_files(ctx, &base)?
        .into_iter()
        .filter(|(path, _)| {
            path.strip_prefix(&base)
                .is_ok_and(|relative| pattern.is_match(relative))
        })
        .map(|(path, _)| ctx.workspace.display(&path))
        .collect::<Vec<_>>();
    matches.sort_unstable();
    let n_matches = matches.len();
    if n_matches == 0 {
        return Ok(source(
            ToolOutput::ok(format!(
                "no files match `{}` under `{shown_base}` (files ignored by .gitignore are not searched)",
                args.pattern
            ))
            .with_meta("matches", 0),
        ));
    }
    let mut text = String::new();
    for path in matches.iter().take(GLOB_MAX_RESULTS) {
        text.push_str(path);
        text.push('\n');
    }
    if n_matches > GLOB_MAX_RESULTS {
        text.push_str(&format!(
            "[{} more files not shown; narrow the pattern or the path]\n",
            n_matches - GLOB_MAX_RESULTS
        ));
    }
    Ok(source(ToolOutput::ok(text).with_meta("matches", n_matches)))
}

/// `grep {pattern, path?, glob?, case_insensitive?}`: lines matching a regex.
pub struct Grep;

/// The arguments of `grep`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// Regular expression, matched against each line.
    pattern: String,
    /// File or directory to search, relative to the workspace root. Default: the root.
    #[serde(default)]
    path: Option<String>,
    /// Only search files matching this glob (same rules as the `glob` tool), e.g. `*.py`.
    #[serde(default)]
    glob: Option<String>,
    /// Match without regard to case. Default false.
    #[serde(default)]
    case_insensitive: Option<bool>,
}

impl TypedTool for Grep {
    type Args = GrepArgs;

    fn name(&self) -> &str {
        "grep"
    }

    fn description(&self) -> String {
        format!(
            "Search workspace files for lines matching a regular expression (Rust regex syntax), honouring \
                 .gitignore and skipping binary files. Output lines are `path:line: text`. At most {GREP_MAX_MATCHES} \
                 matching lines are shown, with a count of the rest."
        )
    }

    fn read_only(&self) -> bool {
        true
    }

    fn run(&self, ctx: ToolContext, args: GrepArgs) -> BoxFuture<'static, ToolOutput> {
        Box::pin(blocking(move || {
            grep(&ctx, &args).unwrap_or_else(|output| output)
        }))
    }
}

#[derive(Default)]
struct GrepTally {
    shown: String,
    n_shown: usize,
    n_matches: usize,
    n_files: usize,
    n_binary: usize,
    n_large: usize,
}

fn grep(ctx: &ToolContext, args: &GrepArgs) -> Result<ToolOutput, ToolOutput> {
    let base = ctx.resolve(args.path.as_deref().unwrap_or("."))?;
    let shown_base = ctx.workspace.display(&base);
    let source = |output: ToolOutput| output.with_meta("source", shown_base.as_str());
    if !base.exists() {
        return Err(source(ToolOutput::error(format!(
            "`{shown_base}` does not exist; use `list` or `glob` to find the right path"
        ))));
    }
    let regex = RegexBuilder::new(&args.pattern)
        .case_insensitive(args.case_insensitive.unwrap_or(false))
        .size_limit(16 * 1024 * 1024)
        .build()
        .map_err(|err| {
            source(ToolOutput::error(format!(
                "invalid regular expression: {err}"
            )))
        })?;
    let filter = args
        .glob
        .as_deref()
        .map(PathGlob::new)
        .transpose()
        .map_err(source)?;
    let searching_one_file = base.is_file();

    let mut tally = GrepTally::default();
    for (path, target) in walk_files(ctx, &base)? {
        if ctx.cancel.is_cancelled() {
            return Err(ToolOutput::error("cancelled"));
        }
        if let Some(filter) = &filter
            && !searching_one_file
            && !path
                .strip_prefix(&base)
                .is_ok_and(|relative| filter.is_match(relative))
        {
            continue;
        }
        search_file(ctx, &regex, &path, &target, &mut tally);
    }

    let mut text = tally.shown;
    if tally.n_matches == 0 {
        text = format!("no matches for `{}` in `{shown_base}`\n", args.pattern);
    } else if tally.n_matches > tally.n_shown {
        text.push_str(&format!(
            "[{} more matching lines not shown ({} in {} files in all); narrow the pattern, the path or the glob]\n",
            tally.n_matches - tally.n_shown,
            tally.n_matches,
            tally.n_files
        ));
    }
    if tally.n_binary + tally.n_large > 0 {
        text.push_str(&format!(
            "[not searched: {} binary files, {} files over {} MiB]\n",
            tally.n_binary,
            tally.n_large,
            GREP_MAX_FILE_BYTES / (1024 * 1024)
        ));
    }
    Ok(source(
        ToolOutput::ok(text)
            .with_meta("matches", tally.n_matches)
            .with_meta("files", tally.n_files),
    ))
}

/// Search one file, adding its matching lines to `tally`. Files that cannot be read are
/// skipped, as a walk skips unreadable directories.
fn search_file(
    ctx: &ToolContext,
    regex: &Regex,
    path: &Path,
    target: &Path,
    tally: &mut GrepTally,
) {
    let Ok(mut file) = ctx.workspace.open_read(target) else {
        return;
    };
    // Only regular files: a FIFO or device swapped in would block or never end.
    if !file.metadata().is_ok_and(|metadata| metadata.is_file()) {
        return;
    }
    if file
        .metadata()
        .is_ok_and(|metadata| metadata.len() > GREP_MAX_FILE_BYTES)
    {
        tally.n_large += 1;
        return;
    }
    let mut content = Vec::new();
    if file.read_to_end(&mut content).is_err() {
        return;
    }
    if binary_kind(&content[..content.len().min(SNIFF_BYTES)]).is_some() {
        tally.n_binary += 1;
        return;
    }
    let shown_path = ctx.workspace.display(path);
    let mut file_matched = false;
    for (index, line) in content.split(|byte| *byte == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if !regex.is_match(line) {
            continue;
        }
        file_matched = true;
        tally.n_matches += 1;
        if tally.n_shown < GREP_MAX_MATCHES {
            tally.n_shown += 1;
            let text = String::from_utf8_lossy(line);
            let text = if text.chars().count() > GREP_MAX_LINE_CHARS {
                text.chars().take(GREP_MAX_LINE_CHARS).collect::<String>() + "…"
            } else {
                text.into_owned()
            };
            tally
                .shown
                .push_str(&format!("{shown_path}:{}: {text}\n", index + 1));
        }
    }
    tally.n_files += usize::from(file_matched);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testing::{Fixture, run};
    use serde_json::json;

    fn tree() -> Fixture {
        let fx = Fixture::new();
        fx.file(".gitignore", "target/\n*.log\n");
        fx.file("src/main.rs", "fn main() {\n    println!(\"Hello\");\n}\n");
        fx.file(
            "src/lib.rs",
            "pub fn hello() -> &'static str {\n    \"hello\"\n}\n",
        );
        fx.file("src/nested/deep.rs", "// hello from deep\n");
        fx.file("README.md", "# Hello\n");
        fx.file("target/debug/out.rs", "hello ignored\n");
        fx.file("build.log", "hello log\n");
        fx.file(".github/workflows/ci.yml", "name: hello\n");
        fx.file(".git/config", "hello git\n");
        std::fs::write(fx.root().join("src/blob.bin"), b"hello\0binary").unwrap();
        fx
    }

    #[tokio::test]
    async fn glob_matches_names_at_any_depth_and_paths_with_slashes() {
        let fx = tree();
        let out = run(&Glob, &fx, json!({"pattern": "*.rs"})).await;
        assert_eq!(out.text, "src/lib.rs\nsrc/main.rs\nsrc/nested/deep.rs\n");
        let out = run(&Glob, &fx, json!({"pattern": "src/*.rs"})).await;
        assert_eq!(out.text, "src/lib.rs\nsrc/main.rs\n");
        let out = run(
            &Glob,
            &fx,
            json!({"pattern": "**/*.rs", "path": "src/nested"}),
        )
        .await;
        assert_eq!(out.text, "src/nested/deep.rs\n");
        assert_eq!(out.meta["source"], "src/nested");
        let out = run(&Glob, &fx, json!({"pattern": "*.yml"})).await;
        assert_eq!(
            out.text, ".github/workflows/ci.yml\n",
            "hidden files are found"
        );
        let out = run(&Glob, &fx, json!({"pattern": "*.log"})).await;
        assert!(out.text.starts_with("no files match"), "{}", out.text);
        let out = run(&Glob, &fx, json!({"pattern": "config"})).await;
        assert!(
            out.text.starts_with("no files match"),
            ".git is skipped: {}",
            out.text
        );
        let out = run(&Glob, &fx, json!({"pattern": "a[b"})).await;
        assert!(
            out.is_error && out.text.contains("invalid glob"),
            "{}",
            out.text
        );
    }

    #[tokio::test]
    async fn glob_caps_its_results() {
        let fx = Fixture::new();
        for i in 0..GLOB_MAX_RESULTS + 3 {
            fx.file(&format!("d/f{i:05}.txt"), "");
        }
        let out = run(&Glob, &fx, json!({"pattern": "*.txt"})).await;
        assert_eq!(out.text.lines().count(), GLOB_MAX_RESULTS + 1);
        assert!(
            out.text
                .ends_with("[3 more files not shown; narrow the pattern or the path]\n")
        );
        assert_eq!(out.meta["matches"], GLOB_MAX_RESULTS + 3);
    }

    #[tokio::test]
    async fn grep_honours_gitignore_skips_binaries_and_formats_matches() {
        let fx = tree();
        let out = run(&Grep, &fx, json!({"pattern": "hello"})).await;
        assert_eq!(
            out.text,
            ".github/workflows/ci.yml:1: name: hello\n\
             src/lib.rs:1: pub fn hello() -> &'static str {\n\
             src/lib.rs:2:     \"hello\"\n\
             src/nested/deep.rs:1: // hello from deep\n\
             [not searched: 1 binary files, 0 files over 16 MiB]\n"
        );
        let out = run(
            &Grep,
            &fx,
            json!({"pattern": "hello", "case_insensitive": true, "glob": "*.rs"}),
        )
        .await;
        assert_eq!(
            out.text,
            "src/lib.rs:1: pub fn hello() -> &'static str {\n\
             src/lib.rs:2:     \"hello\"\n\
             src/main.rs:2:     println!(\"Hello\");\n\
             src/nested/deep.rs:1: // hello from deep\n"
        );
        assert_eq!(out.meta["matches"], 4);
        assert_eq!(out.meta["files"], 3);
        let out = run(&Grep, &fx, json!({"pattern": "^fn", "path": "src/main.rs"})).await;
        assert_eq!(out.text, "src/main.rs:1: fn main() {\n");
        let out = run(&Grep, &fx, json!({"pattern": "nothing-like-this"})).await;
        assert!(
            out.text
                .starts_with("no matches for `nothing-like-this` in `.`"),
            "{}",
            out.text
        );
        assert!(!out.is_error);
        let out = run(&Grep, &fx, json!({"pattern": "(unclosed"})).await;
        assert!(
            out.is_error && out.text.contains("invalid regular expression"),
            "{}",
            out.text
        );
        let out = run(&Grep, &fx, json!({"pattern": "x", "path": "missing"})).await;
        assert!(
            out.is_error && out.text.contains("does not exist"),
            "{}",
            out.text
        );
    }

    #[tokio::test]
    async fn grep_caps_matches_with_a_count_of_the_rest() {
        let fx = Fixture::new();
        let content: String = (0..GREP_MAX_MATCHES + 7)
            .map(|i| format!("match {i}\n"))
            .collect();
        fx.file("a.txt", &content);
        fx.file("b.txt", "match b\n");
        let out = run(&Grep, &fx, json!({"pattern": "match"})).await;
        assert_eq!(out.text.lines().count(), GREP_MAX_MATCHES + 1);
        assert!(
            out.text.ends_with(&format!(
                "[8 more matching lines not shown ({} in 2 files in all); narrow the pattern, the path or the glob]\n",
                GREP_MAX_MATCHES + 8
            )),
            "{}",
            out.text.lines().last().unwrap()
        );
    }

    #[tokio::test]
    async fn searches_do_not_follow_symlinks_out_but_do_follow_them_in() {
        let fx = Fixture::new();
        fx.file("inside.txt", "needle inside\n");
        std::os::unix::fs::symlink("inside.txt", fx.root().join("alias.txt")).unwrap();
        // `Fixture` puts `needle outside` in the outside directory and links to it.
        let out = run(&Grep, &fx, json!({"pattern": "needle"})).await;
        assert_eq!(
            out.text,
            "alias.txt:1: needle inside\ninside.txt:1: needle inside\n"
        );
        let out = run(&Glob, &fx, json!({"pattern": "*"})).await;
        assert!(!out.text.contains("link_"), "{}", out.text);
    }
}
