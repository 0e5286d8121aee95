//! The summary: what the summarizer is given, the fixed template, and the framed checkpoint.
//!
//! The summary request replays the current request prefix verbatim — the system prompt, the tool
//! catalog, and the surface messages up to the end of the folded range, exactly as the last
//! request sent them — and appends the compaction instruction as the last user message. The
//! provider has that prefix cached from the step before, so the summary call costs little more
//! than its instruction and its answer (docs/architecture.md, "Context assembly and the prefix
//! cache").
//!
//! [`Summarizer`] is the hook a preset swaps without touching the engine: pressure measurement,
//! range choice, the shrink check and the commit stay in [`super::basic`].
//!
//! The checkpoint ([`frame_checkpoint`]) is framed here, not by the summarizer: besides the
//! summary it names what it replaced, and it carries the session's goal (`plans::goal`) copied
//! byte for byte from the log, so the goal survives every compaction whatever the summary says.

use std::sync::Arc;

use anyhow::Context;
use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::{CompactionContext, CompactionSettings};
use crate::llm::provider::Provider;
use crate::llm::{Message, ModelRequest};
use crate::plans::GoalSource;
use crate::session::History;
use crate::session::event::{EventBody, Usage};

/// The template's sections, in order. The checkpoint always has these headings.
pub const SECTIONS: [&str; 8] = [
    "Primary Request and Intent",
    "Key Technical Concepts",
    "Files and Code",
    "Errors and Fixes",
    "Pending Tasks",
    "Current Work",
    "Next Step",
    "Critical Context",
];

/// The first line of the instruction; the loopback endpoint's scripts recognise summary calls
/// by it.
pub const INSTRUCTION_MARKER: &str = "<compaction-request>";

/// The instruction appended after the replayed prefix.
pub fn instruction() -> String {
    let mut text = format!(
        "{INSTRUCTION_MARKER}\n\
         Stop working on the task for a moment. The conversation so far is about to be replaced by \
         a summary, written by you now, from which you will continue the work without seeing the \
         original messages again. Write that summary with exactly these Markdown sections, in \
         this order, and nothing before or after them:\n"
    );
    for section in SECTIONS {
        text.push_str("## ");
        text.push_str(section);
        text.push('\n');
    }
    text.push_str(
        "Be specific: keep file paths, function and symbol names, exact error messages, \
         commands, decisions and the user's own words where they matter. Under Files and Code, \
         list every file read or changed and why it matters. If the conversation starts with an \
         earlier <compacted-summary>, carry its content forward into yours. Do not call tools.\n\
         </compaction-request>",
    );
    text
}

/// What a summarizer gets.
#[derive(Clone, Debug)]
pub struct SummaryInput {
    /// The compaction this summary is for, as its events name it.
    pub compaction_id: String,
    /// The prefix replayed verbatim plus the instruction, ready to send.
    pub request: ModelRequest,
    /// Index in `request.messages` of the first message of the folded range (the messages
    /// before it were already on the surface in front of the range; usually none).
    pub range_first: usize,
}

impl SummaryInput {
    /// The messages being folded.
    pub fn shadowed(&self) -> &[Message] {
        let end = self.request.messages.len() - 1;
        &self.request.messages[self.range_first..end]
    }
}

/// A summary and what it cost.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// The summary, in the template's sections, stripped of any tags the model wrapped it in.
    pub text: String,
    /// What the provider reported for the summary call; `None` for a summarizer that calls no
    /// model.
    pub usage: Option<Usage>,
}

/// Turns the folded history into the template's text. Implementations must be cheap to share:
/// a background candidate calls one from a spawned task.
pub trait Summarizer: Send + Sync {
    /// Recorded in `compaction/summary`.
    fn name(&self) -> &'static str;
    /// Summarize the folded messages of `input`; `cancel` stops a call in flight (the turn was
    /// cancelled, or the candidate went stale).
    fn summarize(
        &self,
        input: SummaryInput,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, anyhow::Result<Summary>>;
}

/// The summarizer a compaction setting names.
pub fn summarizer_for(settings: &CompactionSettings, provider: &Provider) -> Arc<dyn Summarizer> {
    match settings.summarizer.as_str() {
        "template" => Arc::new(TemplateSummarizer),
        _ => Arc::new(LlmSummarizer {
            provider: provider.clone(),
        }),
    }
}

/// Build the summary input from `prefix`, the surface messages up to and including the last
/// one folded; `range_first` is the index in `prefix` of the first one folded.
pub fn build_summary_input(
    compaction_id: &str,
    ctx: &CompactionContext,
    summary_max_tokens: u32,
    mut prefix: Vec<Message>,
    range_first: usize,
) -> SummaryInput {
    prefix.push(Message::User {
        text: instruction(),
    });
    let mut params = ctx.params.clone();
    // Only the answer's length changes; it is not part of the cached prompt.
    params.max_tokens = Some(summary_max_tokens);
    SummaryInput {
        compaction_id: compaction_id.to_owned(),
        request: ModelRequest {
            // Not a request of the loop: it gets no `request/header` and no index.
            index: 0,
            model: ctx.model.clone(),
            params,
            system: ctx.prompt.system.clone(),
            tools: ctx.prompt.tools.clone(),
            messages: prefix,
        },
        range_first,
    }
}

/// The checkpoint text the model sees in place of the folded range: what it replaces and how to
/// recall it, the tool calls it folded, the session's goal verbatim when the fold takes it off
/// the surface, and the summary.
pub fn frame_checkpoint(
    history: &History,
    compaction_id: &str,
    shadowed_seqs: &[u64],
    summary: &str,
) -> String {
    const MAX_LISTED_CALLS: usize = 30;
    let mut calls = Vec::new();
    for seq in shadowed_seqs {
        if let Some(EventBody::AssistantMessage(message)) = history.event(*seq).map(|e| &e.body) {
            for call in &message.tool_calls {
                calls.push(format!(
                    "{} {} {}",
                    call.id,
                    call.name,
                    one_line(&call.arguments, 60)
                ));
            }
        }
    }
    let first = shadowed_seqs.first().copied().unwrap_or_default();
    let last = shadowed_seqs.last().copied().unwrap_or_default();
    let mut text = format!(
        "<compacted-summary id=\"{compaction_id}\">\n\
         Earlier history of this session was compacted into the summary below. It replaces log \
         events {first}–{last} ({} messages). The originals are kept in the session log: call \
         `recall_history` with {{\"compaction_id\": \"{compaction_id}\"}}, an `event_seq`, a \
         `tool_call_id` or a `path` to read them verbatim.\n",
        shadowed_seqs.len()
    );
    if let Some(goal) = carried_goal(history, shadowed_seqs) {
        text.push_str(&goal);
    }
    if !calls.is_empty() {
        text.push_str("Tool calls replaced (id, tool, arguments):\n");
        for call in calls.iter().take(MAX_LISTED_CALLS) {
            text.push_str("- ");
            text.push_str(call);
            text.push('\n');
        }
        if calls.len() > MAX_LISTED_CALLS {
            text.push_str(&format!(
                "- … and {} more (recall them by compaction_id)\n",
                calls.len() - MAX_LISTED_CALLS
            ));
        }
    }
    text.push('\n');
    text.push_str(summary.trim());
    text.push_str("\n</compacted-summary>");
    text
}

/// The session's goal, copied verbatim from the log (never from the model's summary, which may
/// paraphrase it), when this fold takes it off the surface: the goal is what the model must
/// never lose, however many compactions there are. Each checkpoint folds the one before, so
/// every checkpoint carries it again. A goal set with `agent.goal.set` lives only in the log,
/// so it is always carried; a first prompt only when it is not on the surface outside the
/// folded range.
fn carried_goal(history: &History, shadowed_seqs: &[u64]) -> Option<String> {
    let goal = crate::plans::goal(history)?;
    let (what, carry) = match goal.source {
        GoalSource::Prompt => (
            "its first prompt",
            shadowed_seqs.contains(&goal.seq) || !history.surface().contains(goal.seq),
        ),
        GoalSource::Set => ("set by the programmer", true),
    };
    carry.then(|| {
        format!(
            "The session's goal ({what}), verbatim:\n{GOAL_OPEN}\n{}\n{GOAL_CLOSE}\n",
            goal.text
        )
    })
}

/// The tags around the goal a checkpoint carries.
pub const GOAL_OPEN: &str = "<goal>";
/// See [`GOAL_OPEN`].
pub const GOAL_CLOSE: &str = "</goal>";

fn one_line(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

/// Strip what a model may wrap its summary in, and check it is not empty.
fn clean_summary(text: &str) -> anyhow::Result<String> {
    let text = text
        .trim()
        .trim_start_matches("<compacted-summary>")
        .trim_end_matches("</compacted-summary>")
        .trim();
    anyhow::ensure!(!text.is_empty(), "the summary call returned no text");
    Ok(text.to_owned())
}

/// Summarizes with the session's model, replaying the cached prefix.
#[derive(Clone, Debug)]
pub struct LlmSummarizer {
    /// The session's provider: the same endpoint and model, so the cached prefix is hit.
    pub provider: Provider,
}

impl Summarizer for LlmSummarizer {
    fn name(&self) -> &'static str {
        "llm"
    }

    fn summarize(
        &self,
        input: SummaryInput,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, anyhow::Result<Summary>> {
        let provider = self.provider.clone();
        Box::pin(async move {
            let completion = provider
                .stream(&input.request, &cancel, |_| {})
                .await
                .with_context(|| format!("the summary call of {} failed", input.compaction_id))?;
            anyhow::ensure!(
                completion.tool_calls.is_empty(),
                "the summary call answered with tool calls instead of a summary"
            );
            Ok(Summary {
                text: clean_summary(&completion.text)?,
                usage: completion.usage_event(0),
            })
        })
    }
}

/// Summarizes without a model: the template filled mechanically from the folded messages (the
/// prompts verbatim, the files the tools touched, the failed results, the last answer). Less
/// understanding than a model's summary, but free, deterministic and offline.
#[derive(Clone, Copy, Debug, Default)]
pub struct TemplateSummarizer;

impl Summarizer for TemplateSummarizer {
    fn name(&self) -> &'static str {
        "template"
    }

    fn summarize(
        &self,
        input: SummaryInput,
        _cancel: CancellationToken,
    ) -> BoxFuture<'static, anyhow::Result<Summary>> {
        let text = template_summary(input.shadowed());
        Box::pin(async move {
            Ok(Summary {
                text: clean_summary(&text)?,
                usage: None,
            })
        })
    }
}

fn template_summary(messages: &[Message]) -> String {
    let mut prompts = Vec::new();
    let mut files = std::collections::BTreeSet::new();
    let mut errors = Vec::new();
    let mut last_answer = String::new();
    for message in messages {
        match message {
            Message::User { text } if !text.starts_with("<runtime-context>") => {
                prompts.push(one_line(text, 400));
            }
            Message::User { .. } => {}
            Message::Assistant {
                text, tool_calls, ..
            } => {
                if !text.trim().is_empty() {
                    last_answer = one_line(text, 400);
                }
                for call in tool_calls {
                    if let Ok(serde_json::Value::Object(args)) =
                        serde_json::from_str::<serde_json::Value>(&call.arguments)
                        && let Some(path) = args.get("path").and_then(|path| path.as_str())
                    {
                        files.insert(format!("{path} ({})", call.name));
                    }
                }
            }
            Message::Tool { call_id, text } if text.starts_with("error:") => {
                errors.push(format!("{call_id}: {}", one_line(text, 200)));
            }
            Message::Tool { .. } => {}
        }
    }
    let list = |items: Vec<String>| {
        if items.is_empty() {
            "(none)".to_owned()
        } else {
            items
                .iter()
                .map(|item| format!("- {item}"))
                .collect::<Vec<_>>()
                .join("\n")
        }
    };
    let body = [
        list(prompts),
        "(not extracted by the template summarizer)".to_owned(),
        list(files.into_iter().collect()),
        list(errors),
        "(see the most recent messages)".to_owned(),
        if last_answer.is_empty() {
            "(none)".to_owned()
        } else {
            last_answer
        },
        "Continue from the most recent messages.".to_owned(),
        "Recall the originals with `recall_history` when details matter.".to_owned(),
    ];
    SECTIONS
        .iter()
        .zip(body)
        .map(|(section, body)| format!("## {section}\n{body}\n"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_instruction_and_the_template_name_every_section_in_order() {
        let instruction = instruction();
        let template = template_summary(&[Message::User {
            text: "fix the parser".into(),
        }]);
        let mut at = (0, 0);
        for section in SECTIONS {
            let heading = format!("## {section}\n");
            let i = instruction[at.0..].find(&heading).unwrap() + at.0;
            let t = template[at.1..].find(&heading).unwrap() + at.1;
            at = (i, t);
        }
        assert!(template.contains("- fix the parser"), "{template}");
    }

    #[test]
    fn a_checkpoint_carries_the_goal_verbatim_when_the_fold_takes_it_away() {
        use crate::session::event::{SessionHeader, UserMessage};
        use crate::session::log::Durability;
        use crate::session::{NewEvent, Session};

        let dir = tempfile::tempdir().unwrap();
        let header = SessionHeader::for_test("s", "standard");
        let mut session =
            Session::create(&dir.path().join("s.jsonl"), header, Durability::Sync).unwrap();
        let goal = "Make `parse()` accept trailing commas,\n  and keep   the old errors. ✓";
        for text in [goal, "And the tests."] {
            session
                .append(NewEvent::new(
                    1,
                    0,
                    EventBody::UserMessage(UserMessage {
                        text: text.into(),
                        origin: "prompt".into(),
                    }),
                ))
                .unwrap();
        }
        let carried = |session: &Session, seqs: &[u64]| {
            frame_checkpoint(session.history(), "cmp-9", seqs, "## A\nx")
        };
        let expected =
            format!("The session's goal (its first prompt), verbatim:\n<goal>\n{goal}\n</goal>\n");
        assert!(carried(&session, &[2, 3]).contains(&expected));
        // A fold that leaves the first prompt on the surface does not repeat it.
        assert!(!carried(&session, &[3]).contains("<goal>"));
        // A goal that was set is only in the log: every checkpoint carries it.
        crate::plans::set_goal(&mut session, "Trailing commas everywhere", "editor").unwrap();
        assert!(carried(&session, &[3]).contains(
            "The session's goal (set by the programmer), verbatim:\n<goal>\nTrailing commas everywhere\n</goal>\n"
        ));
    }

    #[test]
    fn an_empty_summary_is_an_error() {
        assert!(clean_summary("  <compacted-summary> </compacted-summary>").is_err());
        assert_eq!(clean_summary(" ## A\nx ").unwrap(), "## A\nx");
    }
}
