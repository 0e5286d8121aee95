//! `recall_history`: the model reads shadowed history back from the session log, verbatim.
//!
//! Compaction and pruning only change the surface; the originals stay in the log. This tool
//! finds them by compaction id (what a checkpoint replaced), event seq, tool call id, file path
//! (calls whose arguments name it, with their results) or turn/step range, and returns them as
//! text. Retrieval goes through the log file itself, never through memory the log does not back,
//! and what it returns is recorded as an ordinary `tool/result` (docs/architecture.md,
//! "The one rule").

use std::collections::BTreeSet;
use std::path::Path;

use futures_util::future::BoxFuture;
use serde::Deserialize;
use serde_json::Value;

use crate::plugin::outcomes::ToolOutput;
use crate::plugin::tool::ToolContext;
use crate::plugin::typed::TypedTool;
use crate::session::event::{Event, EventBody, SurfaceOp};
use crate::session::log::read_log;
use crate::tools::{blocking, cap_text};

/// The most text one call returns unless it asks for less (or more, up to the hard cap).
const DEFAULT_MAX_CHARS: usize = 20_000;
const MAX_MAX_CHARS: usize = 100_000;

/// The arguments of `recall_history`: one selector (with `session`, none or one).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallArgs {
    /// A sub-agent's session id, to read its log instead of this session's.
    // A child of this one, or of one of its children.
    session: Option<String>,
    /// The id of a <compacted-summary>, e.g. cmp-57.
    // The model reads this line as written (the summary's tag), so rustdoc is told it is no
    // HTML rather than the text being changed.
    #[allow(rustdoc::invalid_html_tags)]
    compaction_id: Option<String>,
    /// The seq of one event of the log.
    #[schemars(range(min = 1))]
    event_seq: Option<u64>,
    /// The id of a tool call, to read the call and its original result.
    tool_call_id: Option<String>,
    /// A workspace path as the tools were given it.
    path: Option<String>,
    /// A turn whose steps to read.
    turn: Option<u32>,
    /// With `turn`: the first step to read.
    step_from: Option<u32>,
    /// With `turn`: the last step to read.
    step_to: Option<u32>,
    /// Cap on the returned text (default 20000).
    #[schemars(range(min = 1000))]
    max_chars: Option<usize>,
}

// The doc comment of `RecallArgs::max_chars` is what the model reads; it states this number.
const _: () = assert!(DEFAULT_MAX_CHARS == 20_000);

/// The `recall_history` tool.
#[derive(Clone, Copy, Debug, Default)]
pub struct RecallHistory;

impl TypedTool for RecallHistory {
    type Args = RecallArgs;

    fn name(&self) -> &str {
        "recall_history"
    }

    fn description(&self) -> String {
        "Read earlier events of this session verbatim from its log: what a <compacted-summary> replaced (compaction_id), one event (event_seq), a tool call and its original result (tool_call_id, also for results shortened as old), every call whose arguments name a file and its results (path), or a turn's steps (turn, with optional step_from/step_to). Give exactly one of compaction_id, event_seq, tool_call_id, path, turn. With `session` (a sub-agent's session id, as a `task` result names it) the same is read from that sub-agent's log, and with no other selector its whole task.".into()
    }

    fn read_only(&self) -> bool {
        true
    }

    fn run(&self, ctx: ToolContext, args: RecallArgs) -> BoxFuture<'static, ToolOutput> {
        let path = ctx.session_path.clone();
        Box::pin(blocking(move || match path {
            Some(path) => match &args.session {
                Some(child) => match descendant_log(&path, child) {
                    Ok(child_path) => recall(&child_path, &args),
                    Err(output) => output,
                },
                None => recall(&path, &args),
            },
            None => ToolOutput::error(
                "recall_history needs a session log, and this call runs outside of a session",
            ),
        }))
    }
}

/// The log of sub-agent session `id` beside the session at `own`, when that session descends
/// from this one (its parent, or its parent's parent, … is `own`'s session): a session reads
/// only its own sub-agents, never a sibling's or an unrelated session's.
fn descendant_log(own: &Path, id: &str) -> Result<std::path::PathBuf, ToolOutput> {
    let refused = |why: &str| {
        Err(ToolOutput::error(format!(
            "cannot read session `{id}`: {why}"
        )))
    };
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return refused("not a session id (they look like 20261201-142233-9f3a)");
    }
    let (Some(dir), Some(own_id)) = (own.parent(), own.file_stem().and_then(|s| s.to_str())) else {
        return refused("this session's log has no folder");
    };
    let path = dir.join(format!("{id}.jsonl"));
    let mut at = id.to_owned();
    // Sub-agents nest at most a few levels; the bound keeps a hand-made loop of headers finite.
    for _ in 0..8 {
        let parent = match read_log(&dir.join(format!("{at}.jsonl"))) {
            Ok(read) => read.events.first().and_then(|event| match &event.body {
                EventBody::SessionHeader(header) => header.parent.clone(),
                _ => None,
            }),
            Err(_) if at == id => return refused("no such session in this workspace"),
            Err(_) => None,
        };
        match parent {
            Some(link) if link.session_id == own_id => return Ok(path),
            Some(link) => at = link.session_id,
            None => break,
        }
    }
    refused("it is not a sub-agent of this session")
}

fn recall(path: &Path, args: &RecallArgs) -> ToolOutput {
    let selectors = [
        args.compaction_id.is_some(),
        args.event_seq.is_some(),
        args.tool_call_id.is_some(),
        args.path.is_some(),
        args.turn.is_some(),
    ];
    let given = selectors.iter().filter(|given| **given).count();
    if given == 0 && args.session.is_some() {
        // A sub-agent's whole task: its one turn.
        let whole = RecallArgs {
            turn: Some(1),
            session: None,
            compaction_id: None,
            event_seq: None,
            tool_call_id: None,
            path: None,
            step_from: None,
            step_to: None,
            max_chars: args.max_chars,
        };
        return recall(path, &whole);
    }
    if given != 1 {
        return ToolOutput::error(
            "give exactly one of compaction_id, event_seq, tool_call_id, path or turn",
        );
    }
    let events = match read_log(path) {
        Ok(read) => read.events,
        Err(error) => {
            return ToolOutput::error(format!("could not read the session log: {error:#}"));
        }
    };
    let by_seq = |seq: u64| {
        events
            .binary_search_by_key(&seq, |event| event.seq)
            .ok()
            .map(|index| &events[index])
    };
    let (title, selected): (String, Vec<&Event>) = if let Some(id) = &args.compaction_id {
        let Some(start) = id
            .strip_prefix("cmp-")
            .and_then(|seq| seq.parse::<u64>().ok())
        else {
            return ToolOutput::error(format!(
                "`{id}` is not a compaction id; they look like cmp-57"
            ));
        };
        let checkpoint = events.iter().find(|event| {
            matches!(&event.body, EventBody::UserMessage(message) if message.origin == "compaction")
                && event.source_event_seqs.first() == Some(&start)
        });
        match checkpoint {
            Some(checkpoint) => (
                format!("what compaction {id} replaced"),
                checkpoint
                    .source_event_seqs
                    .iter()
                    .skip(2)
                    .filter_map(|seq| by_seq(*seq))
                    .collect(),
            ),
            None => {
                return ToolOutput::error(format!(
                    "compaction {id} did not commit a checkpoint in this session"
                ));
            }
        }
    } else if let Some(seq) = args.event_seq {
        match by_seq(seq) {
            Some(event) => (format!("event {seq}"), vec![event]),
            None => {
                return ToolOutput::error(format!(
                    "event {seq} does not exist (the log has {} events)",
                    events.len()
                ));
            }
        }
    } else if let Some(call_id) = &args.tool_call_id {
        let selected = call_events(&events, &BTreeSet::from([call_id.as_str()]));
        if selected.is_empty() {
            return ToolOutput::error(format!("no tool call `{call_id}` in this session"));
        }
        (format!("tool call {call_id}"), selected)
    } else if let Some(wanted) = &args.path {
        let ids = events
            .iter()
            .filter_map(|event| match &event.body {
                EventBody::ToolCall(call) if mentions_path(&call.arguments, wanted) => {
                    Some(call.call_id.as_str())
                }
                _ => None,
            })
            .collect::<BTreeSet<_>>();
        if ids.is_empty() {
            return ToolOutput::error(format!(
                "no tool call in this session names the path `{wanted}`"
            ));
        }
        (
            format!("tool calls naming {wanted}"),
            call_events(&events, &ids),
        )
    } else {
        let turn = args.turn.expect("one selector is set");
        let from = args.step_from.unwrap_or(0);
        let to = args.step_to.unwrap_or(u32::MAX);
        let selected = events
            .iter()
            .filter(|event| {
                event.turn == turn
                    && (from..=to).contains(&event.step)
                    && event.kind().carries_content()
                    && !is_replacement(event)
            })
            .collect::<Vec<_>>();
        if selected.is_empty() {
            return ToolOutput::error(format!(
                "turn {turn} has no messages in steps {from}..={to}"
            ));
        }
        (
            format!("turn {turn}, steps {from}..={}", to.min(9999)),
            selected,
        )
    };

    let mut text = format!("recall_history: {title}, {} events\n", selected.len());
    for event in &selected {
        text.push('\n');
        render(event, &mut text);
    }
    let max = args
        .max_chars
        .unwrap_or(DEFAULT_MAX_CHARS)
        .clamp(1000, MAX_MAX_CHARS);
    let (text, truncated) = cap_text(&text, max);
    ToolOutput::ok(text)
        .with_meta("recalled_events", selected.len())
        .with_meta("recall_truncated", truncated)
}

/// Whether an event only stands in for another on the surface (a pruned result).
fn is_replacement(event: &Event) -> bool {
    event.kind() == crate::session::event::EventKind::ToolResult
        && matches!(event.surface_op, Some(SurfaceOp::Replace { .. }))
}

/// The assistant messages carrying these calls and the original results answering them.
fn call_events<'a>(events: &'a [Event], ids: &BTreeSet<&str>) -> Vec<&'a Event> {
    events
        .iter()
        .filter(|event| match &event.body {
            EventBody::AssistantMessage(message) => message
                .tool_calls
                .iter()
                .any(|call| ids.contains(call.id.as_str())),
            EventBody::ToolResult(result) => {
                ids.contains(result.call_id.as_str()) && !is_replacement(event)
            }
            _ => false,
        })
        .collect()
}

/// Whether a call's raw arguments name `path` as one of their string values (or contain it, for
/// arguments that are not JSON).
fn mentions_path(arguments: &str, path: &str) -> bool {
    let wanted = path.trim_start_matches("./");
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(map)) => map.values().any(|value| {
            value
                .as_str()
                .is_some_and(|text| text.trim_start_matches("./") == wanted)
        }),
        _ => arguments.contains(wanted),
    }
}

fn render(event: &Event, out: &mut String) {
    let head = format!(
        "--- event {} · turn {} step {} · {}",
        event.seq,
        event.turn,
        event.step,
        event.kind()
    );
    out.push_str(&head);
    match &event.body {
        EventBody::UserMessage(message) => {
            out.push_str(&format!(" ({}) ---\n{}\n", message.origin, message.text));
        }
        EventBody::RuntimeContext(context) => {
            out.push_str(&format!(" ---\n{}\n", context.text));
        }
        EventBody::AssistantMessage(message) => {
            out.push_str(" ---\n");
            if let Some(reasoning) = message.reasoning.as_deref().filter(|r| !r.is_empty()) {
                out.push_str(&format!("[reasoning]\n{reasoning}\n[/reasoning]\n"));
            }
            if !message.text.is_empty() {
                out.push_str(&message.text);
                out.push('\n');
            }
            for call in &message.tool_calls {
                out.push_str(&format!(
                    "→ call {} {} {}\n",
                    call.id, call.name, call.arguments
                ));
            }
        }
        EventBody::ToolResult(result) => {
            out.push_str(&format!(
                " {} (call {}) ---\n{}\n",
                result.name, result.call_id, result.text
            ));
        }
        _ => {
            out.push_str(&format!(" ---\n{}\n", event.payload_json()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Session;
    use crate::session::event::{ParentLink, SessionHeader};
    use crate::session::log::Durability;

    fn session(dir: &Path, id: &str, parent: Option<&str>) -> std::path::PathBuf {
        let mut header = SessionHeader::for_test(id, "explore");
        header.parent = parent.map(|parent| ParentLink {
            session_id: parent.into(),
            call_id: "call-1".into(),
            agent_type: "explore".into(),
            depth: 1,
        });
        let path = dir.join(format!("{id}.jsonl"));
        Session::create(&path, header, Durability::Sync).unwrap();
        path
    }

    /// A session reads its children's and grandchildren's logs, and nothing else by id.
    #[test]
    fn only_descendants_are_read_by_session_id() {
        let dir = tempfile::tempdir().unwrap();
        let own = session(dir.path(), "p", None);
        let child = session(dir.path(), "c", Some("p"));
        let grandchild = session(dir.path(), "g", Some("c"));
        session(dir.path(), "u", Some("x"));
        session(dir.path(), "x", None);
        assert_eq!(descendant_log(&own, "c").unwrap(), child);
        assert_eq!(descendant_log(&own, "g").unwrap(), grandchild);
        let refused = |id: &str| descendant_log(&own, id).unwrap_err().text;
        assert!(refused("u").contains("not a sub-agent of this session"));
        assert!(refused("x").contains("not a sub-agent of this session"));
        assert!(refused("p").contains("not a sub-agent of this session"));
        assert!(refused("nope").contains("no such session"));
        for hostile in ["../p", "c/../p", "/etc/passwd", "", "c.jsonl"] {
            assert!(refused(hostile).contains("not a session id"), "{hostile}");
        }
        // From a child, its parent is out of reach.
        assert!(descendant_log(&child, "p").is_err());
    }
}
