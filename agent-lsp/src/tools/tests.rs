//! Runtime tests (recording into a real session, permissions, caps, concurrency, cancellation)
//! and the hostile path corpus run against every file tool.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::sync::Barrier;

use super::testing::{Fixture, run};
use super::*;
use crate::canonical::canonical_json;
use crate::plugin::tool::ToolContext;
use crate::session::event::AssistantMessage;
use crate::session::event::{EventKind, UserMessage};
use crate::session::log::Durability;

fn session(fx: &Fixture) -> Session {
    // Built from JSON so that new optional header fields do not break these tests.
    let header = serde_json::from_value(json!({
        "schema": crate::session::event::SCHEMA_VERSION,
        "session_id": "tools-test",
        "workspace": fx.root().display().to_string(),
        "preset": "standard",
        "agent_version": "test",
    }))
    .unwrap();
    Session::create(
        &fx.tmp.path().join("session.jsonl"),
        header,
        Durability::Sync,
    )
    .unwrap()
}

fn call(id: &str, name: &str, arguments: &str) -> ToolCallRef {
    ToolCallRef {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

/// A user prompt and an assistant message carrying `calls`, as the agent loop records them,
/// then the runtime's execution of the calls.
async fn step(
    runtime: &ToolRuntime,
    session: &mut Session,
    calls: &[ToolCallRef],
    cancel: &CancellationToken,
) -> Vec<ToolCallOutcome> {
    session
        .append(NewEvent::new(
            1,
            0,
            EventBody::UserMessage(UserMessage {
                text: "do it".into(),
                origin: "prompt".into(),
            }),
        ))
        .unwrap();
    session
        .append(NewEvent::new(
            1,
            1,
            EventBody::AssistantMessage(AssistantMessage {
                text: String::new(),
                reasoning: None,
                tool_calls: calls.to_vec(),
            }),
        ))
        .unwrap();
    runtime.execute(session, 1, 1, calls, cancel).await.unwrap()
}

fn runtime(fx: &Fixture) -> ToolRuntime {
    ToolRuntime::new((*fx.workspace).clone(), ToolRegistry::standard())
}

/// The kinds and call ids of the events after the assistant message.
fn recorded(session: &Session) -> Vec<(EventKind, String)> {
    let events = session.history().events();
    let start = events
        .iter()
        .rposition(|event| event.kind() == EventKind::AssistantMessage)
        .unwrap();
    events[start + 1..]
        .iter()
        .map(|event| match &event.body {
            EventBody::ToolCall(call) => (event.kind(), call.call_id.clone()),
            EventBody::ToolResult(result) => (event.kind(), result.call_id.clone()),
            _ => (event.kind(), String::new()),
        })
        .collect()
}

fn result_text(session: &Session, call_id: &str) -> String {
    session
        .history()
        .events()
        .iter()
        .find_map(|event| match &event.body {
            EventBody::ToolResult(result) if result.call_id == call_id => Some(result.text.clone()),
            _ => None,
        })
        .unwrap()
}

/// A tool whose behaviour the tests choose.
struct Probe {
    name: &'static str,
    read_only: bool,
    behaviour: Behaviour,
}

#[derive(Clone)]
enum Behaviour {
    /// Wait until all the calls sharing the barrier are running.
    Barrier(Arc<Barrier>),
    Sleep(Duration),
    /// Never finish (until dropped).
    Hang,
    /// Return this many bytes of numbered lines.
    Big(usize),
    /// Panic in the future it returns.
    PanicLater,
    /// Panic before it returns a future.
    PanicAtOnce,
}

impl Tool for Probe {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: self.name.into(),
            description: "test probe".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }

    fn read_only(&self) -> bool {
        self.read_only
    }

    fn run(&self, ctx: ToolContext, _args: CallArgs) -> BoxFuture<'static, ToolOutput> {
        let behaviour = self.behaviour.clone();
        if let Behaviour::PanicAtOnce = behaviour {
            panic!("a bug before the future");
        }
        Box::pin(async move {
            match behaviour {
                Behaviour::Barrier(barrier) => {
                    barrier.wait().await;
                }
                Behaviour::Sleep(duration) => tokio::time::sleep(duration).await,
                Behaviour::Hang => std::future::pending::<()>().await,
                Behaviour::Big(n) => {
                    let text: String = (0..)
                        .map(|i| format!("line {i:06}\n"))
                        .take(n / 12)
                        .collect();
                    return ToolOutput::ok(text).with_meta("source", "probe");
                }
                Behaviour::PanicLater => panic!("a bug in the future"),
                Behaviour::PanicAtOnce => unreachable!("panicked before"),
            }
            ToolOutput::ok(format!("{} done", ctx.call_id))
        })
    }
}

fn probe(name: &'static str, read_only: bool, behaviour: Behaviour) -> Probe {
    Probe {
        name,
        read_only,
        behaviour,
    }
}

#[test]
fn the_catalog_is_sorted_canonical_and_independent_of_permissions() {
    let fx = Fixture::new();
    let allow_all = runtime(&fx).with_policy(PermissionPolicy::new(Permission::Allow));
    let deny_all = runtime(&fx).with_policy(PermissionPolicy::new(Permission::Deny));
    let catalog = allow_all.catalog();
    let names: Vec<&str> = catalog.iter().map(|def| def.name.as_str()).collect();
    assert_eq!(names, STANDARD_TOOLS);
    assert_eq!(catalog, deny_all.catalog());
    for def in &catalog {
        let bytes = serde_json::to_string(&def.parameters).unwrap();
        assert_eq!(
            bytes,
            canonical_json(&def.parameters),
            "{} schema not canonical",
            def.name
        );
        assert_eq!(def.parameters["type"], "object");
        assert_eq!(
            def.parameters["additionalProperties"], false,
            "{}",
            def.name
        );
    }
    let only = ToolRegistry::standard().only(&["read", "grep"]).unwrap();
    assert_eq!(only.names().collect::<Vec<_>>(), ["grep", "read"]);
    let err = ToolRegistry::standard()
        .only(&["read", "nope"])
        .err()
        .unwrap();
    assert!(err.to_string().contains("no tool named `nope`"), "{err}");
}

#[tokio::test]
async fn calls_and_results_are_recorded_in_call_order_with_meta() {
    let fx = Fixture::new();
    fx.file("a.txt", "alpha\n");
    let mut session = session(&fx);
    let calls = [
        call("c1", "read", r#"{"path": "a.txt"}"#),
        call("c2", "list", ""),
        call("c3", "read", r#"{"path":"missing.txt"}"#),
    ];
    let outcomes = step(
        &runtime(&fx),
        &mut session,
        &calls,
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(
        recorded(&session),
        [
            (EventKind::ToolCall, "c1".into()),
            (EventKind::ToolCall, "c2".into()),
            (EventKind::ToolCall, "c3".into()),
            (EventKind::ToolResult, "c1".into()),
            (EventKind::ToolResult, "c2".into()),
            (EventKind::ToolResult, "c3".into()),
        ]
    );
    // The raw arguments are recorded exactly as sent.
    let raw = session
        .history()
        .events()
        .iter()
        .find_map(|event| match &event.body {
            EventBody::ToolCall(call) if call.call_id == "c1" => Some(call.arguments.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(raw, r#"{"path": "a.txt"}"#);
    assert_eq!(outcomes[0].output.text, "     1\talpha\n");
    assert_eq!(result_text(&session, "c1"), "     1\talpha\n");
    let meta = &outcomes[0].output.meta;
    assert_eq!(meta["source"], "a.txt");
    assert_eq!(meta["truncated"], false);
    assert_eq!(meta["original_len"], 13);
    assert_eq!(meta["is_error"], false);
    assert!(meta["duration_ms"].is_u64());
    assert!(
        outcomes[1].output.text.contains("a.txt\n"),
        "{}",
        outcomes[1].output.text
    );
    assert!(outcomes[2].output.is_error);
    assert_eq!(outcomes[2].output.meta["is_error"], true);
    let event = session.history().event(outcomes[2].result_seq).unwrap();
    assert_eq!(event.kind(), EventKind::ToolResult);
    // Every call is answered: the session takes the next prompt.
    session
        .append(NewEvent::new(
            2,
            0,
            EventBody::UserMessage(UserMessage {
                text: "next".into(),
                origin: "prompt".into(),
            }),
        ))
        .unwrap();
}

#[tokio::test]
async fn invalid_json_and_unknown_tools_are_results_not_errors() {
    let fx = Fixture::new();
    let mut session = session(&fx);
    let calls = [
        call("c1", "read", r#"{"path": "a.txt""#),
        call("c2", "read", r#"["a.txt"]"#),
        call("c3", "frobnicate", "{}"),
        call("c4", "read", r#"{"path": 7}"#),
    ];
    let outcomes = step(
        &runtime(&fx),
        &mut session,
        &calls,
        &CancellationToken::new(),
    )
    .await;
    let texts: Vec<&str> = outcomes.iter().map(|o| o.output.text.as_str()).collect();
    assert!(
        texts[0].starts_with("error: the arguments were not valid JSON ("),
        "{}",
        texts[0]
    );
    assert!(
        texts[0].ends_with("send the call again with a JSON object"),
        "{}",
        texts[0]
    );
    assert_eq!(
        texts[1],
        "error: the arguments must be a JSON object with the tool's parameters"
    );
    assert_eq!(
        texts[2],
        "error: there is no tool named `frobnicate`; the tools are edit, glob, grep, list, read, shell, write"
    );
    assert!(
        texts[3].contains("invalid arguments for `read`: invalid type: integer `7`"),
        "{}",
        texts[3]
    );
    assert!(outcomes.iter().all(|o| o.output.is_error));
    let raw = session
        .history()
        .events()
        .iter()
        .find_map(|event| match &event.body {
            EventBody::ToolCall(call) if call.call_id == "c1" => Some(call.arguments.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(raw, r#"{"path": "a.txt""#);
}

struct Recording {
    answer: bool,
    asked: Mutex<Vec<String>>,
}

impl Asker for Recording {
    fn ask(&self, call: &ToolCallRef) -> BoxFuture<'static, bool> {
        self.asked.lock().unwrap().push(call.id.clone());
        let answer = self.answer;
        Box::pin(async move { answer })
    }
}

#[tokio::test]
async fn permissions_allow_ask_and_deny() {
    let fx = Fixture::new();
    let policy = PermissionPolicy::new(Permission::Allow)
        .with("write", Permission::Deny)
        .with("shell", Permission::Ask);
    let calls = [
        call("c1", "write", r#"{"path": "w.txt", "content": "x"}"#),
        call("c2", "shell", r#"{"command": "echo ran > ran.txt"}"#),
        call("c3", "read", r#"{"path": "sub"}"#),
    ];

    // Headless without --yes: `ask` means deny.
    let mut s = session(&fx);
    let rt = runtime(&fx).with_policy(policy.clone());
    let out = step(&rt, &mut s, &calls, &CancellationToken::new()).await;
    assert_eq!(
        out[0].output.text,
        "error: the call to `write` was refused by the preset's permission policy (`write` is denied in this session); do not retry it, find another way or tell the user"
    );
    assert_eq!(out[0].output.meta["refused"], "deny");
    assert!(
        out[1]
            .output
            .text
            .contains("refused by the preset's permission policy: it needs approval (`ask`)"),
        "{}",
        out[1].output.text
    );
    assert!(out[1].output.text.contains("--yes"));
    assert_eq!(out[1].output.meta["refused"], "ask");
    assert!(
        out[2].output.text.contains("is a directory"),
        "allowed tools still run"
    );
    assert!(!fx.root().join("w.txt").exists());
    assert!(!fx.root().join("ran.txt").exists());

    // Headless with --yes: `ask` means allow; `deny` stays deny.
    std::fs::remove_file(fx.tmp.path().join("session.jsonl")).unwrap();
    let mut s = session(&fx);
    let rt = runtime(&fx)
        .with_policy(policy.clone())
        .with_asker(Arc::new(HeadlessAsker { yes: true }));
    let out = step(&rt, &mut s, &calls, &CancellationToken::new()).await;
    assert!(out[0].output.text.contains("refused"));
    assert_eq!(out[1].output.text, "exit code: 0\n(no output)\n");
    assert!(fx.root().join("ran.txt").exists());

    // An interactive asker is asked, in call order, only for `ask` tools.
    std::fs::remove_file(fx.tmp.path().join("session.jsonl")).unwrap();
    let mut s = session(&fx);
    let asker = Arc::new(Recording {
        answer: false,
        asked: Mutex::new(Vec::new()),
    });
    let rt = runtime(&fx)
        .with_policy(PermissionPolicy::new(Permission::Ask).with("read", Permission::Allow))
        .with_asker(asker.clone());
    let out = step(&rt, &mut s, &calls, &CancellationToken::new()).await;
    assert_eq!(*asker.asked.lock().unwrap(), ["c1", "c2"]);
    assert!(
        out[0].output.text.contains("the user declined it"),
        "{}",
        out[0].output.text
    );
    assert!(!out[2].output.text.contains("refused"));
}

#[tokio::test]
async fn long_output_is_capped_with_head_tail_and_meta() {
    let fx = Fixture::new();
    let mut registry = ToolRegistry::new();
    registry.register(probe("big", true, Behaviour::Big(12_000)));
    let rt = ToolRuntime::new((*fx.workspace).clone(), registry).with_limits(Limits {
        max_output_bytes: 2_000,
        ..Limits::default()
    });
    let mut s = session(&fx);
    let out = step(
        &rt,
        &mut s,
        &[call("c1", "big", "{}")],
        &CancellationToken::new(),
    )
    .await;
    let output = &out[0].output;
    assert!(output.text.len() <= 2_000, "{}", output.text.len());
    assert!(output.text.starts_with("line 000000\n"));
    assert!(output.text.ends_with("line 000999\n"));
    assert!(output.text.contains(" of 12000 bytes ("), "{}", output.text);
    assert!(output.text.contains("cut from the middle of this output"));
    assert_eq!(output.meta["truncated"], true);
    assert_eq!(output.meta["original_len"], 12_000);
    assert_eq!(output.meta["source"], "probe");
    // What the log keeps is what the model saw.
    assert_eq!(result_text(&s, "c1"), output.text);
}

#[test]
fn cap_text_keeps_whole_lines_and_char_boundaries() {
    let text: String = (0..100).map(|i| format!("é{i:03}\n")).collect();
    let (capped, truncated) = cap_text(&text, 400);
    assert!(truncated);
    assert!(capped.len() <= 400);
    assert!(capped.starts_with("é000\n"));
    assert!(capped.ends_with("é099\n"));
    let (head, rest) = capped.split_once("\n[…").unwrap();
    assert!(head.lines().all(|line| line.len() == 5), "{head:?}");
    let tail = rest.split_once("…]\n").unwrap().1;
    assert!(tail.lines().all(|line| line.len() == 5), "{tail:?}");
    assert_eq!(cap_text("short", 10), ("short".to_owned(), false));
    let (tiny, _) = cap_text(&"日本".repeat(100), 250);
    assert!(tiny.len() <= 250);
}

#[tokio::test]
async fn read_only_calls_run_concurrently_and_are_recorded_in_call_order() {
    let fx = Fixture::new();
    fx.file("a.txt", "alpha\n");
    let barrier = Arc::new(Barrier::new(3));
    let mut registry = ToolRegistry::standard();
    registry
        .register(probe("meet", true, Behaviour::Barrier(barrier)))
        .register(probe(
            "slow",
            true,
            Behaviour::Sleep(Duration::from_millis(300)),
        ));
    // If the three `meet` calls ran one after another, the first would wait for the others
    // until its timeout.
    let rt = ToolRuntime::new((*fx.workspace).clone(), registry).with_limits(Limits {
        timeout: Duration::from_secs(5),
        ..Limits::default()
    });
    let calls = [
        call("c1", "slow", "{}"),
        call("c2", "meet", "{}"),
        call("c3", "read", r#"{"path": "a.txt"}"#),
        call("c4", "meet", "{}"),
        call("c5", "meet", "{}"),
    ];
    let mut s = session(&fx);
    let started = std::time::Instant::now();
    let out = step(&rt, &mut s, &calls, &CancellationToken::new()).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let texts: Vec<&str> = out.iter().map(|o| o.output.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "c1 done",
            "c2 done",
            "     1\talpha\n",
            "c4 done",
            "c5 done"
        ]
    );
    let results: Vec<String> = recorded(&s)
        .into_iter()
        .filter(|(kind, _)| *kind == EventKind::ToolResult)
        .map(|(_, id)| id)
        .collect();
    assert_eq!(results, ["c1", "c2", "c3", "c4", "c5"]);
}

/// A tool's panic, in its future or before it, is that call's result: the other calls of the
/// batch are answered and every call is recorded.
#[tokio::test]
async fn a_panicking_tool_is_its_calls_result_and_the_batch_goes_on() {
    let fx = Fixture::new();
    let mut registry = ToolRegistry::standard();
    registry
        .register(probe("later", true, Behaviour::PanicLater))
        .register(probe("at_once", true, Behaviour::PanicAtOnce))
        .register(probe("fine", true, Behaviour::Sleep(Duration::ZERO)));
    let rt = ToolRuntime::new((*fx.workspace).clone(), registry);
    let calls = [
        call("c1", "later", "{}"),
        call("c2", "fine", "{}"),
        call("c3", "at_once", "{}"),
    ];
    let mut s = session(&fx);
    let out = step(&rt, &mut s, &calls, &CancellationToken::new()).await;
    assert_eq!(out.len(), 3);
    assert_eq!(out[1].output.text, "c2 done");
    for (index, said) in [(0, "a bug in the future"), (2, "a bug before the future")] {
        let output = &out[index].output;
        assert!(output.is_error, "{output:?}");
        assert!(output.text.contains(said), "{}", output.text);
        assert_eq!(output.meta["panicked"], true);
    }
    let results = recorded(&s)
        .into_iter()
        .filter(|(kind, _)| *kind == EventKind::ToolResult)
        .count();
    assert_eq!(results, 3);
}

#[tokio::test]
async fn a_mutating_call_runs_alone_and_later_reads_see_it() {
    let fx = Fixture::new();
    let calls = [
        call("c1", "read", r#"{"path": "f.txt"}"#),
        call(
            "c2",
            "write",
            r#"{"path": "f.txt", "content": "written\n"}"#,
        ),
        call("c3", "read", r#"{"path": "f.txt"}"#),
        call(
            "c4",
            "edit",
            r#"{"path": "f.txt", "old_string": "written", "new_string": "edited"}"#,
        ),
        call("c5", "read", r#"{"path": "f.txt"}"#),
    ];
    let mut s = session(&fx);
    let out = step(&runtime(&fx), &mut s, &calls, &CancellationToken::new()).await;
    assert!(out[0].output.text.contains("does not exist"));
    assert_eq!(out[2].output.text, "     1\twritten\n");
    assert_eq!(out[4].output.text, "     1\tedited\n");
}

#[tokio::test]
async fn a_cancelled_turn_still_answers_every_call() {
    let fx = Fixture::new();
    let mut registry = ToolRegistry::standard();
    registry.register(probe("hang", true, Behaviour::Hang));
    let rt = ToolRuntime::new((*fx.workspace).clone(), registry);
    let calls = [
        call("c1", "read", r#"{"path": "sub"}"#),
        call("c2", "hang", "{}"),
        call("c3", "write", r#"{"path": "never.txt", "content": "x"}"#),
    ];
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        trigger.cancel();
    });
    let mut s = session(&fx);
    let out = step(&rt, &mut s, &calls, &cancel).await;
    assert!(
        out[0].output.text.contains("is a directory"),
        "{}",
        out[0].output.text
    );
    assert_eq!(
        out[1].output.text,
        "error: cancelled: the user cancelled the turn while `hang` was running; it had no effect"
    );
    assert_eq!(out[1].output.meta["cancelled"], true);
    assert_eq!(
        out[2].output.text,
        "error: cancelled: the user cancelled the turn before `write` ran; it had no effect"
    );
    assert!(!fx.root().join("never.txt").exists());
    assert_eq!(recorded(&s).len(), 6);
    s.append(NewEvent::new(
        2,
        0,
        EventBody::UserMessage(UserMessage {
            text: "next".into(),
            origin: "prompt".into(),
        }),
    ))
    .unwrap();
}

#[tokio::test]
async fn a_call_past_its_timeout_is_stopped() {
    let fx = Fixture::new();
    let mut registry = ToolRegistry::new();
    registry.register(probe("hang", false, Behaviour::Hang));
    let rt = ToolRuntime::new((*fx.workspace).clone(), registry).with_limits(Limits {
        timeout: Duration::from_millis(100),
        ..Limits::default()
    });
    let mut s = session(&fx);
    let out = step(
        &rt,
        &mut s,
        &[call("c1", "hang", "{}")],
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(
        out[0].output.text,
        "error: `hang` did not finish within 0.1 s and was stopped (it may have taken effect partly: check before retrying); try a smaller request"
    );
    assert_eq!(out[0].output.meta["timed_out"], true);
}

#[derive(Default)]
struct Watcher {
    seen: Mutex<Vec<String>>,
}

impl ToolObserver for Watcher {
    fn before_call(&self, call: &ToolCallRef) {
        self.seen
            .lock()
            .unwrap()
            .push(format!("before {}", call.id));
    }

    fn after_result(&self, call: &ToolCallRef, output: &ToolOutput) {
        self.seen
            .lock()
            .unwrap()
            .push(format!("after {} error={}", call.id, output.is_error));
    }
}

#[tokio::test]
async fn observers_see_every_call_and_result() {
    let fx = Fixture::new();
    let watcher = Arc::new(Watcher::default());
    let rt = runtime(&fx).with_observer(watcher.clone());
    let mut s = session(&fx);
    step(
        &rt,
        &mut s,
        &[call("c1", "list", "{}"), call("c2", "read", "{")],
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(
        *watcher.seen.lock().unwrap(),
        [
            "before c1",
            "before c2",
            "after c1 error=false",
            "after c2 error=true"
        ]
    );
}

#[tokio::test]
async fn run_one_records_a_user_call_that_pairs_like_a_model_call() {
    let fx = Fixture::new();
    fx.file("a.txt", "alpha\n");
    let rt = runtime(&fx);
    let mut s = session(&fx);
    let cancel = CancellationToken::new();
    let outcome = rt
        .run_one(&mut s, "read", r#"{"path":"a.txt"}"#, &cancel)
        .await
        .unwrap();
    assert_eq!(outcome.output.text, "     1\talpha\n");
    assert_eq!(outcome.output.meta["origin"], "user");
    assert_eq!(outcome.call.id, "user-2");
    let kinds: Vec<EventKind> = s
        .history()
        .events()
        .iter()
        .map(|event| event.kind())
        .collect();
    assert_eq!(
        kinds,
        [
            EventKind::SessionHeader,
            EventKind::AssistantMessage,
            EventKind::ToolCall,
            EventKind::ToolResult
        ]
    );
    assert!(
        s.history().events()[1..]
            .iter()
            .all(|event| event.turn == 1 && event.step == 0)
    );
    let second = rt
        .run_one(&mut s, "glob", "{\"pattern\":\"*.txt\"}", &cancel)
        .await
        .unwrap();
    assert_eq!(second.output.text, "a.txt\n");
    assert_eq!(second.call.id, "user-5");
    assert_eq!(s.history().events().last().unwrap().turn, 2);
    let messages = s.derive_messages().to_vec();
    assert_eq!(messages.len(), 4);
    assert!(
        matches!(&messages[1], crate::llm::Message::Tool { call_id, .. } if call_id == "user-2")
    );
    // Errors are results here too.
    let bad = rt
        .run_one(&mut s, "read", "not json", &cancel)
        .await
        .unwrap();
    assert!(bad.output.is_error);
}

/// Paths every file tool must refuse, relative to the fixture's workspace (`tmp/ws`, next to
/// `tmp/outside`).
fn hostile_paths(fx: &Fixture) -> Vec<String> {
    let tmp = fx.tmp.path().display().to_string();
    let mut paths: Vec<String> = [
        "..",
        "../outside/secret.txt",
        "../outside/new.txt",
        "../../etc/passwd",
        "../ws/new.txt",
        "/etc/passwd",
        "/etc/agent-lsp-hostile-test.txt",
        "/tmp",
        "link_file",
        "link_dir",
        "link_dir/secret.txt",
        "link_dir/new.txt",
        "link_dir/../ws/new.txt",
        "link_dir/../x.txt",
        "dangling",
        "a\0b",
        "..\\..\\x",
        "C:\\Windows",
        "C:/Windows/x.txt",
        "\\\\server\\share",
        "//server/share",
        "~/x",
        "./../x",
        "a/../../x",
        "sub/../../x",
        "file:///etc/passwd",
        "",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    paths.push(format!("{tmp}/outside/secret.txt"));
    paths.push(format!("{tmp}/outside/new.txt"));
    paths.push(format!("{tmp}/x.txt"));
    paths.push("a/".repeat(2100) + "x");
    paths.push("y".repeat(300));
    paths.push(format!("sub/{}/x", "z".repeat(256)));
    paths
}

/// Every file under `dir`, with its content, to prove nothing outside changed.
fn snapshot(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                files.push((
                    entry.path().display().to_string(),
                    std::fs::read(entry.path()).unwrap(),
                ));
            }
        }
    }
    files.sort();
    files
}

#[tokio::test]
async fn every_file_tool_refuses_every_hostile_path() {
    let fx = Fixture::new();
    let paths = hostile_paths(&fx);
    assert!(paths.len() >= 20);
    let before_outside = snapshot(&fx.outside());
    let passwd_before = std::fs::read("/etc/passwd").ok();
    let tmp_entries_before: Vec<_> = std::fs::read_dir(fx.tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    for path in &paths {
        // Should a path get through by mistake, writing its current content keeps the machine
        // unharmed; the assertion below still catches it.
        let harmless =
            std::fs::read_to_string(path.replace('\0', "")).unwrap_or_else(|_| "x".into());
        let cases: [(&dyn Tool, Value); 6] = [
            (&fs::Read, json!({"path": path})),
            (&fs::List, json!({"path": path})),
            (&search::Glob, json!({"pattern": "*", "path": path})),
            (
                &search::Grep,
                json!({"pattern": "needle|root", "path": path}),
            ),
            (&fs::Write, json!({"path": path, "content": harmless})),
            (
                &edit::Edit,
                json!({"path": path, "old_string": "needle outside", "new_string": "changed"}),
            ),
        ];
        for (tool, args) in cases {
            let name = tool.def().name;
            let out = run(tool, &fx, args).await;
            assert!(out.is_error, "{name} accepted {path:?}: {}", out.text);
            assert!(
                out.text.starts_with("error: path refused: "),
                "{name} on {path:?} did not say why: {}",
                out.text
            );
            assert!(out.text.len() < 600, "{name} on {path:?}: {}", out.text);
            assert!(
                !out.text.contains("needle outside"),
                "{name} leaked: {}",
                out.text
            );
        }
    }
    assert_eq!(
        snapshot(&fx.outside()),
        before_outside,
        "something outside changed"
    );
    assert_eq!(std::fs::read("/etc/passwd").ok(), passwd_before);
    assert!(!std::path::Path::new("/etc/agent-lsp-hostile-test.txt").exists());
    let tmp_entries_after: Vec<_> = std::fs::read_dir(fx.tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        tmp_entries_after, tmp_entries_before,
        "write created something next to the workspace"
    );
    // Nothing was created inside under odd names either (`~`, `file:`, `C:`…).
    let mut inside: Vec<_> = std::fs::read_dir(fx.root())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    inside.sort();
    assert_eq!(inside, ["dangling", "link_dir", "link_file", "sub"]);
}

#[tokio::test]
async fn hostile_paths_through_the_runtime_are_recorded_as_refusals() {
    let fx = Fixture::new();
    let mut s = session(&fx);
    let calls = [
        call("c1", "read", r#"{"path": "../outside/secret.txt"}"#),
        call(
            "c2",
            "write",
            r#"{"path": "link_dir/new.txt", "content": "x"}"#,
        ),
    ];
    let out = step(&runtime(&fx), &mut s, &calls, &CancellationToken::new()).await;
    assert_eq!(
        out[0].output.text,
        "error: path refused: `../outside/secret.txt` climbs above the workspace root with `..`; only paths inside the workspace are allowed. Tools only work inside the workspace; give a path relative to its root"
    );
    assert_eq!(out[0].output.meta["refused_path"], "../outside/secret.txt");
    assert!(
        out[1]
            .output
            .text
            .contains("goes through the symlink `link_dir`, which points outside the workspace")
    );
    assert!(!fx.outside().join("new.txt").exists());
}

/// The loop may run a step on a spawned task, so the futures must be `Send`; this only has to
/// compile.
#[allow(dead_code)]
fn runtime_futures_are_send(
    runtime: &ToolRuntime,
    session: &mut Session,
    cancel: &CancellationToken,
) {
    fn is_send<T: Send>(_: T) {}
    is_send(runtime.execute(session, 1, 1, &[], cancel));
    is_send(runtime.run_one(session, "read", "{}", cancel));
}
