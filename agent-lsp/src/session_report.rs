//! Recorded sessions as JSON: what `agent-lsp session list --json` and `session show --json`
//! print, and what the MCP server's `session_list` and `session_show` return. It lives outside
//! both front ends (`cli`, `mcp_serve`) so that they share it without importing each other; the
//! terminal's text view is `cli/session.rs`, drawn from this JSON.

mod describe;

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::session::History;
use crate::session::event::{Event, EventBody};
use crate::session::store::{Store, first_prompt};
use crate::tokens::estimate_message;
use describe::describe;
pub use describe::preview;

/// What `session list --json` prints: a summary per session, oldest first (also the MCP
/// server's `session_list`).
pub fn list_json(store: &Store) -> anyhow::Result<Vec<Value>> {
    let mut rows = Vec::new();
    for id in store.ids()? {
        match store.load(&id) {
            Ok(history) => rows.push(summary_json(&id, &history)),
            Err(error) => rows.push(json!({ "id": id, "error": format!("{error:#}") })),
        }
    }
    Ok(rows)
}

/// What `session show --json` prints: the summary, the events by kind, the requests' figures,
/// the surface, the plan and the timeline (also the MCP server's `session_show`).
pub fn show_json(history: &mut History, store: &Store) -> Value {
    let id = history
        .header()
        .map(|h| h.session_id.clone())
        .unwrap_or_default();
    let mut by_kind: BTreeMap<&str, u64> = BTreeMap::new();
    for event in history.events() {
        *by_kind.entry(event.kind().as_str()).or_default() += 1;
    }
    let timeline = timeline(history, store, 0);
    let generation = history.generation();
    let surface_seqs = history
        .surface()
        .entries()
        .iter()
        .map(|entry| entry.seq)
        .collect::<Vec<_>>();
    let messages = history.derive_messages();
    let (n_messages, surface_tokens) = (
        messages.len(),
        messages.iter().map(estimate_message).sum::<u64>(),
    );
    json!({
        "summary": summary_json(&id, history),
        "by_kind": by_kind,
        "requests": requests_json(history),
        "surface": {
            "generation": generation,
            "messages": n_messages,
            "estimated_tokens": surface_tokens,
            "seqs": surface_seqs,
        },
        "plan": crate::plans::view(history),
        "timeline": timeline,
    })
}

fn timeline_json(event: &Event) -> Value {
    let mut row = json!({
        "seq": event.seq,
        "kind": event.kind().as_str(),
        "turn": event.turn,
        "step": event.step,
        "ts": event.ts,
        "summary": describe(event),
    });
    if let Some(op) = &event.surface_op {
        row["surface_op"] = serde_json::to_value(op).unwrap_or(Value::Null);
    }
    row
}

/// One session's row of `session list --json`.
fn summary_json(id: &str, history: &History) -> Value {
    let header = history.header();
    json!({
        "id": id,
        "preset": header.map(|h| h.preset.as_str()),
        "workspace": header.map(|h| h.workspace.as_str()),
        "created": history.events().first().map(|event| event.ts.as_str()),
        "last_activity": history.events().last().map(|event| event.ts.as_str()),
        "events": history.events().len(),
        "requests": history.n_requests(),
        "first_prompt": first_prompt(history),
        "parent": header.and_then(|h| h.parent.as_ref()),
    })
}

/// Prompt and cache figures of every request that has a usage record.
fn requests_json(history: &History) -> Vec<Value> {
    let mut requests: BTreeMap<u64, serde_json::Map<String, Value>> = BTreeMap::new();
    for event in history.events() {
        match &event.body {
            EventBody::RequestHeader(header) => {
                let row = requests.entry(header.index).or_default();
                row.insert("index".into(), header.index.into());
                row.insert("model".into(), header.model.clone().into());
                row.insert("seq".into(), event.seq.into());
            }
            EventBody::RequestContext(context) => {
                let row = requests.entry(context.index).or_default();
                row.insert("generation".into(), context.generation.into());
                row.insert("estimated_tokens".into(), context.estimated_tokens.into());
            }
            EventBody::Usage(usage) => {
                let row = requests.entry(usage.index).or_default();
                row.insert("prompt_tokens".into(), usage.prompt_tokens.into());
                row.insert("completion_tokens".into(), usage.completion_tokens.into());
                row.insert("cache_read".into(), usage.cache_read.into());
            }
            _ => {}
        }
    }
    requests.into_values().map(Value::Object).collect()
}

/// Sub-agents nest at most a few levels (`max_depth` ≤ 4); the bound keeps a hand-made loop of
/// headers finite.
const MAX_DEPTH: usize = 8;

/// The rows of `history`'s timeline, each `subagent/start` with its child's timeline, read from
/// the child's log, down to the deepest sub-agent.
fn timeline(history: &History, store: &Store, depth: usize) -> Vec<Value> {
    let rewound = crate::rewind::attribution::rewound_by(history);
    history
        .events()
        .iter()
        .map(|event| {
            let mut row = timeline_json(event);
            // A turn a rewind took back is marked on its prompt, until an undo gives it back.
            if let EventBody::UserMessage(message) = &event.body
                && message.origin == "prompt"
                && let Some(rewind) = rewound.get(&event.turn)
            {
                row["rewound"] = json!(rewind);
                let summary = row["summary"].as_str().unwrap_or_default();
                row["summary"] = json!(format!("{summary} [taken back by {rewind}]"));
            }
            if let EventBody::SubagentStart(start) = &event.body
                && depth < MAX_DEPTH
            {
                row["subagent"] = match store.load(&start.child) {
                    Ok(child) => json!({
                        "session": start.child,
                        "timeline": timeline(&child, store, depth + 1),
                    }),
                    Err(error) => json!({
                        "session": start.child,
                        "error": format!("{error:#}"),
                    }),
                };
            }
            row
        })
        .collect()
}
