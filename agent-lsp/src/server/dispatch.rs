//! The loop's dispatch table ([`Server::handle`]): every editor message the intake did not
//! forward itself comes here, in the order the editor sent it. What the server reads itself
//! (`initialize`, `shutdown`, `exit`, document sync, cancellations) is handled here; every other
//! request is routed and written to its child before the next message is read
//! ([`requests::dispatch`]), and only its waiting runs as a task.

use std::sync::Arc;

use lsp_bridge::jsonrpc;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{ResponseError, Shared, capabilities, children, codes, documents, prompts, requests};

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
    /// A message the envelope reader refused: its answer (addressed to the request's id when
    /// that could be read, so no request waits forever), and the reason in the log.
    pub(super) fn unreadable(&self, refusal: jsonrpc::Refusal) {
        tracing::warn!("unreadable message from the editor: {}", refusal.problem);
        if let Some(answer) = refusal.answer {
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
            _ => {
                let span = tracing::info_span!("request", %method, %id);
                // What goes to a child is written now, before the next message is read; only
                // the waiting runs as a task.
                let Some(pending) = requests::dispatch(&shared, &id, &method, params)
                    .instrument(span.clone())
                    .await
                else {
                    // Forwarded: the child answers the editor; a cancellation goes to the child.
                    return;
                };
                let cancel = CancellationToken::new();
                let key = id.to_string();
                shared
                    .in_flight
                    .lock()
                    .expect("in flight")
                    .insert(key.clone(), cancel.clone());
                let on_agent_runtime = pending.on_agent_runtime();
                let agent_runtime = shared.agent_runtime.clone();
                let task = async move {
                    let handled = std::panic::AssertUnwindSafe(pending.finish(&shared, &cancel));
                    let answer = requests::guarded(&method, handled).await;
                    shared.in_flight.lock().expect("in flight").remove(&key);
                    match answer {
                        requests::Answer::Raw(result) => shared.respond_raw(&id, &result),
                        requests::Answer::Reply(Err(error)) if cancel.is_cancelled() => shared
                            .respond(
                                id,
                                Err(ResponseError::new(
                                    codes::REQUEST_CANCELLED,
                                    format!("`{method}` was cancelled: {}", error.message),
                                )),
                            ),
                        requests::Answer::Reply(reply) => shared.respond(id, reply),
                    }
                }
                .instrument(span);
                if on_agent_runtime {
                    agent_runtime.spawn(task);
                } else {
                    // Spawned from the loop's own thread: queued locally, no wake-up.
                    tokio::spawn(task);
                }
            }
        }
    }

    async fn notification(&mut self, method: &str, params: Value) -> Flow {
        let shared = self.shared.clone();
        match method {
            "exit" => return Flow::Exit,
            "initialized" => {}
            "$/cancelRequest" => {
                let key = params["id"].to_string();
                let in_flight = shared
                    .in_flight
                    .lock()
                    .expect("in flight")
                    .get(&key)
                    .cloned();
                match in_flight {
                    Some(cancel) => cancel.cancel(),
                    // Forwarded by the intake; the cancellation came here because the loop
                    // had messages queued (a change typed right after the request).
                    None => {
                        if let Some(id) = params["id"].as_i64() {
                            shared.cancel_forwarded(id);
                        }
                    }
                }
            }
            "window/workDoneProgress/cancel" => shared.host.cancel_progress(&params["token"]),
            "workspace/didChangeWatchedFiles" => {
                prompts::mentions::watched_files_changed(&shared, &params);
                children::forward_notification(&shared, method, params).await;
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
            _ => children::forward_notification(&shared, method, params).await,
        }
        Flow::Continue
    }
}
