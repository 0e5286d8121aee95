//! Reading the server: its stderr (kept for error messages), its output (framed, dispatched to
//! our pending requests, to the editor for forwarded ones, to the owner for the rest), and the
//! process's exit.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::{mpsc, oneshot};

use super::{
    Closed, Incoming, RawResult, STDERR_DRAIN, STDERR_TAIL_LINES, STDOUT_DRAIN, Shared, kill_group,
};
use crate::error::Error;
use crate::framing::{ReadError, preview, read_frame, read_frame_blocking};

pub(super) async fn stderr_loop(shared: Arc<Shared>, stderr: impl AsyncRead + Unpin) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&line);
        let mut text = text.trim_end().to_owned();
        if text.is_empty() {
            continue;
        }
        if text.len() > 1000 {
            let cut = (0..=1000)
                .rev()
                .find(|&index| text.is_char_boundary(index))
                .unwrap_or(0);
            text.truncate(cut);
            text.push('…');
        }
        tracing::info!(target: "lsp_bridge::stderr", server = %shared.server, "{text}");
        let mut tail = shared.stderr_tail.lock().unwrap();
        if tail.len() == STDERR_TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(text);
    }
    shared.stderr_done.send_replace(true);
}

/// Where the server's output is read ([`ServerConfig::output_thread`]).
pub(super) enum Output {
    Thread(std::os::fd::OwnedFd),
    Task(tokio::process::ChildStdout),
}

/// A frame read from the server, or why its output ended.
pub(super) fn frame_or_end(
    shared: &Shared,
    read: std::result::Result<Option<Vec<u8>>, ReadError>,
) -> std::result::Result<Vec<u8>, Closed> {
    match read {
        Ok(Some(body)) => Ok(body),
        Ok(None) => Err(Closed::Exited),
        Err(ReadError::Io(error)) => {
            tracing::debug!(server = %shared.server, "reading from language server failed: {error}");
            Err(Closed::Exited)
        }
        Err(ReadError::Protocol(message)) => Err(Closed::Protocol(message)),
    }
}

/// Read the server's output until it ends, on the runtime: the bridge's own callers, waiting
/// on the same runtime, get their answers without a thread waking another.
pub(super) async fn read_output_task(
    shared: Arc<Shared>,
    stdout: tokio::process::ChildStdout,
    incoming: mpsc::Sender<Incoming>,
) {
    let mut reader = tokio::io::BufReader::with_capacity(64 * 1024, stdout);
    let reason = loop {
        let body = match frame_or_end(&shared, read_frame(&mut reader).await) {
            Ok(body) => body,
            Err(reason) => break reason,
        };
        match dispatch(&shared, &body) {
            // The owner is gone: the process is being stopped, nothing left to tell.
            Ok(Some(message)) => {
                let _ = incoming.send(message).await;
            }
            Ok(None) => {}
            Err(problem) => break Closed::Protocol(problem),
        }
    };
    output_ended(shared, reason);
}

/// Read the server's output until it ends, on a thread of its own (see the module docs).
pub(super) fn read_output(
    shared: Arc<Shared>,
    stdout: std::os::fd::OwnedFd,
    incoming: mpsc::Sender<Incoming>,
) {
    /// Closes the connection if the thread ends by a panic, so no caller waits for a reader
    /// that is gone.
    struct CloseOnPanic(Arc<Shared>);
    impl Drop for CloseOnPanic {
        fn drop(&mut self) {
            if std::thread::panicking() {
                self.0
                    .close(Closed::Protocol("the reader of its output failed".into()));
            }
        }
    }
    let _guard = CloseOnPanic(shared.clone());
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, std::fs::File::from(stdout));
    let reason = loop {
        let read = read_frame_blocking(&mut reader);
        let body = match frame_or_end(&shared, read) {
            Ok(body) => body,
            Err(reason) => break reason,
        };
        match dispatch(&shared, &body) {
            // Waits while the owner holds `INCOMING_QUEUE` messages: reading stops and the
            // server's pipe fills. A gone owner means the process is being stopped.
            Ok(Some(message)) => {
                let _ = incoming.blocking_send(message);
            }
            Ok(None) => {}
            Err(problem) => break Closed::Protocol(problem),
        }
    };
    output_ended(shared, reason);
}

/// The server's output ended for `reason`: close the connection (after the last stderr lines,
/// which usually say why it died), and stop a server that broke the framing.
pub(super) fn output_ended(shared: Arc<Shared>, reason: Closed) {
    match reason {
        Closed::Protocol(_) => {
            shared.close(reason);
            // A server that breaks framing cannot be resynchronised: stop it.
            if let Some(pid) = shared.pid {
                kill_group(pid);
            }
        }
        Closed::Exited => {
            // The reason it died is usually its last stderr lines: let them arrive first.
            shared.runtime.clone().spawn(async move {
                let mut done = shared.stderr_done.subscribe();
                let _ = tokio::time::timeout(STDERR_DRAIN, done.wait_for(|done| *done)).await;
                shared.close(reason);
            });
        }
    }
}

/// The parts of a message the dispatch looks at; a response's `result` stays raw.
#[derive(serde::Deserialize)]
pub(super) struct Envelope<'a> {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<Value>,
    #[serde(default, borrow)]
    result: Option<&'a serde_json::value::RawValue>,
    #[serde(default)]
    error: Option<Value>,
}

/// Route one message body: what the owner is to handle is returned; an `Err` is a body that is
/// not JSON at all (the stream is broken).
pub(super) fn dispatch(
    shared: &Arc<Shared>,
    body: &[u8],
) -> std::result::Result<Option<Incoming>, String> {
    let envelope: Envelope<'_> = match serde_json::from_slice(body) {
        Ok(envelope) => envelope,
        Err(error) => {
            if serde_json::from_slice::<Value>(body).is_ok() {
                tracing::warn!(server = %shared.server, "ignoring a message that is not a JSON object");
                return Ok(None);
            }
            return Err(format!("invalid JSON body ({error}): {}", preview(body)));
        }
    };
    let id = envelope.id.filter(|id| !id.is_null());
    match (envelope.method, id) {
        (Some(method), id) => {
            let params = envelope.params.unwrap_or(Value::Null);
            let message = match id {
                Some(id) => {
                    if to_request_handler(shared, &id, &method, &params) {
                        return Ok(None);
                    }
                    Incoming::Request { id, method, params }
                }
                None => {
                    let editor = shared
                        .notification_sink
                        .lock()
                        .unwrap()
                        .as_ref()
                        .filter(|sink| (sink.wanted)(&method))
                        .map(|sink| sink.editor.clone());
                    if let Some(editor) = editor {
                        editor.send_waiting(body);
                    }
                    Incoming::Notification { method, params }
                }
            };
            return Ok(Some(message));
        }
        (None, Some(id)) if shared.answer_forwarded(&id, body) => {}
        (None, Some(id)) => {
            let outcome = match envelope.error {
                Some(error) => Err(Error::Response {
                    server: shared.server.clone(),
                    code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
                    message: error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("(no message)")
                        .to_owned(),
                }),
                None => Ok(envelope
                    .result
                    .map(ToOwned::to_owned)
                    .unwrap_or_else(null_result)),
            };
            shared.complete(&id, outcome);
        }
        _ => {
            tracing::warn!(server = %shared.server, "ignoring a message with neither method nor id")
        }
    }
    Ok(None)
}

/// Hand a server→client request to the request handler, which writes it on (to the editor)
/// before it returns, so it stays in the server's order; the answer is awaited in a task and
/// written back to the server. `false` when the handler declines (or there is none).
fn to_request_handler(shared: &Arc<Shared>, id: &Value, method: &str, params: &Value) -> bool {
    let handler = shared.request_handler.read().unwrap().clone();
    let Some(answer) = handler.and_then(|handler| handler(method, params)) else {
        return false;
    };
    let (shared, id) = (shared.clone(), id.clone());
    let runtime = shared.runtime.clone();
    runtime.spawn(async move {
        // In a task of its own, so that a panic in it still gets the server an answer.
        let outcome = tokio::spawn(answer).await.unwrap_or_else(|error| {
            Err(crate::jsonrpc::ResponseError::internal(format!(
                "request handler failed: {error}"
            )))
        });
        shared.send(&crate::jsonrpc::reply(&id, &outcome));
    });
    true
}

/// An error answer for the editor.
pub(super) fn error_body(id: i64, code: i64, message: &str) -> Vec<u8> {
    serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
    )
    .expect("a Value serializes")
}

pub(super) fn null_result() -> RawResult {
    serde_json::value::RawValue::from_string("null".to_owned()).expect("null is JSON")
}

pub(super) async fn watch_process(
    shared: Arc<Shared>,
    mut process: tokio::process::Child,
    kill: oneshot::Receiver<()>,
) {
    let status = tokio::select! {
        status = process.wait() => status,
        // Asked to kill, or the transport was dropped.
        _ = kill => {
            if let Some(pid) = shared.pid {
                kill_group(pid);
            }
            let _ = process.start_kill();
            process.wait().await
        }
    };
    // Whatever the server left running in its group goes with it.
    if let Some(pid) = shared.pid {
        kill_group(pid);
    }
    match &status {
        Ok(status) => {
            tracing::info!(server = %shared.server, pid = ?shared.pid, %status, "language server exited")
        }
        Err(error) => {
            tracing::warn!(server = %shared.server, "waiting for language server failed: {error}")
        }
    }
    if let Ok(status) = status {
        shared.exit_status.send_replace(Some(status));
    }
    // Normally stdout ends with the process; a grandchild may hold it open, so don't wait long.
    let mut closed = shared.closed.subscribe();
    if tokio::time::timeout(STDOUT_DRAIN, closed.wait_for(|closed| closed.is_some()))
        .await
        .is_err()
    {
        shared.close(Closed::Exited);
    }
}
