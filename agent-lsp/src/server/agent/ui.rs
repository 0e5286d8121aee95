//! What the programmer sees of a turn at the editor: permission questions, `$/progress`, and
//! the answer streaming into its prompt document.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::buffers::EditorBuffers;
use super::{AnswerTarget, Host, STREAM_EVERY};
use crate::agent::{AgentEvent, TurnUi};
use crate::llm::provider::StreamDelta;
use crate::server::Shared;
use crate::server::prompts::answer_heading;
use crate::session::event::ToolCallRef;
use crate::tools::Asker;

/// Permission questions (`ask` in the preset) go to the programmer as a
/// `window/showMessageRequest` with Allow / Deny; no answer (or an editor without the request)
/// means deny.
pub(super) struct EditorAsker {
    pub(super) shared: std::sync::Weak<Shared>,
}

impl Asker for EditorAsker {
    fn ask(&self, call: &ToolCallRef) -> futures_util::future::BoxFuture<'static, bool> {
        self.question(call, None)
    }

    fn ask_because(
        &self,
        call: &ToolCallRef,
        reason: &str,
    ) -> futures_util::future::BoxFuture<'static, bool> {
        self.question(call, Some(reason))
    }
}

impl EditorAsker {
    /// Ask about `call`, naming why it needs approval when the tool said (the arguments are
    /// cut short, so the reason comes first).
    fn question(
        &self,
        call: &ToolCallRef,
        reason: Option<&str>,
    ) -> futures_util::future::BoxFuture<'static, bool> {
        let shared = self.shared.clone();
        let arguments: String = call.arguments.chars().take(300).collect();
        let message = match reason {
            Some(reason) => format!(
                "agent-lsp: the agent wants to run `{}`, which needs your approval because {reason}. Arguments: {arguments}",
                call.name
            ),
            None => format!(
                "agent-lsp: the agent wants to run `{}` {arguments}",
                call.name
            ),
        };
        Box::pin(async move {
            let Some(shared) = shared.upgrade() else {
                return false;
            };
            let answer = shared
                .request_editor(
                    "window/showMessageRequest",
                    json!({"type": 3, "message": message, "actions": [{"title": "Allow"}, {"title": "Deny"}]}),
                )
                .await;
            matches!(answer, Ok(choice) if choice["title"] == "Allow")
        })
    }
}

/// A turn's `$/progress`, when the editor supports it.
#[derive(Clone)]
pub(super) struct Progress {
    pub(super) shared: Arc<Shared>,
    pub(super) token: Option<Value>,
}

impl Progress {
    pub(super) async fn begin(shared: &Arc<Shared>, host: &Host, title: &str) -> Progress {
        let token = create_token(shared, host, "turn").await;
        if let Some(token) = &token {
            if let Some(running) = &mut *host.running.lock().expect("running turn") {
                running.progress = Some(token.clone());
            }
            shared.notify_editor(
                "$/progress",
                json!({"token": token, "value": {"kind": "begin", "title": title, "cancellable": true, "message": "thinking"}}),
            );
        }
        Progress {
            shared: shared.clone(),
            token,
        }
    }

    pub(super) fn report(&self, message: &str) {
        if let Some(token) = &self.token {
            self.shared.notify_editor(
                "$/progress",
                json!({"token": token, "value": {"kind": "report", "message": message}}),
            );
        }
    }

    pub(super) fn end(&self, message: &str) {
        if let Some(token) = &self.token {
            self.shared.notify_editor(
                "$/progress",
                json!({"token": token, "value": {"kind": "end", "message": message}}),
            );
        }
    }
}

/// A new work-done token, `agent-lsp/{what}/{n}` (one count for the connection, so turns' and
/// entries' tokens never meet), created with `window/workDoneProgress/create`; `None` when the
/// editor did not advertise `window.workDoneProgress` or refused the token.
pub(super) async fn create_token(shared: &Arc<Shared>, host: &Host, what: &str) -> Option<Value> {
    if !shared.client_supports("/window/workDoneProgress") {
        return None;
    }
    let token = json!(format!(
        "agent-lsp/{what}/{}",
        host.next_progress.fetch_add(1, Ordering::Relaxed)
    ));
    shared
        .request_editor("window/workDoneProgress/create", json!({"token": token}))
        .await
        .is_ok()
        .then_some(token)
}

/// Show what the turn's loop-level hooks (`SessionStart`, `UserPromptSubmit`, `Stop`,
/// `PreCompact`: those recorded after `after`) have for the user, their failures and their
/// messages, as warnings: the tool hooks' are shown with their call ([`HostUi`]), and these
/// have no call to go with.
pub(super) fn show_hook_failures(
    shared: &Arc<Shared>,
    history: &crate::session::History,
    after: u64,
) {
    for event in history.events().iter().filter(|event| event.seq > after) {
        let crate::session::event::EventBody::HookRun(run) = &event.body else {
            continue;
        };
        if run.call_id.is_some() {
            continue;
        }
        if run.outcome == "failed" {
            shared.show_warning(&format!(
                "the {} hook `{}` failed: {}",
                run.event,
                run.command,
                run.reason.as_deref().unwrap_or("no reason given")
            ));
        }
        if let Some(message) = &run.message {
            shared.show_warning(&format!(
                "the {} hook `{}`: {message}",
                run.event, run.command
            ));
        }
    }
}

/// What the editor sees of a running turn: progress per step and tool, streamed text.
pub(super) struct HostUi {
    pub(super) progress: Progress,
    pub(super) deltas: Option<mpsc::UnboundedSender<String>>,
    pub(super) changed: Vec<String>,
    /// Whether the current step streamed text (a later step's text starts a new paragraph).
    pub(super) text_in_step: bool,
    /// The plan progress last reported, to report it again only when a `todo` call changed it.
    pub(super) plan: crate::plans::Watch,
}

impl TurnUi for HostUi {
    fn delta(&mut self, delta: &StreamDelta) {
        if let (StreamDelta::Text(text), Some(deltas)) = (delta, &self.deltas) {
            self.text_in_step = true;
            let _ = deltas.send(text.clone());
        }
    }

    fn event(&mut self, event: &AgentEvent<'_>) {
        match event {
            AgentEvent::PreStep { step, .. } => {
                if self.text_in_step
                    && let Some(deltas) = &self.deltas
                {
                    let _ = deltas.send("\n\n".into());
                }
                self.text_in_step = false;
                self.progress.report(&format!("step {step}: thinking"));
            }
            AgentEvent::ToolsBeforeCall { step, calls, .. } => {
                let names = ToolCallRef::names(calls);
                self.progress.report(&format!("step {step}: {names}"));
            }
            AgentEvent::ToolsAfterResult { outcome, .. } => {
                // What the user's hooks blocked or reported is theirs to see, not only the
                // model's.
                let meta = &outcome.output.meta;
                if let Some(reason) = meta.get("hook_blocked").and_then(Value::as_str) {
                    self.progress.shared.show_warning(&format!(
                        "a PreToolUse hook blocked `{}`: {reason}",
                        outcome.call.name
                    ));
                }
                for notice in meta
                    .get("hook_notices")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                {
                    self.progress.shared.show_warning(notice);
                }
                if let Some(plan) = self.plan.changed(outcome) {
                    self.progress.report(&format!("plan {}", plan.summary()));
                }
                let mutating = matches!(outcome.call.name.as_str(), "edit" | "write");
                if mutating
                    && !outcome.output.is_error
                    && let Some(source) = outcome.output.meta.get("source").and_then(Value::as_str)
                    && !self.changed.iter().any(|known| known == source)
                {
                    self.changed.push(source.to_owned());
                }
            }
            _ => {}
        }
    }
}

/// Streams an answer into its prompt document: the `## agent (turn N)` heading first, then the
/// text in batches, each inserted right after what was written before. The heading is found
/// again before every batch, so the programmer may edit elsewhere in the document meanwhile; if
/// the answer itself was edited, streaming stops there (the full answer is in the session).
///
/// The answer is always followed by a line break in the document (the writer adds one when the
/// answer ends the document), so every insertion lands on a line that exists: editors agree on
/// what an edit there means, and the document's text after each edit is the one computed here.
pub(super) struct AnswerWriter {
    pub(super) buffers: EditorBuffers,
    pub(super) target: AnswerTarget,
    pub(super) heading: String,
    /// Where the heading was when the writer last wrote: the same heading may be in the
    /// document more than once (each session of a chat document starts at turn 1), and the
    /// answer continues under the one nearest to here.
    pub(super) heading_at: usize,
    pub(super) written: String,
    /// Whether the document is open in the editor (else the answer goes to disk at the end).
    pub(super) open: bool,
    /// Whether the line break after the answer is the writer's own (the answer ends the
    /// document), which the closing `## you` then takes the place of.
    pub(super) own_line_break: bool,
    /// Why streaming stopped early, if it did.
    pub(super) broken: Option<String>,
    /// The answer's end, not written yet when the model finished: [`AnswerWriter::finish`]
    /// writes it with the closing.
    pub(super) unwritten: String,
}

impl AnswerWriter {
    pub(super) fn new(shared: &Arc<Shared>, target: AnswerTarget, turn: u32) -> AnswerWriter {
        let buffers = EditorBuffers::new(shared);
        let open = buffers.editor_text(&target.path).is_some();
        AnswerWriter {
            buffers,
            target,
            heading: answer_heading(turn),
            heading_at: 0,
            written: String::new(),
            open,
            own_line_break: false,
            broken: None,
            unwritten: String::new(),
        }
    }

    /// Write what arrives on `deltas`: at once when nothing was written for [`STREAM_EVERY`],
    /// else at most that often (a throttle, not a debounce: a model that never pauses still
    /// shows its answer growing). What arrives while an edit is under way waits for the next.
    pub(super) async fn run(mut self, mut deltas: mpsc::UnboundedReceiver<String>) -> AnswerWriter {
        if let Err(problem) = self.start().await {
            self.broken = Some(problem);
        }
        let mut pending = String::new();
        let mut last_flush: Option<tokio::time::Instant> = None;
        loop {
            let next = if pending.is_empty() {
                deltas.recv().await
            } else {
                let due = last_flush.map_or_else(tokio::time::Instant::now, |at| at + STREAM_EVERY);
                match tokio::time::timeout_at(due, deltas.recv()).await {
                    Ok(next) => next,
                    Err(_) => {
                        last_flush = Some(tokio::time::Instant::now());
                        self.flush(&mut pending).await;
                        continue;
                    }
                }
            };
            match next {
                Some(text) => pending.push_str(&text),
                None => break,
            }
        }
        // What came after the last edit goes in with the closing: one edit, and one wait for
        // the editor's `didChange`, fewer at the end of every turn.
        self.unwritten = pending;
        self
    }

    /// The text before the answer ends with a blank line, then the heading.
    pub(super) fn opening(text: &str, at: usize) -> &'static str {
        let before = &text[..at];
        if before.is_empty() || before.ends_with("\n\n") {
            ""
        } else if before.ends_with('\n') {
            "\n"
        } else {
            "\n\n"
        }
    }

    pub(super) async fn start(&mut self) -> Result<(), String> {
        if !self.open {
            return Ok(());
        }
        let text = self
            .buffers
            .editor_text(&self.target.path)
            .ok_or("the prompt document was closed")?;
        let at = self.target.insert_at.min(text.len());
        let opening = Self::opening(&text, at);
        self.heading_at = at + opening.len();
        let mut head = format!("{opening}{}", self.heading);
        if text[at..].is_empty() {
            head.push('\n');
            self.own_line_break = true;
        }
        let after = format!("{}{head}{}", &text[..at], &text[at..]);
        self.edit(&text, &after).await
    }

    pub(super) async fn flush(&mut self, pending: &mut String) {
        if pending.is_empty() || !self.open || self.broken.is_some() {
            if !self.open {
                self.written.push_str(pending);
            }
            pending.clear();
            return;
        }
        let text = std::mem::take(pending);
        match self.insert(&text).await {
            Ok(()) => self.written.push_str(&text),
            Err(problem) => {
                tracing::warn!("streaming into the prompt document stopped: {problem}");
                self.broken = Some(problem);
            }
        }
    }

    /// Insert `more` right after what was written so far, in the editor's current text.
    pub(super) async fn insert(&mut self, more: &str) -> Result<(), String> {
        let text = self
            .buffers
            .editor_text(&self.target.path)
            .ok_or("the prompt document was closed")?;
        let headings = text
            .match_indices(&self.heading)
            .map(|(at, _)| at)
            .collect::<Vec<_>>();
        if headings.is_empty() {
            return Err("the answer's heading was removed".into());
        }
        let heading = headings
            .into_iter()
            .filter(|at| text[at + self.heading.len()..].starts_with(&self.written))
            .min_by_key(|at| at.abs_diff(self.heading_at))
            .ok_or("the answer was edited while it streamed")?;
        self.heading_at = heading;
        let anchor = heading + self.heading.len();
        let at = anchor + self.written.len();
        let mut after = format!("{}{more}{}", &text[..at], &text[at..]);
        if text[at..].is_empty() {
            // The line break after the answer was taken away meanwhile: put it back.
            after.push('\n');
            self.own_line_break = true;
        }
        self.edit(&text, &after).await
    }

    /// One edit of the prompt document, without a label: an answer is many small edits, and
    /// an editor that shows labels (Neovim prints each) would print one line for each.
    pub(super) async fn edit(&self, before: &str, after: &str) -> Result<(), String> {
        self.buffers
            .apply(&self.target.path, before, after, None)
            .await
    }

    /// Close the answer: a final line break, the trailer, and a fresh `## you` at the end of
    /// the document. A document the editor does not have open is written on disk here.
    pub(super) async fn finish(mut self, trailer: &str) -> Result<(), String> {
        let mut closing = std::mem::take(&mut self.unwritten);
        let answer_end = if closing.is_empty() {
            &self.written
        } else {
            &closing
        };
        if !answer_end.is_empty() && !answer_end.ends_with('\n') {
            closing.push('\n');
        }
        closing.push_str(trailer);
        if self.target.at_end {
            closing.push_str("\n## you\n\n");
        }
        if !self.open {
            let path = &self.target.path;
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let at = self.target.insert_at.min(text.len());
            let answer = format!(
                "{}{}{}{closing}",
                Self::opening(&text, at),
                self.heading,
                self.written
            );
            let updated = format!("{}{answer}{}", &text[..at], &text[at..]);
            return crate::tools::fs::write_atomically(path, updated.as_bytes())
                .map_err(|error| format!("cannot write {}: {error}", path.display()));
        }
        if let Some(problem) = self.broken.take() {
            return Err(problem);
        }
        // The line break the writer put after the answer ends the closing instead.
        if self.own_line_break && closing.ends_with('\n') {
            closing.pop();
        }
        if closing.is_empty() {
            return Ok(());
        }
        self.insert(&closing).await?;
        self.written.push_str(&closing);
        Ok(())
    }
}
