//! One line per event, for `session show`'s timeline and its JSON: what the event is about,
//! with long texts cut to a preview.

use crate::session::event::{Event, EventBody, ToolCallRef};

/// A one-line description of an event for timelines.
pub(super) fn describe(event: &Event) -> String {
    match &event.body {
        EventBody::SessionHeader(header) => {
            format!("preset {} in {}", header.preset, header.workspace)
        }
        EventBody::UserMessage(message) => {
            format!("({}) {}", message.origin, preview(&message.text, 100))
        }
        EventBody::AssistantMessage(message) => {
            let mut text = preview(&message.text, 80);
            if !message.tool_calls.is_empty() {
                text = format!("{text} → calls {}", ToolCallRef::names(&message.tool_calls));
            }
            text
        }
        EventBody::ToolCall(call) => format!(
            "{} {} {}{}",
            call.call_id,
            call.name,
            preview(&call.arguments, 80),
            call.sandbox.as_ref().map(held).unwrap_or_default()
        ),
        EventBody::ToolResult(result) => format!(
            "{} {} → {}{}",
            result.call_id,
            result.name,
            preview(&result.text, 80),
            result.meta["asked"]["answer"]
                .as_str()
                .map(|answer| format!(" (asked: {answer})"))
                .unwrap_or_default()
        ),
        EventBody::RuntimeContext(context) => {
            let keys = context
                .snapshot
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ");
            match &context.source {
                Some(source) => format!("{source}: {keys}"),
                None => keys,
            }
        }
        EventBody::SurfaceEdit(edit) => edit.reason.clone(),
        EventBody::SubagentStart(start) => format!(
            "{} {} sub-agent {} (preset {}, depth {})",
            start.call_id, start.agent_type, start.child, start.preset, start.depth
        ),
        EventBody::SubagentEnd(end) => format!(
            "{} sub-agent {} {}{} after {} steps, {} requests, {} prompt ({} cached), {} completion tokens",
            end.call_id,
            end.child,
            end.outcome,
            end.reason
                .as_deref()
                .map(|reason| format!(" ({})", preview(reason, 80)))
                .unwrap_or_default(),
            end.steps,
            end.requests,
            end.prompt_tokens,
            end.cache_read,
            end.completion_tokens
        ),
        EventBody::SubtoolCall(call) => format!(
            "{} (in {}) {} {}",
            call.call_id,
            call.parent_call_id,
            call.name,
            preview(&call.arguments, 80)
        ),
        EventBody::SubtoolResult(result) => format!(
            "{} (in {}) {} → {}",
            result.call_id,
            result.parent_call_id,
            result.name,
            preview(&result.text, 80)
        ),
        EventBody::FileCheckpoint(checkpoint) => match &checkpoint.error {
            Some(error) => format!("{} failed: {error}", checkpoint.reason.as_str()),
            None => format!(
                "{} {}: {}{}",
                checkpoint.reason.as_str(),
                checkpoint
                    .id
                    .as_deref()
                    .map_or("", |id| &id[..id.len().min(10)]),
                match checkpoint.changed_total {
                    0 => "nothing changed".to_owned(),
                    n => format!(
                        "{n} changed ({})",
                        preview(&checkpoint.changed.join(", "), 80)
                    ),
                },
                match checkpoint.uncaptured.len() {
                    0 => String::new(),
                    n => format!("; {n} over the size cap"),
                }
            ),
        },
        EventBody::RewindBegin(begin) => format!(
            "{} of turns {}–{} ({:?}){}: {} to restore, {} conflicts{}",
            begin.rewind_id,
            begin.turn,
            begin.last_turn,
            begin.scope,
            begin
                .undo_of
                .as_deref()
                .map(|undone| format!(", undoing {undone}"))
                .unwrap_or_default(),
            begin.plan.len(),
            begin.conflicts.len(),
            if begin.force { ", forced" } else { "" }
        ),
        EventBody::RewindEnd(end) => format!(
            "{} {}: {} restored, {} kept{}",
            end.rewind_id,
            end.outcome,
            end.restored.len(),
            end.kept.len(),
            end.reason
                .as_deref()
                .map(|reason| format!(" ({reason})"))
                .unwrap_or_default()
        ),
        EventBody::HookRun(run) => format!(
            "{}{} `{}` → {}{} in {} ms{}",
            run.event,
            run.call_id
                .as_deref()
                .map(|id| format!(" {id}"))
                .unwrap_or_default(),
            preview(&run.command, 60),
            run.outcome,
            run.exit_code
                .map(|code| format!(" (exit {code})"))
                .unwrap_or_default(),
            run.duration_ms,
            run.reason
                .as_deref()
                .map(|reason| format!(": {}", preview(reason, 80)))
                .unwrap_or_default()
        ),
        EventBody::PluginState(state) => {
            format!("{}: {}", state.plugin, preview(&state.data.to_string(), 80))
        }
        EventBody::RequestHeader(header) => format!(
            "request {} to {}{}",
            header.index,
            header.model,
            if header.system.is_some() {
                " (new system prompt/tools)"
            } else {
                ""
            }
        ),
        EventBody::RequestContext(context) => format!(
            "request {}: generation {}, through seq {}, ~{} tokens",
            context.index, context.generation, context.through_seq, context.estimated_tokens
        ),
        EventBody::RequestError(error) => format!(
            "request {} failed ({}): {}",
            error.index,
            error.class,
            preview(&error.message, 100)
        ),
        EventBody::Usage(usage) => format!(
            "request {}: {} prompt ({} cached), {} completion",
            usage.index, usage.prompt_tokens, usage.cache_read, usage.completion_tokens
        ),
        EventBody::CompactionStart(start) => format!(
            "{} ({}) folds {}..{} ({} entries, ~{} tokens)",
            start.compaction_id,
            start.trigger,
            start.start,
            start.end,
            start.entry_seqs.len(),
            start.estimated_tokens
        ),
        EventBody::CompactionSummary(summary) => format!(
            "{} by {}: {}",
            summary.compaction_id,
            summary.summarizer,
            preview(&summary.text, 80)
        ),
        EventBody::CompactionEnd(end) => format!(
            "{} {}{}: ~{} → ~{} tokens",
            end.compaction_id,
            end.outcome,
            end.reason
                .as_deref()
                .map(|reason| format!(" ({reason})"))
                .unwrap_or_default(),
            end.tokens_before,
            end.tokens_after
        ),
        EventBody::ContextEditBegin(begin) => format!(
            "{} by {}: {}{}",
            begin.edit_id,
            begin.actor,
            begin
                .ops
                .iter()
                .map(|op| format!("{} {:?}", op.op, op.target))
                .collect::<Vec<_>>()
                .join(", "),
            begin
                .snapshot
                .map(|snapshot| format!(" (snapshot {snapshot})"))
                .unwrap_or_default()
        ),
        EventBody::ContextEditEnd(end) => format!(
            "{} {}{}: ~{} → ~{} tokens, generation {}",
            end.edit_id,
            end.outcome,
            end.reason
                .as_deref()
                .map(|reason| format!(" ({reason})"))
                .unwrap_or_default(),
            end.tokens_before,
            end.tokens_after,
            end.generation
        ),
    }
}

/// First `max` characters of `text` on one line.
pub fn preview(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

/// What held a command, as its `tool/call` record says, in brackets: `[workspace-write, no
/// network, bubblewrap; asks to leave: network]`. A reviewer reads it beside the command.
fn held(sandbox: &serde_json::Value) -> String {
    let network = if sandbox["network"] == true {
        "network"
    } else {
        "no network"
    };
    let mut line = format!(
        " [{}, {network}, {}",
        sandbox["mode"].as_str().unwrap_or("?"),
        sandbox["mechanism"].as_str().unwrap_or("?")
    );
    if let Some(leave) = sandbox["leave"].as_str() {
        line.push_str(&format!("; asks to leave: {leave}"));
    }
    line.push(']');
    line
}
