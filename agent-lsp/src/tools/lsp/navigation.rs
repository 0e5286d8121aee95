//! The `lsp_*` tools that start at a symbol's position: definitions and the other
//! navigations, hover, call hierarchy and rename previews, with tree-sitter tags standing in
//! for definitions where no server answers.

use std::fmt::Write as _;
use std::path::Path;

use lsp_bridge::queries::{CallDirection, Location, Navigation, SymbolPosition};
use lsp_bridge::syntax::SyntaxSymbol;
use serde_json::Value;

use super::args::PositionQuery;
use super::render::{failure, notes, render_locations, stamp};
use super::{LspKind, LspTools};
use crate::plugin::outcomes::ToolOutput;
use crate::plugin::tool::ToolContext;

pub(super) async fn positional(
    kind: LspKind,
    tools: &LspTools,
    ctx: &ToolContext,
    args: PositionQuery,
) -> Result<ToolOutput, ToolOutput> {
    let path = ctx.resolve(&args.path)?;
    let shown = ctx.workspace.display(&path);
    let position = SymbolPosition {
        path: path.clone(),
        line: args.line,
        symbol: args.symbol.clone(),
        column: args.column,
    };
    let queries = &tools.queries;
    let has_server = queries.bridge.config_for(&path).is_some();

    let navigation = match kind {
        LspKind::Definition if args.declaration => Some(Navigation::Declaration),
        LspKind::Definition => Some(Navigation::Definition),
        LspKind::References => Some(Navigation::References),
        LspKind::Implementation => Some(Navigation::Implementation),
        LspKind::TypeDefinition => Some(Navigation::TypeDefinition),
        _ => None,
    };
    if let Some(navigation) = navigation {
        if !has_server && kind == LspKind::Definition {
            let why = queries.bridge.no_server_reason(&path);
            return Ok(approximate_definition(tools, ctx, &args.symbol, &why));
        }
        return match queries.navigate(navigation, &position).await {
            Ok(answer) => {
                let what = format!(
                    "{} of `{}` ({shown}:{})",
                    kind.name().trim_start_matches("lsp_").replace('_', " "),
                    args.symbol,
                    args.line
                );
                Ok(render_locations(
                    ctx,
                    &what,
                    &answer.value,
                    &answer.server,
                    &answer.versions,
                    &answer.notes,
                    &args.cursor,
                    args.limit,
                ))
            }
            // The server failed rather than answered: tree-sitter tags stand in, labelled.
            Err(error) if kind == LspKind::Definition && error.is_server_failure() => {
                tracing::warn!("lsp_definition: the language server failed: {error}");
                let why = format!("the language server failed: {}", error.brief());
                Ok(approximate_definition(tools, ctx, &args.symbol, &why)
                    .with_meta("server_error", error.to_string()))
            }
            Err(error) => Err(failure(tools, kind.name(), &error)),
        };
    }
    match kind {
        LspKind::Hover => match queries.hover(&position).await {
            Ok(answer) => {
                let mut text = stamp(&answer.server, &answer.versions, ctx);
                notes(&mut text, &answer.notes);
                if answer.value.trim().is_empty() {
                    text.push_str(&format!("no hover information for `{}`", args.symbol));
                } else {
                    text.push_str(answer.value.trim());
                }
                Ok(ToolOutput::ok(text).with_meta("server", answer.server))
            }
            Err(error) => Err(failure(tools, kind.name(), &error)),
        },
        LspKind::CallHierarchy => {
            let direction = match args.direction.as_deref() {
                Some("incoming") => CallDirection::Incoming,
                Some("outgoing") => CallDirection::Outgoing,
                other => {
                    return Err(ToolOutput::error(format!(
                        "direction must be \"incoming\" or \"outgoing\", not {other:?}"
                    )));
                }
            };
            match queries.call_hierarchy(&position, direction).await {
                Ok(answer) => {
                    let locations = answer
                        .value
                        .iter()
                        .map(|call| Location {
                            code: format!("{} {} — {}", call.kind, call.name, call.location.code),
                            ..call.location.clone()
                        })
                        .collect::<Vec<_>>();
                    let what = format!(
                        "{} calls of `{}`",
                        if direction == CallDirection::Incoming {
                            "incoming"
                        } else {
                            "outgoing"
                        },
                        args.symbol
                    );
                    let output = render_locations(
                        ctx,
                        &what,
                        &locations,
                        &answer.server,
                        &answer.versions,
                        &answer.notes,
                        &args.cursor,
                        args.limit,
                    );
                    Ok(output.with_meta(
                        "calls",
                        serde_json::to_value(&answer.value).unwrap_or(Value::Null),
                    ))
                }
                Err(error) => Err(failure(tools, kind.name(), &error)),
            }
        }
        LspKind::RenamePreview => {
            let Some(new_name) = args.new_name.as_deref() else {
                return Err(ToolOutput::error("give `new_name`"));
            };
            match queries.rename_preview(&position, new_name).await {
                Ok(answer) => {
                    let mut text = stamp(&answer.server, &answer.versions, ctx);
                    notes(&mut text, &answer.notes);
                    if answer.value.is_empty() {
                        text.push_str("the server proposes no change");
                    }
                    let mut n_files = 0;
                    for edit in &answer.value {
                        n_files += 1;
                        let shown = ctx.workspace.display(&edit.path);
                        let diff = similar::TextDiff::from_lines(&edit.old_text, &edit.new_text);
                        let _ = write!(
                            text,
                            "{}",
                            diff.unified_diff()
                                .context_radius(1)
                                .header(&format!("a/{shown}"), &format!("b/{shown}"))
                        );
                    }
                    Ok(ToolOutput::ok(format!(
                        "rename `{}` → `{new_name}`: {n_files} file(s) would change (preview only, nothing applied)\n{text}",
                        args.symbol
                    )))
                }
                Err(error) => Err(failure(tools, kind.name(), &error)),
            }
        }
        _ => unreachable!("navigation kinds are handled above"),
    }
}

/// Definitions from tree-sitter tags, labelled approximate with `why` no server answered.
pub(super) fn approximate_definition(
    tools: &LspTools,
    ctx: &ToolContext,
    symbol: &str,
    why: &str,
) -> ToolOutput {
    let root = ctx.workspace.root().to_owned();
    let found = tools.with_index(&root, |index| index.definitions(symbol));
    let locations = found
        .iter()
        .map(|(path, symbol)| syntax_location(&root, path, symbol, false))
        .collect::<Vec<_>>();
    let what = format!("approximate definition of `{symbol}` (tree-sitter tags; {why})");
    render_locations(ctx, &what, &locations, "tree-sitter", &[], &[], &None, None)
        .with_meta("approximate", true)
}

pub(super) fn syntax_location(
    root: &Path,
    path: &Path,
    symbol: &SyntaxSymbol,
    label: bool,
) -> Location {
    let absolute = root.join(path);
    let code = std::fs::read_to_string(&absolute)
        .ok()
        .and_then(|text| {
            text.lines()
                .nth(symbol.line.saturating_sub(1) as usize)
                .map(|line| line.trim().to_owned())
        })
        .unwrap_or_default();
    let code = if label {
        format!("{code} (approximate)")
    } else {
        code
    };
    Location {
        path: absolute,
        line: symbol.line,
        column: symbol.column,
        code,
    }
}
