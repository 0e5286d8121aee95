use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::context::runtime::RuntimeContextProjection;
use crate::session::NewEvent;
use crate::session::event::{SessionHeader, UserMessage};
use crate::session::log::Durability;
use crate::tools::{ToolRegistry, ToolRuntime};
use crate::workspace::Workspace;

struct Fixture {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    session: Session,
    tools: ToolRuntime,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let session = Session::create(
            &path,
            SessionHeader::for_test("s", "standard"),
            Durability::Sync,
        )
        .unwrap();
        let mut registry = ToolRegistry::new();
        registry.register(tool::Todo);
        let tools = ToolRuntime::new(Workspace::new(dir.path()).unwrap(), registry);
        Fixture {
            _dir: dir,
            path,
            session,
            tools,
        }
    }

    /// One `todo` call as the runtime records it; returns its result text and whether it failed.
    fn todo(&mut self, arguments: serde_json::Value) -> (String, bool) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let outcome = runtime
            .block_on(self.tools.run_one(
                &mut self.session,
                TOOL,
                &arguments.to_string(),
                &CancellationToken::new(),
            ))
            .unwrap();
        (outcome.output.text, outcome.output.is_error)
    }

    fn prompt(&mut self, text: &str) {
        let turn = self.session.history().next_turn();
        self.session
            .append(NewEvent::new(
                turn,
                0,
                EventBody::UserMessage(UserMessage {
                    text: text.into(),
                    origin: "prompt".into(),
                }),
            ))
            .unwrap();
    }
}

fn items(list: &[(&str, &str)]) -> serde_json::Value {
    json!({"items": list.iter().map(|(text, status)| json!({"text": text, "status": status})).collect::<Vec<_>>()})
}

fn plan(list: &[(&str, Status)]) -> Plan {
    Plan {
        items: list
            .iter()
            .map(|(text, status)| Item {
                text: (*text).into(),
                status: *status,
            })
            .collect(),
    }
}

#[test]
fn a_valid_list_is_the_current_plan_and_a_broken_one_says_what_to_fix() {
    let mut fx = Fixture::new();
    assert_eq!(current(fx.session.history()), None);
    let (text, failed) = fx.todo(items(&[
        ("  Read the lexer ", "done"),
        ("Fix lex()", "in_progress"),
        ("Run the tests", "pending"),
    ]));
    assert!(!failed, "{text}");
    assert_eq!(
        text,
        "Plan saved: 3 items (1 done, 1 in progress, 1 pending). It is shown to you as <todo> from the next step on."
    );
    let expected = plan(&[
        ("Read the lexer", Status::Done),
        ("Fix lex()", Status::InProgress),
        ("Run the tests", Status::Pending),
    ]);
    assert_eq!(current(fx.session.history()).unwrap().1, expected);

    let long = "x".repeat(MAX_ITEM_CHARS + 1);
    let too_many = (0..=MAX_ITEMS)
        .map(|n| json!({"text": format!("step {n}"), "status": "pending"}))
        .collect::<Vec<_>>();
    for (arguments, message) in [
        (
            items(&[("a", "in_progress"), ("b", "done"), ("c", "in_progress")]),
            "error: 2 items are in_progress (items 1, 3), and at most one may be at a time: mark the others pending or done; the previous plan stays the current one",
        ),
        (
            items(&[("a", "done"), ("  ", "pending")]),
            "error: item 2 has no text: say what the step is; the previous plan stays the current one",
        ),
        (
            items(&[("first line\nsecond line", "pending")]),
            "error: item 1 spans several lines: give each item one line; the previous plan stays the current one",
        ),
        (
            items(&[(long.as_str(), "pending")]),
            "error: item 1 is 301 characters long, at most 300 are allowed: shorten it; the previous plan stays the current one",
        ),
        (
            json!({"items": too_many}),
            "error: the plan has 51 items, at most 50 are allowed: merge or drop some; the previous plan stays the current one",
        ),
    ] {
        let (text, failed) = fx.todo(arguments);
        assert!(failed);
        assert_eq!(text, message);
    }
    let (text, failed) = fx.todo(items(&[("a", "started")]));
    assert!(
        failed && text.contains("unknown variant `started`"),
        "{text}"
    );
    let (text, failed) = fx.todo(json!({"items": [{"text": "a", "status": "done", "id": 1}]}));
    assert!(failed && text.contains("unknown field `id`"), "{text}");

    // None of the refused calls changed the plan, and a reopened log has it too.
    assert_eq!(current(fx.session.history()).unwrap().1, expected);
    let path = fx.path.clone();
    drop(fx.session);
    let reopened = Session::open(&path, Durability::Sync).unwrap();
    assert_eq!(current(reopened.history()).unwrap().1, expected);
    assert_eq!(expected.summary(), "1/3 done, now: Fix lex()");
    assert_eq!(expected.open_line(), "[>] Fix lex(); [ ] Run the tests");
}

#[test]
fn the_goal_is_the_first_prompt_until_one_is_set() {
    let mut fx = Fixture::new();
    assert_eq!(goal(fx.session.history()), None);
    fx.prompt("Make the parser accept trailing commas.");
    fx.prompt("Also keep the old error messages.");
    let first = goal(fx.session.history()).unwrap();
    assert_eq!(first.text, "Make the parser accept trailing commas.");
    assert_eq!((first.source, first.seq), (GoalSource::Prompt, 2));

    assert_eq!(
        set_goal(&mut fx.session, "   ", "editor")
            .unwrap_err()
            .to_string(),
        "the goal is empty; say what the session is for"
    );
    let set = set_goal(&mut fx.session, " Ship trailing commas \n", "editor").unwrap();
    assert_eq!(set.text, "Ship trailing commas");
    assert_eq!(goal(fx.session.history()).unwrap(), set);
    let view = view(fx.session.history());
    assert_eq!(
        view,
        json!({"goal": "Ship trailing commas", "goal_source": "set", "items": [], "open": 0})
    );
    let long = "g".repeat(MAX_GOAL_CHARS + 1);
    assert!(check_goal(&long).unwrap_err().contains("at most 4000"));
}

/// The plugin's contribution, projected as the loop projects it.
fn step(fx: &mut Fixture, plugin: &mut PlansPlugin, step: u32) -> Option<u64> {
    let contribution = plugin.runtime_context(fx.session.history()).unwrap()?;
    RuntimeContextProjection::project_from(
        &mut fx.session,
        1,
        step,
        contribution.source.as_deref(),
        &contribution.facts,
        contribution.text,
    )
    .unwrap()
}

#[test]
fn the_list_reaches_the_runtime_context_once_per_change() {
    let mut fx = Fixture::new();
    let mut plugin = PlansPlugin::default();
    fx.prompt("Fix the parser.");
    // No plan and no goal set: nothing to show (the first prompt is on the surface already).
    assert_eq!(plugin.runtime_context(fx.session.history()).unwrap(), None);

    fx.todo(items(&[("Read", "in_progress"), ("Fix", "pending")]));
    let first = step(&mut fx, &mut plugin, 1).unwrap();
    let EventBody::RuntimeContext(context) = &fx.session.history().event(first).unwrap().body
    else {
        panic!("not runtime context");
    };
    assert_eq!(context.source.as_deref(), Some(PLUGIN));
    assert_eq!(context.text, "<todo>\n[>] Read\n[ ] Fix\n</todo>");
    assert_eq!(step(&mut fx, &mut plugin, 2), None);

    // The same list again is no change; a new status is.
    fx.todo(items(&[("Read", "in_progress"), ("Fix", "pending")]));
    assert_eq!(step(&mut fx, &mut plugin, 3), None);
    fx.todo(items(&[("Read", "done"), ("Fix", "in_progress")]));
    assert!(step(&mut fx, &mut plugin, 4).is_some());
    // A goal that was set comes with the list; a fresh plugin (a new process) sees the
    // same facts and injects nothing twice.
    set_goal(&mut fx.session, "Parser fixed", "cli").unwrap();
    let with_goal = step(&mut fx, &mut plugin, 5).unwrap();
    let EventBody::RuntimeContext(context) = &fx.session.history().event(with_goal).unwrap().body
    else {
        panic!("not runtime context");
    };
    assert_eq!(
        context.text,
        "<goal>\nParser fixed\n</goal>\n<todo>\n[x] Read\n[>] Fix\n</todo>"
    );
    let mut restarted = PlansPlugin::default();
    assert_eq!(step(&mut fx, &mut restarted, 6), None);

    // An empty list clears the plan, and says so.
    fx.todo(json!({"items": []}));
    let cleared = step(&mut fx, &mut plugin, 7).unwrap();
    let EventBody::RuntimeContext(context) = &fx.session.history().event(cleared).unwrap().body
    else {
        panic!("not runtime context");
    };
    assert!(
        context
            .text
            .ends_with("<todo>\n(the plan is empty)\n</todo>"),
        "{}",
        context.text
    );
}
