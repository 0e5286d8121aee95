//! What `agent-lsp run` shows while a turn runs: one JSON object per line with `--json`, else
//! progress lines on stderr (a spinner beside the streaming answer on a terminal, plain lines on
//! a pipe), and the plan each time it changes.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::activity::{Activity, Entry, Kind};

use super::println_json;
use crate::agent::{AgentEvent, TurnUi};
use crate::llm::provider::StreamDelta;

/// Machine output: one JSON object per line.
pub(super) struct JsonUi {
    plan: crate::plans::Watch,
}

impl JsonUi {
    pub(super) fn new(plan: crate::plans::Watch) -> JsonUi {
        JsonUi { plan }
    }
}

impl TurnUi for JsonUi {
    fn delta(&mut self, delta: &StreamDelta) {
        let value = match delta {
            StreamDelta::Reasoning(text) => json!({"type": "reasoning", "text": text}),
            StreamDelta::Text(text) => json!({"type": "text", "text": text}),
            StreamDelta::ToolCallStarted { id, name, .. } => {
                json!({"type": "tool_call_started", "id": id, "name": name})
            }
        };
        println_json(&value);
    }

    fn event(&mut self, event: &AgentEvent<'_>) {
        match event {
            AgentEvent::ToolsBeforeCall { calls, .. } => {
                for call in *calls {
                    println_json(
                        &json!({"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}),
                    );
                }
            }
            AgentEvent::ToolsAfterResult { outcome, .. } => {
                println_json(&json!({
                    "type": "tool_result",
                    "id": outcome.call.id,
                    "is_error": outcome.output.is_error,
                    "text": outcome.output.text,
                }));
                if let Some(plan) = self.plan.changed(outcome) {
                    println_json(&json!({
                        "type": "plan",
                        "items": plan.items,
                        "done": plan.done(),
                        "open": plan.open().count(),
                    }));
                }
            }
            AgentEvent::PostStep {
                step, completion, ..
            } => println_json(&json!({
                "type": "step",
                "step": step,
                "finish_reason": completion.finish_reason,
                "usage": completion.usage.as_ref().map(|usage| json!({
                    "prompt_tokens": usage.prompt_tokens,
                    "completion_tokens": usage.completion_tokens,
                    "cache_read": usage.cache_read,
                })),
            })),
            AgentEvent::Compaction { outcome, .. } => {
                if let Some(line) = crate::compaction::describe_outcome(outcome) {
                    println_json(&json!({"type": "compaction", "message": line}));
                }
            }
            _ => {}
        }
    }
}

/// Human output: the answer on stdout; progress on stderr (a spinner on a terminal, plain
/// lines on a pipe), each progress line cut to one line of the terminal (or [`PIPE_WIDTH`]
/// columns on a pipe): a tool result's first line can be thousands of characters.
pub(super) struct TextUi {
    spinner: Option<indicatif::ProgressBar>,
    step: u32,
    width: usize,
    plan: crate::plans::Watch,
}

/// How wide progress lines are on a pipe (a log file, CI output), where no terminal says.
const PIPE_WIDTH: usize = 120;

impl TextUi {
    pub(super) fn new(terminal: bool, plan: crate::plans::Watch) -> TextUi {
        let spinner = terminal.then(|| {
            let spinner = indicatif::ProgressBar::new_spinner();
            spinner.enable_steady_tick(Duration::from_millis(120));
            spinner
        });
        let width = match console::Term::stderr().size_checked() {
            Some((_, columns)) if terminal => usize::from(columns),
            _ => PIPE_WIDTH,
        };
        TextUi {
            spinner,
            step: 0,
            width,
            plan,
        }
    }

    /// Where [`show_activity`] writes its lines (above the spinner on a terminal).
    pub(super) fn activity_out(&self) -> ActivityOut {
        ActivityOut::Text {
            spinner: self.spinner.clone(),
            width: self.width,
        }
    }

    /// `line` cut to `width` columns, with `…` where it was cut; a tab (the `read` tool's line
    /// numbers end in one) counts as the one space it is shown as here.
    fn fit(line: &str, width: usize) -> String {
        console::truncate_str(&line.replace('\t', " "), width, "…").into_owned()
    }

    fn status(&self, message: String) {
        match &self.spinner {
            // The spinner's own two columns come before the message.
            Some(spinner) => spinner.set_message(Self::fit(&message, self.width.saturating_sub(2))),
            None => eprintln!("{}", Self::fit(&format!("· {message}"), self.width)),
        }
    }

    /// One progress line above the spinner, or on its own on a pipe.
    fn progress_line(&self, line: &str) {
        let line = Self::fit(line, self.width);
        match &self.spinner {
            Some(spinner) => spinner.println(line),
            None => eprintln!("{line}"),
        }
    }

    #[allow(clippy::print_stdout)]
    fn print(&self, text: &str) {
        let write = || {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        };
        match &self.spinner {
            Some(spinner) => spinner.suspend(write),
            None => write(),
        }
    }
}

impl TurnUi for TextUi {
    fn delta(&mut self, delta: &StreamDelta) {
        match delta {
            StreamDelta::Reasoning(_) => {
                if let Some(spinner) = &self.spinner {
                    spinner.set_message(format!("step {} · thinking", self.step));
                }
            }
            StreamDelta::Text(text) => self.print(text),
            StreamDelta::ToolCallStarted { name, .. } => {
                self.status(format!("step {} · calling {name}", self.step))
            }
        }
    }

    fn event(&mut self, event: &AgentEvent<'_>) {
        match event {
            AgentEvent::PreStep { step, .. } => {
                self.step = *step;
                if self.spinner.is_some() {
                    self.status(format!("step {step} · waiting for the model"));
                }
            }
            AgentEvent::PostStep { completion, .. }
                if !completion.text.is_empty() && !completion.text.ends_with('\n') =>
            {
                self.print("\n");
            }
            AgentEvent::ToolsAfterResult { outcome, .. }
                if outcome.call.name == crate::plans::TOOL =>
            {
                // The plan instead of the list's JSON, which would fill the line: where it
                // stands when it changed, or what to fix.
                let line = match self.plan.changed(outcome) {
                    Some(plan) => format!("✓ todo → plan {}", plan.summary()),
                    None if outcome.output.is_error => format!(
                        "✗ todo → {}",
                        outcome.output.text.lines().next().unwrap_or_default()
                    ),
                    None => "✓ todo → plan unchanged".to_owned(),
                };
                self.progress_line(&line);
            }
            AgentEvent::ToolsAfterResult { outcome, .. } => {
                let first = outcome.output.text.lines().next().unwrap_or_default();
                let mark = if outcome.output.is_error {
                    "✗"
                } else {
                    "✓"
                };
                self.progress_line(&format!(
                    "{mark} {} {} → {}",
                    outcome.call.name, outcome.call.arguments, first
                ));
            }
            AgentEvent::SessionEnd { .. } => {
                if let Some(spinner) = &self.spinner {
                    spinner.finish_and_clear();
                }
            }
            AgentEvent::Compaction { outcome, .. } => {
                if let Some(line) = crate::compaction::describe_outcome(outcome) {
                    self.progress_line(&format!("agent-lsp: {line}"));
                }
            }
            _ => {}
        }
    }
}

/// How [`show_activity`] shows the board.
pub(super) enum ActivityOut {
    Json,
    Text {
        spinner: Option<indicatif::ProgressBar>,
        width: usize,
    },
}

/// Show the jobs and sub-agents of the run as they start and end, and each step of a
/// sub-agent, until the board goes away: a `task` call can take minutes, and its sub-agent's
/// steps are what shows that it works. One line per change: `↳ sub-agent explore: find the parser · step 3: read`, then its
/// outcome; with `--json`, `{"type": "activity", …the entry}`.
pub(super) async fn show_activity(board: Arc<Activity>, out: ActivityOut) {
    let mut changed = board.changed();
    let mut shown: HashMap<String, (String, Option<String>)> = HashMap::new();
    loop {
        for entry in board.list() {
            // A job's detail is its last output line, four times a second: only its start and
            // end are worth a line here (`job_output` has the rest).
            let detail = match entry.kind {
                Kind::Job => String::new(),
                Kind::Subagent | Kind::Server => entry.detail.clone(),
            };
            let state = (detail, entry.outcome.clone());
            if shown.get(&entry.id) == Some(&state) {
                continue;
            }
            shown.insert(entry.id.clone(), state);
            match &out {
                ActivityOut::Json => {
                    let mut value = serde_json::to_value(&entry).unwrap_or_default();
                    value["type"] = "activity".into();
                    println_json(&value);
                }
                ActivityOut::Text { spinner, width } => {
                    let line = TextUi::fit(&activity_line(&entry), *width);
                    match spinner {
                        Some(spinner) => spinner.println(line),
                        None => eprintln!("{line}"),
                    }
                }
            }
        }
        if changed.changed().await.is_err() {
            return;
        }
    }
}

fn activity_line(entry: &Entry) -> String {
    let state = match (&entry.outcome, entry.detail.is_empty()) {
        (Some(outcome), _) => format!(" → {outcome}"),
        (None, true) => " · started".to_owned(),
        (None, false) => format!(" · {}", entry.detail),
    };
    format!("↳ {} {}{state}", entry.kind.word(), entry.title)
}
