//! Property tests of the session surface over random event and op sequences:
//! incremental derive equals derive from scratch, `derive_at` of every seq equals the surface
//! that was live then, and no accepted op ever separates a tool call from its result.

use agent_lsp::llm::Message;
use agent_lsp::session::event::{
    AssistantMessage, EventBody, RuntimeContext, SCHEMA_VERSION, SessionHeader, SurfaceEdit,
    SurfaceOp, ToolCallEvent, ToolCallRef, ToolResult, UserMessage,
};
use agent_lsp::session::log::Durability;
use agent_lsp::session::{History, NewEvent, Session};
use agent_tests::assert_tool_pairing;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Action {
    User,
    Runtime(u8),
    Assistant {
        n_calls: usize,
        reasoning: bool,
    },
    /// Answer the n-th pending call (mod their number), or send an orphan result if none waits.
    Answer(usize),
    /// A log-only event.
    LogOnly,
    /// A log-only kind that tries to carry a surface op: always refused.
    LogOnlyWithOp,
    Replace(usize, usize),
    Remove(usize, usize),
    Restore(u64),
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        3 => Just(Action::User),
        1 => (0u8..3).prop_map(Action::Runtime),
        3 => (0usize..3, any::<bool>()).prop_map(|(n_calls, reasoning)| Action::Assistant { n_calls, reasoning }),
        4 => (0usize..4).prop_map(Action::Answer),
        1 => Just(Action::LogOnly),
        1 => Just(Action::LogOnlyWithOp),
        2 => (0usize..64, 0usize..64).prop_map(|(a, b)| Action::Replace(a, b)),
        1 => (0usize..64, 0usize..64).prop_map(|(a, b)| Action::Remove(a, b)),
        1 => (0u64..6).prop_map(Action::Restore),
    ]
}

fn header() -> SessionHeader {
    SessionHeader {
        schema: SCHEMA_VERSION,
        session_id: "prop".into(),
        workspace: "/prop".into(),
        preset: "standard".into(),
        preset_text: None,
        agent_version: "test".into(),
        parent: None,
    }
}

/// Turn an action into an event against the current state (ranges pick surface positions).
fn to_event(session: &Session, action: &Action, counter: u64) -> NewEvent {
    let history = session.history();
    let entries = history.surface().entries();
    let seq_at = |position: usize| {
        entries
            .get(position % entries.len().max(1))
            .map_or(counter, |entry| entry.seq)
    };
    let user = |text: String| {
        EventBody::UserMessage(UserMessage {
            text,
            origin: "prompt".into(),
        })
    };
    match action {
        Action::User => NewEvent::new(1, 0, user(format!("user {counter}"))),
        Action::Runtime(value) => {
            let snapshot = [("k".to_owned(), value.to_string())].into_iter().collect();
            NewEvent::new(
                1,
                0,
                EventBody::RuntimeContext(RuntimeContext {
                    source: None,
                    snapshot,
                    text: format!("rt {value}"),
                }),
            )
        }
        Action::Assistant { n_calls, reasoning } => {
            let tool_calls = (0..*n_calls)
                .map(|index| ToolCallRef {
                    id: format!("call-{counter}-{index}"),
                    name: "grep".into(),
                    arguments: "{}".into(),
                })
                .collect();
            let message = AssistantMessage {
                text: format!("assistant {counter}"),
                reasoning: reasoning.then(|| format!("reasoning {counter}")),
                tool_calls,
            };
            NewEvent::new(1, 1, EventBody::AssistantMessage(message))
        }
        Action::Answer(choice) => {
            let mut pending = history
                .surface()
                .pending_calls()
                .map(str::to_owned)
                .collect::<Vec<_>>();
            pending.sort();
            let call_id = if pending.is_empty() {
                "orphan".to_owned()
            } else {
                pending[choice % pending.len()].clone()
            };
            NewEvent::new(
                1,
                1,
                EventBody::ToolResult(ToolResult {
                    call_id,
                    name: "grep".into(),
                    text: format!("result {counter}"),
                    meta: serde_json::Value::Null,
                }),
            )
        }
        Action::LogOnly => NewEvent::new(
            1,
            1,
            EventBody::ToolCall(ToolCallEvent {
                call_id: "x".into(),
                name: "grep".into(),
                arguments: "{}".into(),
                sandbox: None,
            }),
        ),
        Action::LogOnlyWithOp => NewEvent::new(
            1,
            1,
            EventBody::ToolCall(ToolCallEvent {
                call_id: "x".into(),
                name: "grep".into(),
                arguments: "{}".into(),
                sandbox: None,
            }),
        )
        .with_op(SurfaceOp::Append),
        Action::Replace(a, b) => {
            NewEvent::new(1, 0, user(format!("<compacted-summary> {counter}"))).with_op(
                SurfaceOp::Replace {
                    start: seq_at(*a),
                    end: seq_at(*b),
                },
            )
        }
        Action::Remove(a, b) => NewEvent::new(
            1,
            0,
            EventBody::SurfaceEdit(SurfaceEdit {
                reason: "prop".into(),
            }),
        )
        .with_op(SurfaceOp::Remove {
            start: seq_at(*a),
            end: seq_at(*b),
        }),
        Action::Restore(generation) => NewEvent::new(
            1,
            0,
            EventBody::SurfaceEdit(SurfaceEdit {
                reason: "prop".into(),
            }),
        )
        .with_op(SurfaceOp::Restore {
            generation: *generation,
        }),
    }
}

fn run(actions: Vec<Action>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("prop.jsonl");
    let mut session = Session::create(&path, header(), Durability::Batched).unwrap();
    let mut live: Vec<(u64, Vec<Message>)> = vec![(1, Vec::new())];
    let mut n_refused = 0;

    for (counter, action) in actions.iter().enumerate() {
        let event = to_event(&session, action, counter as u64);
        let before_seq = session.history().last_seq();
        let before = session.derive_messages().to_vec();
        let structural = matches!(
            event.surface_op,
            Some(SurfaceOp::Replace { .. } | SurfaceOp::Remove { .. } | SurfaceOp::Restore { .. })
        );
        match session.append(event) {
            Ok(_) => {
                let incremental = session.derive_messages().to_vec();
                let scratch = History::from_events(session.history().events().to_vec())
                    .unwrap()
                    .derive_messages()
                    .to_vec();
                prop_assert_eq!(
                    &incremental,
                    &scratch,
                    "incremental derive differs after {:?}",
                    action
                );
                assert_tool_pairing(&incremental);
                if structural {
                    prop_assert_eq!(session.history().surface().pending_calls().count(), 0);
                }
                live.push((session.history().last_seq(), incremental));
            }
            Err(_) => {
                n_refused += 1;
                prop_assert!(
                    matches!(action, Action::LogOnlyWithOp) || !matches!(action, Action::LogOnly)
                );
                prop_assert_eq!(session.history().last_seq(), before_seq);
                prop_assert_eq!(session.derive_messages(), before.as_slice());
            }
        }
        if matches!(action, Action::LogOnlyWithOp) {
            prop_assert_eq!(
                session.history().last_seq(),
                before_seq,
                "a log-only kind carried an op"
            );
        }
    }

    for (seq, messages) in &live {
        prop_assert_eq!(
            &session.history().derive_at(*seq).unwrap(),
            messages,
            "derive_at({}) differs",
            seq
        );
    }
    let final_messages = session.derive_messages().to_vec();
    let waiting = session.history().surface().pending_calls().count();
    session.flush().unwrap();
    drop(session);
    // The next writer answers the calls this one left waiting, as interrupted, and changes
    // nothing else.
    let mut reopened = Session::open(&path, Durability::Sync).unwrap();
    let messages = reopened.derive_messages();
    prop_assert_eq!(&messages[..final_messages.len()], final_messages.as_slice());
    prop_assert_eq!(messages.len() - final_messages.len(), waiting);
    for message in &messages[final_messages.len()..] {
        prop_assert!(
            matches!(message, Message::Tool { text, .. } if text.starts_with("interrupted:")),
            "{message:?}"
        );
    }
    let _ = n_refused;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn surface_invariants_hold_for_random_sequences(actions in proptest::collection::vec(action(), 1..80)) {
        run(actions)?;
    }
}

/// A fixed sequence that exercises every op at least once, so the property test's coverage does
/// not depend on luck.
#[test]
fn every_op_kind_is_exercised() {
    use Action::*;
    let actions = vec![
        User,
        Runtime(1),
        Assistant {
            n_calls: 2,
            reasoning: true,
        },
        Answer(0),
        Answer(0),
        Assistant {
            n_calls: 0,
            reasoning: false,
        },
        User,
        Replace(0, 3),
        Runtime(2),
        Remove(1, 1),
        Restore(0),
        Restore(1),
        Answer(0),
        LogOnlyWithOp,
    ];
    run(actions).unwrap();
}
