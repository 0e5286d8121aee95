//! The proxy's ordering rule, as a property: for random interleavings of document changes,
//! requests of every path (forwarded by the intake, dispatched by the loop, code actions that
//! the agent adds to) and cancellations, sent by a scripted editor through the real `serve` to
//! a recording fake child, the child receives each document's messages in the order the editor
//! sent them, and every request gets exactly one answer.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use agent_tests::editor::{Editor, url};
use serde_json::{Value, json};

/// A small deterministic generator: every seed is a reproducible interleaving.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// `serve` for `root`, its fake child recording what it receives to `record`.
fn serve_command(root: &Path, state: &Path, record: &Path) -> Command {
    let config = agent_tests::fake_lsp_config(&["record", record.to_str().unwrap()]);
    agent_tests::serve_command(root, state, &config)
}

/// A workspace whose `documents` hold `0`, and a state folder where the child's record goes.
struct Recorded {
    root: std::path::PathBuf,
    state: tempfile::TempDir,
    record: std::path::PathBuf,
    _workspace: tempfile::TempDir,
}

impl Recorded {
    fn new(documents: &[&str]) -> Recorded {
        let workspace = tempfile::tempdir().unwrap();
        let root = workspace.path().canonicalize().unwrap();
        for document in documents {
            std::fs::write(root.join(document), "0\n").unwrap();
        }
        let state = tempfile::tempdir().unwrap();
        let record = state.path().join("received.jsonl");
        Recorded {
            root,
            state,
            record,
            _workspace: workspace,
        }
    }

    fn command(&self) -> Command {
        serve_command(&self.root, self.state.path(), &self.record)
    }
}

/// What the child received about each document, in its order: each message's sequence number
/// (a change's text, a request's position or range start character).
fn received_per_document(record: &Path, uris: &[String]) -> HashMap<String, Vec<u64>> {
    let mut seen: HashMap<String, Vec<u64>> = HashMap::new();
    for message in agent_tests::fake_lsp_record(record) {
        let params = &message["params"];
        let Some(uri) = params["textDocument"]["uri"].as_str() else {
            continue;
        };
        if !uris.iter().any(|known| known == uri) {
            continue;
        }
        let seq = match message["method"].as_str().unwrap_or_default() {
            "textDocument/didOpen" => continue,
            "textDocument/didChange" => params["contentChanges"][0]["text"]
                .as_str()
                .and_then(|text| text.trim().parse().ok()),
            _ => params["position"]["character"]
                .as_u64()
                .or_else(|| params["range"]["start"]["character"].as_u64()),
        };
        seen.entry(uri.to_owned())
            .or_default()
            .push(seq.unwrap_or_else(|| panic!("a message without its number: {message}")));
    }
    seen
}

fn one_interleaving(seed: u64) {
    let recorded = Recorded::new(&["a.fake", "b.fake"]);
    let (root, record) = (&recorded.root, &recorded.record);
    let documents = [root.join("a.fake"), root.join("b.fake")];
    let uris: Vec<String> = documents.iter().map(|path| url(path)).collect();
    let mut editor = Editor::start(recorded.command());
    editor.initialize(root);
    for document in &documents {
        editor.open(document, "fake");
    }
    // The first request about each document finds its child (the intake forwards the next).
    for uri in &uris {
        let params = json!({"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}});
        editor.request("textDocument/hover", params);
    }

    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut expected: HashMap<String, Vec<u64>> = HashMap::new();
    let mut versions = [1_i64; 2];
    let mut ids = Vec::new();
    let mut requested: HashMap<i64, (String, u64)> = HashMap::new();
    const METHODS: [&str; 5] = [
        "textDocument/hover",
        "textDocument/definition",
        "textDocument/codeAction",
        "textDocument/completion",
        "fake/custom",
    ];
    for seq in 1..=240_u64 {
        let which = rng.below(2) as usize;
        let uri = &uris[which];
        match rng.below(10) {
            0..=3 => {
                versions[which] += 1;
                editor.notify(
                    "textDocument/didChange",
                    json!({"textDocument": {"uri": uri, "version": versions[which]},
                           "contentChanges": [{"text": format!("{seq}\n")}]}),
                );
                expected.entry(uri.clone()).or_default().push(seq);
            }
            4..=7 => {
                let method = METHODS[rng.below(METHODS.len() as u64) as usize];
                let at = json!({"line": 0, "character": seq});
                let params = if method == "textDocument/codeAction" {
                    json!({"textDocument": {"uri": uri}, "range": {"start": at, "end": at},
                           "context": {"diagnostics": []}})
                } else {
                    json!({"textDocument": {"uri": uri}, "position": at})
                };
                let id = editor.request_async(method, params);
                ids.push(id);
                requested.insert(id, (uri.clone(), seq));
                expected.entry(uri.clone()).or_default().push(seq);
            }
            8 if !ids.is_empty() => {
                let id = ids[rng.below(ids.len() as u64) as usize];
                editor.notify("$/cancelRequest", json!({"id": id}));
            }
            _ => std::thread::sleep(Duration::from_micros(200 * rng.below(10))),
        }
    }
    // A request cancelled while it still waited in its child's lane never reaches the child
    // (as a server drops a cancelled request it has not read): its answer says so.
    for &id in &ids {
        let answer = editor.response(id);
        assert!(
            answer.get("result").is_some() || answer.get("error").is_some(),
            "{answer}"
        );
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        if answer["error"]["code"] == -32800 && message.contains("before") {
            let (uri, seq) = &requested[&id];
            expected
                .get_mut(uri)
                .expect("sent")
                .retain(|sent| sent != seq);
        }
    }
    // A last request and its answer: any second answer to an earlier one has arrived by now.
    let last = editor.request(
        "fake/custom",
        json!({"textDocument": {"uri": uris[0]}, "position": {"line": 0, "character": 999}}),
    );
    assert!(last.get("result").is_some(), "{last}");
    let extra: Vec<&Value> = editor
        .backlog
        .iter()
        .filter(|message| message.get("method").is_none())
        .filter(|message| message["id"].as_i64().is_some_and(|id| ids.contains(&id)))
        .collect();
    assert!(extra.is_empty(), "seed {seed}: second answers {extra:?}");
    expected.entry(uris[0].clone()).or_default().push(999);

    let received = received_per_document(record, &uris);
    for uri in &uris {
        let got = received.get(uri).cloned().unwrap_or_default();
        // The warm-up hover at character 0 comes first.
        let got: Vec<u64> = got.into_iter().skip(1).collect();
        let want = expected.get(uri).cloned().unwrap_or_default();
        if got != want {
            let first = got.iter().zip(&want).position(|(got, want)| got != want);
            panic!(
                "seed {seed}, {uri}: the child's order differs from the editor's at {first:?}\n got {got:?}\nwant {want:?}"
            );
        }
    }
    editor.shutdown();
}

#[test]
fn every_child_gets_each_documents_messages_in_the_editors_order_and_each_request_one_answer() {
    for seed in 1..=6 {
        one_interleaving(seed);
    }
}

#[test]
fn the_editor_gets_a_childs_notifications_and_answers_in_the_childs_order() {
    let recorded = Recorded::new(&["a.fake"]);
    let root = &recorded.root;
    let document = root.join("a.fake");
    let mut editor = Editor::start(recorded.command());
    editor.initialize(root);
    editor.open(&document, "fake");
    let at = |n: u64| json!({"textDocument": {"uri": url(&document)}, "position": {"line": 0, "character": n}});
    editor.request("textDocument/hover", at(0));
    // The child writes `fake/poked n` (a notification), then the answer to request n.
    let mut ids = Vec::new();
    for n in 1..=200_u64 {
        editor.notify(
            "fake/poke",
            json!({"textDocument": {"uri": url(&document)}, "n": n}),
        );
        ids.push(editor.request_async("textDocument/hover", at(n)));
    }
    let last = *ids.last().unwrap();
    editor.response(last);
    // Everything the child wrote has arrived: the backlog holds it in arrival order.
    let mut order = Vec::new();
    for message in &editor.backlog {
        if message["method"] == "fake/poked" {
            order.push(("poked", message["params"]["n"].as_u64().unwrap()));
        } else if let Some(at) = message["id"]
            .as_i64()
            .and_then(|id| ids.iter().position(|&x| x == id))
        {
            order.push(("answer", at as u64 + 1));
        }
    }
    order.push(("answer", 200));
    let expected: Vec<(&str, u64)> = (1..=200)
        .flat_map(|n| [("poked", n), ("answer", n)])
        .collect();
    assert_eq!(order, expected);
    editor.shutdown();
}

/// `pid`'s resident memory in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// How a test reaches `serve`: its standard input and output (pipes), or a Unix socket of
/// `serve --listen`, where the editor is read by a task instead of a thread.
#[derive(Clone, Copy, Debug)]
enum Over {
    Pipes,
    UnixSocket,
}

/// `serve` over raw pipes or a socket (the test reads and writes frames itself, and may stop
/// doing either), initialized, with `a.fake` open and its recording child started.
struct RawServe {
    server: std::process::Child,
    to_server: std::fs::File,
    from_server: std::io::BufReader<std::fs::File>,
    document: std::path::PathBuf,
    recorded: Recorded,
}

impl RawServe {
    fn start(over: Over) -> RawServe {
        use std::io::BufRead;
        use std::os::fd::OwnedFd;
        use std::process::Stdio;
        let recorded = Recorded::new(&["a.fake"]);
        let document = recorded.root.join("a.fake");
        let mut command = recorded.command();
        let (server, to_server, from_server) = match over {
            Over::Pipes => {
                let mut server = command
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap();
                let to_server = OwnedFd::from(server.stdin.take().unwrap());
                let from_server = OwnedFd::from(server.stdout.take().unwrap());
                (server, to_server, from_server)
            }
            Over::UnixSocket => {
                let socket = recorded.state.path().join("serve.sock");
                let mut server = command
                    .args(["--listen", &format!("unix:{}", socket.display())])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap();
                let mut stderr = std::io::BufReader::new(server.stderr.take().unwrap());
                loop {
                    let mut line = String::new();
                    assert!(
                        stderr.read_line(&mut line).unwrap() > 0,
                        "serve did not listen"
                    );
                    if line.contains("listening on") {
                        break;
                    }
                }
                std::thread::spawn(move || {
                    for line in stderr.lines().map_while(Result::ok) {
                        eprintln!("serve: {line}");
                    }
                });
                let stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
                let reader = OwnedFd::from(stream.try_clone().unwrap());
                (server, OwnedFd::from(stream), reader)
            }
        };
        let mut serve = RawServe {
            server,
            to_server: std::fs::File::from(to_server),
            from_server: std::io::BufReader::new(std::fs::File::from(from_server)),
            document,
            recorded,
        };
        serve.send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "processId": null, "rootUri": url(&serve.recorded.root), "capabilities": {}}}),
        );
        serve.answer_to(1);
        serve.send(json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
        let uri = url(&serve.document);
        serve.send(
            json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
            "textDocument": {"uri": uri, "languageId": "fake", "version": 1, "text": "0\n"}}}),
        );
        serve.hover(2);
        serve
    }

    fn send(&mut self, message: Value) {
        agent_tests::relay::write_frame(&mut self.to_server, message.to_string().as_bytes())
            .unwrap();
    }

    fn read(&mut self) -> Value {
        let body = agent_tests::relay::read_frame(&mut self.from_server).expect("serve ended");
        serde_json::from_slice(&body).unwrap()
    }

    fn answer_to(&mut self, id: i64) -> Value {
        loop {
            let message = self.read();
            if message["id"] == id && message.get("method").is_none() {
                return message;
            }
        }
    }

    /// A hover about the document, answered: the child has read everything sent before it.
    fn hover(&mut self, id: i64) -> Value {
        let uri = url(&self.document);
        self.send(
            json!({"jsonrpc": "2.0", "id": id, "method": "textDocument/hover", "params": {
            "textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}}),
        );
        self.answer_to(id)
    }

    fn rss_kib(&self) -> u64 {
        rss_kib(self.server.id())
    }
}

impl Drop for RawServe {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// Every queue between a child and the editor is bounded, on a thread (stdio) as in a task
/// (`--listen`): `serve` grows by less than 16 MiB for 80 MB.
const GROWTH_BOUND_MIB: u64 = 16;

#[test]
fn a_flood_of_diagnostics_reaches_a_slow_editor_whole_in_order_and_serves_memory_stays_bounded() {
    flood_to_a_slow_editor(Over::Pipes);
}

#[test]
fn under_listen_a_flood_reaches_a_slow_editor_whole_in_order_and_serves_memory_stays_bounded() {
    flood_to_a_slow_editor(Over::UnixSocket);
}

fn flood_to_a_slow_editor(over: Over) {
    const COUNT: u64 = 20_000;
    const BYTES: u64 = 4_000;
    let mut serve = RawServe::start(over);
    let before = serve.rss_kib();

    // 80 MB of diagnostics while the editor reads nothing for a while, then reads slowly.
    let uri = url(&serve.document);
    serve.send(json!({"jsonrpc": "2.0", "method": "fake/flood", "params": {
        "uri": uri, "count": COUNT, "bytes": BYTES}}));
    std::thread::sleep(Duration::from_secs(3));
    let mut most = serve.rss_kib();
    let mut next = 0;
    while next < COUNT {
        let message = serve.read();
        if message["method"] != "textDocument/publishDiagnostics" {
            continue;
        }
        assert_eq!(
            message["params"]["diagnostics"][0]["code"], next,
            "out of order or lost"
        );
        next += 1;
        if next % 500 == 0 {
            most = most.max(serve.rss_kib());
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let grew_mib = most.saturating_sub(before) / 1024;
    eprintln!("{over:?}: serve grew by {grew_mib} MiB during the flood");
    // Without backpressure the whole flood (80 MB) waits in `serve`; with it, about the
    // writer's bound (8 MiB) and what is in flight.
    assert!(
        grew_mib < GROWTH_BOUND_MIB,
        "{over:?}: serve grew by {grew_mib} MiB for an 80 MB flood to a slow editor"
    );
}

/// The other direction: a child that stops reading holds the editor's messages in the editor's
/// pipe, not in `serve`. 20,000 changes of 4 KB (80 MB) written while the child pauses reach
/// it whole and in order once it reads again, and `serve`'s memory stays bounded.
#[test]
fn changes_for_a_child_that_stops_reading_wait_in_the_editors_pipe_and_all_arrive_in_order() {
    changes_for_a_child_that_stops_reading(Over::Pipes);
}

#[test]
fn under_listen_changes_for_a_child_that_stops_reading_wait_in_the_socket_and_all_arrive() {
    changes_for_a_child_that_stops_reading(Over::UnixSocket);
}

fn changes_for_a_child_that_stops_reading(over: Over) {
    const COUNT: u64 = 20_000;
    let mut serve = RawServe::start(over);
    let before = serve.rss_kib();
    serve.send(json!({"jsonrpc": "2.0", "method": "fake/pause", "params": {"millis": 4000}}));
    let uri = url(&serve.document);
    let padding = "x".repeat(4_000);
    // The same pipe, for a thread that blocks on it while `serve` does not read.
    let mut to_server = serve.to_server.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        for n in 1..=COUNT {
            let change = json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
                "textDocument": {"uri": uri, "version": n + 1},
                "contentChanges": [{"text": format!("{n}\n{padding}")}]}});
            agent_tests::relay::write_frame(&mut to_server, change.to_string().as_bytes()).unwrap();
        }
    });
    let mut most = before;
    while !writer.is_finished() {
        most = most.max(serve.rss_kib());
        std::thread::sleep(Duration::from_millis(50));
    }
    writer.join().unwrap();
    // A request that finds the child's lane still full is answered at once with "ask again"
    // (it never reaches the child): ask again until one reaches the child behind every change.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut id = 3;
    loop {
        let answer = serve.hover(id);
        if answer["result"]["echo"] == "textDocument/hover" {
            break;
        }
        let refused = answer["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("is not keeping up"));
        assert!(refused, "{answer}");
        assert!(
            std::time::Instant::now() < deadline,
            "the child's lane stayed full"
        );
        std::thread::sleep(Duration::from_millis(100));
        id += 1;
    }
    let changes: Vec<u64> = agent_tests::fake_lsp_record(&serve.recorded.record)
        .iter()
        .filter(|message| message["method"] == "textDocument/didChange")
        .map(|message| {
            let text = message["params"]["contentChanges"][0]["text"]
                .as_str()
                .unwrap();
            text.lines().next().unwrap().parse().unwrap()
        })
        .collect();
    assert_eq!(changes.len() as u64, COUNT, "changes lost");
    assert!(
        changes.iter().zip(1..).all(|(seen, sent)| *seen == sent),
        "changes out of order"
    );
    let grew_mib = most.saturating_sub(before) / 1024;
    eprintln!("{over:?}: serve grew by {grew_mib} MiB while its child did not read");
    // Without backpressure all 80 MB wait in `serve`; with it, the child writer's bound
    // (8 MiB), the loop's and the lane's queues (256 messages each) and the pipes.
    assert!(
        grew_mib < GROWTH_BOUND_MIB,
        "{over:?}: serve grew by {grew_mib} MiB for 80 MB of changes to a child that did not read"
    );
}
