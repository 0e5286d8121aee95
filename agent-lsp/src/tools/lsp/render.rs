//! How the `lsp_*` tools' answers read: the stamp naming the server and the versions, pages
//! of locations grouped by file, diagnostics, and the one-line failure.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use lsp_bridge::queries::{DocumentDiagnostics, Location};
use serde_json::{Value, json};

use super::{DEFAULT_LIMIT, LspTools, MAX_LIMIT};
use crate::plugin::outcomes::ToolOutput;
use crate::plugin::tool::ToolContext;

/// The error output for a query that failed: one line (two with the server's last stderr
/// line) for the model, and what to do; the full error, with the server's stderr, goes to the
/// log, and the servers' health into the result's meta (the session log keeps it; the model
/// does not see it).
pub(super) fn failure(
    tools: &LspTools,
    tool: &str,
    error: &lsp_bridge::error::Error,
) -> ToolOutput {
    tracing::warn!(tool, "language server query failed: {error}");
    let health = serde_json::to_value(tools.queries.bridge.health()).unwrap_or(Value::Null);
    ToolOutput::error(format!("{tool} could not be answered: {}", error.brief()))
        .with_meta("servers", health)
}

pub(super) async fn diagnostics(
    tools: &LspTools,
    ctx: &ToolContext,
    path: &str,
) -> Result<ToolOutput, ToolOutput> {
    let path = ctx.resolve(path)?;
    let shown = ctx.workspace.display(&path);
    match tools.queries.diagnostics(&path).await {
        Ok(answer) => {
            let text = render_diagnostics(&shown, &answer.value, &answer.server);
            Ok(ToolOutput::ok(text).with_meta("diagnostics", diagnostics_meta(&answer.value)))
        }
        Err(error) => Err(failure(tools, "lsp_diagnostics", &error)),
    }
}

pub(super) fn diagnostics_meta(value: &DocumentDiagnostics) -> Value {
    match value {
        DocumentDiagnostics::Current {
            version,
            diagnostics,
        } => json!({"version": version, "items": diagnostics}),
        DocumentDiagnostics::Pending { version } => json!({"version": version, "pending": true}),
    }
}

/// Diagnostics as the model reads them, in edit results and `lsp_diagnostics`.
pub fn render_diagnostics(shown: &str, value: &DocumentDiagnostics, server: &str) -> String {
    match value {
        DocumentDiagnostics::Pending { version } => format!(
            "diagnostics of {shown} (version {version}): pending — {server} has not reported on this version yet; do not assume it is clean, check again with lsp_diagnostics"
        ),
        DocumentDiagnostics::Current {
            version,
            diagnostics,
        } if diagnostics.is_empty() => {
            format!("diagnostics of {shown} (version {version}, {server}): none")
        }
        DocumentDiagnostics::Current {
            version,
            diagnostics,
        } => {
            let mut text = format!(
                "diagnostics of {shown} (version {version}, {server}): {}\n",
                diagnostics.len()
            );
            for diagnostic in diagnostics {
                let code = diagnostic
                    .code
                    .as_deref()
                    .map(|code| format!(" [{code}]"))
                    .unwrap_or_default();
                let _ = writeln!(
                    text,
                    "  {}:{} {}{code}: {}",
                    diagnostic.line, diagnostic.column, diagnostic.severity, diagnostic.message
                );
            }
            text.trim_end().to_owned()
        }
    }
}

/// The header line naming the server and the versions an answer was computed on.
pub(super) fn stamp(server: &str, versions: &[(PathBuf, i32)], ctx: &ToolContext) -> String {
    if versions.is_empty() {
        return format!("[{server}]\n");
    }
    let versions = versions
        .iter()
        .map(|(path, version)| format!("{} v{version}", ctx.workspace.display(path)))
        .collect::<Vec<_>>()
        .join(", ");
    format!("[{server}; computed on {versions}]\n")
}

pub(super) fn notes(text: &mut String, notes: &[String]) {
    for note in notes {
        let _ = writeln!(text, "note: {note}");
    }
}

/// Locations grouped by file, one page of them, with the cursor to the next page.
#[allow(clippy::too_many_arguments)]
pub(super) fn render_locations(
    ctx: &ToolContext,
    what: &str,
    locations: &[Location],
    server: &str,
    versions: &[(PathBuf, i32)],
    extra: &[String],
    cursor: &Option<String>,
    limit: Option<usize>,
) -> ToolOutput {
    let offset = cursor
        .as_deref()
        .and_then(|cursor| cursor.parse::<usize>().ok())
        .unwrap_or(0)
        .min(locations.len());
    let limit = limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let page = &locations[offset..(offset + limit).min(locations.len())];
    let mut text = stamp(server, versions, ctx);
    notes(&mut text, extra);
    if locations.is_empty() {
        let _ = write!(text, "{what}: no results");
        return ToolOutput::ok(text).with_meta("total", 0);
    }
    let _ = writeln!(text, "{what}: {} result(s)", locations.len());
    let mut by_file: BTreeMap<String, Vec<&Location>> = BTreeMap::new();
    for location in page {
        by_file
            .entry(ctx.workspace.display(&location.path))
            .or_default()
            .push(location);
    }
    for (file, locations) in by_file {
        let _ = writeln!(text, "{file}");
        for location in locations {
            let _ = writeln!(
                text,
                "  {}:{}  {}",
                location.line, location.column, location.code
            );
        }
    }
    let shown_to = offset + page.len();
    if shown_to < locations.len() || offset > 0 {
        let _ = write!(
            text,
            "{}–{} of {} shown",
            offset + 1,
            shown_to,
            locations.len()
        );
        if shown_to < locations.len() {
            let _ = write!(text, "; call again with cursor=\"{shown_to}\" for more");
        }
    }
    let all = locations
        .iter()
        .map(|location| json!({"path": ctx.workspace.display(&location.path), "line": location.line, "column": location.column, "code": location.code}))
        .collect::<Vec<_>>();
    ToolOutput::ok(text.trim_end().to_owned())
        .with_meta("total", locations.len())
        .with_meta("server", server)
        .with_meta("results", Value::Array(all))
}
