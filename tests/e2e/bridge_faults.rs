//! lsp-bridge against a misbehaving child (`fake-lsp`): broken framing, silence, crashes,
//! hangs, `ContentModified`, and the restart limit. Every case must end in a clear error within
//! a bound, never a panic or a hang; elapsed-time checks are loose hang guards only.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_tests::fake_lsp_record as recorded;
use lsp_bridge::{Bridge, BridgeConfig, Child, ChildState, Error, RestartPolicy, ServerConfig};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Generous bound for anything that should take well under a second.
const HANG_GUARD: Duration = Duration::from_secs(10);

fn fake(args: &[&str]) -> ServerConfig {
    ServerConfig {
        args: args.iter().map(|arg| arg.to_string()).collect(),
        file_patterns: vec!["*.fake".into()],
        root_markers: vec!["fake.project".into()],
        settings: json!({"fake": {"answer": 42}}),
        request_timeout: Duration::from_millis(500),
        startup_timeout: Duration::from_secs(2),
        cancel_grace: Duration::from_millis(500),
        // A fake that ignores a cancellation is idle (no output, no CPU): hung half a second
        // after the grace, where a real server gets a minute to show it is merely busy.
        hung_timeout: Duration::from_millis(500),
        ..ServerConfig::new("fake", env!("CARGO_BIN_EXE_fake-lsp"))
    }
}

async fn start(dir: &Path, args: &[&str]) -> lsp_bridge::Result<Arc<Child>> {
    Child::start(Arc::new(fake(args)), dir.to_path_buf(), vec![]).await
}

/// [`start`] as the editor-facing server does: the child's output read on a thread.
async fn start_for_editor(dir: &Path, args: &[&str]) -> lsp_bridge::Result<Arc<Child>> {
    let config = ServerConfig {
        output_thread: true,
        ..fake(args)
    };
    Child::start(Arc::new(config), dir.to_path_buf(), vec![]).await
}

fn bridge(dir: &Path, servers: Vec<ServerConfig>, restart: RestartPolicy) -> Bridge {
    Bridge::new(BridgeConfig { servers, restart }, vec![dir.to_path_buf()])
}

/// A restart policy on a test's time scale.
fn quick_restarts() -> RestartPolicy {
    RestartPolicy {
        max_restarts: 5,
        window: Duration::from_secs(60),
        backoff: Duration::from_millis(10),
    }
}

/// Wait (bounded) until the record holds a message matching `matches`.
async fn wait_recorded(path: &Path, matches: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + HANG_GUARD;
    loop {
        if let Some(found) = recorded(path).into_iter().find(|message| matches(message)) {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "not recorded: {:#?}",
            recorded(path)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn record_path(dir: &tempfile::TempDir) -> (PathBuf, String) {
    let path = dir.path().join("record.jsonl");
    let text = path.to_string_lossy().into_owned();
    (path, text)
}

fn request_id(record: &Path, method: &str) -> Value {
    recorded(record)
        .into_iter()
        .find(|message| message["method"] == method && message.get("id").is_some())
        .unwrap_or_else(|| panic!("no {method} request recorded"))["id"]
        .clone()
}

#[tokio::test]
async fn garbage_framing_at_startup_is_a_protocol_error() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let error = start(dir.path(), &["garbage"]).await.unwrap_err();
    assert!(started.elapsed() < HANG_GUARD);
    let Error::Protocol { server, message } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(server, "fake");
    assert!(message.contains("invalid JSON"), "{message}");
    assert!(error.to_string().contains("broke the protocol"), "{error}");
}

#[tokio::test]
async fn garbage_framing_mid_session_fails_the_request_and_the_child() {
    let dir = tempfile::tempdir().unwrap();
    let child = start(dir.path(), &["garbage-on", "fake/garble"])
        .await
        .unwrap();
    let error = child.request("fake/garble", json!({})).await.unwrap_err();
    assert!(
        matches!(&error, Error::Protocol { message, .. } if message.contains("expected a header")),
        "{error:?}"
    );
    assert!(
        matches!(child.state(), ChildState::Failed { .. }),
        "{:?}",
        child.state()
    );
    // The connection is gone: later requests fail at once, and the process is stopped.
    let started = Instant::now();
    assert!(matches!(
        child.request("fake/other", json!({})).await,
        Err(Error::Protocol { .. })
    ));
    assert!(started.elapsed() < Duration::from_millis(100));
    let deadline = Instant::now() + HANG_GUARD;
    while child.pid().is_some() {
        assert!(
            Instant::now() < deadline,
            "a server that broke framing keeps running"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_silent_server_times_out_at_startup() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let error = start(dir.path(), &["silent"]).await.unwrap_err();
    assert!(started.elapsed() < HANG_GUARD);
    assert!(
        matches!(&error, Error::Timeout { method, after, .. } if method == "initialize" && *after == Duration::from_secs(2)),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_server_that_exits_at_once_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let error = start(dir.path(), &["exit"]).await.unwrap_err();
    let Error::ServerExited { stderr_tail, .. } = &error else {
        panic!("{error:?}")
    };
    assert!(
        stderr_tail
            .iter()
            .any(|line| line.contains("exiting at once")),
        "{stderr_tail:?}"
    );
    assert!(error.to_string().contains("exiting at once"), "{error}");
}

#[tokio::test]
async fn a_missing_command_is_a_spawn_error() {
    let dir = tempfile::tempdir().unwrap();
    let config = ServerConfig::new("ghost", "/nonexistent/ghost-ls");
    let error = Child::start(Arc::new(config), dir.path().to_path_buf(), vec![])
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::Spawn { server, .. } if server == "ghost"),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_hung_request_is_cancelled_and_the_child_recycled() {
    let dir = tempfile::tempdir().unwrap();
    let (record, record_arg) = record_path(&dir);
    let bridge = bridge(
        dir.path(),
        vec![fake(&[
            "hang-on",
            "textDocument/hover",
            "record",
            &record_arg,
        ])],
        quick_restarts(),
    );
    let file = dir.path().join("a.fake");
    let child = bridge.child_for(&file).await.unwrap();
    let first_pid = child.pid().unwrap();

    let started = Instant::now();
    let error = child
        .request("textDocument/hover", json!({}))
        .await
        .unwrap_err();
    assert!(started.elapsed() < HANG_GUARD);
    assert!(
        matches!(&error, Error::Timeout { method, .. } if method == "textDocument/hover"),
        "{error:?}"
    );
    // The server was told, for the id we used.
    let id = request_id(&record, "textDocument/hover");
    wait_recorded(&record, |message| {
        message["method"] == "$/cancelRequest" && message["params"]["id"] == id
    })
    .await;

    // It ignores the cancellation: after the grace period it is hung, and gets replaced.
    let deadline = Instant::now() + HANG_GUARD;
    while !child.is_hung() {
        assert!(Instant::now() < deadline, "never marked hung");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(matches!(child.state(), ChildState::Failed { reason } if reason.contains("hung")));
    let replacement = bridge.child_for(&file).await.unwrap();
    assert!(!Arc::ptr_eq(&child, &replacement));
    assert_ne!(replacement.pid(), Some(first_pid));
    assert_eq!(
        replacement
            .request("fake/ping", json!({"n": 1}))
            .await
            .unwrap()["echo"],
        "fake/ping"
    );
    assert_eq!(bridge.health()[0].restarts, 1);
    let deadline = Instant::now() + HANG_GUARD;
    while child.pid().is_some() {
        assert!(Instant::now() < deadline, "the hung server was not stopped");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bridge.shutdown_all().await;
}

#[tokio::test]
async fn an_acknowledged_cancellation_does_not_make_the_child_hung() {
    let dir = tempfile::tempdir().unwrap();
    let (record, record_arg) = record_path(&dir);
    let child = start(
        dir.path(),
        &["slow", "fake/slow", "5000", "record", &record_arg],
    )
    .await
    .unwrap();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        trigger.cancel();
    });
    let started = Instant::now();
    let outcome = child
        .request_with("fake/slow", json!({}), Duration::from_secs(30), &cancel)
        .await;
    assert!(matches!(outcome, Err(Error::Cancelled)), "{outcome:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
    let id = request_id(&record, "fake/slow");
    wait_recorded(&record, |message| {
        message["method"] == "$/cancelRequest" && message["params"]["id"] == id
    })
    .await;
    // Past the grace period (500 ms) the child answered the cancellation and is fine.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(!child.is_hung());
    assert_eq!(child.state(), ChildState::Ready);
    child.shutdown().await;
}

#[tokio::test]
async fn dropping_a_request_cancels_it_with_our_id() {
    let dir = tempfile::tempdir().unwrap();
    let (record, record_arg) = record_path(&dir);
    let child = start(
        dir.path(),
        &["slow", "fake/slow", "5000", "record", &record_arg],
    )
    .await
    .unwrap();
    // The caller (say, the editor proxy on the editor's `$/cancelRequest`) stops waiting.
    let dropped = tokio::time::timeout(
        Duration::from_millis(100),
        child.request("fake/slow", json!({})),
    )
    .await;
    assert!(dropped.is_err());
    let id = request_id(&record, "fake/slow");
    wait_recorded(&record, |message| {
        message["method"] == "$/cancelRequest" && message["params"]["id"] == id
    })
    .await;
    child.shutdown().await;
}

#[tokio::test]
async fn content_modified_is_retried_three_times() {
    let dir = tempfile::tempdir().unwrap();
    let (record, record_arg) = record_path(&dir);
    let child = start(
        dir.path(),
        &[
            "content-modified",
            "fake/twice",
            "2",
            "content-modified",
            "fake/always",
            "100",
            "record",
            &record_arg,
        ],
    )
    .await
    .unwrap();
    assert_eq!(
        child.request("fake/twice", json!({})).await.unwrap()["echo"],
        "fake/twice"
    );
    let error = child
        .request_with(
            "fake/always",
            json!({}),
            Duration::from_secs(5),
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(error, Error::Response { code: -32801, .. }),
        "{error:?}"
    );
    let attempts = recorded(&record)
        .iter()
        .filter(|message| message["method"] == "fake/always")
        .count();
    assert_eq!(attempts, 4, "one attempt and three retries");
    child.shutdown().await;
}

#[tokio::test]
async fn a_crash_mid_request_fails_at_once_and_the_next_call_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let bridge = bridge(
        dir.path(),
        vec![fake(&["crash-on", "fake/crash"])],
        quick_restarts(),
    );
    let file = dir.path().join("a.fake");
    let child = bridge.child_for(&file).await.unwrap();
    let started = Instant::now();
    let error = child
        .request_with(
            "fake/crash",
            json!({}),
            Duration::from_secs(30),
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    // Well before the 30 s timeout: a dead server fails its requests at once.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let Error::ServerExited { stderr_tail, .. } = &error else {
        panic!("{error:?}")
    };
    assert!(
        stderr_tail
            .iter()
            .any(|line| line.contains("crashing on fake/crash")),
        "{stderr_tail:?}"
    );
    assert_eq!(child.state(), ChildState::Exited);

    let restarted = bridge.child_for(&file).await.unwrap();
    assert_eq!(
        restarted.request("fake/ping", json!({})).await.unwrap()["echo"],
        "fake/ping"
    );
    let health = bridge.health();
    assert_eq!((health[0].state.as_str(), health[0].restarts), ("ready", 1));
    bridge.shutdown_all().await;
}

#[tokio::test]
async fn the_restart_limit_gives_up_with_the_stderr_tail() {
    let dir = tempfile::tempdir().unwrap();
    let bridge = bridge(
        dir.path(),
        vec![fake(&["crash-on", "fake/crash"])],
        quick_restarts(),
    );
    let file = dir.path().join("a.fake");
    let started = Instant::now();
    // The first start and five restarts each crash.
    for round in 0..6 {
        let child = bridge
            .child_for(&file)
            .await
            .unwrap_or_else(|error| panic!("round {round}: {error}"));
        let _ = child.request("fake/crash", json!({})).await.unwrap_err();
    }
    let error = bridge.child_for(&file).await.unwrap_err();
    assert!(started.elapsed() < HANG_GUARD);
    let Error::ServerFailed {
        restarts,
        stderr_tail,
        ..
    } = &error
    else {
        panic!("{error:?}")
    };
    assert_eq!(*restarts, 5);
    assert!(
        stderr_tail
            .iter()
            .any(|line| line.contains("crashing on fake/crash")),
        "{stderr_tail:?}"
    );
    let text = error.to_string();
    assert!(
        text.contains("gave up after 5 restarts") && text.contains("crashing on fake/crash"),
        "{text}"
    );
    let health = &bridge.health()[0];
    assert_eq!(health.restarts, 5);
    assert!(health.state.starts_with("failed"), "{health:?}");
    assert!(
        health.last_error.as_deref().unwrap().contains("gave up"),
        "{health:?}"
    );
    // It stays given up (within the window) rather than starting again.
    assert!(matches!(
        bridge.child_for(&file).await,
        Err(Error::ServerFailed { .. })
    ));
}

#[tokio::test]
async fn a_server_that_never_starts_is_given_up_on() {
    let dir = tempfile::tempdir().unwrap();
    let bridge = bridge(dir.path(), vec![fake(&["exit"])], quick_restarts());
    let file = dir.path().join("a.fake");
    let started = Instant::now();
    for _ in 0..6 {
        let error = bridge.child_for(&file).await.unwrap_err();
        assert!(matches!(error, Error::ServerExited { .. }), "{error:?}");
    }
    let error = bridge.child_for(&file).await.unwrap_err();
    assert!(started.elapsed() < HANG_GUARD);
    let Error::ServerFailed { stderr_tail, .. } = &error else {
        panic!("{error:?}")
    };
    assert!(
        stderr_tail
            .iter()
            .any(|line| line.contains("exiting at once")),
        "{stderr_tail:?}"
    );
}

#[tokio::test]
async fn a_starting_server_does_not_block_other_servers_and_starts_are_shared() {
    let dir = tempfile::tempdir().unwrap();
    let slow = ServerConfig {
        name: "slow".into(),
        file_patterns: vec!["*.slow".into()],
        startup_timeout: Duration::from_secs(3),
        ..fake(&["silent"])
    };
    let bridge = bridge(dir.path(), vec![slow, fake(&[])], quick_restarts());
    let slow_start = tokio::spawn({
        let bridge = bridge.clone();
        let file = dir.path().join("a.slow");
        async move { bridge.child_for(&file).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    let file = dir.path().join("b.fake");
    let (first, second) = tokio::join!(bridge.child_for(&file), bridge.child_for(&file));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(
        Arc::ptr_eq(&first.unwrap(), &second.unwrap()),
        "concurrent callers share one start"
    );
    let states: Vec<_> = bridge
        .health()
        .into_iter()
        .map(|health| (health.name, health.state))
        .collect();
    assert!(
        states.contains(&("slow".into(), "starting".into())),
        "{states:?}"
    );
    let error = slow_start.await.unwrap().unwrap_err();
    assert!(matches!(error, Error::Timeout { .. }), "{error:?}");
    bridge.shutdown_all().await;
}

#[tokio::test]
async fn server_requests_are_answered_and_notifications_tracked() {
    let dir = tempfile::tempdir().unwrap();
    let (record, record_arg) = record_path(&dir);
    let child = start(dir.path(), &["chatty", "record", &record_arg])
        .await
        .unwrap();
    assert!(
        child.wait_ready(HANG_GUARD).await,
        "progress ended and diagnostics came"
    );
    let answer = |id: i64| {
        let record = record.clone();
        async move {
            wait_recorded(&record, |message| {
                message["id"] == id && message.get("method").is_none()
            })
            .await
        }
    };
    // Requests 1001.. in the order `chatty` sends them.
    assert_eq!(
        answer(1001).await["result"],
        json!([42, null]),
        "configuration by section"
    );
    assert_eq!(
        answer(1002).await["result"],
        Value::Null,
        "registerCapability accepted"
    );
    assert_eq!(
        answer(1003).await["result"],
        Value::Null,
        "progress token accepted"
    );
    assert_eq!(
        answer(1004).await["result"]["applied"],
        false,
        "no editor: edits refused"
    );
    assert_eq!(
        answer(1005).await["error"]["code"],
        -32601,
        "unknown methods"
    );
    let registrations = child.registrations();
    assert_eq!(registrations.len(), 1);
    assert_eq!(registrations[0].method, "workspace/didChangeWatchedFiles");

    // The diagnostics come right after the progress ends, which already made the child ready.
    let uri = lsp_bridge::lsp_types::Url::from_file_path("/fake/grüße.txt").unwrap();
    let mut published = child.diagnostics().subscribe();
    tokio::time::timeout(
        HANG_GUARD,
        published.wait_for(|_| child.diagnostics().get(&uri).is_some()),
    )
    .await
    .expect("published diagnostics are stored")
    .unwrap();
    let entry = child.diagnostics().get(&uri).unwrap();
    assert_eq!(entry.version, Some(7));
    assert_eq!(entry.diagnostics[0].message, "größe is wrong");
    assert_eq!(*child.diagnostics().subscribe().borrow(), entry.generation);

    // Notifications are broadcast in order.
    let mut notifications = child.subscribe_notifications();
    child.notify("fake/poke", json!({"n": 1})).await.unwrap();
    let (method, params) = tokio::time::timeout(HANG_GUARD, notifications.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((method.as_str(), params), ("fake/poked", json!({"n": 1})));

    // A request handler answers first; a panicking one still answers, with an error.
    child.set_request_handler(Arc::new(|method: &str, _params: &Value| match method {
        "workspace/applyEdit" => Some(Box::pin(async { Ok(json!({"applied": true})) }) as _),
        "fake/panic" => Some(Box::pin(async { Ok(buggy_handler()) }) as _),
        _ => None,
    }));
    child
        .notify(
            "fake/ask",
            json!({"method": "workspace/applyEdit", "params": {"edit": {}}}),
        )
        .await
        .unwrap();
    assert_eq!(answer(1006).await["result"]["applied"], true);
    child
        .notify("fake/ask", json!({"method": "fake/panic", "params": {}}))
        .await
        .unwrap();
    assert_eq!(answer(1007).await["error"]["code"], -32603);
    child
        .notify(
            "fake/ask",
            json!({"method": "workspace/workspaceFolders", "params": null}),
        )
        .await
        .unwrap();
    let folders = answer(1008).await;
    assert_eq!(
        folders["result"][0]["uri"],
        lsp_bridge::lsp_types::Url::from_directory_path(dir.path())
            .unwrap()
            .as_str()
    );
    child.shutdown().await;
}

/// Stands for a request handler with a bug.
fn buggy_handler() -> Value {
    panic!("a handler bug")
}

#[tokio::test]
async fn utf8_is_negotiated_when_offered() {
    let dir = tempfile::tempdir().unwrap();
    let child = start(dir.path(), &[]).await.unwrap();
    assert_eq!(
        child.encoding(),
        lsp_bridge::position::PositionEncoding::Utf8
    );
    assert!(child.capabilities().hover_provider.is_some());
    child.shutdown().await;
}

#[tokio::test]
async fn shutdown_is_clean_and_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let (record, record_arg) = record_path(&dir);
    let child = start(dir.path(), &["record", &record_arg]).await.unwrap();
    child.shutdown().await;
    assert_eq!(child.pid(), None);
    assert_eq!(child.state(), ChildState::Exited);
    let methods: Vec<_> = recorded(&record)
        .iter()
        .map(|message| message["method"].clone())
        .collect();
    assert_eq!(
        methods,
        [
            json!("initialize"),
            json!("initialized"),
            json!("shutdown"),
            json!("exit")
        ]
    );

    // A server that ignores `shutdown` is killed after the grace periods.
    let child = start(dir.path(), &["hang-on", "shutdown"]).await.unwrap();
    let started = Instant::now();
    child.shutdown().await;
    assert!(started.elapsed() < HANG_GUARD);
    assert_eq!(child.pid(), None);
}

#[tokio::test]
async fn files_without_a_server_are_explained() {
    let dir = tempfile::tempdir().unwrap();
    let bridge = bridge(dir.path(), vec![fake(&[])], quick_restarts());
    let error = bridge
        .child_for(&dir.path().join("notes.zzz"))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::NoServer { reason, .. } if reason.contains(".zzz")),
        "{error:?}"
    );
}

/// The editor's end of forwarded requests: where their answers are written, and a reader of
/// what arrives there.
fn editor_end() -> (
    Arc<lsp_bridge::framing::FrameWriter>,
    tokio::io::BufReader<tokio::io::DuplexStream>,
) {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (writer, _task) = lsp_bridge::framing::FrameWriter::queued("editor", ours);
    (writer, tokio::io::BufReader::new(theirs))
}

/// The next message the editor gets (bounded).
async fn editor_gets(editor: &mut tokio::io::BufReader<tokio::io::DuplexStream>) -> Value {
    tokio::time::timeout(HANG_GUARD, lsp_bridge::framing::read_message(editor))
        .await
        .expect("the editor got an answer in time")
        .unwrap()
        .unwrap()
}

/// Forward the editor's request `id` to `child`, its answer going to `editor`.
fn forward(
    child: &Child,
    editor: &Arc<lsp_bridge::framing::FrameWriter>,
    id: i64,
    method: &str,
    params: Value,
    timeout: Duration,
) -> lsp_bridge::Result<()> {
    let body = serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
    )
    .unwrap();
    child.forward(id, method, &body, editor, timeout)
}

#[tokio::test]
async fn a_forwarded_request_keeps_the_editors_id_and_our_own_ids_stay_apart() {
    let dir = tempfile::tempdir().unwrap();
    let (record, record_arg) = record_path(&dir);
    // Forwarding works with the output read by a task too (the agent's own bridge).
    let child = start(dir.path(), &["record", &record_arg]).await.unwrap();
    let (writer, mut editor) = editor_end();
    forward(
        &child,
        &writer,
        7,
        "fake/custom",
        json!({"x": "grüße"}),
        HANG_GUARD,
    )
    .unwrap();
    let answer = editor_gets(&mut editor).await;
    assert_eq!(answer["id"], 7, "{answer}");
    assert_eq!(answer["result"]["echo"], "fake/custom");
    assert_eq!(answer["result"]["params"]["x"], "grüße");
    // The child saw the editor's id; our own requests use ids from FIRST_OWN_ID on.
    wait_recorded(&record, |message| {
        message["method"] == "fake/custom" && message["id"] == 7
    })
    .await;
    child.request("fake/own", json!({})).await.unwrap();
    let own = request_id(&record, "fake/own").as_i64().unwrap();
    assert!(own >= lsp_bridge::FIRST_OWN_ID, "{own}");
    // Every id the child got is an LSP `integer` (32-bit): servers built on `lsp-server`
    // (rust-analyzer, ruff) refuse anything larger.
    for message in recorded(&record) {
        if let Some(id) = message["id"].as_i64() {
            assert!(i32::try_from(id).is_ok(), "{message}");
        }
    }
    child.shutdown().await;
}

#[tokio::test]
async fn a_forwarded_request_that_times_out_is_answered_cancelled_and_a_silent_child_hung() {
    let dir = tempfile::tempdir().unwrap();
    let (record, record_arg) = record_path(&dir);
    let child = start_for_editor(
        dir.path(),
        &["hang-on", "textDocument/hover", "record", &record_arg],
    )
    .await
    .unwrap();
    let (writer, mut editor) = editor_end();
    // A request with a long timeout first: the one after it, with a short one, must still time
    // out on time.
    forward(
        &child,
        &writer,
        2,
        "textDocument/hover",
        json!({}),
        Duration::from_secs(120),
    )
    .unwrap();
    // Let the task that times requests out go to sleep until then.
    tokio::time::sleep(Duration::from_millis(100)).await;
    forward(
        &child,
        &writer,
        3,
        "textDocument/hover",
        json!({}),
        Duration::from_millis(300),
    )
    .unwrap();
    let answer = editor_gets(&mut editor).await;
    assert_eq!(answer["id"], 3, "{answer}");
    assert_eq!(answer["error"]["code"], -32603);
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("did not answer `textDocument/hover`"),
        "{message}"
    );
    wait_recorded(&record, |message| {
        message["method"] == "$/cancelRequest" && message["params"]["id"] == 3
    })
    .await;
    // `hang-on` ignores the cancellation too: after the grace (500 ms), the child is hung.
    let deadline = Instant::now() + HANG_GUARD;
    while !child.is_hung() {
        assert!(Instant::now() < deadline, "never marked hung");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!child.is_healthy());
    child.kill();
}

#[tokio::test]
async fn a_forwarded_request_the_editor_cancels_is_answered_at_once_and_only_once() {
    let dir = tempfile::tempdir().unwrap();
    let (record, record_arg) = record_path(&dir);
    let child = start_for_editor(
        dir.path(),
        &["slow", "textDocument/hover", "20000", "record", &record_arg],
    )
    .await
    .unwrap();
    let (writer, mut editor) = editor_end();
    forward(
        &child,
        &writer,
        4,
        "textDocument/hover",
        json!({}),
        HANG_GUARD,
    )
    .unwrap();
    wait_recorded(&record, |message| message["method"] == "textDocument/hover").await;
    assert!(child.cancel_forwarded(4));
    let answer = editor_gets(&mut editor).await;
    assert_eq!(
        (answer["id"].clone(), answer["error"]["code"].clone()),
        (json!(4), json!(-32800)),
        "{answer}"
    );
    wait_recorded(&record, |message| {
        message["method"] == "$/cancelRequest" && message["params"]["id"] == 4
    })
    .await;
    // The child acknowledges with its own RequestCancelled, which the editor does not get a
    // second time: the next thing it gets is the next answer.
    forward(&child, &writer, 5, "fake/custom", json!({}), HANG_GUARD).unwrap();
    assert_eq!(editor_gets(&mut editor).await["id"], 5);
    // Once the acknowledgement came, 4 is no longer pending (cancelling it again does nothing).
    let deadline = Instant::now() + HANG_GUARD;
    while child.cancel_forwarded(4) {
        assert!(Instant::now() < deadline, "the acknowledgement never came");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(!child.is_hung(), "it acknowledged the cancellation");
    child.shutdown().await;
}

#[tokio::test]
async fn a_forwarded_request_to_a_child_that_crashes_gets_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let child = start_for_editor(dir.path(), &["crash-on", "textDocument/hover"])
        .await
        .unwrap();
    let (writer, mut editor) = editor_end();
    forward(
        &child,
        &writer,
        9,
        "textDocument/hover",
        json!({}),
        HANG_GUARD,
    )
    .unwrap();
    let answer = editor_gets(&mut editor).await;
    assert_eq!(answer["id"], 9, "{answer}");
    assert_eq!(answer["error"]["code"], -32603);
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("crashing on textDocument/hover"),
        "{message}"
    );
    // Forwarding to the dead child now fails at once.
    assert!(
        forward(
            &child,
            &writer,
            10,
            "textDocument/hover",
            json!({}),
            HANG_GUARD
        )
        .is_err()
    );
}

#[tokio::test]
async fn an_answer_the_server_writes_in_pieces_reaches_the_editor_whole() {
    let dir = tempfile::tempdir().unwrap();
    // The server writes each header, then its body half a second later.
    let child = start_for_editor(dir.path(), &["split", "500"])
        .await
        .unwrap();
    // The editor reads a real pipe, as over stdio.
    let (editor_reads, editor_pipe) = std::io::pipe().unwrap();
    let (editor, _writing) =
        lsp_bridge::framing::FrameWriter::direct("editor", editor_pipe.into()).unwrap();
    forward(
        &child,
        &editor,
        3,
        "fake/custom",
        json!({"n": 1}),
        HANG_GUARD,
    )
    .unwrap();
    let answer = tokio::task::spawn_blocking(move || {
        let mut reader = std::io::BufReader::new(editor_reads);
        lsp_bridge::framing::read_frame_blocking(&mut reader)
            .unwrap()
            .unwrap()
    })
    .await
    .unwrap();
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(answer["id"], 3);
    assert_eq!(answer["result"]["echo"], "fake/custom");
    child.shutdown().await;
}
