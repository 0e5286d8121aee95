//! Unit tests of the context editor over small scripted sessions.

use super::ops::{
    BatchOptions, EditOp, NeedsConfirmation, Refused, apply_batch, edit_history, rollback,
};
use super::rules::{ContextRulesSettings, due_ops};
use super::*;
use crate::llm::Message;
use crate::session::event::{
    AssistantMessage, SessionHeader, SurfaceOp, ToolCallRef, ToolResult, UserMessage,
};
use crate::session::log::Durability;
use crate::session::{NewEvent, Session};

/// seqs: 2 prompt, 3 assistant → read a (c1), 4 result c1, 5 assistant → read b (c2),
/// 6 result c2, 7 answer mentioning src/a.rs "as shown above".
fn session(dir: &std::path::Path) -> Session {
    let header = SessionHeader::for_test("s", "minimal");
    let mut session = Session::create(&dir.join("s.jsonl"), header, Durability::Sync).unwrap();
    let call = |id: &str, path: &str| {
        EventBody::AssistantMessage(AssistantMessage {
            text: String::new(),
            reasoning: None,
            tool_calls: vec![ToolCallRef {
                id: id.into(),
                name: "read".into(),
                arguments: format!("{{\"path\":\"{path}\"}}"),
            }],
        })
    };
    let result = |id: &str, text: &str| {
        EventBody::ToolResult(ToolResult {
            call_id: id.into(),
            name: "read".into(),
            text: text.into(),
            meta: serde_json::Value::Null,
        })
    };
    let bodies = [
        (
            0,
            EventBody::UserMessage(UserMessage {
                text: "Find the parser bug".into(),
                origin: "prompt".into(),
            }),
        ),
        (1, call("c1", "src/a.rs")),
        (1, result("c1", &"fn parse() {}\n".repeat(200))),
        (2, call("c2", "src/b.rs")),
        (2, result("c2", "fn other() {}")),
        (
            3,
            EventBody::AssistantMessage(AssistantMessage {
                text: "As shown above, the bug is in src/a.rs.".into(),
                reasoning: None,
                tool_calls: vec![],
            }),
        ),
    ];
    for (step, body) in bodies {
        session.append(NewEvent::new(1, step, body)).unwrap();
    }
    session
}

fn options(force: bool) -> BatchOptions {
    BatchOptions {
        actor: "cli".into(),
        force,
        turn: 1,
        step: 0,
    }
}

fn messages(session: &mut Session) -> Vec<Message> {
    session.derive_messages().to_vec()
}

#[test]
fn segments_name_their_source_tokens_and_references() {
    let dir = tempfile::tempdir().unwrap();
    let session = session(dir.path());
    let all = segments(session.history(), 20);
    let summary = all
        .iter()
        .map(|s| (s.id, s.role, s.source.as_str(), s.referenced))
        .collect::<Vec<_>>();
    assert_eq!(
        summary,
        [
            (2, "user", "prompt", false),
            (3, "assistant", "model → read", true),
            (4, "tool", "tool read src/a.rs (call c1)", true),
            (5, "assistant", "model → read", false),
            (6, "tool", "tool read src/b.rs (call c2)", true),
            (7, "assistant", "model", false),
        ]
    );
    // The path is named later; the hint marks what the answer just read.
    assert_eq!(all[2].referenced_by[0].reason, "path src/a.rs");
    assert_eq!(all[4].referenced_by[0].reason, "hint \"as shown above\"");
    assert_eq!(all[0].preview, "Find the parser bug");
    assert!(all[2].preview.ends_with('…') && all[2].preview.chars().count() == 21);
    assert!(all[2].tokens > all[4].tokens);

    let view = view(
        session.history(),
        &Query {
            role: Some("tool".into()),
            sort_by_tokens: true,
            ..Query::default()
        },
    )
    .unwrap();
    assert_eq!(
        view.segments.iter().map(|s| s.id).collect::<Vec<_>>(),
        [4, 6]
    );
    assert_eq!(view.totals.segments, 6);
    assert_eq!(view.totals.by_role["tool"].segments, 2);
    assert_eq!(
        view.totals.tokens,
        view.totals.by_role.values().map(|r| r.tokens).sum::<u64>()
    );
    let found = super::view(
        session.history(),
        &Query {
            keyword: Some("OTHER".into()),
            ..Query::default()
        },
    )
    .unwrap();
    assert_eq!(found.segments.iter().map(|s| s.id).collect::<Vec<_>>(), [6]);
    assert!(
        super::view(
            session.history(),
            &Query {
                role: Some("robot".into()),
                ..Query::default()
            }
        )
        .is_err()
    );
}

#[test]
fn fold_pin_delete_replace_change_the_surface_and_rollback_restores_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = session(dir.path());
    let before = messages(&mut session);

    // Fold one result: it stays a result of the same call.
    let report = apply_batch(
        &mut session,
        &[EditOp::Fold {
            id: 4,
            end: None,
            summary: Some("a.rs defines parse()".into()),
        }],
        &options(false),
    )
    .unwrap();
    assert_eq!(report.snapshot, 0);
    assert!(report.tokens_after < report.tokens_before);
    let after = messages(&mut session);
    assert_eq!(after.len(), before.len());
    let Message::Tool { call_id, text } = &after[2] else {
        panic!("{:?}", after[2])
    };
    assert_eq!(call_id, "c1");
    assert!(
        text.starts_with("<folded-context edit=\"edit-8\""),
        "{text}"
    );
    assert!(text.contains("a.rs defines parse()"));
    assert!(text.contains(r#"recall_history {"tool_call_id": "c1"}"#));
    assert_eq!(after[..2], before[..2]);
    assert_eq!(after[3..], before[3..]);

    // Pin the goal: appended, the prefix untouched.
    let pinned = apply_batch(&mut session, &[EditOp::Pin { id: 2 }], &options(false)).unwrap();
    let with_pin = messages(&mut session);
    assert_eq!(with_pin[..after.len()], after[..]);
    let Message::User { text } = with_pin.last().unwrap() else {
        panic!()
    };
    assert!(text.starts_with("<pinned-context") && text.contains("Find the parser bug"));
    assert!(
        apply_batch(&mut session, &[EditOp::Pin { id: 2 }], &options(false))
            .unwrap_err()
            .is::<Refused>()
    );

    // Delete the second read: the answer's hint refers to it, so it needs confirmation.
    let log_len = session.history().events().len();
    let err = apply_batch(
        &mut session,
        &[EditOp::Delete {
            id: 5,
            end: Some(6),
        }],
        &options(false),
    )
    .unwrap_err();
    assert!(err.is::<NeedsConfirmation>(), "{err:#}");
    assert_eq!(session.history().events().len(), log_len, "nothing written");
    apply_batch(
        &mut session,
        &[
            EditOp::Delete {
                id: 5,
                end: Some(6),
            },
            EditOp::Replace {
                id: 7,
                end: None,
                text: "The bug is in parse().".into(),
            },
        ],
        &options(true),
    )
    .unwrap();
    let edited = messages(&mut session);
    assert_eq!(edited.len(), before.len() - 1);
    assert!(
        matches!(&edited[3], Message::Assistant { text, .. } if text == "The bug is in parse().")
    );

    // Rollback to each snapshot gives back exactly the messages of then.
    rollback(&mut session, pinned.snapshot, &options(false)).unwrap();
    assert_eq!(messages(&mut session), after);
    rollback(&mut session, report.snapshot, &options(false)).unwrap();
    assert_eq!(messages(&mut session), before);

    // All of it is in the audit trail, and the log replays to the same surface.
    let records = edit_history(session.history());
    assert_eq!(
        records
            .iter()
            .map(|r| (r.ops[0].op.as_str(), r.outcome.as_str()))
            .collect::<Vec<_>>(),
        [
            ("fold", "applied"),
            ("pin", "applied"),
            ("pin", "refused"),
            ("delete", "applied"),
            ("rollback", "applied"),
            ("rollback", "applied"),
        ]
    );
    assert!(records[0].ops[0].before.starts_with("#4 tool/result"));
    assert!(
        records[0].results[0]
            .after
            .starts_with("tool/result: <folded-context")
    );
    assert_eq!(records[3].ops[1].op, "replace");
    let reopened =
        crate::session::History::from_events(session.history().events().to_vec()).unwrap();
    assert_eq!(
        reopened.surface().entries(),
        session.history().surface().entries()
    );
}

#[test]
fn an_op_that_splits_a_tool_call_from_its_result_refuses_the_whole_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = session(dir.path());
    let before = messages(&mut session);
    let generation = session.history().generation();
    let err = apply_batch(
        &mut session,
        &[
            EditOp::Pin { id: 2 },
            EditOp::Fold {
                id: 3,
                end: Some(5),
                summary: Some("x".into()),
            },
        ],
        &options(true),
    )
    .unwrap_err();
    let refused = err.downcast_ref::<Refused>().unwrap();
    assert!(
        refused.reason.contains("tool call `c2`"),
        "{}",
        refused.reason
    );
    assert_eq!(messages(&mut session), before);
    assert_eq!(session.history().generation(), generation);
    let err = apply_batch(
        &mut session,
        &[EditOp::Delete { id: 4, end: None }],
        &options(true),
    )
    .unwrap_err();
    assert!(err.to_string().contains("tool call `c1`"), "{err}");
    let err = apply_batch(
        &mut session,
        &[EditOp::Replace {
            id: 3,
            end: None,
            text: "x".into(),
        }],
        &options(true),
    )
    .unwrap_err();
    assert!(err.to_string().contains("carries tool calls"), "{err}");
    assert_eq!(messages(&mut session), before);
    let records = edit_history(session.history());
    assert!(
        records
            .iter()
            .all(|r| r.outcome == "refused" && r.snapshot.is_none())
    );
}

#[test]
fn rules_fold_old_large_results_and_pin_a_folded_goal() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = session(dir.path());
    let settings = ContextRulesSettings {
        enabled: true,
        fold_tool_results_over_tokens: 500,
        fold_older_than_steps: 1,
        pin_first_goal: true,
    };
    assert_eq!(
        due_ops(session.history(), &settings),
        [EditOp::Fold {
            id: 4,
            end: None,
            summary: None
        }]
    );
    let off = ContextRulesSettings {
        enabled: false,
        ..settings.clone()
    };
    assert!(due_ops(session.history(), &off).is_empty());
    // Too recent: keeping 3 steps covers the result.
    let recent = ContextRulesSettings {
        fold_older_than_steps: 3,
        ..settings.clone()
    };
    assert!(due_ops(session.history(), &recent).is_empty());

    // A checkpoint folds the goal away: the rule pins it back, once.
    session
        .append(
            NewEvent::new(
                1,
                3,
                EventBody::UserMessage(UserMessage {
                    text: "<compacted-summary id=\"cmp-9\">\nsummary\n</compacted-summary>".into(),
                    origin: "compaction".into(),
                }),
            )
            .with_op(SurfaceOp::Replace { start: 2, end: 6 }),
        )
        .unwrap();
    let plugin = super::rules::ContextRulesPlugin::new(settings.clone());
    assert_eq!(plugin.apply(&mut session, 1, 4).unwrap(), 1);
    assert_eq!(plugin.apply(&mut session, 1, 5).unwrap(), 0);
    let all = segments(session.history(), 40);
    assert_eq!(all[0].source, "compaction cmp-9");
    assert_eq!(all[0].role, "summary");
    assert_eq!(all.last().unwrap().source, "pin edit-9 of #2");
    assert_eq!(all.last().unwrap().role, "context");
}
