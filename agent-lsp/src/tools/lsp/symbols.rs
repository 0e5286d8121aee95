//! The `lsp_*` tools over symbols rather than one position: a file's outline and the
//! workspace's symbols by name, from the servers and, where none covers a file, from
//! tree-sitter tags, labelled approximate.

use std::fmt::Write as _;

use lsp_bridge::queries::{Location, OutlineSymbol};
use lsp_bridge::syntax::SyntaxSymbol;

use super::args::QueryArgs;
use super::navigation::syntax_location;
use super::render::{render_locations, stamp};
use super::{LspTools, MAX_LIMIT};
use crate::plugin::outcomes::ToolOutput;
use crate::plugin::tool::ToolContext;

pub(super) async fn document_symbols(
    tools: &LspTools,
    ctx: &ToolContext,
    path: &str,
) -> Result<ToolOutput, ToolOutput> {
    let path = ctx.resolve(path)?;
    let shown = ctx.workspace.display(&path);
    let server_answer = match tools.queries.bridge.config_for(&path) {
        Some(_) => Some(tools.queries.document_symbols(&path).await),
        None => None,
    };
    match server_answer {
        Some(Ok(answer)) => {
            let mut text = stamp(&answer.server, &answer.versions, ctx);
            let _ = writeln!(text, "outline of {shown}:");
            render_outline(&mut text, &answer.value, 1);
            Ok(ToolOutput::ok(text.trim_end().to_owned()).with_meta("server", answer.server))
        }
        other => {
            let why = match &other {
                Some(Err(error)) => {
                    tracing::warn!("lsp_document_symbols: the language server failed: {error}");
                    format!("the language server failed: {}", error.brief())
                }
                _ => tools.queries.bridge.no_server_reason(&path),
            };
            let text = std::fs::read_to_string(&path)
                .map_err(|error| ToolOutput::error(format!("cannot read {shown}: {error}")))?;
            let Some(symbols) = lsp_bridge::syntax::document_symbols(&path, &text) else {
                return Err(ToolOutput::error(format!(
                    "{why}, and tree-sitter has no grammar for {shown}"
                )));
            };
            let mut out = format!("approximate (tree-sitter; {why}): outline of {shown}:\n");
            render_syntax_outline(&mut out, &symbols, 1);
            Ok(ToolOutput::ok(out.trim_end().to_owned()).with_meta("approximate", true))
        }
    }
}

pub(super) async fn workspace_symbols(
    tools: &LspTools,
    ctx: &ToolContext,
    args: QueryArgs,
) -> Result<ToolOutput, ToolOutput> {
    let mut symbols = Vec::new();
    let mut errors = Vec::new();
    let mut indexing = Vec::new();
    for answer in tools.queries.workspace_symbols(&args.query).await {
        match answer {
            Ok(found) => {
                if found.still_indexing {
                    indexing.push(found.server.clone());
                }
                symbols.extend(found.symbols)
            }
            Err(error) => {
                tracing::warn!("lsp_workspace_symbols: a language server failed: {error}");
                errors.push(error.brief())
            }
        }
    }
    let query = args.query.to_lowercase();
    let rank = |name: &str| {
        let name = name.to_lowercase();
        if name == query {
            0
        } else if name.starts_with(&query) {
            1
        } else if name.contains(&query) {
            2
        } else {
            3
        }
    };
    let mut rows = symbols
        .iter()
        .map(|symbol| {
            let container = symbol
                .container
                .as_deref()
                .map(|c| format!(" in {c}"))
                .unwrap_or_default();
            let location = Location {
                code: format!(
                    "{} {}{container} — {}",
                    symbol.kind, symbol.name, symbol.location.code
                ),
                ..symbol.location.clone()
            };
            (rank(&symbol.name), location)
        })
        .collect::<Vec<_>>();
    // Languages without a running server are covered by tree-sitter tags, labelled as such.
    let root = ctx.workspace.root().to_owned();
    let approximate = tools.with_index(&root, |index| {
        index.workspace_symbols(&args.query, MAX_LIMIT)
    });
    let mut n_approximate = 0;
    for (path, symbol) in approximate {
        n_approximate += 1;
        rows.push((
            rank(&symbol.name),
            syntax_location(&root, &path, &symbol, true),
        ));
    }
    rows.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    rows.dedup_by(|a, b| a.1.path == b.1.path && a.1.line == b.1.line);
    let locations = rows
        .into_iter()
        .map(|(_, location)| location)
        .collect::<Vec<_>>();
    let mut extra = Vec::new();
    if n_approximate > 0 {
        extra.push(format!("{n_approximate} result(s) marked (approximate) come from tree-sitter tags, for files no language server covers"));
    }
    extra.extend(
        errors
            .into_iter()
            .map(|error| format!("a server failed: {error}")),
    );
    let servers = tools
        .queries
        .bridge
        .running()
        .iter()
        .map(|child| child.name().to_owned())
        .collect::<Vec<_>>()
        .join(", ");
    if locations.is_empty() && !indexing.is_empty() {
        // An empty answer from a server that has not finished indexing is not "no results".
        return Ok(ToolOutput::ok(format!(
            "workspace symbols matching `{}`: none yet, {} still indexing the workspace; call again in a few seconds (or look in a file with lsp_document_symbols)",
            args.query,
            indexing.join(", ")
        ))
        .with_meta("total", 0)
        .with_meta("still_indexing", indexing));
    }
    let what = format!("workspace symbols matching `{}`", args.query);
    Ok(render_locations(
        ctx,
        &what,
        &locations,
        &servers,
        &[],
        &extra,
        &args.cursor,
        args.limit,
    ))
}

fn render_outline(text: &mut String, symbols: &[OutlineSymbol], depth: usize) {
    for symbol in symbols {
        let detail = symbol
            .detail
            .as_deref()
            .map(|detail| format!(" — {detail}"))
            .unwrap_or_default();
        let _ = writeln!(
            text,
            "{}{} {} ({}:{}){detail}",
            "  ".repeat(depth),
            symbol.kind,
            symbol.name,
            symbol.line,
            symbol.column
        );
        render_outline(text, &symbol.children, depth + 1);
    }
}

fn render_syntax_outline(text: &mut String, symbols: &[SyntaxSymbol], depth: usize) {
    for symbol in symbols {
        let _ = writeln!(
            text,
            "{}{:?} {} ({}:{})",
            "  ".repeat(depth),
            symbol.kind,
            symbol.name,
            symbol.line,
            symbol.column
        );
        render_syntax_outline(text, &symbol.children, depth + 1);
    }
}
