//! A proxy with agent-lsp's per-message work but the byte relay's threading: start the command
//! given as arguments, read each side's frames on its own blocking thread, parse them, give the
//! editor's requests ids of our own and map the answers back, forwarding a result as the server
//! wrote it (the envelope is parsed, the result is not).
//!
//! The proxy benchmark (`benches/proxy.rs`) puts it between the editor and pyright next to
//! `agent-lsp serve` and `byte-relay`: it tells how much of `serve`'s overhead is the work a
//! broker must do on every message and how much is its design (a reactor thread and tasks).
//! It routes to one server and keeps no document state, so it is a baseline, not a server.

use std::collections::HashMap;
use std::io::BufReader;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use agent_tests::relay::{raw_stdout, read_frame, spawn_relayed_command, write_frame};

/// What the server side needs of a message: whether it answers one of our ids.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default)]
    id: Option<i64>,
    #[serde(default)]
    method: Option<&'a str>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
}

fn main() {
    let (mut child, mut child_in, child_out) = spawn_relayed_command("json-relay");
    // Our id → the editor's id, for the requests waiting for an answer.
    let pending: Arc<Mutex<HashMap<i64, Value>>> = Arc::default();
    let next_id = Arc::new(AtomicI64::new(1));

    let upstream = {
        let pending = pending.clone();
        std::thread::spawn(move || {
            let mut editor = BufReader::new(std::io::stdin().lock());
            loop {
                let Some(body) = read_frame(&mut editor) else {
                    return;
                };
                // What is not JSON goes on as it is.
                let body = match serde_json::from_slice::<Value>(&body) {
                    Ok(mut message) => {
                        if message.get("method").is_some()
                            && let Some(id) = message.get("id").cloned()
                        {
                            let ours = next_id.fetch_add(1, Ordering::Relaxed);
                            pending.lock().expect("pending").insert(ours, id);
                            message["id"] = ours.into();
                        }
                        serde_json::to_vec(&message).expect("a Value serializes")
                    }
                    Err(_) => body,
                };
                if write_frame(&mut child_in, &body).is_err() {
                    return;
                }
            }
        })
    };

    let mut server = BufReader::new(child_out);
    let mut editor = raw_stdout();
    while let Some(body) = read_frame(&mut server) {
        let answer = match serde_json::from_slice::<Envelope<'_>>(&body) {
            Ok(Envelope {
                id: Some(id),
                method: None,
                result: Some(result),
            }) => pending.lock().expect("pending").remove(&id).map(|theirs| {
                format!(
                    r#"{{"jsonrpc":"2.0","id":{theirs},"result":{}}}"#,
                    result.get()
                )
            }),
            // An error answer: the same, through a `Value`.
            Ok(Envelope {
                id: Some(id),
                method: None,
                result: None,
            }) => pending
                .lock()
                .expect("pending")
                .remove(&id)
                .and_then(|theirs| {
                    let mut message = serde_json::from_slice::<Value>(&body).ok()?;
                    message["id"] = theirs;
                    Some(message.to_string())
                }),
            _ => None,
        };
        let sent = match answer {
            Some(answer) => write_frame(&mut editor, answer.as_bytes()),
            None => write_frame(&mut editor, &body),
        };
        if sent.is_err() {
            break;
        }
    }
    let _ = upstream.join();
    let _ = child.wait();
}
