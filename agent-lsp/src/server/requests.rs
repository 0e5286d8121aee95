//! An editor request's life on the loop (anything but `initialize` and `shutdown`, and what the
//! intake forwards itself): [`dispatch`] runs on the loop, routes the request
//! ([`router::route`]) and writes whatever goes to a child before the loop reads the editor's
//! next message; [`Pending::finish`] runs as a task of its own and waits for the answers. So a child receives the editor's requests and document
//! changes in the order the editor sent them, and only the waiting is concurrent.

use std::sync::Arc;

use lsp_bridge::framing::RawResult;
use lsp_bridge::jsonrpc;
use lsp_bridge::lsp_types::CodeActionParams;
use lsp_bridge::{Child, SentRequest};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::children::{self, Sent};
use super::router::{self, Kind, Lookup, Own, Route};
use super::{
    CHILD_REQUEST_TIMEOUT, Reply, ResponseError, Shared, code_actions, codes, commands, inline,
    items, prompts,
};

/// What a request task answers: a child's result as it wrote it, or a reply of ours.
pub(super) enum Answer {
    Raw(RawResult),
    Reply(Reply),
}

/// A request whose child part, if any, is written: what is left is waiting and answering.
pub(super) enum Pending {
    /// One child answers.
    Child(Sent),
    /// One child answers with items that two children could resolve: each is tagged with it.
    Tagged(Sent),
    /// The document's child's code actions (if it has a child), then the agent's.
    CodeActions {
        params: Box<CodeActionParams>,
        child: Option<Result<(Sent, bool), ResponseError>>,
    },
    /// Every running child's symbols, merged.
    Symbols(Vec<(Arc<Child>, SentRequest)>),
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

/// Route `method` and write what goes to a child now, in arrival order. A request with a
/// numeric id for one child, with nothing to rewrite, is forwarded as it is, like those the
/// intake forwards: `None`, the child answers the editor itself.
///
/// At most two writes: the second only when the first never reached the child, which was gone
/// (killed, crashed) before the request was written. That is a delivery retry: the restarted
/// child is asked what the dead one never saw. A request the child received and then died on
/// is answered with the error, never sent again (it may have had effects, and the editor
/// decides what to ask again).
pub(super) async fn dispatch(
    shared: &Arc<Shared>,
    id: &Value,
    method: &str,
    params: Value,
) -> Option<Pending> {
    let forward_as = id
        .as_i64()
        .filter(|id| (0..lsp_bridge::FIRST_OWN_ID).contains(id));
    // The agent adds to the child's code actions (the router routes every one to
    // `Own::CodeActions`), so it reads the params: malformed ones are refused before any child
    // is started or asked.
    let mut code_action_params = match method {
        "textDocument/codeAction" => {
            match jsonrpc::decode_params::<CodeActionParams>(method, params.clone()) {
                Ok(typed) => Some(Box::new(typed)),
                Err(error) => return Some(Pending::Answered(Err(error))),
            }
        }
        _ => None,
    };
    let mut delivery_retried = false;
    loop {
        let route = router::route(shared, Kind::Request, method, &params, Lookup::Start)
            .await
            .expect("the loop's lookup always decides");
        // A child that stops reading holds the loop here, and the editor's messages wait in
        // its pipe, instead of queueing here without bound.
        match &route {
            Route::Child(to) | Route::Agent(Own::CodeActions(Some(to))) => {
                to.child.writable().await
            }
            Route::FanOut(children) => {
                for child in children {
                    child.writable().await;
                }
            }
            _ => {}
        }
        let written = match route {
            Route::Child(to) => {
                children::write(shared, &to, method, &params, forward_as).map(|sent| {
                    sent.map(|sent| match to.tag_items {
                        true => Pending::Tagged(sent),
                        false => Pending::Child(sent),
                    })
                })
            }
            Route::Agent(Own::CodeActions(Some(to))) => {
                children::write(shared, &to, method, &params, None).map(|sent| {
                    let sent = sent.expect("sent, not forwarded");
                    Some(Pending::CodeActions {
                        child: Some(Ok((sent, to.tag_items))),
                        params: code_action_params.take().expect("decoded"),
                    })
                })
            }
            Route::Agent(Own::CodeActions(None)) => Ok(Some(Pending::CodeActions {
                child: None,
                params: code_action_params.take().expect("decoded"),
            })),
            Route::Agent(own) => Ok(Some(Pending::Own {
                own,
                params: params.clone(),
            })),
            Route::FanOut(children) => {
                let mut sent = Vec::new();
                for child in children {
                    match child.send(method, &params) {
                        Ok(request) => sent.push((child, request)),
                        Err(error) => {
                            tracing::warn!(server = child.name(), method, "not sent: {error}")
                        }
                    }
                }
                Ok(Some(Pending::Symbols(sent)))
            }
            Route::NoServer(answer) => Ok(Some(Pending::Answered(answer))),
        };
        match written {
            // Writing fails only before the request is written: the pipe was found closed, or
            // the connection already was. Either way this child never saw it.
            Err(error) if error.is_server_gone() && !delivery_retried => {
                tracing::info!(
                    server = error.server().unwrap_or_default(),
                    method,
                    "the child was gone before the request reached it: restarting it and sending the request there"
                );
                delivery_retried = true;
            }
            Err(error) if let Some(params) = code_action_params.take() => {
                // A document whose child failed still gets the agent's actions.
                return Some(Pending::CodeActions {
                    child: Some(Err(children::error_reply(error))),
                    params,
                });
            }
            Err(error) => return Some(Pending::Answered(Err(children::error_reply(error)))),
            Ok(pending) => return pending,
        }
    }
}

impl Pending {
    /// Wait for the answers and make the reply.
    pub(super) async fn finish(self, shared: &Arc<Shared>, cancel: &CancellationToken) -> Answer {
        match self {
            Pending::Answered(Ok(raw)) => Answer::Raw(raw),
            Pending::Answered(Err(error)) => Answer::Reply(Err(error)),
            Pending::Child(sent) => match children::answer(shared, sent, cancel).await {
                Ok(raw) => Answer::Raw(raw),
                Err(error) => Answer::Reply(Err(error)),
            },
            Pending::Tagged(sent) => {
                let child = sent.child.clone();
                let answer = children::answer(shared, sent, cancel)
                    .await
                    .and_then(|raw| parse(&raw));
                Answer::Reply(answer.map(|mut result| {
                    items::tag_items(&mut result, &child);
                    result
                }))
            }
            Pending::CodeActions { params, child } => {
                let from_child = match child {
                    Some(Ok((sent, tag))) => {
                        let child = sent.child.clone();
                        children::answer(shared, sent, cancel)
                            .await
                            .and_then(|raw| parse(&raw))
                            .map(|mut actions| {
                                if tag {
                                    items::tag_items(&mut actions, &child);
                                }
                                actions
                            })
                    }
                    Some(Err(error)) => Err(error),
                    None => Ok(Value::Null),
                };
                let child_actions = match from_child {
                    Ok(Value::Array(actions)) => actions,
                    Ok(_) => Vec::new(),
                    // A document without a server still gets the agent's actions.
                    Err(ResponseError {
                        message: problem, ..
                    }) => {
                        tracing::debug!("no child code actions: {problem}");
                        Vec::new()
                    }
                };
                Answer::Reply(code_actions::code_actions(shared, &params, child_actions))
            }
            Pending::Symbols(sent) => {
                let mut merged = Vec::new();
                for (child, request) in sent {
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
            let what = panic
                .downcast_ref::<&str>()
                .map(|text| (*text).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_owned());
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
