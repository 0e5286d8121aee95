//! `workspace/executeCommand`: the agent's commands, or the child that announced the command.
//!
//! Every command takes at most one argument, a JSON object:
//! - `agent.ask {prompt}`: ask in the workspace's chat document (`[editor] chat_file`), where
//!   the answer streams; `agent.ask {uri, range}` (the "Ask agent about selection" action)
//!   instead writes a prompt quoting the selection there and shows it, for the programmer to
//!   finish and send.
//! - `agent.explain {uri, range}`: "Explain with agent": the same, sent at once.
//! - `agent.send {uri, position}`: send the prompt under the cursor of a prompt document; the
//!   answer streams into it below the prompt.
//! - `agent.fix {uri, diagnostic}`: a turn that fixes one diagnostic; its edits arrive through
//!   `workspace/applyEdit`, then the diagnostics of the changed files are checked and reported.
//! - `agent.cancel`: stop the running turn (the log stays consistent).
//! - `agent.compact`: compact the session now (a checkpoint summary replaces older history).
//! - `agent.session.new`, `agent.session.list`.
//! - `agent.status`: `{session, running, context_tokens, cache_hit_share}` for an editor's status
//!   bar, from the session's last `usage` event (`null` figures before the first request).
//! - `agent.tool {name, arguments}`: run one agent tool without a model, in the server's
//!   session, over the editor's buffers; the answer is `{text, is_error, meta, session}`.
//! - `agent.context.show {session?, query?, role?, sort?, preview?}`: the context editor's
//!   segments view, `{session, segments: [{id, role, source, tokens, preview, referenced, …}],
//!   totals}`; `agent.context.edit {session?, ops, force?}` applies a batch of
//!   `{op: fold|pin|delete|replace, id, end?, summary?|text?}` and answers
//!   `{applied, edit_id, snapshot, generation, results, …}`, or `{applied: false,
//!   needs_confirmation: true, message, referenced}` for a delete of referenced segments without
//!   `force`; `agent.context.rollback {session?, snapshot}`. Without `session` they work on the
//!   server's current session (refused while a turn runs; pass `session` to read it then).
//!
//! A turn's command answers when the turn ends, with `{outcome, steps, text, session, ...}`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use lsp_bridge::lsp_types::Url;
use lsp_bridge::position::PositionEncoding;
use lsp_bridge::queries::{DocumentDiagnostics, Queries};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::agent::buffers::EditorBuffers;
use super::agent::{AnswerTarget, REQUEST_FAILED, TurnReport, TurnRequest};
use super::prompts::{PROMPT_HEADING, offset_of, prompt_at};
use super::{Reply, ResponseError, Shared, codes};
use crate::agent::TurnOutcome;
use crate::tools::buffers::Buffers;

/// The commands this server owns, announced in `executeCommandProvider`.
pub const COMMANDS: [&str; 13] = [
    "agent.ask",
    "agent.explain",
    "agent.send",
    "agent.fix",
    "agent.cancel",
    "agent.session.new",
    "agent.session.list",
    "agent.tool",
    "agent.compact",
    "agent.context.show",
    "agent.context.edit",
    "agent.context.rollback",
    "agent.status",
];

/// Lines of code shown around a diagnostic or a selection.
const CONTEXT_LINES: usize = 12;
/// How long to wait for the editor to open the chat document it was asked to show.
const SHOW_WAIT: Duration = Duration::from_secs(3);

pub(super) async fn execute(
    shared: &Arc<Shared>,
    params: Value,
    cancel: &CancellationToken,
) -> Reply {
    let command = params["command"].as_str().ok_or(ResponseError::new(
        codes::INVALID_PARAMS,
        "executeCommand without `command`".to_owned(),
    ))?;
    let argument = params["arguments"].get(0).cloned().unwrap_or(Value::Null);
    if !(argument.is_object() || argument.is_null()) {
        return Err(ResponseError::new(
            codes::INVALID_PARAMS,
            format!("`{command}` takes one JSON object argument"),
        ));
    }
    let host = &shared.host;
    match command {
        "agent.tool" => run_tool(shared, argument, cancel).await,
        "agent.session.list" => {
            let ids = host.store()?.ids().map_err(internal)?;
            Ok(json!(ids))
        }
        "agent.session.new" => host.new_session(shared).await,
        "agent.cancel" => Ok(json!({"cancelled": host.cancel()})),
        "agent.send" => send(shared, &argument, cancel).await,
        "agent.ask" if argument.get("prompt").is_some() => {
            let prompt = string(&argument, "prompt")?;
            ask_in_chat(shared, prompt.to_owned(), "agent", cancel).await
        }
        "agent.ask" => quote_selection(shared, &argument).await,
        "agent.explain" => {
            let (path, quoted) = selection(shared, &argument)?;
            let prompt = format!(
                "Explain this code from {}: what it does, how, and anything surprising.\n\n{quoted}",
                mention(shared, &path)?
            );
            ask_in_chat(shared, prompt, "agent: explain", cancel).await
        }
        "agent.fix" => fix(shared, &argument, cancel).await,
        "agent.compact" => host.compact(shared, cancel).await,
        "agent.context.show" => context_show(shared, &argument).await,
        "agent.context.edit" => context_edit(shared, &argument, cancel).await,
        "agent.context.rollback" => context_rollback(shared, &argument).await,
        "agent.status" => status(shared).await,
        other => Err(ResponseError::new(
            codes::METHOD_NOT_FOUND,
            format!("unknown command `{other}`"),
        )),
    }
}

fn internal(error: anyhow::Error) -> ResponseError {
    ResponseError::new(codes::INTERNAL_ERROR, format!("{error:#}"))
}

fn string<'a>(argument: &'a Value, key: &str) -> Result<&'a str, ResponseError> {
    argument[key].as_str().ok_or(ResponseError::new(
        codes::INVALID_PARAMS,
        format!("the argument needs `{key}`"),
    ))
}

fn path_of(argument: &Value) -> Result<PathBuf, ResponseError> {
    let uri = string(argument, "uri")?;
    Url::parse(uri)
        .ok()
        .and_then(|uri| uri.to_file_path().ok())
        .ok_or(ResponseError::new(
            codes::INVALID_PARAMS,
            format!("`{uri}` is not a file URI"),
        ))
}

fn position_of(value: &Value) -> Result<(usize, u32), ResponseError> {
    match (value["line"].as_u64(), value["character"].as_u64()) {
        (Some(line), Some(character)) => Ok((line as usize, character as u32)),
        _ => Err(ResponseError::new(
            codes::INVALID_PARAMS,
            "a position needs `line` and `character`",
        )),
    }
}

/// The editor's text of `path` (unsaved changes included), else the disk's.
fn current_text(shared: &Arc<Shared>, path: &Path) -> Result<String, ResponseError> {
    EditorBuffers::new(shared)
        .text_or_disk(path)
        .map_err(|error| {
            ResponseError::new(
                REQUEST_FAILED,
                format!("cannot read {}: {error}", path.display()),
            )
        })
}

/// `@path` for a workspace file, as the model is told to read it.
fn mention(shared: &Arc<Shared>, path: &Path) -> Result<String, ResponseError> {
    let workspace = crate::workspace::Workspace::new(shared.host.workspace()?).map_err(internal)?;
    if !path.starts_with(workspace.root()) {
        return Err(ResponseError::new(
            codes::INVALID_PARAMS,
            format!("{} is outside the workspace", path.display()),
        ));
    }
    let shown = workspace.display(path);
    Ok(crate::workspace::mentions::insert_text(
        &shown,
        crate::workspace::files::EntryKind::File,
    ))
}

/// Lines `first..=last` (0-based) of `text`, numbered from 1, in a fenced block.
fn numbered(text: &str, first: usize, last: usize, language: &str) -> String {
    let mut out = format!("```{language}\n");
    for (number, line) in text.lines().enumerate().skip(first).take(last + 1 - first) {
        out.push_str(&format!("{:>5}  {line}\n", number + 1));
    }
    out.push_str("```");
    out
}

fn language_of(path: &Path) -> &str {
    path.extension().and_then(|ext| ext.to_str()).unwrap_or("")
}

/// The selection of a `{uri, range}` argument, quoted with its line numbers.
fn selection(shared: &Arc<Shared>, argument: &Value) -> Result<(PathBuf, String), ResponseError> {
    let path = path_of(argument)?;
    let text = current_text(shared, &path)?;
    let (first, _) = position_of(&argument["range"]["start"])?;
    let (mut last, end_character) = position_of(&argument["range"]["end"])?;
    // A selection ending at the start of a line does not include that line.
    if end_character == 0 && last > first {
        last -= 1;
    }
    let lines = text.lines().count().max(1);
    let last = last.min(lines - 1);
    let first = first.min(last);
    let quoted = format!(
        "Lines {}–{}:\n{}",
        first + 1,
        last + 1,
        numbered(&text, first, last, language_of(&path))
    );
    Ok((path, quoted))
}

/// The workspace's chat document, opened in the editor when it can show documents.
async fn chat_document(shared: &Arc<Shared>) -> Result<PathBuf, ResponseError> {
    let workspace = crate::workspace::Workspace::new(shared.host.workspace()?).map_err(internal)?;
    let path = workspace
        .resolve(&shared.config.editor.chat_file)
        .map_err(|error| {
            ResponseError::new(
                REQUEST_FAILED,
                format!(
                    "[editor] chat_file `{}`: {error}",
                    shared.config.editor.chat_file
                ),
            )
        })?;
    if !path.exists() {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|error| {
                ResponseError::new(
                    REQUEST_FAILED,
                    format!("cannot create {}: {error}", parent.display()),
                )
            })?;
        }
        std::fs::write(&path, "").map_err(|error| {
            ResponseError::new(
                REQUEST_FAILED,
                format!("cannot create {}: {error}", path.display()),
            )
        })?;
    }
    let buffers = EditorBuffers::new(shared);
    if buffers.text(&path).is_none() && shared.client_supports("/window/showDocument/support") {
        let uri = Url::from_file_path(&path).map_err(|()| {
            ResponseError::new(
                codes::INTERNAL_ERROR,
                format!("{} is not absolute", path.display()),
            )
        })?;
        let shown = shared
            .request_editor(
                "window/showDocument",
                json!({"uri": uri, "takeFocus": false}),
            )
            .await;
        if shown.is_ok() {
            let deadline = tokio::time::Instant::now() + SHOW_WAIT;
            while buffers.text(&path).is_none() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    Ok(path)
}

/// Append a `## you` block with `prompt` to the chat document; returns the byte offset where
/// its answer goes (the end).
async fn append_prompt(
    shared: &Arc<Shared>,
    path: &Path,
    prompt: &str,
) -> Result<usize, ResponseError> {
    let buffers = EditorBuffers::new(shared);
    let open = buffers.text(path);
    let text = match &open {
        Some(text) => text.clone(),
        None => std::fs::read_to_string(path).unwrap_or_default(),
    };
    let mut block = String::new();
    if !text.is_empty() && !text.ends_with("\n\n") {
        block.push_str(if text.ends_with('\n') { "\n" } else { "\n\n" });
    }
    // A document that already ends with an empty `## you` block gets the prompt in it.
    let trimmed = text.trim_end();
    let reuse = trimmed
        .rsplit('\n')
        .next()
        .is_some_and(|last| last.trim().eq_ignore_ascii_case(PROMPT_HEADING));
    if !reuse && !text.trim().is_empty() {
        block.push_str(&format!("{PROMPT_HEADING}\n"));
    }
    block.push_str(prompt.trim_end());
    block.push('\n');
    // A document of only blank lines (an editor may open an empty file as "\n") starts with
    // the prompt itself.
    let after = if text.trim().is_empty() {
        block.trim_start().to_owned()
    } else {
        format!("{text}{block}")
    };
    match open {
        // The chat document is the server's own view, not a file the agent edits: no label.
        Some(_) => buffers
            .apply(path, &text, &after, None)
            .await
            .map_err(|problem| {
                ResponseError::new(
                    REQUEST_FAILED,
                    format!("the editor refused the prompt: {problem}"),
                )
            })?,
        None => crate::tools::fs::write_atomically(path, after.as_bytes()).map_err(|error| {
            ResponseError::new(
                REQUEST_FAILED,
                format!("cannot write {}: {error}", path.display()),
            )
        })?,
    }
    Ok(after.len())
}

/// Ask in the chat document: the prompt is appended there and the answer streams after it.
async fn ask_in_chat(
    shared: &Arc<Shared>,
    prompt: String,
    title: &str,
    cancel: &CancellationToken,
) -> Reply {
    shared.host.ensure_idle()?;
    shared.host.ensure_model(shared).await?;
    let path = chat_document(shared).await?;
    let insert_at = append_prompt(shared, &path, &prompt).await?;
    let request = TurnRequest {
        prompt,
        title: title.to_owned(),
        answer: Some(AnswerTarget {
            path: path.clone(),
            insert_at,
            at_end: true,
        }),
    };
    let report = shared.host.run_turn(shared, request, cancel).await?;
    Ok(turn_result(&report, Some(&path)))
}

/// "Ask agent about selection": a prompt quoting the selection, left for the programmer.
async fn quote_selection(shared: &Arc<Shared>, argument: &Value) -> Reply {
    if argument.get("uri").is_none() {
        return Err(ResponseError::new(
            codes::INVALID_PARAMS,
            "agent.ask needs {\"prompt\": ...} or {\"uri\": ..., \"range\": ...}",
        ));
    }
    let (path, quoted) = selection(shared, argument)?;
    let chat = chat_document(shared).await?;
    let block = format!(
        "About this code from {}:\n\n{quoted}\n\n",
        mention(shared, &path)?
    );
    let end = append_prompt(shared, &chat, &block).await?;
    let text = current_text(shared, &chat)?;
    let line = text[..end.min(text.len())].matches('\n').count();
    let uri = Url::from_file_path(&chat)
        .map_err(|()| ResponseError::new(codes::INTERNAL_ERROR, "bad path"))?;
    if shared.client_supports("/window/showDocument/support") {
        let cursor = json!({"line": line, "character": 0});
        let _ = shared
            .request_editor(
                "window/showDocument",
                json!({"uri": uri, "takeFocus": true, "selection": {"start": cursor, "end": cursor}}),
            )
            .await;
    }
    Ok(json!({"document": uri, "line": line}))
}

/// `agent.send {uri, position}`: the prompt under the cursor, answered below it.
async fn send(shared: &Arc<Shared>, argument: &Value, cancel: &CancellationToken) -> Reply {
    let path = path_of(argument)?;
    if !shared.prompt_documents.matches(&path) {
        return Err(ResponseError::new(
            codes::INVALID_PARAMS,
            format!(
                "{} is not a prompt document (`{}`)",
                path.display(),
                shared.config.editor.prompt_documents
            ),
        ));
    }
    shared.host.ensure_idle()?;
    let text = current_text(shared, &path)?;
    let (line, _) = match argument.get("position") {
        Some(position) => position_of(position)?,
        // No cursor: the last prompt of the document.
        None => (text.lines().count().saturating_sub(1), 0),
    };
    let prompt =
        prompt_at(&text, line).map_err(|problem| ResponseError::new(REQUEST_FAILED, problem))?;
    let request = TurnRequest {
        prompt: prompt.text,
        title: "agent".into(),
        answer: Some(AnswerTarget {
            path: path.clone(),
            insert_at: prompt.insert_at,
            at_end: prompt.at_end,
        }),
    };
    let report = shared.host.run_turn(shared, request, cancel).await?;
    Ok(turn_result(&report, Some(&path)))
}

fn turn_result(report: &TurnReport, document: Option<&Path>) -> Value {
    let (outcome, steps, text) = match &report.outcome {
        TurnOutcome::Answered { text, steps } => ("answered", *steps, text.as_str()),
        TurnOutcome::StepLimit { steps } => ("step_limit", *steps, ""),
        TurnOutcome::Cancelled { steps } => ("cancelled", *steps, ""),
    };
    json!({
        "outcome": outcome,
        "steps": steps,
        "text": text,
        "session": report.session,
        "changed": report.changed,
        "document": document.and_then(|path| Url::from_file_path(path).ok()),
    })
}

/// `agent.fix {uri, diagnostic}`.
async fn fix(shared: &Arc<Shared>, argument: &Value, cancel: &CancellationToken) -> Reply {
    let path = path_of(argument)?;
    let diagnostic = &argument["diagnostic"];
    let message = string(diagnostic, "message")?;
    let (line, character) = position_of(&diagnostic["range"]["start"])?;
    let text = current_text(shared, &path)?;
    let lines = text.lines().count().max(1);
    let first = line.saturating_sub(CONTEXT_LINES).min(lines - 1);
    let last = (line + CONTEXT_LINES).min(lines - 1);
    let severity = match diagnostic["severity"].as_u64() {
        Some(1) => "error",
        Some(2) => "warning",
        Some(3) => "information",
        Some(4) => "hint",
        _ => "diagnostic",
    };
    let source = diagnostic["source"].as_str().unwrap_or("");
    let code = match &diagnostic["code"] {
        Value::Null => String::new(),
        Value::String(code) => format!(" [{code}]"),
        other => format!(" [{other}]"),
    };
    let column = {
        let line_text = text.lines().nth(line).unwrap_or("");
        let start = offset_of(line_text, 0, character, PositionEncoding::Utf16);
        line_text[..start.min(line_text.len())].chars().count() + 1
    };
    let hover = hover_at(shared, &path, &diagnostic["range"]["start"]).await;
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
        // A diagnostic without a severity is the client's to judge; editors show it as an error.
        match diagnostic["severity"].as_u64().unwrap_or(1) {
            1 | 2 => problems += 1,
            _ => notes += 1,
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
async fn hover_at(shared: &Arc<Shared>, path: &Path, position: &Value) -> Option<String> {
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

/// `agent.status`: the figures of the session's last model request. A running turn holds the
/// session, so the answer then says only that it runs (editors ask again when it ends).
async fn status(shared: &Arc<Shared>) -> Reply {
    if shared.host.is_running() {
        return Ok(
            json!({"session": null, "running": true, "context_tokens": null, "cache_hit_share": null}),
        );
    }
    let guard = shared.host.state(shared).await?;
    let state = guard.as_ref().expect("made by state()");
    let last = state
        .session
        .history()
        .events()
        .iter()
        .rev()
        .find_map(|event| match &event.body {
            crate::session::event::EventBody::Usage(usage) => Some(usage.clone()),
            _ => None,
        });
    let (context_tokens, cache_hit_share) = match last {
        Some(usage) => (
            json!(usage.prompt_tokens),
            json!(if usage.prompt_tokens == 0 {
                0.0
            } else {
                usage.cache_read as f64 / usage.prompt_tokens as f64
            }),
        ),
        None => (Value::Null, Value::Null),
    };
    Ok(json!({
        "session": state.session.id(),
        "running": false,
        "context_tokens": context_tokens,
        "cache_hit_share": cache_hit_share,
    }))
}

async fn run_tool(shared: &Arc<Shared>, argument: Value, cancel: &CancellationToken) -> Reply {
    let name = argument["name"].as_str().ok_or(ResponseError::new(
        codes::INVALID_PARAMS,
        "agent.tool needs {\"name\": ..., \"arguments\": {...}}".to_owned(),
    ))?;
    let arguments = match &argument["arguments"] {
        Value::String(raw) => raw.clone(),
        Value::Null => "{}".to_owned(),
        other => other.to_string(),
    };
    let mut guard = shared.host.state(shared).await?;
    let state = guard.as_mut().expect("made by state()");
    let outcome = state
        .tools
        .run_one(&mut state.session, name, &arguments, cancel)
        .await
        .map_err(internal)?;
    Ok(json!({
        "text": outcome.output.text,
        "is_error": outcome.output.is_error,
        "meta": outcome.output.meta,
        "session": state.session.id(),
    }))
}

/// The session a context command names: `None` for the server's own (also when `session` names
/// it), or the id of another session of the workspace.
async fn context_target(
    shared: &Arc<Shared>,
    argument: &Value,
) -> Result<Option<String>, ResponseError> {
    let Some(query) = argument["session"].as_str() else {
        return Ok(None);
    };
    let id = shared
        .host
        .store()?
        .resolve(query)
        .map_err(|error| ResponseError::new(codes::INVALID_PARAMS, format!("{error:#}")))?;
    if shared.host.is_running() {
        return Ok(Some(id));
    }
    let guard = shared.host.state(shared).await?;
    let own = guard.as_ref().is_some_and(|state| state.session.id() == id);
    Ok((!own).then_some(id))
}

fn context_busy() -> ResponseError {
    ResponseError::new(
        REQUEST_FAILED,
        "a turn is running in this session; edit its context after the turn ends (pass `session` to read it now)",
    )
}

/// `agent.context.show`.
async fn context_show(shared: &Arc<Shared>, argument: &Value) -> Reply {
    use crate::context::editor::{DEFAULT_PREVIEW_CHARS, Query, view};
    let query = Query {
        keyword: argument["query"].as_str().map(str::to_owned),
        role: argument["role"].as_str().map(str::to_owned),
        sort_by_tokens: argument["sort"].as_str() == Some("tokens"),
        preview_chars: argument["preview"]
            .as_u64()
            .map_or(DEFAULT_PREVIEW_CHARS, |n| n as usize),
    };
    let invalid =
        |error: anyhow::Error| ResponseError::new(codes::INVALID_PARAMS, format!("{error:#}"));
    let (session, shown) = match context_target(shared, argument).await? {
        Some(id) => {
            let history = shared.host.store()?.load(&id).map_err(internal)?;
            (id, view(&history, &query).map_err(invalid)?)
        }
        None if shared.host.is_running() => return Err(context_busy()),
        None => {
            let guard = shared.host.state(shared).await?;
            let state = guard.as_ref().expect("made by state()");
            let shown = view(state.session.history(), &query).map_err(invalid)?;
            (state.session.id().to_owned(), shown)
        }
    };
    Ok(json!({"session": session, "segments": shown.segments, "totals": shown.totals}))
}

/// Run `edit` on the session a context command names, holding the server's session when it
/// is the server's own.
async fn with_context_session<F>(shared: &Arc<Shared>, argument: &Value, edit: F) -> Reply
where
    F: AsyncFnOnce(&mut crate::session::Session) -> anyhow::Result<Value>,
{
    let answer = match context_target(shared, argument).await? {
        Some(id) => {
            let mut session = shared
                .host
                .store()?
                .open(&id, crate::session::log::Durability::Sync)
                .map_err(internal)?;
            edit(&mut session).await
        }
        None if shared.host.is_running() => return Err(context_busy()),
        None => {
            let mut guard = shared.host.state(shared).await?;
            let state = guard.as_mut().expect("made by state()");
            edit(&mut state.session).await
        }
    };
    answer.or_else(|error| {
        match error.downcast_ref::<crate::context::editor::ops::NeedsConfirmation>() {
            Some(question) => Ok(json!({
                "applied": false,
                "needs_confirmation": true,
                "message": question.to_string(),
                "referenced": question.referenced,
            })),
            None => Err(ResponseError::new(REQUEST_FAILED, format!("{error:#}"))),
        }
    })
}

/// `agent.context.edit`. Folds without a summary are written by the server's model (see
/// [`super::agent::Host::provider`]) when there is one, else summarized mechanically.
async fn context_edit(shared: &Arc<Shared>, argument: &Value, cancel: &CancellationToken) -> Reply {
    use crate::context::editor::ops::{BatchOptions, EditOp, apply_batch, write_fold_summaries};
    let mut ops: Vec<EditOp> = serde_json::from_value(argument["ops"].clone()).map_err(|error| {
        ResponseError::new(
            codes::INVALID_PARAMS,
            format!("agent.context.edit needs `ops`: [{{\"op\": fold|pin|delete|replace, \"id\": N, ...}}]: {error}"),
        )
    })?;
    let force = argument["force"].as_bool().unwrap_or(false);
    let provider = shared.host.provider(shared).await;
    with_context_session(shared, argument, async |session| {
        let wants_summary = ops
            .iter()
            .any(|op| matches!(op, EditOp::Fold { summary: None, .. }));
        if wants_summary && let Some(provider) = &provider {
            write_fold_summaries(session.history(), &mut ops, provider, cancel).await?;
        }
        let options = BatchOptions::between_turns(session.history(), "editor", force);
        let report = apply_batch(session, &ops, &options)?;
        let mut answer = serde_json::to_value(&report)?;
        answer["applied"] = json!(true);
        answer["session"] = json!(session.id());
        Ok(answer)
    })
    .await
}

/// `agent.context.rollback`.
async fn context_rollback(shared: &Arc<Shared>, argument: &Value) -> Reply {
    use crate::context::editor::ops::{BatchOptions, rollback};
    let snapshot = argument["snapshot"].as_u64().ok_or(ResponseError::new(
        codes::INVALID_PARAMS,
        "agent.context.rollback needs `snapshot` (a generation, as edits report it)".to_owned(),
    ))?;
    with_context_session(shared, argument, async |session| {
        let options = BatchOptions::between_turns(session.history(), "editor", false);
        let report = rollback(session, snapshot, &options)?;
        let mut answer = serde_json::to_value(&report)?;
        answer["applied"] = json!(true);
        answer["session"] = json!(session.id());
        Ok(answer)
    })
    .await
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::COMMANDS;
    use crate::server::code_actions::KINDS;

    const EXTENSIONS_DOC: &str = include_str!("../../../docs/lsp-extensions.md");

    /// The first backticked name of each table row between the headings `from` and `to`.
    fn table_names(from: &str, to: &str) -> BTreeSet<&'static str> {
        let start = EXTENSIONS_DOC.find(from).expect("section") + from.len();
        let end = start + EXTENSIONS_DOC[start..].find(to).expect("next section");
        EXTENSIONS_DOC[start..end]
            .lines()
            .filter_map(|line| line.strip_prefix("| `"))
            .filter_map(|rest| rest.split('`').next())
            .collect()
    }

    /// Tidy: docs/lsp-extensions.md documents exactly the commands and code action kinds the
    /// server announces, so plugin authors can trust it.
    #[test]
    fn a_fix_summary_counts_errors_and_warnings_and_names_hints_apart() {
        let left = |severities: &[u64]| {
            let diagnostics: Vec<serde_json::Value> = severities
                .iter()
                .map(|severity| serde_json::json!({"severity": severity, "message": "m"}))
                .collect();
            let mut map = serde_json::Map::new();
            map.insert("app.py".into(), serde_json::json!(diagnostics));
            super::describe_left(&map)
        };
        assert_eq!(
            left(&[4, 4]),
            "no errors or warnings left in the changed files; 2 hints or notes"
        );
        assert_eq!(left(&[]), "no errors or warnings left in the changed files");
        assert_eq!(
            left(&[1, 2, 3]),
            "2 errors or warnings left in the changed files; 1 hint or note"
        );
        assert_eq!(left(&[2]), "1 error or warning left in the changed files");
    }

    #[test]
    fn the_extensions_doc_lists_exactly_the_commands_and_action_kinds() {
        let commands: BTreeSet<&str> = COMMANDS.into_iter().collect();
        assert_eq!(table_names("## Commands", "## Code actions"), commands);
        let kinds: BTreeSet<&str> = KINDS.into_iter().collect();
        assert_eq!(table_names("## Code actions", "## Prompt documents"), kinds);
    }
}
