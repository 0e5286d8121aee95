//! The loop's dispatch table ([`Server::handle`]): every editor message the intake did not
//! forward itself comes here, in the order the editor sent it. What the server reads itself
//! (`initialize`, `shutdown`, `exit`, document sync, cancellations) is handled here; every other
//! request is routed and handed to its child's lane before the next message is read
//! ([`requests::dispatch`]), and only its waiting runs as a task. Nothing here waits for a
//! child.

use std::sync::Arc;

use lsp_bridge::jsonrpc;
use serde_json::{Value, json};

use super::{ResponseError, Shared, capabilities, codes, documents, prompts, requests};

#[derive(PartialEq, Eq)]
pub(super) enum Flow {
    Continue,
    Exit,
}

pub(super) struct Server {
    pub(super) shared: Arc<Shared>,
    pub(super) shutdown_requested: bool,
    /// Log lines go to the editor as `window/logMessage` while this is held (from
    /// `initialize` until the connection ends).
    pub(super) editor_log: Option<crate::logging::EditorLogGuard>,
}

impl Server {
    /// A message the envelope reader refused: its answers (addressed to the request's id when
    /// that could be read, so no request waits forever; one per request of a batch, each in a
    /// frame of its own), and the reason in the log. The connection goes on.
    pub(super) fn unreadable(&self, refusal: jsonrpc::Refusal) {
        tracing::warn!("unreadable message from the editor: {}", refusal.problem);
        for answer in refusal.answers {
            self.shared.send(answer);
        }
    }

    /// The dispatch table: what runs on the loop, what runs as a task, what is forwarded.
    pub(super) async fn handle(&mut self, message: jsonrpc::Message) -> Flow {
        match message {
            // A response to one of our requests to the editor.
            jsonrpc::Message::Response { id, outcome } => {
                let reply = outcome;
                let waiter = id
                    .as_i64()
                    .and_then(|id| self.shared.to_editor.lock().expect("pending").remove(&id));
                match waiter {
                    Some(waiter) => {
                        let _ = waiter.send(reply);
                    }
                    None => {
                        tracing::warn!(%id, "the editor answered a request that was never sent")
                    }
                }
                Flow::Continue
            }
            jsonrpc::Message::Request { id, method, params } => {
                self.request(id, method, params).await;
                Flow::Continue
            }
            jsonrpc::Message::Notification { method, params } => {
                self.notification(&method, params).await
            }
        }
    }

    async fn request(&mut self, id: Value, method: String, params: Value) {
        let shared = self.shared.clone();
        match method.as_str() {
            "initialize" => {
                // From now on the editor may be sent log messages (the protocol allows them
                // while `initialize` is answered), and reads them better than stderr.
                let out = shared.out.clone();
                self.editor_log = Some(crate::logging::to_editor(Arc::new(move |kind, line| {
                    let message = json!({"jsonrpc": "2.0", "method": "window/logMessage",
                                         "params": {"type": kind, "message": line}});
                    let _ = out.send(&serde_json::to_vec(&message).expect("a Value serializes"));
                })));
                let reply = capabilities::initialize(&shared, params).await;
                shared.respond(id, reply);
            }
            _ if shared.bridge.get().is_none() => {
                shared.respond(
                    id,
                    Err(ResponseError::new(
                        codes::SERVER_NOT_INITIALIZED,
                        format!("`{method}` before `initialize`"),
                    )),
                );
            }
            "shutdown" => {
                self.shutdown_requested = true;
                // No lane starts a child from now on.
                shared
                    .shutting_down
                    .store(true, std::sync::atomic::Ordering::Release);
                if let Some(bridge) = shared.bridge.get() {
                    bridge.shutdown_all().await;
                }
                shared.respond(id, Ok(Value::Null));
            }
            _ if self.shutdown_requested => {
                shared.respond(
                    id,
                    Err(ResponseError::new(
                        codes::INVALID_REQUEST,
                        "the server is shutting down",
                    )),
                );
            }
            _ => requests::dispatch(&shared, id, method, params).await,
        }
    }

    async fn notification(&mut self, method: &str, params: Value) -> Flow {
        let shared = self.shared.clone();
        match method {
            "exit" => return Flow::Exit,
            "initialized" => {}
            "$/cancelRequest" => {
                // Still here (waiting in a lane, or answered by a task): its token. Else it
                // was forwarded (by the intake, or by its lane, which takes the token under
                // the same lock): the child that has it answers and is told.
                let key = params["id"].to_string();
                let in_flight = shared
                    .in_flight
                    .lock()
                    .expect("in flight")
                    .get(&key)
                    .map(|cancel| cancel.cancel())
                    .is_some();
                if !in_flight && let Some(id) = params["id"].as_i64() {
                    shared.cancel_forwarded(id);
                }
            }
            "window/workDoneProgress/cancel" => shared.host.cancel_progress(&params["token"]),
            "workspace/didChangeWatchedFiles" => {
                prompts::mentions::watched_files_changed(&shared, &params);
                documents::forward_notification(&shared, method, params).await;
            }
            "textDocument/didOpen"
            | "textDocument/didChange"
            | "textDocument/didClose"
            | "textDocument/didSave" => {
                let synced = match documents::DocumentEvent::decode(method, params) {
                    Ok(event) => {
                        prompts::mentions::document_event(&shared, &event);
                        documents::sync(&shared, event).await
                    }
                    Err(refused) => {
                        // No answer goes back to a notification: the person at the editor is
                        // told, since their buffer and ours may now differ.
                        shared.show_error(&refused.message);
                        Err(refused)
                    }
                };
                if let Err(ResponseError {
                    message: problem, ..
                }) = synced
                {
                    tracing::warn!(method, "{problem}");
                }
            }
            _ if shared.bridge.get().is_none() => {}
            _ => documents::forward_notification(&shared, method, params).await,
        }
        Flow::Continue
    }
}
