use serde_json::json;

use super::attribution::{Checkpoints, Owner, owner};
use crate::session::event::{
    AssistantMessage, CheckpointReason, EventBody, FileCheckpoint, SessionHeader, ToolCallRef,
    ToolResult, UserMessage,
};
use crate::session::{History, NewEvent};

fn checkpoint(reason: CheckpointReason, id: Option<&str>) -> EventBody {
    EventBody::FileCheckpoint(FileCheckpoint {
        reason,
        id: id.map(str::to_owned),
        calls: Vec::new(),
        changed: Vec::new(),
        changed_total: 0,
        uncaptured: Vec::new(),
        read: 0,
        scan: "walk".into(),
        duration_ms: 0,
        error: id.is_none().then(|| "disk full".to_owned()),
    })
}

/// A session of three turns: 1 edits `a` with the file tool; 2 runs a command in a window;
/// 3 starts, a capture fails, and ends.
fn session() -> History {
    use CheckpointReason::*;
    let mut history = History::from_events(Vec::new()).unwrap();
    let mut add = |turn: u32, body: EventBody| {
        history.simulate(NewEvent::new(turn, 0, body)).unwrap();
    };
    add(
        0,
        EventBody::SessionHeader(SessionHeader::for_test("s", "standard")),
    );
    let call = |id: &str, name: &str| ToolCallRef {
        id: id.into(),
        name: name.into(),
        arguments: "{}".into(),
    };
    let prompt = |text: &str| {
        EventBody::UserMessage(UserMessage {
            text: text.into(),
            origin: "prompt".into(),
        })
    };
    add(1, checkpoint(TurnStart, Some("c1")));
    add(1, prompt("one"));
    add(
        1,
        EventBody::AssistantMessage(AssistantMessage {
            text: String::new(),
            reasoning: None,
            tool_calls: vec![call("e1", "edit"), call("r1", "read")],
        }),
    );
    for (id, name, source) in [("e1", "edit", "a"), ("r1", "read", "b")] {
        add(
            1,
            EventBody::ToolResult(ToolResult {
                call_id: id.into(),
                name: name.into(),
                text: "ok".into(),
                meta: json!({"source": source, "is_error": false}),
            }),
        );
    }
    add(1, checkpoint(TurnEnd, Some("c2")));
    add(2, checkpoint(TurnStart, Some("c3")));
    add(2, prompt("two"));
    add(2, checkpoint(BeforeCall, Some("c4")));
    add(2, checkpoint(AfterCall, Some("c5")));
    add(2, checkpoint(TurnEnd, Some("c6")));
    add(3, checkpoint(TurnStart, Some("c7")));
    add(3, prompt("three"));
    add(3, checkpoint(BeforeCall, None));
    add(3, checkpoint(TurnEnd, Some("c8")));
    history
}

#[test]
fn whose_change_it_is_follows_the_window_and_the_file_tools() {
    let history = session();
    let points = Checkpoints::of(&history).points;
    let ids: Vec<&str> = points.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8"]);
    let owners: Vec<Owner> = points
        .windows(2)
        .map(|pair| owner(&history, &pair[0], &pair[1]))
        .collect();
    // Turn 1: only the path the edit named is the agent's, not the one `read` named.
    let Owner::FileTools(named) = &owners[0] else {
        panic!("{:?}", owners[0]);
    };
    assert!(named.contains_key("a") && !named.contains_key("b"));
    assert!(owners[0].is_agents("a") && !owners[0].is_agents("b"));
    // Between turns: the user's.
    assert_eq!(owners[1], Owner::User);
    // Turn 2: the model's step before the command (no file tool) is the user's, the
    // command's window the agent's, the step after it the user's.
    assert_eq!(owners[2], Owner::FileTools(Default::default()));
    assert_eq!(owners[3], Owner::Agent);
    assert_eq!(owners[4], Owner::FileTools(Default::default()));
    // Between turns 2 and 3, and across turn 3's failed capture: the user's.
    assert_eq!(owners[5], Owner::User);
    assert_eq!(owners[6], Owner::User);
}

#[test]
fn the_turns_list_what_the_agent_changed_and_which_can_be_taken_back() {
    let history = session();
    let turns = super::turns(&history);
    assert_eq!(
        turns
            .iter()
            .map(|t| (t.turn, t.rewindable, t.rewound))
            .collect::<Vec<_>>(),
        [(1, true, false), (2, true, false), (3, true, false)]
    );
}
