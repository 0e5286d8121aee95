//! The agent's code actions, added after the child's: "Fix with agent" per diagnostic, "Explain
//! with agent" and "Ask agent about selection" on a selection, "Send to agent" in a prompt
//! document, and "Rewind to before turn N" on a prompt document's `## agent (turn N)` heading.
//! Each is a command of ours (see `commands`), so it resolves to itself.

use std::sync::Arc;

use lsp_bridge::lsp_types::CodeActionParams;
use serde_json::{Value, json};

use super::{Reply, Shared};

/// The code action kinds the agent offers (announced in `codeActionProvider`).
pub(super) const KINDS: [&str; 4] = [
    "quickfix.agent",
    "agent.explain",
    "agent.send",
    "agent.rewind",
];

/// The child's code actions for the document (asked for by the dispatch), then the agent's: "Fix with
/// agent" per diagnostic in the request's context, "Explain with agent" and "Ask agent about
/// selection" on a non-empty selection, "Send to agent" in a prompt document.
pub(super) fn code_actions(
    shared: &Arc<Shared>,
    params: &CodeActionParams,
    child_actions: Vec<Value>,
) -> Reply {
    let prompt_document = params
        .text_document
        .uri
        .to_file_path()
        .is_ok_and(|path| shared.prompt_documents.matches(&path));
    let mut actions = child_actions;
    let only = params.context.only.as_ref();
    // A kind is wanted when `only` lists it or a parent of it (`quickfix` covers `quickfix.agent`).
    let wanted = |kind: &str| {
        only.is_none_or(|only| {
            only.iter().any(|base| {
                let base = base.as_str();
                kind == base || kind.starts_with(&format!("{base}."))
            })
        })
    };
    let uri = &params.text_document.uri;
    let range = params.range;
    if prompt_document {
        if wanted("agent.send") {
            actions.push(json!({
                "title": "Send to agent",
                "kind": "agent.send",
                "command": {"title": "Send to agent", "command": "agent.send",
                            "arguments": [{"uri": uri, "position": range.start}]},
            }));
        }
        if wanted("agent.rewind")
            && let Some(turn) = uri
                .to_file_path()
                .ok()
                .and_then(|path| shared.text_or_disk(&path).ok())
                .and_then(|text| heading_turn(text.lines().nth(range.start.line as usize)?))
        {
            let title = format!("Rewind to before turn {turn}");
            actions.push(json!({
                "title": title,
                "kind": "agent.rewind",
                "command": {"title": title, "command": "agent.rewind",
                            "arguments": [{"turn": turn}]},
            }));
        }
        return Ok(Value::Array(actions));
    }
    if wanted("quickfix.agent") {
        for diagnostic in &params.context.diagnostics {
            let message = diagnostic.message.as_str();
            let short: String = message
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(60)
                .collect();
            actions.push(json!({
                "title": format!("Fix with agent: {short}"),
                "kind": "quickfix.agent",
                "diagnostics": [diagnostic],
                "command": {"title": "Fix with agent", "command": "agent.fix",
                            "arguments": [{"uri": uri, "diagnostic": diagnostic}]},
            }));
        }
    }
    let empty = range.start == range.end;
    if !empty && wanted("agent.explain") {
        for (title, command) in [
            ("Explain with agent", "agent.explain"),
            ("Ask agent about selection", "agent.ask"),
        ] {
            actions.push(json!({
                "title": title,
                "kind": "agent.explain",
                "command": {"title": title, "command": command,
                            "arguments": [{"uri": uri, "range": range}]},
            }));
        }
    }
    Ok(Value::Array(actions))
}

/// The turn an answer heading of a prompt document names: `## agent (turn 3)` → 3.
fn heading_turn(line: &str) -> Option<u32> {
    line.trim_end()
        .strip_prefix("## agent (turn ")?
        .strip_suffix(')')?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_answer_heading_names_its_turn() {
        assert_eq!(super::heading_turn("## agent (turn 12)"), Some(12));
        assert_eq!(super::heading_turn("## agent (turn 3)  "), Some(3));
        for other in [
            "## you",
            "## agent (turn x)",
            "text ## agent (turn 1)",
            "## agent",
        ] {
            assert_eq!(super::heading_turn(other), None, "{other}");
        }
    }
}
