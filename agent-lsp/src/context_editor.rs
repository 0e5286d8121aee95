//! The context editor: see, edit and roll back what the model sees.
//!
//! A programmer debugging a long run needs the context as the model gets it, not as a log:
//! [`segments`] lists the current surface entry by entry (role, where it came from, estimated
//! tokens, a preview, and whether later messages refer to it), searchable and sortable.
//! [`ops`] edits it (fold, pin, delete, replace) as batches of surface ops recorded in the log,
//! each batch after a snapshot so it can be rolled back, and `rules` lets a preset do the same
//! automatically. Nothing here rewrites the log: an edit is new events, a rollback is a `restore`.
//!
//! A segment's id is the seq of the event that supplies its content, so ids stay valid across
//! processes and are the targets of ops.

pub mod ops;
pub(crate) mod rules;

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;
use serde_json::Value;

use crate::session::History;
use crate::session::event::{EventBody, ToolCallRef};
use crate::session::surface::Pairing;
use crate::tokens::{TokenMeter, estimate_message};

/// Characters of a segment's text shown in a preview, unless asked otherwise.
pub const DEFAULT_PREVIEW_CHARS: usize = 200;

/// Phrases by which a message refers to what came just before it without naming it. A hint
/// marks the non-assistant segments between the previous assistant message and the hinting one.
const TEXTUAL_HINTS: [&str; 14] = [
    "as shown above",
    "shown above",
    "the output above",
    "the result above",
    "the results above",
    "as mentioned",
    "as above",
    "from the output",
    "based on the result",
    "according to the result",
    "上面",
    "如前所述",
    "根据上面",
    "前面的结果",
];

/// One entry of the surface as the context editor shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Segment {
    /// The seq of the event supplying the content; the target of edits.
    pub id: u64,
    /// `user` (the programmer's prompts), `assistant`, `tool` (tool results), `context`
    /// (runtime context, pinned copies, replaced text) or `summary` (compaction checkpoints and
    /// folds).
    pub role: &'static str,
    /// Where the content came from, in a few words: `prompt`, `model → read, grep`,
    /// `tool read src/a.rs (call c1)`, `compaction cmp-12`, `fold edit-30`, …
    pub source: String,
    /// The same source as data (kind, tool, call, files, compaction or edit id), for editors that
    /// link to it.
    pub detail: SourceDetail,
    /// Estimated tokens, calibrated by what the provider reported for earlier requests.
    pub tokens: u64,
    /// The start of the text, at most [`Query::preview_chars`] characters, on one line.
    pub preview: String,
    /// Whether a later segment refers to this one (see [`Reference`]).
    pub referenced: bool,
    /// Each later segment that refers to this one, and why: what a fold or delete would orphan.
    pub referenced_by: Vec<Reference>,
    /// The user turn of the supplying event.
    pub turn: u32,
    /// The model step of the supplying event.
    pub step: u32,
    /// Position on the surface, 0-based.
    pub position: usize,
    /// The tool call ids this segment makes (assistant) or answers (tool): a fold or delete
    /// must keep them together.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub call_ids: Vec<String>,
    /// The whole text, for search; not sent to editors.
    #[serde(skip)]
    pub text: String,
}

/// The structured form of a segment's source.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SourceDetail {
    /// The event kind and, for user messages, their origin.
    pub kind: String,
    /// The tool that produced a tool result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The call a tool result answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// Paths named in the arguments of the calls involved, so a reference by path can be found.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// The compaction that wrote a checkpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction_id: Option<String>,
    /// The context-editor batch that wrote a fold, pin or replacement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edit_id: Option<String>,
    /// Events this one was derived from (what a checkpoint or fold shadows, what a pin copies).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub source_event_seqs: Vec<u64>,
}

/// Why a later segment is taken to rely on an earlier one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Reference {
    /// The referring segment.
    pub id: u64,
    /// `call id c1`, `path src/a.rs` or `hint "as shown above"`.
    pub reason: String,
}

/// Totals of one role.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RoleTotals {
    /// Segments of the role.
    pub segments: usize,
    /// Their estimated tokens.
    pub tokens: u64,
}

/// Totals of the whole surface and by role.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Segments on the whole surface, filters notwithstanding.
    pub segments: usize,
    /// Estimated tokens of the whole surface.
    pub tokens: u64,
    /// Segment count and tokens per role, by role name.
    pub by_role: BTreeMap<&'static str, RoleTotals>,
    /// The surface generation the view was made from; rollbacks name generations.
    pub generation: u64,
}

/// What to show: search, role filter, order, preview length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    /// Case-insensitive keyword, matched against the text and the source.
    pub keyword: Option<String>,
    /// Only segments of this role (one of [`ROLES`]).
    pub role: Option<String>,
    /// Largest first instead of surface order.
    pub sort_by_tokens: bool,
    /// Characters of each segment's preview.
    pub preview_chars: usize,
}

impl Default for Query {
    fn default() -> Self {
        Query {
            keyword: None,
            role: None,
            sort_by_tokens: false,
            preview_chars: DEFAULT_PREVIEW_CHARS,
        }
    }
}

/// The view an editor or the terminal shows: the selected segments and the totals of the whole
/// surface (so a filtered view still says how big the context is).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct View {
    /// The segments the query selected, in the order it asked for.
    pub segments: Vec<Segment>,
    /// The totals of the whole surface.
    pub totals: Totals,
}

/// The roles a segment may have, for validating filters.
pub const ROLES: [&str; 5] = ["user", "assistant", "tool", "context", "summary"];

/// Every segment of the current surface, in surface order.
pub fn segments(history: &History, preview_chars: usize) -> Vec<Segment> {
    let meter = TokenMeter::recover(history);
    let calls = tool_calls(history);
    let mut out = Vec::with_capacity(history.surface().entries().len());
    for (position, entry) in history.surface().entries().iter().enumerate() {
        let Some(event) = history.event(entry.seq) else {
            continue;
        };
        let Some(message) = crate::session::message_of(event) else {
            continue;
        };
        let mut detail = SourceDetail {
            kind: event.kind().as_str().to_owned(),
            source_event_seqs: event.source_event_seqs.clone(),
            ..SourceDetail::default()
        };
        let call_ids = match &entry.pairing {
            Pairing::None => Vec::new(),
            Pairing::Calls(ids) => ids.clone(),
            Pairing::Result(id) => vec![id.clone()],
        };
        let (role, source, text) = match &event.body {
            EventBody::UserMessage(user) => {
                detail.kind = format!("user/message ({})", user.origin);
                let (role, source) = match user.origin.as_str() {
                    "prompt" => ("user", "prompt".to_owned()),
                    "compaction" => {
                        let id = tag_attribute(&user.text, "compacted-summary", "id");
                        detail.compaction_id = id.clone();
                        ("summary", format!("compaction {}", id.unwrap_or_default()))
                    }
                    "context-edit" => context_edit_source(&user.text, &mut detail),
                    other => ("user", other.to_owned()),
                };
                (role, source, user.text.clone())
            }
            EventBody::RuntimeContext(context) => (
                "context",
                "runtime-context".to_owned(),
                context.text.clone(),
            ),
            EventBody::AssistantMessage(assistant) => {
                let mut text = assistant.text.clone();
                let source = if assistant.tool_calls.is_empty() {
                    "model".to_owned()
                } else {
                    for call in &assistant.tool_calls {
                        detail.files.extend(paths_in_arguments(&call.arguments));
                        text.push_str(&format!("\n→ {} {}", call.name, call.arguments));
                    }
                    format!("model → {}", ToolCallRef::names(&assistant.tool_calls))
                };
                if let Some(edit) = event_edit_id(history, event.seq) {
                    detail.edit_id = Some(edit);
                }
                ("assistant", source, text)
            }
            EventBody::ToolResult(result) => {
                detail.tool = Some(result.name.clone());
                detail.call_id = Some(result.call_id.clone());
                if let Some(call) = calls.get(result.call_id.as_str()) {
                    detail.files = paths_in_arguments(&call.arguments);
                }
                let files = if detail.files.is_empty() {
                    String::new()
                } else {
                    format!(" {}", detail.files.join(", "))
                };
                let mut source = format!("tool {}{files} (call {})", result.name, result.call_id);
                if let Some(edit) = result.meta.get("edit_id").and_then(Value::as_str) {
                    detail.edit_id = Some(edit.to_owned());
                    source = format!("fold {edit} of {source}");
                } else if result.meta.get("pruned").is_some() {
                    source = format!("pruned {source}");
                }
                let role = if detail.edit_id.is_some() {
                    "summary"
                } else {
                    "tool"
                };
                (role, source, result.text.clone())
            }
            _ => continue,
        };
        let tokens = meter.calibrated(estimate_message(&message));
        out.push(Segment {
            id: entry.seq,
            role,
            source,
            detail,
            tokens,
            preview: preview(&text, preview_chars),
            referenced: false,
            referenced_by: Vec::new(),
            turn: event.turn,
            step: event.step,
            position,
            call_ids,
            text,
        });
    }
    mark_references(&mut out);
    out
}

/// The view for `query`.
pub fn view(history: &History, query: &Query) -> anyhow::Result<View> {
    if let Some(role) = &query.role {
        anyhow::ensure!(
            ROLES.contains(&role.as_str()),
            "unknown role `{role}`; the roles are {}",
            ROLES.join(", ")
        );
    }
    let all = segments(history, query.preview_chars);
    let mut totals = Totals {
        generation: history.generation(),
        ..Totals::default()
    };
    for segment in &all {
        totals.segments += 1;
        totals.tokens += segment.tokens;
        let role = totals.by_role.entry(segment.role).or_default();
        role.segments += 1;
        role.tokens += segment.tokens;
    }
    let keyword = query.keyword.as_ref().map(|keyword| keyword.to_lowercase());
    let mut segments = all
        .into_iter()
        .filter(|segment| {
            query
                .role
                .as_deref()
                .is_none_or(|role| segment.role == role)
        })
        .filter(|segment| {
            keyword.as_deref().is_none_or(|keyword| {
                segment.text.to_lowercase().contains(keyword)
                    || segment.source.to_lowercase().contains(keyword)
            })
        })
        .collect::<Vec<_>>();
    if query.sort_by_tokens {
        // Stable: equal sizes keep surface order.
        segments.sort_by_key(|segment| std::cmp::Reverse(segment.tokens));
    }
    Ok(View { segments, totals })
}

/// Fill `referenced` / `referenced_by`: a later segment names this one's tool call id or one of
/// its files, or a later assistant message points back at it with a textual hint.
fn mark_references(segments: &mut [Segment]) {
    let mut found: Vec<Vec<Reference>> = vec![Vec::new(); segments.len()];
    for (index, segment) in segments.iter().enumerate() {
        // A call and its results belong together; they are not "later messages" of each other.
        let partners: HashSet<&str> = segment.call_ids.iter().map(String::as_str).collect();
        for later in &segments[index + 1..] {
            let pair = later
                .call_ids
                .iter()
                .any(|id| partners.contains(id.as_str()));
            if pair {
                continue;
            }
            let reason = segment
                .call_ids
                .iter()
                .find(|id| later.text.contains(id.as_str()))
                .map(|id| format!("call id {id}"))
                .or_else(|| {
                    segment
                        .detail
                        .files
                        .iter()
                        .find(|file| later.text.contains(file.as_str()))
                        .map(|file| format!("path {file}"))
                });
            if let Some(reason) = reason {
                found[index].push(Reference {
                    id: later.id,
                    reason,
                });
            }
        }
    }
    // Textual hints refer to what the hinting assistant message just read.
    for (index, segment) in segments.iter().enumerate() {
        if segment.role != "assistant" {
            continue;
        }
        let lowered = segment.text.to_lowercase();
        let Some(hint) = TEXTUAL_HINTS.iter().find(|hint| lowered.contains(*hint)) else {
            continue;
        };
        for earlier in (0..index).rev() {
            if segments[earlier].role == "assistant" {
                break;
            }
            if !found[earlier].iter().any(|r| r.id == segment.id) {
                found[earlier].push(Reference {
                    id: segment.id,
                    reason: format!("hint \"{hint}\""),
                });
            }
        }
    }
    for (segment, references) in segments.iter_mut().zip(found) {
        segment.referenced = !references.is_empty();
        segment.referenced_by = references;
    }
}

/// Every tool call of the log by id, for the files a result is about.
fn tool_calls(history: &History) -> HashMap<&str, &ToolCallRef> {
    let mut calls = HashMap::new();
    for event in history.events() {
        if let EventBody::AssistantMessage(message) = &event.body {
            for call in &message.tool_calls {
                calls.insert(call.id.as_str(), call);
            }
        }
    }
    calls
}

/// Workspace paths named in a tool call's arguments (`path`, `file`, `paths`).
pub fn paths_in_arguments(arguments: &str) -> Vec<String> {
    let Ok(Value::Object(arguments)) = serde_json::from_str::<Value>(arguments) else {
        return Vec::new();
    };
    let mut paths = Vec::new();
    for key in ["path", "file", "file_path"] {
        if let Some(path) = arguments.get(key).and_then(Value::as_str) {
            paths.push(path.to_owned());
        }
    }
    if let Some(list) = arguments.get("paths").and_then(Value::as_array) {
        paths.extend(list.iter().filter_map(Value::as_str).map(str::to_owned));
    }
    paths.retain(|path| !path.is_empty() && path != ".");
    paths
}

/// Role and source of a `user/message` the context editor wrote, read from its framing.
fn context_edit_source(text: &str, detail: &mut SourceDetail) -> (&'static str, String) {
    for (tag, role, label) in [
        (ops::FOLD_TAG, "summary", "fold"),
        (ops::PIN_TAG, "context", "pin"),
        (ops::REPLACE_TAG, "context", "replace"),
    ] {
        if text.starts_with(&format!("<{tag}")) {
            let edit = tag_attribute(text, tag, "edit").unwrap_or_default();
            let source = match (label, detail.source_event_seqs.first()) {
                ("pin", Some(seq)) => format!("pin {edit} of #{seq}"),
                _ => format!("{label} {edit}"),
            };
            detail.edit_id = Some(edit);
            return (role, source);
        }
    }
    ("context", "context-edit".to_owned())
}

/// The edit id recorded in a replacement assistant message's source list, if any: replaced
/// assistant text carries no framing, so the `context-edit/end` results name it.
fn event_edit_id(history: &History, seq: u64) -> Option<String> {
    let event = history.event(seq)?;
    if !matches!(
        event.surface_op,
        Some(crate::session::event::SurfaceOp::Replace { .. })
    ) {
        return None;
    }
    history.events()[..]
        .iter()
        .rev()
        .find_map(|later| match &later.body {
            EventBody::ContextEditEnd(end) if end.results.iter().any(|r| r.seq == seq) => {
                Some(end.edit_id.clone())
            }
            _ => None,
        })
}

/// The value of `attribute` in the opening `<tag …>` at the start of `text`.
fn tag_attribute(text: &str, tag: &str, attribute: &str) -> Option<String> {
    let rest = text.strip_prefix('<')?.strip_prefix(tag)?;
    let open = &rest[..rest.find('>')?];
    let start = open.find(&format!("{attribute}=\""))? + attribute.len() + 2;
    let end = open[start..].find('"')? + start;
    Some(open[start..end].to_owned())
}

/// The first `max` characters of `text` on one line.
pub fn preview(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

#[cfg(test)]
mod tests;
