//! An editor request's life on the loop (anything but `initialize` and `shutdown`, and what the
//! intake forwards itself): [`dispatch`] runs on the loop, routes the request
//! ([`router::route`]) and hands whatever goes to a child to that child's lane (`lanes`),
//! which writes it in the order the editor sent it; [`answer_later`] waits for the answers as a
//! task of its own and writes the reply. So a child receives the editor's requests and
//! document changes in the order the editor sent them, the loop never waits for a child, and
//! only the waiting is concurrent.

use std::sync::Arc;

use lsp_bridge::framing::RawResult;
use lsp_bridge::jsonrpc;
use lsp_bridge::lsp_types::CodeActionParams;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::children;
use super::lanes::{FannedOut, Job, RequestJob};
use super::relay::Relayed;
use super::router::{self, Kind, Lookup, Own, Route};
use super::{
    CHILD_REQUEST_TIMEOUT, Reply, ResponseError, Shared, code_actions, codes, commands, inline,
    prompts,
};

/// What a request task answers: a child's result as it wrote it, or a reply of ours.
pub(super) enum Answer {
    Raw(RawResult),
    Reply(Reply),
    /// The child's reader answered the editor already (`relay`).
    Relayed,
}

/// A request whose child part, if any, is written: what is left is waiting and answering.
pub(super) enum Pending {
    /// One child answers, its answer made into the reply where it is read (`relay`).
    Child(Relayed),
    /// The agent's code actions alone: no child serves the document, or the request could not
    /// reach it.
    AgentActions(Box<CodeActionParams>),
    /// Every running child's symbols, merged: each lane hands back the request it wrote.
    Symbols(Vec<oneshot::Receiver<FannedOut>>),
    /// The server's own: a command, `@path` completion in a prompt document.
    Own { own: Own, params: Value },
    /// Known without waiting: no server, or an item answered as it is.
    Answered(Result<RawResult, ResponseError>),
}

impl Pending {
    /// Whether it runs on the agent's runtime, off the proxy's thread: an agent command, or an
    /// inline completion (its model request and the servers' lookups).
    pub(super) fn on_agent_runtime(&self) -> bool {
        matches!(
            self,
            Pending::Own {
                own: Own::Command | Own::Inline,
                ..
            }
        )
    }
}

/// Route the request `id` and hand what goes to a child to its lane, in arrival order; what
/// the server answers itself is answered by a task. The request is in flight (cancellable) from
/// here until it is answered or forwarded.
pub(super) async fn dispatch(shared: &Arc<Shared>, id: Value, method: String, params: Value) {
    let cancel = CancellationToken::new();
    shared
        .in_flight
        .lock()
        .expect("in flight")
        .insert(id.to_string(), cancel.clone());
    // The agent adds to the child's code actions (the router routes every one to
    // `Own::CodeActions`), so it reads the params: malformed ones are refused before any child
    // is started or asked.
    let code_actions = match method.as_str() {
        "textDocument/codeAction" => {
            match jsonrpc::decode_params::<CodeActionParams>(&method, params.clone()) {
                Ok(typed) => Some(Box::new(typed)),
                Err(error) => {
                    return answer_later(shared, id, method, Pending::Answered(Err(error)), cancel);
                }
            }
        }
        _ => None,
    };
    let route = router::route(shared, Kind::Request, &method, &params, Lookup::Lane)
        .await
        .expect("the loop's lookup always decides");
    let pending = match route {
        Route::Child(to) | Route::Agent(Own::CodeActions(Some(to))) => {
            let lane = to.lane.clone();
            let job = RequestJob {
                id,
                method,
                params,
                to,
                code_actions,
                cancel,
            };
            // A full lane (a child that is starting or not reading, 256 messages behind): the
            // request is answered now rather than waiting in the loop, which would hold up
            // every other child's messages.
            if let Err(job) = lane.try_push(Job::Request(Box::new(job)))
                && let Job::Request(job) = *job
            {
                let pending = match job.code_actions {
                    Some(params) => Pending::AgentActions(params),
                    None => Pending::Answered(Err(lane.full())),
                };
                answer_later(shared, job.id, job.method, pending, job.cancel);
            }
            return;
        }
        Route::Agent(Own::CodeActions(None)) => {
            Pending::AgentActions(code_actions.expect("decoded"))
        }
        Route::Agent(own) => Pending::Own {
            own,
            params: params.clone(),
        },
        Route::FanOut(members) => {
            let mut parts = Vec::new();
            for (lane, child) in members {
                let (sent, part) = oneshot::channel();
                let job = Job::FanOut {
                    child,
                    method: method.clone(),
                    params: params.clone(),
                    sent,
                };
                if lane.try_push(job).is_ok() {
                    parts.push(part);
                }
            }
            Pending::Symbols(parts)
        }
        Route::NoServer(answer) => Pending::Answered(answer),
    };
    answer_later(shared, id, method, pending, cancel);
}

/// Wait for `pending`'s answers in a task of its own and answer the editor: exactly once, also
/// when the waiting panics, and with `RequestCancelled` when the editor cancelled it.
pub(super) fn answer_later(
    shared: &Arc<Shared>,
    id: Value,
    method: String,
    pending: Pending,
    cancel: CancellationToken,
) {
    let span = tracing::info_span!("request", %method, %id);
    let on_agent_runtime = pending.on_agent_runtime();
    let shared = shared.clone();
    let agent_runtime = shared.agent_runtime.clone();
    let task = async move {
        let handled = std::panic::AssertUnwindSafe(pending.finish(&shared, &cancel));
        let answer = guarded(&method, handled).await;
        shared
            .in_flight
            .lock()
            .expect("in flight")
            .remove(&id.to_string());
        write_answer(&shared, id, &method, answer, cancel.is_cancelled());
    }
    .instrument(span);
    if on_agent_runtime {
        agent_runtime.spawn(task);
    } else {
        // Spawned from the loop's own thread: queued locally, no wake-up.
        tokio::spawn(task);
    }
}

/// Answer the editor's request `id`; a failure of a request the editor cancelled is said to be
/// its cancellation.
pub(super) fn write_answer(
    shared: &Shared,
    id: Value,
    method: &str,
    answer: Answer,
    cancelled: bool,
) {
    match answer {
        Answer::Raw(result) => shared.respond_raw(&id, &result),
        Answer::Reply(Err(error)) if cancelled => shared.respond(
            id,
            Err(ResponseError::new(
                codes::REQUEST_CANCELLED,
                format!("`{method}` was cancelled: {}", error.message),
            )),
        ),
        Answer::Reply(reply) => shared.respond(id, reply),
        Answer::Relayed => {}
    }
}

impl Pending {
    /// Wait for the answers and make the reply.
    pub(super) async fn finish(self, shared: &Arc<Shared>, cancel: &CancellationToken) -> Answer {
        match self {
            Pending::Answered(Ok(raw)) => Answer::Raw(raw),
            Pending::Answered(Err(error)) => Answer::Reply(Err(error)),
            Pending::Child(relayed) => relayed.finish(shared, cancel).await,
            Pending::AgentActions(params) => {
                Answer::Reply(code_actions::code_actions(shared, &params, Vec::new()))
            }
            Pending::Symbols(parts) => {
                let mut merged = Vec::new();
                for part in parts {
                    let Ok(Some((child, request))) = part.await else {
                        continue;
                    };
                    let answer = child
                        .answer(request, CHILD_REQUEST_TIMEOUT, cancel)
                        .await
                        .map_err(children::error_reply)
                        .and_then(|raw| parse(&raw));
                    match answer {
                        Ok(Value::Array(symbols)) => merged.extend(symbols),
                        Ok(_) => {}
                        Err(ResponseError {
                            message: problem, ..
                        }) => {
                            tracing::warn!(
                                server = child.name(),
                                "workspace/symbol failed: {problem}"
                            )
                        }
                    }
                }
                Answer::Reply(Ok(Value::Array(merged)))
            }
            // Boxed: the commands' futures (agent turns) are kilobytes that every request's
            // task, the forwarded ones included, would otherwise allocate and copy.
            Pending::Own { own, params } => Answer::Reply(match own {
                Own::Mention => {
                    Box::pin(prompts::mentions::complete_mention(shared, &params)).await
                }
                Own::Inline => Box::pin(inline::complete(shared, &params, cancel)).await,
                _ => Box::pin(commands::execute(shared, params, cancel)).await,
            }),
        }
    }
}

fn parse(raw: &RawResult) -> Result<Value, ResponseError> {
    serde_json::from_str(raw.get())
        .map_err(|error| ResponseError::new(codes::INTERNAL_ERROR, error.to_string()))
}

/// Run a request's waiting so that a panic in it becomes an error reply: every request gets
/// exactly one response, and the server goes on serving (tokio would otherwise end the task
/// silently and leave the editor waiting).
pub(super) async fn guarded(
    method: &str,
    handler: impl std::future::Future<Output = Answer> + std::panic::UnwindSafe,
) -> Answer {
    use futures_util::FutureExt;
    match handler.catch_unwind().await {
        Ok(answer) => answer,
        Err(panic) => {
            let what = crate::logging::panic_message(&*panic);
            tracing::error!(method, "request handler panicked: {what}");
            Answer::Reply(Err(ResponseError::new(
                codes::INTERNAL_ERROR,
                format!(
                    "agent-lsp failed while handling `{method}` ({what}); this is a bug, please report it with the log"
                ),
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_handler_becomes_an_internal_error_reply() {
        let answer = guarded("textDocument/hover", async {
            panic!("index out of bounds");
        })
        .await;
        match answer {
            Answer::Reply(Err(ResponseError { code, message })) => {
                assert_eq!(code, codes::INTERNAL_ERROR);
                assert!(message.contains("`textDocument/hover`"), "{message}");
                assert!(message.contains("index out of bounds"), "{message}");
            }
            _ => panic!("expected an error reply"),
        }
        let fine = guarded("x", async { Answer::Reply(Ok(Value::Null)) }).await;
        assert!(matches!(fine, Answer::Reply(Ok(Value::Null))));
    }
}
