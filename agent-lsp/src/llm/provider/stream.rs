//! Assembling a streamed chat-completions answer into one [`Completion`].
//!
//! The OpenAI-compatible stream is a sequence of SSE `data:` chunks, each a JSON object whose
//! `choices[0].delta` carries a piece of `content`, `reasoning_content` (DeepSeek thinking
//! mode) or of a tool call. Tool calls arrive in fragments keyed by `index`: the first one
//! has `id` and `function.name`, later ones only more `function.arguments` text. Usage comes
//! from whichever chunk carries it (DeepSeek: a last chunk with empty `choices`; others: the
//! last choice chunk). This module is pure apart from the byte stream it reads, so it is
//! tested on recorded streams without a server.

mod chunk;
mod read;

use std::collections::BTreeMap;

use serde_json::Value;

use super::body::{MAX_ANSWER_BYTES, TOOL_CALL_OVERHEAD};
use super::error::{ProviderError, classify_inline_error};
use crate::llm::{AssistantMessage, ToolCallRef, Usage};
use chunk::{Chunk, ChunkChoice, ToolCallFragment, WholeAnswer};
pub(crate) use read::{BodyError, read_sse, with_idle_timeout};

/// A piece of the answer, handed to the caller as soon as it arrives (for progress display).
/// Empty pieces are never sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamDelta {
    /// A piece of the model's thinking (`reasoning_content`), shown apart from the answer.
    Reasoning(String),
    /// A piece of the answer's text.
    Text(String),
    /// The model began a tool call; its arguments follow but are not streamed piecewise.
    ToolCallStarted {
        /// The call's position among the answer's tool calls.
        index: u32,
        /// The call's id, which its result will name.
        id: String,
        /// The tool called, for "running …" progress before the arguments are complete.
        name: String,
    },
}

/// Token figures of one request, normalized across providers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UsageFigures {
    /// Tokens of the whole prompt, cached or not, as the endpoint counted them.
    pub prompt_tokens: u64,
    /// Tokens of the answer, reasoning included.
    pub completion_tokens: u64,
    /// Prompt tokens served from the prefix cache: DeepSeek's `prompt_cache_hit_tokens`, else
    /// OpenAI's `prompt_tokens_details.cached_tokens`, else 0.
    pub cache_read: u64,
    /// Uncached prompt tokens: `prompt_tokens - cache_read`.
    pub input: u64,
}

impl UsageFigures {
    /// The session's `usage` event for request number `index`.
    pub fn to_event(self, index: u64) -> Usage {
        Usage {
            index,
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.completion_tokens,
            cache_read: self.cache_read,
            input: self.input,
        }
    }
}

/// The whole answer of one model call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Completion {
    /// The answer's text, all pieces concatenated; empty when the model only called tools.
    pub text: String,
    /// `Some` only if the endpoint sent any reasoning; kept verbatim for reasoning passback.
    pub reasoning: Option<String>,
    /// In `index` order; `arguments` is the raw concatenated string, possibly invalid JSON.
    pub tool_calls: Vec<ToolCallRef>,
    /// The last `finish_reason` seen (`stop`, `tool_calls`, `length`, ...), if any.
    pub finish_reason: Option<String>,
    /// The request's token figures, if the endpoint reported any; not every
    /// OpenAI-compatible server does.
    pub usage: Option<UsageFigures>,
}

impl Completion {
    /// The session's `assistant/message` payload for this answer.
    pub fn assistant_message(&self) -> AssistantMessage {
        AssistantMessage {
            text: self.text.clone(),
            reasoning: self.reasoning.clone(),
            tool_calls: self.tool_calls.clone(),
        }
    }

    /// The session's `usage` event, if the endpoint reported usage. `request_index` is
    /// [`ModelRequest::index`](crate::llm::ModelRequest::index).
    pub fn usage_event(&self, request_index: u64) -> Option<Usage> {
        self.usage.map(|usage| usage.to_event(request_index))
    }
}

/// Whether the stream should go on after a chunk.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    Continue,
    Done,
}

/// Accumulates chunks into a [`Completion`], reporting deltas as they come.
#[derive(Debug)]
pub(crate) struct Assembler {
    completion: Completion,
    tool_calls: BTreeMap<u32, PartialToolCall>,
    /// Whether any delta was handed to the caller; a retry after that would duplicate them.
    pub(crate) delivered: bool,
    saw_done: bool,
    /// Bytes kept so far: text, reasoning, and each call's strings and overhead.
    kept: usize,
    /// Most bytes the answer may keep ([`MAX_ANSWER_BYTES`]); past it the answer is refused.
    limit: usize,
}

impl Default for Assembler {
    fn default() -> Self {
        Assembler::with_limit(MAX_ANSWER_BYTES)
    }
}

#[derive(Debug, Default)]
struct PartialToolCall {
    id: String,
    name: String,
    arguments: String,
    announced: bool,
}

impl Assembler {
    pub(crate) fn with_limit(limit: usize) -> Assembler {
        Assembler {
            completion: Completion::default(),
            tool_calls: BTreeMap::new(),
            delivered: false,
            saw_done: false,
            kept: 0,
            limit,
        }
    }

    /// Count `bytes` more against the limit, before they are kept.
    fn keep(&mut self, bytes: usize) -> Result<(), ProviderError> {
        self.kept = self.kept.saturating_add(bytes);
        if self.kept > self.limit {
            return Err(ProviderError::TooLarge {
                what: "of answer (text, reasoning and tool calls together)",
                limit: self.limit,
            });
        }
        Ok(())
    }

    /// Take one SSE `data:` payload.
    pub(crate) fn push_data(
        &mut self,
        data: &str,
        on_delta: &mut impl FnMut(StreamDelta),
    ) -> Result<Flow, ProviderError> {
        let data = data.trim();
        if data == "[DONE]" {
            self.saw_done = true;
            return Ok(Flow::Done);
        }
        if data.is_empty() {
            return Ok(Flow::Continue);
        }
        let value: Value = serde_json::from_str(data).map_err(|error| ProviderError::Protocol {
            message: format!("a stream chunk is not JSON ({error}): {}", preview(data)),
        })?;
        if let Some(error) = value.get("error").filter(|error| !error.is_null()) {
            return Err(classify_inline_error(error));
        }
        let chunk: Chunk =
            serde_json::from_value(value).map_err(|error| ProviderError::Protocol {
                message: format!(
                    "a stream chunk has an unexpected shape ({error}): {}",
                    preview(data)
                ),
            })?;
        self.push_chunk(chunk, on_delta)?;
        Ok(Flow::Continue)
    }

    /// Take a whole non-streamed answer (`choices[].message`), for servers that ignore
    /// `stream: true` and answer with one JSON object.
    pub(crate) fn push_whole_answer(
        &mut self,
        body: &[u8],
        on_delta: &mut impl FnMut(StreamDelta),
    ) -> Result<(), ProviderError> {
        let text = String::from_utf8_lossy(body);
        let value: Value =
            serde_json::from_str(&text).map_err(|error| ProviderError::Protocol {
                message: format!(
                    "the JSON answer does not parse ({error}): {}",
                    preview(&text)
                ),
            })?;
        if let Some(error) = value.get("error").filter(|error| !error.is_null()) {
            return Err(classify_inline_error(error));
        }
        let answer: WholeAnswer =
            serde_json::from_value(value).map_err(|error| ProviderError::Protocol {
                message: format!("the JSON answer has an unexpected shape ({error})"),
            })?;
        let chunk = Chunk {
            choices: Some(
                answer
                    .choices
                    .into_iter()
                    .map(|choice| ChunkChoice {
                        delta: choice.message,
                        finish_reason: choice.finish_reason,
                    })
                    .collect(),
            ),
            usage: answer.usage,
        };
        self.push_chunk(chunk, on_delta)?;
        self.saw_done = true;
        Ok(())
    }

    fn push_chunk(
        &mut self,
        chunk: Chunk,
        on_delta: &mut impl FnMut(StreamDelta),
    ) -> Result<(), ProviderError> {
        if let Some(usage) = chunk.usage {
            self.completion.usage = Some(usage.figures());
        }
        // Only the first choice is ours: requests never ask for `n > 1`.
        let Some(choice) = chunk.choices.into_iter().flatten().next() else {
            return Ok(());
        };
        if let Some(reason) = choice.finish_reason {
            self.completion.finish_reason = Some(reason);
        }
        let delta = choice.delta;
        // Some servers name the field `reasoning`; prefer DeepSeek's name when both appear.
        if let Some(reasoning) = delta.reasoning_content.or(delta.reasoning)
            && !reasoning.is_empty()
        {
            self.keep(reasoning.len())?;
            self.completion
                .reasoning
                .get_or_insert_with(String::new)
                .push_str(&reasoning);
            self.delivered = true;
            on_delta(StreamDelta::Reasoning(reasoning));
        }
        if let Some(text) = delta.content
            && !text.is_empty()
        {
            self.keep(text.len())?;
            self.completion.text.push_str(&text);
            self.delivered = true;
            on_delta(StreamDelta::Text(text));
        }
        for fragment in delta.tool_calls.unwrap_or_default() {
            self.push_tool_fragment(fragment, on_delta)?;
        }
        Ok(())
    }

    fn push_tool_fragment(
        &mut self,
        fragment: ToolCallFragment,
        on_delta: &mut impl FnMut(StreamDelta),
    ) -> Result<(), ProviderError> {
        let index = match fragment.index {
            Some(index) => index,
            // Without an index (non-streamed answers, a few servers), a new id starts a new
            // call and anything else continues the last one.
            None => {
                let last = self.tool_calls.last_key_value();
                match (&fragment.id, last) {
                    (Some(id), Some((_, call))) if !id.is_empty() && *id != call.id => {
                        self.tool_calls.len() as u32
                    }
                    (_, Some((index, _))) => *index,
                    (_, None) => 0,
                }
            }
        };
        // What this fragment adds, counted before anything of it is kept.
        let known = self.tool_calls.get(&index);
        let id = fragment
            .id
            .filter(|_| known.is_none_or(|call| call.id.is_empty()));
        let (name, arguments) = match fragment.function {
            Some(function) => (
                function
                    .name
                    .filter(|_| known.is_none_or(|call| call.name.is_empty())),
                function.arguments,
            ),
            None => (None, None),
        };
        let added = id.as_ref().map_or(0, String::len)
            + name.as_ref().map_or(0, String::len)
            + arguments.as_ref().map_or(0, String::len)
            + if known.is_none() {
                TOOL_CALL_OVERHEAD
            } else {
                0
            };
        self.keep(added)?;
        let call = self.tool_calls.entry(index).or_default();
        if let Some(id) = id {
            call.id = id;
        }
        if let Some(name) = name {
            call.name = name;
        }
        if let Some(arguments) = arguments {
            call.arguments.push_str(&arguments);
        }
        if !call.announced && !call.name.is_empty() {
            call.announced = true;
            self.delivered = true;
            on_delta(StreamDelta::ToolCallStarted {
                index,
                id: call.id.clone(),
                name: call.name.clone(),
            });
        }
        Ok(())
    }

    /// The assembled answer once the stream has ended. An end without `[DONE]` is accepted
    /// when a `finish_reason` arrived (the answer is complete); otherwise the answer was cut.
    pub(crate) fn finish(mut self) -> Result<Completion, ProviderError> {
        if !self.saw_done && self.completion.finish_reason.is_none() {
            return Err(ProviderError::Protocol {
                message: "the stream ended before the answer was finished (no finish_reason and no [DONE])"
                    .into(),
            });
        }
        for (index, call) in std::mem::take(&mut self.tool_calls) {
            if call.name.is_empty() {
                return Err(ProviderError::Protocol {
                    message: format!(
                        "tool call {index} ({}) never received a function name",
                        call.id
                    ),
                });
            }
            self.completion.tool_calls.push(ToolCallRef {
                id: call.id,
                name: call.name,
                arguments: call.arguments,
            });
        }
        Ok(self.completion)
    }
}

fn preview(text: &str) -> String {
    match text.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use tokio_util::sync::CancellationToken;

    use super::*;

    /// A DeepSeek thinking-mode answer as recorded on the wire: keep-alive comments while
    /// queued, reasoning, text, one tool call split over three fragments and a second call,
    /// `finish_reason` on the last choice chunk, usage in a final chunk with empty choices.
    const DEEPSEEK_STREAM: &str = concat!(
        ": keep-alive\n\n",
        ": keep-alive\n\n",
        "data: {\"id\":\"a1\",\"object\":\"chat.completion.chunk\",\"model\":\"deepseek-v4-flash\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"a1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":null,\"reasoning_content\":\"Need to \"},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"a1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":null,\"reasoning_content\":\"read é.\"},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"a1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Reading\",\"reasoning_content\":null},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"a1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_0\",\"type\":\"function\",\"function\":{\"name\":\"read\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n",
        ": keep-alive\n\n",
        "data: {\"id\":\"a1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"path\\\":\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"a1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"src/main.rs\\\"}\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"a1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"grep\",\"arguments\":\"{\\\"pattern\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"a1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"\\\":\\\"fn\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: {\"id\":\"a1\",\"choices\":[],\"usage\":{\"prompt_tokens\":1200,\"completion_tokens\":40,\"total_tokens\":1240,\"prompt_tokens_details\":{\"cached_tokens\":1024},\"prompt_cache_hit_tokens\":1024,\"prompt_cache_miss_tokens\":176}}\n\n",
        "data: [DONE]\n\n",
    );

    /// Feed `text` as a body cut into pieces of `piece` bytes (cutting through lines, JSON and
    /// multi-byte characters), collecting the deltas.
    fn run(text: &str, piece: usize) -> (Result<Completion, ProviderError>, Vec<StreamDelta>) {
        run_limited(text, piece, MAX_ANSWER_BYTES)
    }

    /// [`run`] with an answer of at most `limit` bytes.
    fn run_limited(
        text: &str,
        piece: usize,
        limit: usize,
    ) -> (Result<Completion, ProviderError>, Vec<StreamDelta>) {
        let pieces = text
            .as_bytes()
            .chunks(piece)
            .map(|bytes| Ok::<_, BodyError>(bytes.to_vec()))
            .collect::<Vec<_>>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let mut deltas = Vec::new();
        let result = runtime.block_on(async {
            let mut assembler = Assembler::with_limit(limit);
            let cancel = CancellationToken::new();
            read_sse(
                futures_util::stream::iter(pieces),
                &mut assembler,
                &cancel,
                &mut |delta| deltas.push(delta),
            )
            .await?;
            assembler.finish()
        });
        (result, deltas)
    }

    #[test]
    fn assembles_a_recorded_deepseek_stream() {
        for piece in [1, 7, 64, usize::MAX] {
            let (completion, deltas) = run(DEEPSEEK_STREAM, piece.min(DEEPSEEK_STREAM.len()));
            let completion = completion.unwrap();
            assert_eq!(completion.text, "Reading");
            assert_eq!(completion.reasoning.as_deref(), Some("Need to read é."));
            assert_eq!(completion.finish_reason.as_deref(), Some("tool_calls"));
            assert_eq!(
                completion.tool_calls,
                vec![
                    ToolCallRef {
                        id: "call_0".into(),
                        name: "read".into(),
                        arguments: r#"{"path":"src/main.rs"}"#.into(),
                    },
                    ToolCallRef {
                        id: "call_1".into(),
                        name: "grep".into(),
                        arguments: r#"{"pattern":"fn"}"#.into(),
                    },
                ]
            );
            assert_eq!(
                completion.usage,
                Some(UsageFigures {
                    prompt_tokens: 1200,
                    completion_tokens: 40,
                    cache_read: 1024,
                    input: 176,
                })
            );
            assert_eq!(
                deltas,
                vec![
                    StreamDelta::Reasoning("Need to ".into()),
                    StreamDelta::Reasoning("read é.".into()),
                    StreamDelta::Text("Reading".into()),
                    StreamDelta::ToolCallStarted {
                        index: 0,
                        id: "call_0".into(),
                        name: "read".into()
                    },
                    StreamDelta::ToolCallStarted {
                        index: 1,
                        id: "call_1".into(),
                        name: "grep".into()
                    },
                ]
            );
        }
    }

    #[test]
    fn an_answer_past_its_limit_is_refused_whatever_it_is_made_of() {
        let chunk = |delta: &str| format!("data: {{\"choices\":[{{\"delta\":{delta}}}]}}\n\n");
        let ten = |delta: &str| chunk(delta).repeat(10);
        let streams = [
            ten(r#"{"content":"0123456789"}"#),
            ten(r#"{"reasoning_content":"0123456789"}"#),
            chunk(r#"{"tool_calls":[{"index":0,"id":"c","function":{"name":"read"}}]}"#)
                + &ten(r#"{"tool_calls":[{"index":0,"function":{"arguments":"0123456789"}}]}"#),
            // Empty calls cost their overhead, so an endless run of them ends too.
            (0..10)
                .map(|index| chunk(&format!(r#"{{"tool_calls":[{{"index":{index}}}]}}"#)))
                .collect(),
        ];
        for stream in streams {
            let (result, _) = run_limited(&stream, 13, 90);
            assert_eq!(
                result,
                Err(ProviderError::TooLarge {
                    what: "of answer (text, reasoning and tool calls together)",
                    limit: 90
                }),
                "{stream}"
            );
            // Within the limit, the same answer is read (and ends with its missing finish).
            let (result, _) = run_limited(&stream, 13, 1000);
            assert!(
                matches!(result, Err(ProviderError::Protocol { .. })),
                "{result:?}"
            );
        }
        let message = ProviderError::TooLarge {
            what: "of answer (text, reasoning and tool calls together)",
            limit: MAX_ANSWER_BYTES,
        }
        .to_string();
        assert!(message.contains("more than 8 MiB of answer"), "{message}");
    }

    #[test]
    fn usage_on_the_last_choice_chunk_with_openai_cache_field() {
        let stream = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\r\n\r\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],",
            "\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":2,\"prompt_tokens_details\":{\"cached_tokens\":32}}}\r\n\r\n",
            "data:[DONE]\r\n\r\n",
        );
        let completion = run(stream, 5).0.unwrap();
        assert_eq!(completion.text, "hi");
        assert_eq!(completion.reasoning, None);
        assert_eq!(
            completion.usage,
            Some(UsageFigures {
                prompt_tokens: 50,
                completion_tokens: 2,
                cache_read: 32,
                input: 18,
            })
        );
        let usage = completion.usage_event(7).unwrap();
        assert_eq!((usage.index, usage.input, usage.cache_read), (7, 18, 32));
    }

    #[test]
    fn usage_without_cache_figures_counts_all_as_input() {
        let stream = "data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":1}}\n\n";
        let completion = run(stream, 1000).0.unwrap();
        assert_eq!(completion.usage.unwrap().input, 9);
        assert_eq!(completion.usage.unwrap().cache_read, 0);
    }

    #[test]
    fn cut_streams_and_garbage_are_protocol_errors() {
        let cut = "data: {\"choices\":[{\"delta\":{\"content\":\"par\"}}]}\n\n";
        assert!(matches!(run(cut, 8).0, Err(ProviderError::Protocol { .. })));

        let garbage = "data: {\"choices\":[{\"delta\"\n\n";
        let (result, _) = run(garbage, 100);
        let error = result.unwrap_err();
        assert!(matches!(error, ProviderError::Protocol { .. }), "{error:?}");
        assert!(error.to_string().contains("not JSON"), "{error}");
    }

    #[test]
    fn error_object_inside_the_stream() {
        let stream = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"error\":{\"message\":\"Server overloaded\",\"code\":503}}\n\n";
        assert!(matches!(
            run(stream, 100).0,
            Err(ProviderError::Overloaded { status: 503, .. })
        ));
    }

    #[test]
    fn whole_json_answer_is_accepted() {
        let body = br#"{"choices":[{"message":{"role":"assistant","content":"done","reasoning_content":"why","tool_calls":[{"id":"c9","type":"function","function":{"name":"read","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"prompt_cache_hit_tokens":0}}"#;
        let mut assembler = Assembler::default();
        let mut deltas = Vec::new();
        assembler
            .push_whole_answer(body, &mut |delta| deltas.push(delta))
            .unwrap();
        let completion = assembler.finish().unwrap();
        assert_eq!(completion.text, "done");
        assert_eq!(completion.reasoning.as_deref(), Some("why"));
        assert_eq!(completion.tool_calls[0].id, "c9");
        assert_eq!(deltas.len(), 3);
        let message = completion.assistant_message();
        assert_eq!(message.tool_calls, completion.tool_calls);
    }
}
