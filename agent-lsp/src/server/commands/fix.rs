//! `agent.fix`: a turn that fixes one diagnostic. Its edits arrive through
//! `workspace/applyEdit`; then the diagnostics of the changed files are checked, and what is
//! left is reported.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use lsp_bridge::lsp_types::{Diagnostic, DiagnosticSeverity, NumberOrString, Position, Url};
use lsp_bridge::position::PositionEncoding;
use lsp_bridge::queries::{DocumentDiagnostics, Queries};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::chat::{language_of, numbered, turn_result};
use super::{current_text, mention, path_of};
use crate::agent::TurnOutcome;
use crate::server::agent::TurnRequest;
use crate::server::prompts::offset_of;
use crate::server::{Reply, Shared};

/// Lines of code shown around the diagnostic.
const CONTEXT_LINES: usize = 12;

/// `agent.fix`: the document, and the diagnostic as the editor has it.
#[derive(Deserialize)]
pub(super) struct FixArgument {
    uri: Url,
    diagnostic: Diagnostic,
}

/// `agent.fix {uri, diagnostic}`.
pub(super) async fn fix(
    shared: &Arc<Shared>,
    argument: FixArgument,
    cancel: &CancellationToken,
) -> Reply {
    let path = path_of(&argument.uri)?;
    let diagnostic = &argument.diagnostic;
    let message = diagnostic.message.as_str();
    let start = diagnostic.range.start;
    let (line, character) = (start.line as usize, start.character);
    let text = current_text(shared, &path)?;
    let lines = text.lines().count().max(1);
    let first = line.saturating_sub(CONTEXT_LINES).min(lines - 1);
    let last = (line + CONTEXT_LINES).min(lines - 1);
    let severity = match diagnostic.severity {
        Some(DiagnosticSeverity::ERROR) => "error",
        Some(DiagnosticSeverity::WARNING) => "warning",
        Some(DiagnosticSeverity::INFORMATION) => "information",
        Some(DiagnosticSeverity::HINT) => "hint",
        _ => "diagnostic",
    };
    let source = diagnostic.source.as_deref().unwrap_or("");
    let code = match &diagnostic.code {
        None => String::new(),
        Some(NumberOrString::String(code)) => format!(" [{code}]"),
        Some(NumberOrString::Number(code)) => format!(" [{code}]"),
    };
    let column = {
        let line_text = text.lines().nth(line).unwrap_or("");
        let start = offset_of(line_text, 0, character, PositionEncoding::Utf16);
        line_text[..start.min(line_text.len())].chars().count() + 1
    };
    let hover = hover_at(shared, &path, start).await;
    let mut prompt = format!(
        "Fix this {severity} in {} at line {}, column {column}:\n\n{source}{code}: {message}\n\nThe code around it (lines {}–{}):\n{}\n",
        mention(shared, &path)?,
        line + 1,
        first + 1,
        last + 1,
        numbered(&text, first, last, language_of(&path)),
    );
    if let Some(hover) = hover {
        prompt.push_str(&format!(
            "\nThe language server's hover at that position:\n{hover}\n"
        ));
    }
    prompt.push_str(
        "\nMake the smallest change that fixes it with the `edit` tool, then check the diagnostics in the edit's result. Do not change anything else.",
    );
    let request = TurnRequest {
        prompt,
        title: "agent: fix".into(),
        answer: None,
    };
    let report = shared.host.run_turn(shared, request, cancel).await?;

    // Check what the edits left behind.
    let workspace = shared.host.workspace()?.to_owned();
    let queries = Queries::new(
        Arc::new(shared.bridge()?.clone()),
        shared.documents().clone(),
    );
    let mut diagnostics = serde_json::Map::new();
    let mut still_there = false;
    for changed in &report.changed {
        let changed_path = workspace.join(changed);
        let value = match queries.diagnostics(&changed_path).await {
            Ok(answer) => match answer.value {
                DocumentDiagnostics::Current { diagnostics, .. } => {
                    if changed_path == path {
                        still_there = diagnostics.iter().any(|found| found.message == message);
                    }
                    json!(diagnostics)
                }
                DocumentDiagnostics::Pending { .. } => json!("pending"),
            },
            Err(error) => json!(format!("unavailable: {error}")),
        };
        diagnostics.insert(changed.clone(), value);
    }
    let fixed = matches!(report.outcome, TurnOutcome::Answered { .. })
        && report
            .changed
            .iter()
            .any(|changed| workspace.join(changed) == path)
        && !still_there;
    let name = path
        .file_name()
        .map_or(String::new(), |name| name.to_string_lossy().into_owned());
    let (kind, note) = if fixed {
        (
            3,
            format!(
                "agent-lsp: fixed “{message}” in {name}; {}",
                describe_left(&diagnostics)
            ),
        )
    } else if report.changed.is_empty() {
        (
            2,
            format!("agent-lsp: the agent changed nothing for “{message}” in {name}"),
        )
    } else {
        (
            2,
            format!("agent-lsp: “{message}” is still reported in {name} after the agent's edit"),
        )
    };
    shared.notify_editor("window/showMessage", json!({"type": kind, "message": note}));
    let mut result = turn_result(&report, None);
    result["fixed"] = json!(fixed);
    result["diagnostics"] = Value::Object(diagnostics);
    Ok(result)
}

/// What the changed files still report, as the summary of a fix says it: errors and warnings
/// are what is left to do; hints and information (unused names, deprecated calls) are named
/// apart, so that "2 left" never means two hints.
fn describe_left(diagnostics: &serde_json::Map<String, Value>) -> String {
    let (mut problems, mut notes) = (0, 0);
    for diagnostic in diagnostics.values().filter_map(Value::as_array).flatten() {
        // The bridge names severities (`lsp_bridge::queries::Diagnostic`), and one the server
        // sent without a severity as an error, as editors show it.
        match diagnostic["severity"].as_str() {
            Some("information" | "info" | "hint") => notes += 1,
            _ => problems += 1,
        }
    }
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let problems = match problems {
        0 => "no errors or warnings left in the changed files".to_owned(),
        n => format!(
            "{} left in the changed files",
            plural(n, "error or warning", "errors or warnings")
        ),
    };
    match notes {
        0 => problems,
        n => format!(
            "{problems}; {}",
            plural(n, "hint or note", "hints or notes")
        ),
    }
}

/// The hover of the document's child at `position`, as plain text, if it answers in time.
async fn hover_at(shared: &Arc<Shared>, path: &Path, position: Position) -> Option<String> {
    let child = shared.child_for(path).await.ok()?;
    let uri = Url::from_file_path(path).ok()?;
    let answer = tokio::time::timeout(
        Duration::from_secs(5),
        child.request(
            "textDocument/hover",
            json!({"textDocument": {"uri": uri}, "position": position}),
        ),
    )
    .await
    .ok()?
    .ok()?;
    let contents = &answer["contents"];
    let text = match contents {
        Value::String(text) => text.clone(),
        Value::Object(object) => object.get("value")?.as_str()?.to_owned(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part.as_str().or_else(|| part["value"].as_str()))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return None,
    };
    let text: String = text.chars().take(1500).collect();
    (!text.trim().is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_fix_summary_counts_errors_and_warnings_and_names_hints_apart() {
        // As the bridge reports them (`lsp_bridge::queries::Diagnostic`), not as LSP numbers.
        let left = |severities: &[&str]| {
            let diagnostics: Vec<serde_json::Value> = severities
                .iter()
                .map(|severity| serde_json::json!({"severity": severity, "message": "m"}))
                .collect();
            let mut map = serde_json::Map::new();
            map.insert("app.py".into(), serde_json::json!(diagnostics));
            super::describe_left(&map)
        };
        assert_eq!(
            left(&["hint", "hint"]),
            "no errors or warnings left in the changed files; 2 hints or notes"
        );
        assert_eq!(left(&[]), "no errors or warnings left in the changed files");
        assert_eq!(
            left(&["error", "warning", "info"]),
            "2 errors or warnings left in the changed files; 1 hint or note"
        );
        assert_eq!(
            left(&["warning"]),
            "1 error or warning left in the changed files"
        );
    }
}
