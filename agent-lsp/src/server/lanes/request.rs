//! A lane's delivery of an editor request: to which child, forwarded as it is or sent to be
//! reshaped, written once more to a restarted child when it never reached a dead one, and its
//! answer waited for.
//!
//! Apart from the lane's queue and document sync in `lanes.rs` because a request is the one job
//! with an answer: the cancellation race with `$/cancelRequest`, the fallback of an instance
//! that is gone and the agent's code actions all belong to it.

use std::sync::Arc;

use lsp_bridge::{Child, Error};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::super::relay::{self, Relayed, Shape};
use super::super::requests::{self, Pending};
use super::super::{ResponseError, Shared, children, codes};
use super::{Delivered, Lane, RequestJob, Target};

impl Lane {
    /// Deliver an editor request: written to the child (forwarded with the editor's id when
    /// nothing is rewritten, so the child's answer goes to the editor as it is), and its answer
    /// waited for as a task. At most two writes: the second only when the first never reached
    /// the child, which was gone. A request the child received and then died on is answered
    /// with the error (it may have had effects; the editor decides what to ask again).
    pub(super) async fn request(
        &self,
        shared: &Arc<Shared>,
        delivered: &mut Delivered,
        job: RequestJob,
    ) {
        let RequestJob {
            id,
            method,
            params,
            to,
            code_actions,
            cancel,
        } = job;
        let shape = match code_actions {
            Some(params) => Shape::CodeActions {
                params,
                tag: to.tag_items,
            },
            None if to.tag_items => Shape::Tagged,
            None => Shape::Plain,
        };
        let mut retried = false;
        let pending = loop {
            let child = match &to.target {
                Target::Document(path) => self.child_for(shared, delivered, path).await,
                Target::Instance { child, .. } if child.is_healthy() => {
                    self.adopt(shared, delivered, child).await;
                    Ok(child.clone())
                }
                Target::Instance {
                    fallback: Some(item),
                    ..
                } => break Pending::Answered(raw(item)),
                Target::Instance { child, .. } => Err(Error::NotReady {
                    server: child.name().to_owned(),
                }),
            };
            let written = match child {
                Ok(child) => {
                    child.writable().await;
                    write(shared, &child, &to, &id, &method, &params, &shape, &cancel)
                }
                Err(error) => Err(error),
            };
            match written {
                Err(error) if error.is_server_gone() && !retried => {
                    tracing::info!(
                        server = %self.server,
                        %method,
                        "the child was gone before the request reached it: restarting it and sending the request there"
                    );
                    retried = true;
                }
                Err(error) => {
                    break match shape {
                        // A document whose child failed still gets the agent's actions.
                        Shape::CodeActions { params, .. } => {
                            tracing::debug!("no child code actions: {error}");
                            Pending::AgentActions(params)
                        }
                        _ => Pending::Answered(Err(children::error_reply(error))),
                    };
                }
                Ok(Written::Forwarded) => return,
                // Like a server's own queue: a request cancelled before it was read is dropped.
                Ok(Written::Cancelled) => {
                    break Pending::Answered(Err(ResponseError::new(
                        codes::REQUEST_CANCELLED,
                        format!(
                            "`{method}` was cancelled before {} received it",
                            self.server
                        ),
                    )));
                }
                Ok(Written::Sent(relayed)) => break Pending::Child(relayed),
            }
        };
        requests::answer_later(shared, id, method, pending, cancel);
    }
}

/// What became of a request the lane wrote.
enum Written {
    /// Forwarded with the editor's id: the child answers the editor.
    Forwarded,
    /// Sent with an id of the bridge's: its reply is made where the answer is read.
    Sent(Relayed),
    /// The editor cancelled it while it waited in the lane: the child never saw it.
    Cancelled,
}

/// Write a request to `child`: forwarded with the editor's numeric id when nothing about it is
/// rewritten, else sent to be reshaped (`relay`). The check for a cancellation and the forward
/// happen under the lock of the requests in flight, so that a `$/cancelRequest` either finds
/// the request still here or finds it at the child ([`Shared::cancel_forwarded`]), never
/// neither.
#[allow(clippy::too_many_arguments)]
fn write(
    shared: &Arc<Shared>,
    child: &Arc<Child>,
    to: &super::super::router::ToChild,
    id: &Value,
    method: &str,
    params: &Value,
    shape: &Shape,
    cancel: &CancellationToken,
) -> Result<Written, Error> {
    let params = to.params.as_ref().unwrap_or(params);
    let key = id.to_string();
    let mut in_flight = shared.in_flight.lock().expect("in flight");
    if cancel.is_cancelled() {
        return Ok(Written::Cancelled);
    }
    let forward_as = id
        .as_i64()
        .filter(|id| (0..lsp_bridge::FIRST_OWN_ID).contains(id))
        .filter(|_| to.is_verbatim() && matches!(shape, Shape::Plain));
    match forward_as {
        Some(id) => {
            let body = serde_json::to_vec(
                &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
            )
            .expect("a Value serializes");
            // From here the child has it: a cancellation goes there.
            let token = in_flight.remove(&key);
            let forwarded = children::forward(shared, child, id, method, &body);
            if forwarded.is_err()
                && let Some(token) = token
            {
                in_flight.insert(key, token);
            }
            forwarded.map(|()| Written::Forwarded)
        }
        None => {
            drop(in_flight);
            relay::send(shared, child, id, method, params, shape.clone()).map(Written::Sent)
        }
    }
}

fn raw(item: &Value) -> Result<lsp_bridge::framing::RawResult, ResponseError> {
    serde_json::value::to_raw_value(item)
        .map_err(|error| ResponseError::internal(error.to_string()))
}
