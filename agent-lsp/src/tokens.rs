//! A fast token estimate, calibrated by what the provider reports.
//!
//! The estimate walks the text once and weighs each character by class, in thousandths of a
//! token, from how BPE tokenizers of the DeepSeek/OpenAI families split text:
//! - ASCII letters and digits: 0.25 (English averages about four characters a token);
//! - ASCII punctuation and symbols: 0.5 (code is dense in `(){}[];:->`, often one token each
//!   or merged in pairs, so code estimates higher than prose of the same length);
//! - spaces and tabs: 0.1 (mostly merged into the following word; indentation runs merge);
//! - newlines: 0.5;
//! - CJK ideographs, kana and hangul: 0.6 (DeepSeek documents about 0.6 tokens per Chinese
//!   character);
//! - any other character: 1.0 (accented letters, emoji and other scripts split into byte
//!   pieces; erring high keeps pressure checks conservative).
//!
//! Each message adds 4 tokens of framing. The [`TokenMeter`] multiplies the raw estimate by a
//! ratio learnt from `usage.prompt_tokens` of earlier requests (an exponential moving average of
//! reported / estimated, clamped to 0.5..=3), recoverable from the log.

use crate::llm::{Message, ModelRequest};
use crate::session::History;
use crate::session::event::EventBody;

const PER_MESSAGE: u64 = 4;

/// Raw estimate of the tokens in `text`, before calibration.
pub fn estimate_text(text: &str) -> u64 {
    text.chars().map(char_milli).sum::<u64>().div_ceil(1000)
}

/// One character's weight, in thousandths of a token.
fn char_milli(ch: char) -> u64 {
    match ch {
        'a'..='z' | 'A'..='Z' | '0'..='9' => 250,
        ' ' | '\t' => 100,
        '\n' | '\r' => 500,
        c if c.is_ascii() => 500,
        c if is_cjk(c) => 600,
        _ => 1000,
    }
}

/// The head and the tail of `text` that keep about `head` and `tail` tokens of it (by
/// [`estimate_text`]'s weights, split at character boundaries), or `None` when the whole text
/// is no longer than `head + tail` tokens. What lies between them is what a cut removes; the
/// caller says so in a marker of its own.
pub fn cut_middle(text: &str, head: u64, tail: u64) -> Option<(&str, &str)> {
    if estimate_text(text) <= head + tail {
        return None;
    }
    let prefix_end = |budget: u64, chars: &mut dyn Iterator<Item = (usize, char)>| {
        let mut milli = 0;
        for (at, ch) in chars {
            milli += char_milli(ch);
            if milli > budget * 1000 {
                return Some(at);
            }
        }
        None
    };
    let head_end = prefix_end(head, &mut text.char_indices()).unwrap_or(text.len());
    // Walking back from the end, the tail starts after the first character that no longer fits.
    let tail_start = prefix_end(tail, &mut text.char_indices().rev()).map_or(0, |at| {
        at + text[at..].chars().next().map_or(0, char::len_utf8)
    });
    let tail_start = tail_start.max(head_end);
    Some((&text[..head_end], &text[tail_start..]))
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // hiragana, katakana
        | 0x3400..=0x4DBF    // CJK extension A
        | 0x4E00..=0x9FFF    // CJK unified ideographs
        | 0xAC00..=0xD7AF    // hangul syllables
        | 0xF900..=0xFAFF    // CJK compatibility ideographs
        | 0x3000..=0x303F    // CJK punctuation
        | 0xFF00..=0xFFEF    // full-width forms
        | 0x20000..=0x2FA1F) // CJK extensions B–F
}

/// Raw estimate of one message, framing included.
pub fn estimate_message(message: &Message) -> u64 {
    PER_MESSAGE
        + match message {
            Message::User { text } => estimate_text(text),
            Message::Tool { call_id, text } => estimate_text(call_id) + estimate_text(text),
            Message::Assistant {
                text,
                reasoning,
                tool_calls,
            } => {
                estimate_text(text)
                    + reasoning.as_deref().map_or(0, estimate_text)
                    + tool_calls
                        .iter()
                        .map(|call| {
                            PER_MESSAGE + estimate_text(&call.name) + estimate_text(&call.arguments)
                        })
                        .sum::<u64>()
            }
        }
}

/// Raw estimate of a whole request: system prompt, tool catalog and messages.
pub fn estimate_request(request: &ModelRequest) -> u64 {
    let tools = crate::llm::catalog_json(&request.tools);
    PER_MESSAGE
        + estimate_text(&request.system)
        + estimate_text(&tools)
        + request.messages.iter().map(estimate_message).sum::<u64>()
}

/// Estimates calibrated by the provider's reported prompt tokens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenMeter {
    ratio: f64,
}

impl Default for TokenMeter {
    fn default() -> Self {
        TokenMeter { ratio: 1.0 }
    }
}

impl TokenMeter {
    /// A meter calibrated from every (estimate, reported) pair in the log.
    pub fn recover(history: &History) -> TokenMeter {
        let mut meter = TokenMeter::default();
        let mut estimates = std::collections::HashMap::new();
        for event in history.events() {
            match &event.body {
                EventBody::RequestContext(context) => {
                    estimates.insert(context.index, context.estimated_tokens);
                }
                EventBody::Usage(usage) => {
                    if let Some(estimate) = estimates.get(&usage.index) {
                        meter.calibrate(*estimate, usage.prompt_tokens);
                    }
                }
                _ => {}
            }
        }
        meter
    }

    /// Learn from one request whose raw estimate was `estimated` and whose reported prompt size
    /// was `reported`.
    pub fn calibrate(&mut self, estimated: u64, reported: u64) {
        if estimated == 0 || reported == 0 {
            return;
        }
        let observed = reported as f64 / estimated as f64;
        self.ratio = (0.5 * self.ratio + 0.5 * observed).clamp(0.5, 3.0);
    }

    /// Calibrated estimate from a raw one.
    pub fn calibrated(&self, raw: u64) -> u64 {
        (raw as f64 * self.ratio).ceil() as u64
    }
}

/// The most estimated tokens one message may hold in a session whose model has a context
/// window of `context_window` tokens: a quarter, so no one message (a tool result, a pasted
/// file) can crowd out the rest of a request.
pub fn message_budget(context_window: u64) -> u64 {
    (context_window / 4).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_weigh_as_documented() {
        assert_eq!(estimate_text(""), 0);
        assert_eq!(estimate_text("abcdefgh"), 2);
        assert_eq!(estimate_text("你好世界你好世界你好"), 6);
        // Code costs more than prose of the same length.
        assert!(estimate_text("fn f(x:&[u8])->{}") > estimate_text("the quick brown f"));
        assert_eq!(estimate_text("éé"), 2);
    }

    #[test]
    fn cut_middle_keeps_a_head_and_a_tail_of_the_asked_tokens() {
        assert_eq!(cut_middle("abcdefgh", 1, 1), None);
        let (head, tail) = cut_middle("abcdefghijklmnop", 1, 1).unwrap();
        assert_eq!((head, tail), ("abcd", "mnop"));
        // Characters are never split, and weights count, not bytes.
        let text = format!("{}{}{}", "é".repeat(3), "x".repeat(40), "ü".repeat(3));
        let (head, tail) = cut_middle(&text, 3, 3).unwrap();
        assert_eq!((head, tail), ("ééé", "üüü"));
        assert_eq!(cut_middle(&"é".repeat(10), 0, 0), Some(("", "")));
    }

    #[test]
    fn calibration_moves_toward_reported_and_is_clamped() {
        let mut meter = TokenMeter::default();
        meter.calibrate(100, 200);
        assert_eq!(meter.ratio, 1.5);
        meter.calibrate(100, 200);
        assert_eq!(meter.ratio, 1.75);
        assert_eq!(meter.calibrated(100), 175);
        for _ in 0..20 {
            meter.calibrate(1, 1000);
        }
        assert_eq!(meter.ratio, 3.0);
        meter.calibrate(0, 5);
        assert_eq!(meter.ratio, 3.0);
    }
}
