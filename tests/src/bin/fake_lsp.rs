//! A misbehaving language server for the bridge's fault tests, scripted by its arguments.
//!
//! Real servers misbehave rarely and never on cue, so the bridge's error paths (broken framing,
//! silence, crashes, ignoring `$/cancelRequest`) are tested against this instead. Modes combine:
//!
//! - `garbage`: answers `initialize` with broken framing, then stays alive and silent;
//! - `silent`: reads everything, answers nothing;
//! - `exit`: writes a line to stderr and exits at once;
//! - `garbage-on METHOD`: answers METHOD with broken framing;
//! - `hang-on METHOD`: never answers METHOD and ignores `$/cancelRequest`;
//! - `crash-on METHOD`: writes a line to stderr and exits when METHOD arrives;
//! - `slow METHOD MILLIS`: answers METHOD after MILLIS, or with `RequestCancelled` as soon as
//!   it is cancelled; `slow initialize MILLIS` reads nothing more until it answers `initialize`
//!   after MILLIS, as a server that takes long to start does;
//! - `content-modified METHOD N`: answers the first N METHOD requests with `ContentModified`;
//! - `chatty`: after `initialized`, asks the client `workspace/configuration`,
//!   `client/registerCapability`, `window/workDoneProgress/create`, `workspace/applyEdit` and
//!   an unknown method, reports progress begin/end and publishes diagnostics (version 7) for
//!   `file:///fake/grüße.txt`;
//! - `record PATH`: appends every message received, and every answer to its own requests, to
//!   PATH as JSON lines;
//! - `split MILLIS`: writes each message's header, then its body MILLIS later;
//! - `deaf-on METHOD`: closes its input, then answers METHOD, and stays alive with its output
//!   open, as a dying server does for a moment (what is written to it fails with `EPIPE`, and
//!   no end of output says it is gone);
//! - `no-symbols`: offers `workspace/symbol` and answers it with `[]`, always, reporting no
//!   progress (a server that may be indexing, as far as anyone can tell);
//! - `busy MILLIS`: from `initialized` on, for MILLIS, answers no request and ignores
//!   `$/cancelRequest`, while it reports progress every 200 ms and uses a core, as pyright does
//!   during its first analysis of a large package; then it answers every request it held;
//! - `hold-pipes`: starts a `sleep` that shares its input and output, as a server's helper
//!   processes do: killed alone, the server leaves its pipes open (what is written to it then
//!   is read by nobody) until its process group goes;
//! - `diagnose`: publishes (empty) diagnostics for each document it is given, as a server does
//!   once it has analysed it; while `busy`, when it is done;
//! - `items NAME`: answers completion with three items labelled `NAME-1` to `NAME-3`, each with
//!   `data` `{from: NAME, n}` (a resolve is echoed as any other request).
//!
//! Any other request is answered with `{"echo": METHOD, "params": PARAMS}`. Two notifications
//! drive it from a test: `fake/poke` is echoed back as the notification `fake/poked`, and
//! `fake/ask {method, params}` makes it send that request to the client. A third,
//! `fake/flood {uri, count, bytes}`, makes it publish `count` diagnostics for `uri` at once, each
//! carrying its number as `code` and a message of `bytes` bytes; `fake/pause {millis}` makes it
//! stop reading its input for that long, as a server busy indexing does; `fake/progress
//! {count}` makes it send `count` times, without waiting for answers, the request
//! `window/workDoneProgress/create` for token `t<n>` and then `$/progress` begin for it, as
//! rust-analyzer does.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

#[derive(Default)]
struct Script {
    garbage: bool,
    garbage_on: HashSet<String>,
    silent: bool,
    exit: bool,
    chatty: bool,
    hang_on: HashSet<String>,
    crash_on: HashSet<String>,
    slow: HashMap<String, u64>,
    content_modified: HashMap<String, u32>,
    record: Option<String>,
    split: Option<Duration>,
    no_symbols: bool,
    busy: Option<Duration>,
    hold_pipes: bool,
    deaf_on: HashSet<String>,
    items: Option<String>,
    diagnose: bool,
}

impl Script {
    fn parse(args: &[String]) -> Script {
        let mut script = Script::default();
        let mut args: VecDeque<String> = args.iter().cloned().collect();
        let value = |mode: &str, what: &str, args: &mut VecDeque<String>| -> String {
            args.pop_front()
                .unwrap_or_else(|| die(&format!("`{mode}` needs {what}")))
        };
        while let Some(arg) = args.pop_front() {
            match arg.as_str() {
                "garbage" => script.garbage = true,
                "silent" => script.silent = true,
                "exit" => script.exit = true,
                "chatty" => script.chatty = true,
                "no-symbols" => script.no_symbols = true,
                "hold-pipes" => script.hold_pipes = true,
                "busy" => {
                    let millis = value("busy", "MILLIS", &mut args);
                    let millis = millis
                        .parse()
                        .unwrap_or_else(|_| die("`busy`: MILLIS is a number"));
                    script.busy = Some(Duration::from_millis(millis));
                }
                "deaf-on" => {
                    script.deaf_on.insert(value("deaf-on", "METHOD", &mut args));
                }
                "garbage-on" => {
                    script
                        .garbage_on
                        .insert(value("garbage-on", "METHOD", &mut args));
                }
                "hang-on" => {
                    script.hang_on.insert(value("hang-on", "METHOD", &mut args));
                }
                "crash-on" => {
                    script
                        .crash_on
                        .insert(value("crash-on", "METHOD", &mut args));
                }
                "slow" => {
                    let method = value("slow", "METHOD", &mut args);
                    let millis = value("slow", "MILLIS", &mut args);
                    let millis = millis
                        .parse()
                        .unwrap_or_else(|_| die("`slow`: MILLIS is a number"));
                    script.slow.insert(method, millis);
                }
                "content-modified" => {
                    let method = value("content-modified", "METHOD", &mut args);
                    let count = value("content-modified", "N", &mut args);
                    let count = count
                        .parse()
                        .unwrap_or_else(|_| die("`content-modified`: N is a number"));
                    script.content_modified.insert(method, count);
                }
                "record" => script.record = Some(value("record", "PATH", &mut args)),
                "diagnose" => script.diagnose = true,
                "items" => script.items = Some(value("items", "NAME", &mut args)),
                "split" => {
                    let millis = value("split", "MILLIS", &mut args);
                    let millis = millis
                        .parse()
                        .unwrap_or_else(|_| die("`split`: MILLIS is a number"));
                    script.split = Some(Duration::from_millis(millis));
                }
                other => die(&format!("unknown mode `{other}`")),
            }
        }
        script
    }
}

/// `path`, opened to append to (created if need be).
fn append_to(path: &str) -> std::fs::File {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap_or_else(|error| die(&format!("{path}: {error}")))
}

fn die(message: &str) -> ! {
    eprintln!("fake-lsp: {message}");
    std::process::exit(2)
}

struct Out {
    stdout: Mutex<std::io::Stdout>,
    record: Option<Mutex<std::fs::File>>,
    /// `split`: the pause between a message's header and its body.
    split: Option<Duration>,
}

impl Out {
    fn send(&self, message: &Value) {
        let body = message.to_string();
        let mut stdout = self.stdout.lock().unwrap();
        let _ = write!(stdout, "Content-Length: {}\r\n\r\n", body.len());
        if let Some(pause) = self.split {
            let _ = stdout.flush();
            std::thread::sleep(pause);
        }
        let _ = write!(stdout, "{body}");
        let _ = stdout.flush();
    }

    fn raw(&self, bytes: &[u8]) {
        let mut stdout = self.stdout.lock().unwrap();
        let _ = stdout.write_all(bytes);
        let _ = stdout.flush();
    }

    fn record(&self, message: &Value) {
        if let Some(file) = &self.record {
            // One write per line: `writeln!` on a `File` writes the pieces of the JSON one by
            // one, and a test reading meanwhile saw a line cut after its `{`.
            let line = format!("{message}\n");
            let _ = file.lock().unwrap().write_all(line.as_bytes());
        }
    }

    fn answer(&self, id: &Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    fn error(&self, id: &Value, code: i64, message: &str) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        );
    }
}

/// The next message; other header lines than `Content-Length` go to `headers` (and `(body)`
/// when the body begins).
fn read_message(reader: &mut impl BufRead) -> Option<Value> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok();
        }
    }
    let mut body = vec![0; length?];
    reader.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let script = Script::parse(&args);
    eprintln!("fake-lsp: started ({})", args.join(" "));
    if script.exit {
        eprintln!("fake-lsp: exiting at once, as asked");
        std::process::exit(3);
    }
    if script.hold_pipes {
        // Inherits standard input and output; stays in our process group.
        let _ = std::process::Command::new("sleep")
            .arg("3600")
            .stderr(std::process::Stdio::null())
            .spawn();
    }
    let record = script
        .record
        .as_deref()
        .map(|path| Mutex::new(append_to(path)));
    let out = Arc::new(Out {
        stdout: Mutex::new(std::io::stdout()),
        record,
        split: script.split,
    });
    let cancelled = Arc::new(Mutex::new(HashSet::<String>::new()));
    let mut content_modified = script.content_modified.clone();
    let mut reader = BufReader::new(std::io::stdin());
    let mut next_id = 1000;
    // While busy: the requests held until it is done.
    let held: Arc<Held> = Arc::new(Mutex::new(None));
    // With `diagnose`, the documents given while busy, diagnosed when it is done.
    let opened: Arc<Mutex<Vec<Value>>> = Arc::new(Mutex::new(Vec::new()));
    while let Some(message) = read_message(&mut reader) {
        out.record(&message);
        if script.silent {
            continue;
        }
        let method = message
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let id = message.get("id").cloned();
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        let Some(id) = id else {
            match method.as_str() {
                "exit" => std::process::exit(0),
                "$/cancelRequest" => {
                    cancelled.lock().unwrap().insert(params["id"].to_string());
                }
                "initialized" if script.chatty => chatter(&out, &mut next_id),
                "initialized" if script.busy.is_some() => {
                    let busy = script.busy.unwrap_or_default();
                    *held.lock().unwrap() = Some(Vec::new());
                    let (out, held, opened) = (out.clone(), held.clone(), opened.clone());
                    std::thread::spawn(move || {
                        be_busy(&out, &held, busy);
                        for uri in opened.lock().unwrap().drain(..) {
                            diagnose(&out, &uri);
                        }
                    });
                }
                "textDocument/didOpen" if script.diagnose => {
                    let uri = params["textDocument"]["uri"].clone();
                    match held.lock().unwrap().as_ref() {
                        Some(_) => opened.lock().unwrap().push(uri),
                        None => diagnose(&out, &uri),
                    }
                }
                "fake/flood" => {
                    let padding = "x".repeat(params["bytes"].as_u64().unwrap_or(0) as usize);
                    for seq in 0..params["count"].as_u64().unwrap_or(0) {
                        out.send(&json!({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics",
                            "params": {"uri": params["uri"], "diagnostics": [{
                                "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}},
                                "code": seq, "message": padding}]}}));
                    }
                }
                "fake/progress" => {
                    for n in 0..params["count"].as_u64().unwrap_or(0) {
                        next_id += 1;
                        let token = format!("t{n}");
                        out.send(&json!({"jsonrpc": "2.0", "id": next_id,
                            "method": "window/workDoneProgress/create", "params": {"token": token}}));
                        out.send(&json!({"jsonrpc": "2.0", "method": "$/progress", "params": {
                            "token": token, "value": {"kind": "begin", "title": format!("work {n}")}}}));
                    }
                }
                "fake/poke" => {
                    out.send(&json!({"jsonrpc": "2.0", "method": "fake/poked", "params": params}))
                }
                "fake/pause" => std::thread::sleep(Duration::from_millis(
                    params["millis"].as_u64().unwrap_or(0),
                )),
                "fake/ask" => {
                    next_id += 1;
                    out.send(&json!({"jsonrpc": "2.0", "id": next_id, "method": params["method"], "params": params["params"]}));
                }
                _ => {}
            }
            continue;
        };
        if method.is_empty() {
            // An answer to one of our own requests: already recorded.
            continue;
        }
        if script.crash_on.contains(&method) {
            eprintln!("fake-lsp: crashing on {method}, as asked");
            std::process::exit(101);
        }
        if script.garbage_on.contains(&method) {
            out.raw(b"this is not a header\r\n\r\n");
            continue;
        }
        if let Some(held) = held.lock().unwrap().as_mut() {
            held.push((id, method, params));
            continue;
        }
        if script.hang_on.contains(&method) {
            continue;
        }
        if script.deaf_on.contains(&method) {
            eprintln!("fake-lsp: closing my input on {method}, as asked");
            // /dev/null takes fd 0's place, which closes our end of the input pipe. Closed
            // before the answer, so that nothing the client sends after reading it can reach
            // the pipe while it is still open.
            let null =
                std::fs::File::open("/dev/null").unwrap_or_else(|error| die(&error.to_string()));
            nix::unistd::dup2_stdin(&null).unwrap_or_else(|error| die(&error.to_string()));
            out.answer(&id, json!({"deaf": true}));
            loop {
                std::thread::park();
            }
        }
        if let Some(left) = content_modified.get_mut(&method).filter(|left| **left > 0) {
            *left -= 1;
            out.error(&id, -32801, "content modified");
            continue;
        }
        match method.as_str() {
            "initialize" if script.garbage => {
                // A frame whose body is not JSON.
                out.raw(b"Content-Length: 20\r\n\r\n{\"jsonrpc\": broken!!");
            }
            "initialize" => {
                if let Some(&millis) = script.slow.get("initialize") {
                    std::thread::sleep(Duration::from_millis(millis));
                }
                let offered_utf8 = params
                    .pointer("/capabilities/general/positionEncodings")
                    .and_then(Value::as_array)
                    .is_some_and(|kinds| kinds.iter().any(|kind| kind == "utf-8"));
                out.answer(
                    &id,
                    json!({
                        "capabilities": {
                            "positionEncoding": if offered_utf8 { "utf-8" } else { "utf-16" },
                            "hoverProvider": true,
                            "definitionProvider": true,
                            "completionProvider": {"resolveProvider": true},
                            "textDocumentSync": 1,
                            "workspaceSymbolProvider": script.no_symbols,
                        },
                        "serverInfo": {"name": "fake-lsp"},
                    }),
                );
            }
            "shutdown" => out.answer(&id, Value::Null),
            "workspace/symbol" if script.no_symbols => out.answer(&id, json!([])),
            "textDocument/completion" if script.items.is_some() => {
                let name = script.items.as_deref().unwrap_or_default();
                let items: Vec<Value> = (1..=3)
                    .map(
                        |n| json!({"label": format!("{name}-{n}"), "data": {"from": name, "n": n}}),
                    )
                    .collect();
                out.answer(&id, json!({"isIncomplete": false, "items": items}));
            }
            method => match script.slow.get(method) {
                Some(&millis) => {
                    let out = out.clone();
                    let cancelled = cancelled.clone();
                    let method = method.to_owned();
                    std::thread::spawn(move || {
                        let key = id.to_string();
                        for _ in 0..millis / 10 {
                            if cancelled.lock().unwrap().contains(&key) {
                                out.error(&id, -32800, "cancelled");
                                return;
                            }
                            std::thread::sleep(Duration::from_millis(10));
                        }
                        out.answer(&id, json!({"echo": method, "params": params}));
                    });
                }
                None => out.answer(&id, json!({"echo": method, "params": params})),
            },
        }
    }
}

/// The server→client traffic of `chatty`.
/// Busy for `busy`: progress every 200 ms and a core in use, then every held request answered.
/// The requests a `busy` server holds (id, method, params) while it is busy, `None` after.
type Held = Mutex<Option<Vec<(Value, String, Value)>>>;

fn be_busy(out: &Out, held: &Held, busy: Duration) {
    let token = "analysis";
    out.send(
        &json!({"jsonrpc": "2.0", "method": "$/progress", "params": {"token": token,
        "value": {"kind": "begin", "title": "analysing"}}}),
    );
    let started = std::time::Instant::now();
    let mut report = started;
    while started.elapsed() < busy {
        std::hint::black_box((0..100_000u64).sum::<u64>());
        if report.elapsed() >= Duration::from_millis(200) {
            report = std::time::Instant::now();
            out.send(&json!({"jsonrpc": "2.0", "method": "$/progress", "params": {"token": token,
                "value": {"kind": "report", "message": format!("{} ms", started.elapsed().as_millis())}}}));
        }
    }
    out.send(
        &json!({"jsonrpc": "2.0", "method": "$/progress", "params": {"token": token,
        "value": {"kind": "end"}}}),
    );
    for (id, method, params) in held.lock().unwrap().take().unwrap_or_default() {
        out.answer(&id, json!({"echo": method, "params": params}));
    }
}

/// No diagnostics for `uri`: what a server publishes once it has analysed a clean document.
fn diagnose(out: &Out, uri: &Value) {
    out.send(
        &json!({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics",
        "params": {"uri": uri, "diagnostics": []}}),
    );
}

fn chatter(out: &Out, next_id: &mut i64) {
    let mut request = |method: &str, params: Value| {
        *next_id += 1;
        out.send(&json!({"jsonrpc": "2.0", "id": *next_id, "method": method, "params": params}));
    };
    request(
        "workspace/configuration",
        json!({"items": [{"section": "fake.answer"}, {"section": "absent"}]}),
    );
    request(
        "client/registerCapability",
        json!({"registrations": [{"id": "watch-1", "method": "workspace/didChangeWatchedFiles", "registerOptions": {"watchers": []}}]}),
    );
    request(
        "window/workDoneProgress/create",
        json!({"token": "fake-progress"}),
    );
    request("workspace/applyEdit", json!({"edit": {"changes": {}}}));
    request("fake/unknown", json!({}));
    let progress = |value: Value| {
        out.send(&json!({"jsonrpc": "2.0", "method": "$/progress", "params": {"token": "fake-progress", "value": value}}));
    };
    progress(json!({"kind": "begin", "title": "indexing"}));
    std::thread::sleep(Duration::from_millis(200));
    progress(json!({"kind": "end"}));
    out.send(&json!({
        "jsonrpc": "2.0",
        "method": "textDocument/publishDiagnostics",
        "params": {
            "uri": "file:///fake/gr%C3%BC%C3%9Fe.txt",
            "version": 7,
            "diagnostics": [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 5}}, "message": "größe is wrong", "severity": 1}],
        },
    }));
}
