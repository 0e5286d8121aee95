//! Turns in prompt documents: `agent.ask` (a prompt, or a selection quoted for the programmer
//! to finish), `agent.explain` (a selection, sent at once), `agent.send` (the prompt under the
//! cursor). The answer streams into the document below its prompt.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use lsp_bridge::jsonrpc;
use lsp_bridge::lsp_types::{Position, Range, Url};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{EditorBuffers, REQUEST_FAILED, Selection, current_text, internal, mention, path_of};
use crate::agent::TurnOutcome;
use crate::server::agent::{AnswerTarget, TurnReport, TurnRequest};
use crate::server::prompts::{PROMPT_HEADING, prompt_at};
use crate::server::{Reply, ResponseError, Shared, codes};

/// How long to wait for the editor to open the chat document it was asked to show.
const SHOW_WAIT: Duration = Duration::from_secs(3);

/// `agent.ask`: `{prompt}`, or `{uri, range}` for "Ask agent about selection".
#[derive(Deserialize)]
pub(super) struct AskArgument {
    prompt: Option<String>,
    uri: Option<Url>,
    #[serde(default, deserialize_with = "jsonrpc::optional_object")]
    range: Option<Range>,
}

/// `agent.send`: the prompt document, and the cursor (the last prompt without one).
#[derive(Deserialize)]
pub(super) struct SendArgument {
    uri: Url,
    #[serde(default, deserialize_with = "jsonrpc::optional_object")]
    position: Option<Position>,
}

/// `agent.ask`.
pub(super) async fn ask(
    shared: &Arc<Shared>,
    argument: AskArgument,
    cancel: &CancellationToken,
) -> Reply {
    match argument {
        AskArgument {
            prompt: Some(prompt),
            ..
        } => ask_in_chat(shared, prompt, "agent", cancel).await,
        AskArgument {
            uri: Some(uri),
            range: Some(range),
            ..
        } => quote_selection(shared, &Selection { uri, range }).await,
        _ => Err(ResponseError::invalid_params(
            "`agent.ask` needs {\"prompt\": ...} or {\"uri\": ..., \"range\": ...}",
        )),
    }
}

/// `agent.explain`: "Explain with agent", asked in the chat document at once.
pub(super) async fn explain(
    shared: &Arc<Shared>,
    selection: Selection,
    cancel: &CancellationToken,
) -> Reply {
    let (path, quoted) = quote(shared, &selection)?;
    let prompt = format!(
        "Explain this code from {}: what it does, how, and anything surprising.\n\n{quoted}",
        mention(shared, &path)?
    );
    ask_in_chat(shared, prompt, "agent: explain", cancel).await
}

/// Lines `first..=last` (0-based) of `text`, numbered from 1, in a fenced block.
pub(super) fn numbered(text: &str, first: usize, last: usize, language: &str) -> String {
    let mut out = format!("```{language}\n");
    for (number, line) in text.lines().enumerate().skip(first).take(last + 1 - first) {
        out.push_str(&format!("{:>5}  {line}\n", number + 1));
    }
    out.push_str("```");
    out
}

pub(super) fn language_of(path: &Path) -> &str {
    path.extension().and_then(|ext| ext.to_str()).unwrap_or("")
}

/// The selection, quoted with its line numbers.
fn quote(shared: &Arc<Shared>, selection: &Selection) -> Result<(PathBuf, String), ResponseError> {
    let path = path_of(&selection.uri)?;
    let text = current_text(shared, &path)?;
    let first = selection.range.start.line as usize;
    let (mut last, end_character) = (
        selection.range.end.line as usize,
        selection.range.end.character,
    );
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
    if buffers.editor_text(&path).is_none()
        && shared.client_supports("/window/showDocument/support")
    {
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
            while buffers.editor_text(&path).is_none() && tokio::time::Instant::now() < deadline {
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
    let open = buffers.editor_text(path);
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
async fn quote_selection(shared: &Arc<Shared>, selection: &Selection) -> Reply {
    let (path, quoted) = quote(shared, selection)?;
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
pub(super) async fn send(
    shared: &Arc<Shared>,
    argument: SendArgument,
    cancel: &CancellationToken,
) -> Reply {
    let path = path_of(&argument.uri)?;
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
    let line = match argument.position {
        Some(position) => position.line as usize,
        // No cursor: the last prompt of the document.
        None => text.lines().count().saturating_sub(1),
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

pub(super) fn turn_result(report: &TurnReport, document: Option<&Path>) -> Value {
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
        "plan": report.plan,
    })
}
