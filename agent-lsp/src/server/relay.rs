//! A child's answer that the server reshapes before the editor sees it (items tagged with the
//! child that made them, code actions followed by the agent's, an item resolved as the child
//! made it): the reply is made and written to the editor by the thread that reads the child,
//! as it reads the answer, so it reaches the editor in order with the child's notifications,
//! like a forwarded answer. When no answer comes (the request timed out or was cancelled, or
//! the child exited), the request's task answers instead; one flag makes sure only one of the
//! two does.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use lsp_bridge::framing::RawResult;
use lsp_bridge::lsp_types::CodeActionParams;
use lsp_bridge::{Child, Error};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::children::{self, Sent};
use super::requests::{self, Answer};
use super::{ResponseError, Shared, code_actions, codes, items};

/// How a child's answer becomes the editor's reply.
#[derive(Clone)]
pub(super) enum Shape {
    /// As the child wrote it.
    Plain,
    /// Its items tagged with the child (two running children resolve them).
    Tagged,
    /// The child's code actions (tagged or not), then the agent's.
    CodeActions {
        params: Box<CodeActionParams>,
        tag: bool,
    },
}

impl Shape {
    /// The reply for the child's `outcome`.
    fn reply(
        &self,
        shared: &Arc<Shared>,
        child: &Child,
        outcome: Result<&RawResult, ResponseError>,
    ) -> Answer {
        match self {
            Shape::Plain => match outcome {
                Ok(raw) => Answer::Raw(raw.clone()),
                Err(error) => Answer::Reply(Err(error)),
            },
            Shape::Tagged => Answer::Reply(outcome.and_then(parse).map(|mut result| {
                items::tag_items(&mut result, child);
                result
            })),
            Shape::CodeActions { params, tag } => {
                let actions = match outcome.and_then(parse) {
                    Ok(mut actions) => {
                        if *tag {
                            items::tag_items(&mut actions, child);
                        }
                        match actions {
                            Value::Array(actions) => actions,
                            _ => Vec::new(),
                        }
                    }
                    // A document whose child failed still gets the agent's actions.
                    Err(ResponseError {
                        message: problem, ..
                    }) => {
                        tracing::debug!("no child code actions: {problem}");
                        Vec::new()
                    }
                };
                Answer::Reply(code_actions::code_actions(shared, params, actions))
            }
        }
    }
}

fn parse(raw: &RawResult) -> Result<Value, ResponseError> {
    serde_json::from_str(raw.get())
        .map_err(|error| ResponseError::new(codes::INTERNAL_ERROR, error.to_string()))
}

/// A request sent to a child with an id of the bridge's, whose reply the child's reader makes.
pub(super) struct Relayed {
    sent: Sent,
    shape: Shape,
    /// Set by whichever of the reader and the task answers the editor first.
    answered: Arc<AtomicBool>,
}

/// Send the editor's request `id` to `child`, its answer to be made into the reply by `shape`
/// where the child's answer is read. Fails only before the request was written.
pub(super) fn send(
    shared: &Arc<Shared>,
    child: &Arc<Child>,
    id: &Value,
    method: &str,
    params: &Value,
    shape: Shape,
) -> Result<Relayed, Error> {
    let answered = Arc::new(AtomicBool::new(false));
    let relay: lsp_bridge::Relay = {
        let (shared, child) = (Arc::downgrade(shared), Arc::downgrade(child));
        let (id, method, shape, answered) = (
            id.clone(),
            method.to_owned(),
            shape.clone(),
            answered.clone(),
        );
        Box::new(move |outcome: &Result<RawResult, Error>| {
            let (Some(shared), Some(child)) = (shared.upgrade(), child.upgrade()) else {
                return;
            };
            if answered.swap(true, Ordering::AcqRel) {
                return;
            }
            if outcome.is_ok() {
                // Before the editor has the items: a resolve it sends at once finds their child.
                items::remember_resolve_route(&shared, &method, &child);
            }
            let outcome = outcome
                .as_ref()
                .map_err(|error| children::error_reply(error.clone()));
            // On the thread that reads the child: a panic here must not end that thread.
            let made = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                shape.reply(&shared, &child, outcome)
            }));
            let answer = made.unwrap_or_else(|_| {
                tracing::error!(%method, "making the reply panicked");
                Answer::Reply(Err(ResponseError::internal(format!(
                    "agent-lsp failed while answering `{method}`; this is a bug, please report it with the log"
                ))))
            });
            requests::write_answer(&shared, id, &method, answer, false);
        })
    };
    let request = child.send_relayed(method, params, Some(relay))?;
    Ok(Relayed {
        sent: children::sent(child, method, request),
        shape,
        answered,
    })
}

impl Relayed {
    /// Wait for the answer: `Answer::Relayed` when the child's reader answered the editor.
    pub(super) async fn finish(self, shared: &Arc<Shared>, cancel: &CancellationToken) -> Answer {
        let child = self.sent.child.clone();
        let outcome = children::answer(shared, self.sent, cancel).await;
        if self.answered.swap(true, Ordering::AcqRel) {
            return Answer::Relayed;
        }
        self.shape
            .reply(shared, &child, outcome.as_ref().map_err(Clone::clone))
    }
}
