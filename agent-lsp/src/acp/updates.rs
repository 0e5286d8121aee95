//! What a client is shown of a session: each event of the log as ACP `session/update`s. The
//! one mapping serves a live turn (the events its log gains, read as they are appended) and
//! `session/load` (the whole log), so a loaded session shows what the live one showed.
//!
//! Live, the model's text and thinking went out as they streamed, so an `assistant/message`
//! adds nothing, and the user's own prompt is the client's to show; loaded, both come from the
//! log. Everything else is the same either way: a `tool/call` is a `tool_call` (pending), its
//! `tool/result` a `tool_call_update` (completed or failed, with the result's text), a call
//! made inside another (`run_code`'s, a sub-agent's) a tool call of its own whose `_meta`
//! names its parent, a successful `todo` the `plan`, and `usage` a `usage_update`.

use std::path::Path;

use agent_client_protocol::v1::schema::{
    Content, ContentBlock, ContentChunk, Diff, Meta, Plan, PlanEntry, PlanEntryPriority,
    PlanEntryStatus, SessionUpdate, TextContent, ToolCall, ToolCallContent, ToolCallLocation,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind, UsageUpdate,
};
use serde_json::{Value, json};

use crate::session::event::{Event, EventBody};

/// How much of a tool's result a client is shown: results are capped for the model already,
/// but a client needs no more than a screen or two of it.
const SHOWN_RESULT_BYTES: usize = 16 * 1024;

/// Whether the updates are for a turn as it runs or for a session being loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reading {
    /// A running turn: the text streamed already, the prompt is the client's own.
    Live,
    /// `session/load`: everything from the log.
    Load,
}

/// Where the calls of a log belong: the top-level session's, or inside the call `parent` of
/// the session that started this one (a sub-agent's log).
#[derive(Clone, Debug, Default)]
pub(super) struct Nesting {
    /// The call of the parent session this log's calls are nested in.
    pub parent: Option<String>,
}

impl Nesting {
    /// The id a call of this log has for the client: unique across the logs shown.
    pub(super) fn id(&self, call_id: &str) -> String {
        match &self.parent {
            Some(parent) => inside(parent, call_id),
            None => call_id.to_owned(),
        }
    }

    fn meta(&self, parent: Option<&str>) -> Option<Meta> {
        let parent = parent.map(str::to_owned).or_else(|| self.parent.clone())?;
        let mut meta = Meta::new();
        meta.insert("agent-lsp".into(), json!({ "parentToolCallId": parent }));
        Some(meta)
    }
}

/// The client's id of the call `call_id` made inside the call `parent` (a program's call, a
/// sub-agent's): unique, and naming where it belongs.
pub(super) fn inside(parent: &str, call_id: &str) -> String {
    format!("{parent}/{call_id}")
}

/// The updates `event` makes, for a session of `workspace` (tool locations are absolute).
pub(super) fn of_event(
    event: &Event,
    workspace: &Path,
    reading: Reading,
    nesting: &Nesting,
) -> Vec<SessionUpdate> {
    let top = nesting.parent.is_none();
    match &event.body {
        EventBody::UserMessage(message)
            if reading == Reading::Load && top && message.origin == "prompt" =>
        {
            vec![SessionUpdate::UserMessageChunk(text_chunk(&message.text))]
        }
        EventBody::AssistantMessage(message) if reading == Reading::Load && top => {
            let mut updates = Vec::new();
            if let Some(reasoning) = message.reasoning.as_deref().filter(|r| !r.is_empty()) {
                updates.push(SessionUpdate::AgentThoughtChunk(text_chunk(reasoning)));
            }
            if !message.text.is_empty() {
                updates.push(SessionUpdate::AgentMessageChunk(text_chunk(&message.text)));
            }
            updates
        }
        EventBody::ToolCall(call) => vec![SessionUpdate::ToolCall(tool_call(
            &nesting.id(&call.call_id),
            &call.name,
            &call.arguments,
            workspace,
            nesting.meta(None),
        ))],
        EventBody::SubtoolCall(call) => vec![SessionUpdate::ToolCall(tool_call(
            &nesting.id(&inside(&call.parent_call_id, &call.call_id)),
            &call.name,
            &call.arguments,
            workspace,
            nesting.meta(Some(&nesting.id(&call.parent_call_id))),
        ))],
        EventBody::ToolResult(result) => {
            let mut updates = vec![SessionUpdate::ToolCallUpdate(finished(
                &nesting.id(&result.call_id),
                &result.text,
                &result.meta,
                workspace,
            ))];
            if top && let Some((_, plan)) = crate::plans::plan_of(event) {
                updates.push(SessionUpdate::Plan(plan_update(&plan)));
            }
            updates
        }
        EventBody::SubtoolResult(result) => vec![SessionUpdate::ToolCallUpdate(finished(
            &nesting.id(&inside(&result.parent_call_id, &result.call_id)),
            &result.text,
            &result.meta,
            workspace,
        ))],
        _ => Vec::new(),
    }
}

/// The `usage_update` after a model request: the context it filled of `window`, and in
/// `_meta` the request's prompt tokens and the share of them the provider's cache served
/// (the protocol's update has no field for it, and a prompt-cache hit rate is what keeps a
/// long session cheap).
pub(super) fn usage(usage: &crate::llm::Usage, window: u64) -> SessionUpdate {
    let mut meta = Meta::new();
    meta.insert(
        "agent-lsp".into(),
        json!({
            "promptTokens": usage.prompt_tokens,
            "completionTokens": usage.completion_tokens,
            "cacheReadTokens": usage.cache_read,
        }),
    );
    SessionUpdate::UsageUpdate(
        UsageUpdate::new(usage.prompt_tokens + usage.completion_tokens, window).meta(meta),
    )
}

/// A piece of text as a message chunk.
pub(super) fn text_chunk(text: &str) -> ContentChunk {
    ContentChunk::new(ContentBlock::Text(TextContent::new(text)))
}

/// The plan as ACP shows one: every item, in order, with its status.
pub(super) fn plan_update(plan: &crate::plans::Plan) -> Plan {
    use crate::plans::Status;
    Plan::new(
        plan.items
            .iter()
            .map(|item| {
                let status = match item.status {
                    Status::Pending => PlanEntryStatus::Pending,
                    Status::InProgress => PlanEntryStatus::InProgress,
                    Status::Done => PlanEntryStatus::Completed,
                };
                PlanEntry::new(item.text.clone(), PlanEntryPriority::Medium, status)
            })
            .collect(),
    )
}

/// A call as the client first sees it: pending, with what it is about.
pub(super) fn tool_call(
    id: &str,
    name: &str,
    arguments: &str,
    workspace: &Path,
    meta: Option<Meta>,
) -> ToolCall {
    let args: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
    let about = About::of(name, &args, workspace);
    ToolCall::new(id.to_owned(), about.title)
        .kind(about.kind)
        .status(ToolCallStatus::Pending)
        .locations(about.locations)
        .content(about.content)
        .raw_input(args)
        .meta(meta)
}

/// How a call ended: its result's text, failed when the result says it is an error, and the
/// place it names (`meta.source`, `meta.line`: where an edit landed), so the editor can follow.
fn finished(id: &str, text: &str, meta: &Value, workspace: &Path) -> ToolCallUpdate {
    let failed = meta.get("is_error").and_then(Value::as_bool) == Some(true);
    let mut shown = text.to_owned();
    if shown.len() > SHOWN_RESULT_BYTES {
        let mut cut = SHOWN_RESULT_BYTES;
        while !shown.is_char_boundary(cut) {
            cut -= 1;
        }
        shown.truncate(cut);
        shown.push_str("\n…");
    }
    let place = meta.get("source").and_then(Value::as_str).map(|source| {
        let line = meta
            .get("line")
            .and_then(Value::as_u64)
            .and_then(|line| u32::try_from(line).ok());
        vec![ToolCallLocation::new(workspace.join(source)).line(line)]
    });
    ToolCallUpdate::new(
        id.to_owned(),
        ToolCallUpdateFields::new()
            .locations(place)
            .status(if failed {
                ToolCallStatus::Failed
            } else {
                ToolCallStatus::Completed
            })
            .content(vec![ToolCallContent::Content(Content::new(
                ContentBlock::Text(TextContent::new(shown)),
            ))]),
    )
}

/// What a client is told a call is about: a title, a kind, the places it touches (so the
/// editor can follow along) and, for a change, its diff.
struct About {
    title: String,
    kind: ToolKind,
    locations: Vec<ToolCallLocation>,
    content: Vec<ToolCallContent>,
}

impl About {
    fn of(name: &str, args: &Value, workspace: &Path) -> About {
        let text = |key: &str| args.get(key).and_then(Value::as_str);
        let path = text("path").map(|path| workspace.join(path));
        let line = args
            .get("line")
            .or_else(|| args.get("offset"))
            .and_then(Value::as_u64)
            .and_then(|line| u32::try_from(line).ok());
        let at = || {
            path.iter()
                .map(|path| ToolCallLocation::new(path.clone()).line(line))
                .collect::<Vec<_>>()
        };
        let shown = text("path").unwrap_or(".");
        let mut about = About {
            title: name.to_owned(),
            kind: ToolKind::Other,
            locations: Vec::new(),
            content: Vec::new(),
        };
        match name {
            "read" => {
                about.title = format!("Read {shown}");
                about.kind = ToolKind::Read;
                about.locations = at();
            }
            "list" => {
                about.title = format!("List {shown}");
                about.kind = ToolKind::Read;
                about.locations = at();
            }
            "glob" | "grep" => {
                let pattern = text("pattern").unwrap_or_default();
                about.title = format!(
                    "{} {pattern}",
                    if name == "grep" { "Search" } else { "Find" }
                );
                about.kind = ToolKind::Search;
            }
            "write" => {
                about.title = format!("Write {shown}");
                about.kind = ToolKind::Edit;
                about.locations = at();
                if let (Some(path), Some(content)) = (&path, text("content")) {
                    about.content = vec![ToolCallContent::Diff(Diff::new(path.clone(), content))];
                }
            }
            "edit" => {
                about.title = format!("Edit {shown}");
                about.kind = ToolKind::Edit;
                about.locations = at();
                if let (Some(path), Some(old), Some(new)) =
                    (&path, text("old_string"), text("new_string"))
                {
                    about.content = vec![ToolCallContent::Diff(
                        Diff::new(path.clone(), new).old_text(old.to_owned()),
                    )];
                }
            }
            "shell" | "run_code" => {
                let command = text("command").or(text("code")).unwrap_or_default();
                let first = command.lines().next().unwrap_or_default();
                about.title = if name == "shell" {
                    format!("Run `{first}`")
                } else {
                    "Run a program".to_owned()
                };
                about.kind = ToolKind::Execute;
            }
            "web_fetch" => {
                about.title = format!("Fetch {}", text("url").unwrap_or_default());
                about.kind = ToolKind::Fetch;
            }
            "web_search" => {
                about.title = format!("Search the web for {}", text("query").unwrap_or_default());
                about.kind = ToolKind::Search;
            }
            "todo" => {
                about.title = "Update the plan".to_owned();
                about.kind = ToolKind::Think;
            }
            "task" => {
                about.title = format!(
                    "Sub-agent: {}",
                    text("description").or(text("prompt")).unwrap_or_default()
                );
                about.kind = ToolKind::Think;
            }
            _ if name.starts_with("lsp_") => {
                let symbol = text("symbol").or(text("query")).unwrap_or_default();
                let place = match line {
                    Some(line) => format!("{shown}:{line}"),
                    None => shown.to_owned(),
                };
                about.title = format!("{name} {symbol} {place}").replace("  ", " ");
                about.kind = if name == "lsp_workspace_symbols" {
                    ToolKind::Search
                } else {
                    ToolKind::Read
                };
                about.locations = at();
            }
            _ => {
                about.locations = at();
            }
        }
        about
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(body: EventBody) -> Event {
        Event {
            seq: 2,
            turn: 1,
            step: 1,
            ts: String::new(),
            body,
            surface_op: None,
            source_event_seqs: Vec::new(),
        }
    }

    #[test]
    fn an_edit_is_a_pending_edit_call_with_its_place_and_diff_then_a_completed_update() {
        let call = event(EventBody::ToolCall(crate::session::event::ToolCallEvent {
            call_id: "c1".into(),
            name: "edit".into(),
            arguments: r#"{"path":"src/a.py","old_string":"x = 1","new_string":"x = 2"}"#.into(),
            sandbox: None,
        }));
        let updates = of_event(&call, Path::new("/w"), Reading::Live, &Nesting::default());
        let json = serde_json::to_value(&updates).unwrap();
        assert_eq!(json[0]["sessionUpdate"], "tool_call");
        assert_eq!(json[0]["toolCallId"], "c1");
        assert_eq!(json[0]["kind"], "edit");
        // `pending` is the protocol's default, which goes unsaid.
        assert!(
            json[0]
                .get("status")
                .is_none_or(|status| status == "pending")
        );
        assert_eq!(json[0]["title"], "Edit src/a.py");
        assert_eq!(json[0]["locations"][0]["path"], "/w/src/a.py");
        assert_eq!(json[0]["content"][0]["type"], "diff");
        assert_eq!(json[0]["content"][0]["oldText"], "x = 1");
        assert_eq!(json[0]["content"][0]["newText"], "x = 2");
        let result = event(EventBody::ToolResult(crate::session::event::ToolResult {
            call_id: "c1".into(),
            name: "edit".into(),
            text: "boom".into(),
            meta: json!({"is_error": true, "source": "src/a.py", "line": 7}),
        }));
        let json = serde_json::to_value(of_event(
            &result,
            Path::new("/w"),
            Reading::Live,
            &Nesting::default(),
        ))
        .unwrap();
        assert_eq!(json[0]["sessionUpdate"], "tool_call_update");
        assert_eq!(json[0]["status"], "failed");
        assert_eq!(json[0]["content"][0]["content"]["text"], "boom");
        assert_eq!(json[0]["locations"][0]["path"], "/w/src/a.py");
        assert_eq!(json[0]["locations"][0]["line"], 7);
    }

    #[test]
    fn text_comes_from_the_log_only_when_loading() {
        let message = event(EventBody::AssistantMessage(crate::llm::AssistantMessage {
            text: "hello".into(),
            reasoning: Some("hm".into()),
            tool_calls: Vec::new(),
        }));
        let nesting = Nesting::default();
        assert!(of_event(&message, Path::new("/w"), Reading::Live, &nesting).is_empty());
        let json =
            serde_json::to_value(of_event(&message, Path::new("/w"), Reading::Load, &nesting))
                .unwrap();
        assert_eq!(json[0]["sessionUpdate"], "agent_thought_chunk");
        assert_eq!(json[1]["sessionUpdate"], "agent_message_chunk");
        assert_eq!(json[1]["content"]["text"], "hello");
    }

    #[test]
    fn a_call_inside_another_names_its_parent() {
        let call = event(EventBody::SubtoolCall(crate::session::event::SubtoolCall {
            parent_call_id: "p".into(),
            call_id: "1".into(),
            name: "read".into(),
            arguments: r#"{"path":"a"}"#.into(),
            sandbox: None,
        }));
        let json = serde_json::to_value(of_event(
            &call,
            Path::new("/w"),
            Reading::Live,
            &Nesting::default(),
        ))
        .unwrap();
        assert_eq!(json[0]["toolCallId"], "p/1");
        assert_eq!(json[0]["_meta"]["agent-lsp"]["parentToolCallId"], "p");
    }
}
