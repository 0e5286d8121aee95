//! What a session needs when it is opened after its last writer died mid-turn.
//!
//! A process killed while tools run (SIGKILL, a closed editor window, a power cut) leaves an
//! `assistant/message` whose calls have no `tool/result`. The surface then refuses everything
//! but those results (providers answer HTTP 400 to a call without its result), so without help
//! the session could never be continued, edited or compacted again. Nobody is left to answer
//! those calls but the next writer, so [`Session::open`](super::Session::open) appends, once, a
//! result for each of them saying what is known: the process ended, no output was kept. A
//! second open finds no call waiting and appends nothing, and every request recorded before
//! stays as it was, so `session replay` of earlier requests is unchanged.

use serde_json::json;

use super::History;
use super::NewEvent;
use super::event::{EventBody, ToolResult};

/// The `tool/result` events that answer every call left waiting by a writer that died, in the
/// order the calls were made; empty when nothing waits.
pub(super) fn interrupted_results(history: &History) -> Vec<NewEvent> {
    let waiting = history
        .surface()
        .pending_calls()
        .map(str::to_owned)
        .collect::<std::collections::HashSet<_>>();
    if waiting.is_empty() {
        return Vec::new();
    }
    // Nothing but results may follow a call until all its results are in, so the calls that
    // wait all belong to the last assistant message that made calls.
    let Some((index, message, turn, step)) =
        history
            .events()
            .iter()
            .enumerate()
            .rev()
            .find_map(|(index, event)| match &event.body {
                EventBody::AssistantMessage(message) if !message.tool_calls.is_empty() => {
                    Some((index, message, event.turn, event.step))
                }
                _ => None,
            })
    else {
        return Vec::new();
    };
    let later = &history.events()[index + 1..];
    message
        .tool_calls
        .iter()
        .filter(|call| waiting.contains(&call.id))
        .map(|call| {
            // `tool/call` is logged just before a tool starts: without it the tool never ran.
            let started = later.iter().any(|event| {
                matches!(&event.body, EventBody::ToolCall(logged) if logged.call_id == call.id)
            });
            let text = if started {
                format!(
                    "interrupted: the agent-lsp process ended (killed or crashed) while `{}` was \
                     running; its output was lost, and it may or may not have taken effect: \
                     check before retrying",
                    call.name
                )
            } else {
                format!(
                    "interrupted: the agent-lsp process ended (killed or crashed) before `{}` \
                     ran; it had no effect",
                    call.name
                )
            };
            NewEvent::new(
                turn,
                step,
                EventBody::ToolResult(ToolResult {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    text,
                    meta: json!({ "interrupted": true, "started": started, "is_error": true }),
                }),
            )
        })
        .collect()
}

/// The `rewind/end` of a rewind whose writer died after its `rewind/begin`: `interrupted`, so
/// a reader knows some of its planned paths may have been restored and others not, and the
/// next rewind or undo starts from the files as they are (its own capture). `None` when every
/// rewind ended.
pub(super) fn interrupted_rewind(history: &History) -> Option<NewEvent> {
    use super::event::RewindEnd;
    let (turn, begin) = history
        .events()
        .iter()
        .rev()
        .find_map(|event| match &event.body {
            EventBody::RewindBegin(begin) => Some((event.turn, begin)),
            _ => None,
        })?;
    let ended = history.events().iter().any(
        |event| matches!(&event.body, EventBody::RewindEnd(end) if end.rewind_id == begin.rewind_id),
    );
    (!ended).then(|| {
        NewEvent::new(
            turn,
            0,
            EventBody::RewindEnd(RewindEnd {
                rewind_id: begin.rewind_id.clone(),
                outcome: "interrupted".into(),
                restored: Vec::new(),
                kept: Vec::new(),
                context_edit: None,
                context_snapshot: None,
                post: None,
                reason: Some(
                    "the agent-lsp process ended during the rewind; some planned paths may be restored"
                        .into(),
                ),
            }),
        )
    })
}

#[cfg(test)]
mod tests {
    use crate::session::event::{AssistantMessage, SessionHeader, ToolCallEvent, ToolCallRef};
    use crate::session::log::Durability;
    use crate::session::{EventBody, NewEvent, Session};

    fn call(id: &str) -> ToolCallRef {
        ToolCallRef {
            id: id.into(),
            name: "shell".into(),
            arguments: r#"{"command":"sleep 9"}"#.into(),
        }
    }

    #[test]
    fn calls_left_waiting_are_answered_once_in_call_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let header = SessionHeader::for_test("s1", "standard");
        let mut session = Session::create(&path, header, Durability::Sync).unwrap();
        session
            .append(NewEvent::new(
                1,
                1,
                EventBody::AssistantMessage(AssistantMessage {
                    text: String::new(),
                    reasoning: None,
                    tool_calls: vec![call("a"), call("b")],
                }),
            ))
            .unwrap();
        session
            .append(NewEvent::new(
                1,
                1,
                EventBody::ToolCall(ToolCallEvent {
                    call_id: "a".into(),
                    name: "shell".into(),
                    arguments: "{}".into(),
                    sandbox: None,
                }),
            ))
            .unwrap();
        // The writer dies here: `a` started, `b` never did.
        drop(session);

        let session = Session::open(&path, Durability::Sync).unwrap();
        let results = session
            .history()
            .events()
            .iter()
            .filter_map(|event| match &event.body {
                EventBody::ToolResult(result) => Some((event.step, result.clone())),
                _ => None,
            })
            .collect::<Vec<_>>();
        assert_eq!(results.len(), 2, "{results:?}");
        assert_eq!(results[0].1.call_id, "a");
        assert!(results[0].1.text.contains("while `shell` was running"));
        assert_eq!(results[1].1.call_id, "b");
        assert!(results[1].1.text.contains("before `shell` ran"));
        assert!(results.iter().all(|(step, _)| *step == 1));
        assert_eq!(session.history().surface().pending_calls().count(), 0);
        drop(session);

        let before = std::fs::read(&path).unwrap();
        drop(Session::open(&path, Durability::Batched).unwrap());
        assert_eq!(
            std::fs::read(&path).unwrap(),
            before,
            "a second open appends nothing"
        );
    }
}
