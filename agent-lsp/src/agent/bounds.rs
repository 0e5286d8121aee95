//! What one message may bring into the session: the size of a message and the number of tool
//! calls of a step, decided here and nowhere else.
//!
//! The session log is append-only and every request is derived from it, so whatever enters it
//! is sent again with every later request until a compaction folds it. A message larger than the
//! window can never be sent, and one that fills most of it leaves the compaction nothing to fold
//! into (it keeps the recent steps verbatim), so one oversized prompt or answer would end the
//! session. The bound is a share of the context window rather than a fixed size because the
//! window is what runs out: [`message_budget`] is a quarter of it, which leaves room for the
//! system prompt, the tool catalog, the answer and the recent steps a compaction keeps.
//!
//! - A prompt over the budget is refused before anything is written: the programmer still has
//!   the text where they typed it (the shell, the prompt document) and is told to put the long
//!   part in a file and mention it.
//! - An answer over the budget is cut: its text, its reasoning and its calls' arguments are
//!   shortened to head and tail with a marker in the middle, the largest first, until the whole
//!   message fits. Reasoning is passed back verbatim in thinking mode, but one too large to fit
//!   cannot be passed back at all, and the API asks for its presence, not its length: a cut
//!   reasoning keeps the session going where the verbatim one would end it. A call whose
//!   arguments were cut is not run (it would run with the marker in its arguments); it gets an
//!   error result saying why.
//! - Only the first `model.max_tool_calls_per_step` calls of an answer are kept and run. The
//!   others are dropped from the recorded message, and its text says so and lists some of
//!   them. They are not kept with an error result each, because a runaway answer's calls and
//!   results are what overflows the window: ten thousand calls with a short error result each
//!   cost over half a million tokens in every later request.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::llm::provider::Completion;
use crate::session::event::ToolCallRef;
use crate::tokens::{cut_middle, estimate_text};

/// How many of the dropped calls the note in the answer lists by name and arguments.
const LISTED_DROPPED_CALLS: usize = 8;

/// Room a cut marker takes, in tokens (it names the sizes and the budget).
const MARKER_TOKENS: u64 = 64;

pub use crate::tokens::message_budget;

/// A prompt refused for its size: the front end's fault to report as bad input, not as the
/// agent failing.
#[derive(Debug)]
pub struct PromptTooLong(String);

impl std::fmt::Display for PromptTooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PromptTooLong {}

/// The bounds of one session's messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageBounds {
    /// The model's context window in tokens.
    pub context_window: u64,
    /// Estimated tokens one message may hold: [`message_budget`] of the window.
    pub max_message_tokens: u64,
    /// Tool calls of one answer that are kept and run.
    pub max_tool_calls: usize,
}

/// An answer as it enters the session, and the calls of it that must not run.
#[derive(Clone, Debug, PartialEq)]
pub struct BoundedAnswer {
    pub completion: Completion,
    /// Call id → why the call is not run (its arguments were cut).
    pub not_run: BTreeMap<String, String>,
    /// Calls dropped from the answer because it made more than the step allows.
    pub dropped_calls: usize,
    /// Whether any text, reasoning or arguments were cut.
    pub cut: bool,
}

impl MessageBounds {
    pub fn new(context_window: u64, max_tool_calls_per_step: u32) -> MessageBounds {
        MessageBounds {
            context_window,
            max_message_tokens: message_budget(context_window),
            max_tool_calls: max_tool_calls_per_step.max(1) as usize,
        }
    }

    /// Refuse a prompt that is larger than one message may be. Nothing has been written when
    /// this fails, so the error says the text is still where the programmer typed it. The
    /// error is a [`PromptTooLong`], which a front end can tell from its other failures.
    pub fn check_prompt(&self, text: &str) -> anyhow::Result<()> {
        let tokens = estimate_text(text);
        if tokens <= self.max_message_tokens {
            return Ok(());
        }
        Err(anyhow::Error::new(PromptTooLong(format!(
            "the prompt is too long: about {tokens} tokens ({} bytes), and one message may hold \
             about {} tokens, a quarter of the model's {}-token context window. Nothing was sent \
             or recorded, and your text is still where you typed it (the prompt document or the \
             shell): put the long part in a file and mention it with @path, and the agent reads \
             what it needs of it",
            text.len(),
            self.max_message_tokens,
            self.context_window
        ))))
    }

    /// The answer as it may enter the session: at most `max_tool_calls` calls, and no more than
    /// `max_message_tokens` in all.
    pub fn bound_answer(&self, mut completion: Completion) -> BoundedAnswer {
        let mut notes = Vec::new();
        let dropped = completion
            .tool_calls
            .split_off(self.max_tool_calls.min(completion.tool_calls.len()));
        if !dropped.is_empty() {
            tracing::warn!(
                made = self.max_tool_calls + dropped.len(),
                kept = self.max_tool_calls,
                "an answer made more tool calls than a step may run; the rest are dropped"
            );
            notes.push(dropped_note(self.max_tool_calls, &dropped));
        }
        let notes_tokens: u64 = notes.iter().map(|note| estimate_text(note)).sum();
        let (cut, not_run) = self.cut_to_budget(&mut completion, notes_tokens);
        for note in notes {
            if !completion.text.is_empty() && !completion.text.ends_with('\n') {
                completion.text.push('\n');
            }
            completion.text.push_str(&note);
        }
        BoundedAnswer {
            completion,
            not_run,
            dropped_calls: dropped.len(),
            cut,
        }
    }

    /// Cut the largest of the text, the reasoning and the calls' arguments until the answer
    /// fits the budget with `reserved` tokens to spare. Returns whether anything was cut, and
    /// the calls that must not run because their arguments were.
    fn cut_to_budget(
        &self,
        completion: &mut Completion,
        reserved: u64,
    ) -> (bool, BTreeMap<String, String>) {
        let mut pieces: Vec<&mut String> = Vec::new();
        let mut calls_overhead = 0;
        pieces.push(&mut completion.text);
        if let Some(reasoning) = completion.reasoning.as_mut() {
            pieces.push(reasoning);
        }
        let first_call = pieces.len();
        for call in &mut completion.tool_calls {
            calls_overhead += 4 + estimate_text(&call.name) + estimate_text(&call.id);
            pieces.push(&mut call.arguments);
        }
        let sizes = pieces
            .iter()
            .map(|piece| estimate_text(piece))
            .collect::<Vec<_>>();
        let room = self
            .max_message_tokens
            .saturating_sub(reserved + calls_overhead);
        if sizes.iter().sum::<u64>() <= room {
            return (false, BTreeMap::new());
        }
        let level = fill_level(&sizes, room);
        let mut cut_calls = Vec::new();
        for (index, (piece, size)) in pieces.into_iter().zip(&sizes).enumerate() {
            if *size <= level {
                continue;
            }
            let what = match index {
                0 => "text",
                _ if index < first_call => "reasoning",
                _ => "call's arguments",
            };
            let keep = level.saturating_sub(MARKER_TOKENS);
            *piece = self.cut(piece, keep, *size, what);
            if index >= first_call {
                cut_calls.push((index - first_call, *size));
            }
        }
        tracing::warn!(
            budget = self.max_message_tokens,
            "an answer was larger than one message may be and was cut"
        );
        let not_run = cut_calls
            .into_iter()
            .map(|(index, size)| {
                let call = &completion.tool_calls[index];
                let reason = format!(
                    "not run: the arguments of this `{}` call were about {size} tokens, more than \
                     one message may hold (about {} tokens, a quarter of the context window), so \
                     they were cut before it could run; make it again with smaller arguments \
                     (write a large file in parts: `write` a first part, then `edit` to add the \
                     rest)",
                    call.name, self.max_message_tokens
                );
                (call.id.clone(), reason)
            })
            .collect();
        (true, not_run)
    }

    /// `text` (about `size` tokens) as its head and tail of `keep` tokens in all, with a marker
    /// between them saying what was cut and why.
    fn cut(&self, text: &str, keep: u64, size: u64, what: &str) -> String {
        let (head, tail) = cut_middle(text, keep - keep / 3, keep / 3).unwrap_or((text, ""));
        let cut_bytes = text.len() - head.len() - tail.len();
        format!(
            "{head}\n[… agent-lsp cut {cut_bytes} of {} bytes (about {size} tokens) from the middle \
             of this {what}: one message may hold about {} tokens, a quarter of the model's \
             {}-token context window …]\n{tail}",
            text.len(),
            self.max_message_tokens,
            self.context_window
        )
    }
}

/// The largest `level` such that the pieces, each cut to at most `level`, fit in `room`: the
/// largest pieces are cut first and to the same size, the small ones stay whole.
fn fill_level(sizes: &[u64], room: u64) -> u64 {
    let mut sorted = sizes.to_vec();
    sorted.sort_unstable();
    let mut left = room;
    for (index, size) in sorted.iter().enumerate() {
        let share = left / (sorted.len() - index) as u64;
        if *size > share {
            return share;
        }
        left -= size;
    }
    u64::MAX
}

/// The note an answer's text gets when calls were dropped from it.
fn dropped_note(kept: usize, dropped: &[ToolCallRef]) -> String {
    let mut note = format!(
        "[agent-lsp: this answer made {} tool calls and a step runs at most {kept} (the preset's \
         model.max_tool_calls_per_step): the first {kept} ran, and the other {} were dropped from \
         it without running:",
        kept + dropped.len(),
        dropped.len()
    );
    for call in dropped.iter().take(LISTED_DROPPED_CALLS) {
        let arguments = match cut_middle(&call.arguments, 24, 0) {
            Some((head, _)) => format!("{head}…"),
            None => call.arguments.clone(),
        };
        let _ = write!(note, " `{}` {arguments};", call.name);
    }
    if dropped.len() > LISTED_DROPPED_CALLS {
        let _ = write!(note, " and {} more;", dropped.len() - LISTED_DROPPED_CALLS);
    }
    note.push_str(" make the ones still needed in the next steps.]");
    note
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(index: usize, arguments: &str) -> ToolCallRef {
        ToolCallRef {
            id: format!("c{index}"),
            name: "read".into(),
            arguments: arguments.into(),
        }
    }

    fn answer(text: &str, reasoning: Option<&str>, calls: Vec<ToolCallRef>) -> Completion {
        Completion {
            text: text.into(),
            reasoning: reasoning.map(Into::into),
            tool_calls: calls,
            ..Completion::default()
        }
    }

    fn size(completion: &Completion) -> u64 {
        estimate_text(&completion.text)
            + completion.reasoning.as_deref().map_or(0, estimate_text)
            + completion
                .tool_calls
                .iter()
                .map(|call| 4 + estimate_text(&call.name) + estimate_text(&call.id))
                .sum::<u64>()
            + completion
                .tool_calls
                .iter()
                .map(|call| estimate_text(&call.arguments))
                .sum::<u64>()
    }

    #[test]
    fn the_budget_is_a_quarter_of_the_window() {
        assert_eq!(message_budget(128_000), 32_000);
        assert_eq!(MessageBounds::new(32_000, 32).max_message_tokens, 8_000);
        assert_eq!(message_budget(0), 1);
    }

    #[test]
    fn a_prompt_over_the_budget_is_refused_and_told_where_its_text_is() {
        let bounds = MessageBounds::new(400, 32);
        bounds.check_prompt(&"x".repeat(400)).unwrap();
        let error = bounds.check_prompt(&"x".repeat(404)).unwrap_err();
        let message = format!("{error:#}");
        assert!(
            message.contains("about 101 tokens (404 bytes)"),
            "{message}"
        );
        assert!(message.contains("about 100 tokens"), "{message}");
        assert!(message.contains("still where you typed it"), "{message}");
        assert!(message.contains("@path"), "{message}");
    }

    #[test]
    fn an_answer_within_the_bounds_is_kept_as_it_came() {
        let bounds = MessageBounds::new(128_000, 32);
        let completion = answer(
            "text",
            Some("thinking"),
            (0..32).map(|i| call(i, "{}")).collect(),
        );
        let bounded = bounds.bound_answer(completion.clone());
        assert_eq!(bounded.completion, completion);
        assert!(bounded.not_run.is_empty() && !bounded.cut);
        assert_eq!(bounded.dropped_calls, 0);
    }

    #[test]
    fn calls_beyond_the_cap_are_dropped_and_the_text_says_which() {
        let bounds = MessageBounds::new(128_000, 3);
        let calls = (0..10_000)
            .map(|i| call(i, &format!("{{\"path\":\"f{i}\"}}")))
            .collect();
        let bounded = bounds.bound_answer(answer("", None, calls));
        let kept = &bounded.completion.tool_calls;
        assert_eq!(
            kept.iter().map(|call| call.id.as_str()).collect::<Vec<_>>(),
            ["c0", "c1", "c2"]
        );
        assert_eq!(bounded.dropped_calls, 9_997);
        assert!(bounded.not_run.is_empty());
        let text = &bounded.completion.text;
        assert!(
            text.starts_with(
                "[agent-lsp: this answer made 10000 tool calls and a step runs at most 3"
            ),
            "{text}"
        );
        assert!(text.contains(r#"`read` {"path":"f3"};"#), "{text}");
        assert!(text.contains(r#"`read` {"path":"f10"};"#), "{text}");
        assert!(!text.contains(r#""f11""#), "{text}");
        assert!(text.contains("and 9989 more;"), "{text}");
        assert!(text.len() < 1_000, "{text}");
    }

    #[test]
    fn an_oversized_answer_is_cut_largest_first_to_the_budget() {
        let bounds = MessageBounds::new(40_000, 32);
        let huge = "x".repeat(20 << 20);
        let completion = answer(
            &huge,
            Some(&"r".repeat(8_000)),
            vec![call(0, r#"{"path":"a"}"#), call(1, &huge)],
        );
        let bounded = bounds.bound_answer(completion);
        assert!(bounded.cut);
        let completion = &bounded.completion;
        assert!(size(completion) <= 10_000, "{}", size(completion));
        // The small pieces stay whole; the two huge ones are cut to the same size.
        assert_eq!(
            completion.reasoning.as_deref(),
            Some("r".repeat(8_000).as_str())
        );
        assert_eq!(completion.tool_calls[0].arguments, r#"{"path":"a"}"#);
        for piece in [&completion.text, &completion.tool_calls[1].arguments] {
            assert!(piece.starts_with("xxxx"), "{}", &piece[..100]);
            assert!(piece.ends_with("xxxx"));
            assert!(
                piece.contains("[… agent-lsp cut ") && piece.contains("of 20971520 bytes"),
                "{}",
                &piece[..2000]
            );
        }
        assert!(completion.text.contains("from the middle of this text"));
        // The call with cut arguments must not run; the other one does.
        assert_eq!(bounded.not_run.keys().collect::<Vec<_>>(), ["c1"]);
        assert!(bounded.not_run["c1"].contains("were about 5242880 tokens"));
    }

    #[test]
    fn oversized_reasoning_is_cut_but_kept() {
        let bounds = MessageBounds::new(4_000, 32);
        let bounded = bounds.bound_answer(answer(
            "done",
            Some(&"r".repeat(100_000)),
            vec![call(0, "{}")],
        ));
        let reasoning = bounded.completion.reasoning.as_deref().unwrap();
        assert!(reasoning.starts_with("rrrr") && reasoning.ends_with("rrrr"));
        assert!(reasoning.contains("from the middle of this reasoning"));
        assert!(size(&bounded.completion) <= 1_000);
        assert_eq!(bounded.completion.text, "done");
        assert!(bounded.not_run.is_empty());
    }

    #[test]
    fn fill_level_cuts_only_what_does_not_fit() {
        assert_eq!(fill_level(&[1, 2, 3], 10), u64::MAX);
        assert_eq!(fill_level(&[10, 100, 1000], 110), 50);
        assert_eq!(fill_level(&[5, 5], 4), 2);
    }
}
