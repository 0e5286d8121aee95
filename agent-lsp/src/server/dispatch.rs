//! An editor request's life on the loop (anything but `initialize` and `shutdown`, and what the
//! intake forwards itself): [`dispatch`] runs on the loop and writes whatever goes to a child
//! before the loop reads the editor's next message; [`Pending::finish`] runs as a task of its
//! own and waits for the answers. So a child receives the editor's requests and document
//! changes in the order the editor sent them, and only the waiting is concurrent.

use std::sync::Arc;

use lsp_bridge::framing::RawResult;
use lsp_bridge::{Child, SentRequest};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{
    CHILD_REQUEST_TIMEOUT, Reply, ResponseError, Shared, actions, codes, commands, routing,
};

/// What a request task answers: a child's result as it wrote it, or a reply of ours.
pub(super) enum Answer {
    Raw(RawResult),
    Reply(Reply),
}

/// A request whose child part, if any, is written: what is left is waiting and answering.
pub(super) enum Pending {
    /// One child answers, or the answer is known already (a document no server handles).
    Child(Result<routing::Dispatch, ResponseError>),
    /// One child answers with items that two children could resolve: each is tagged with it.
    Tagged(routing::Dispatch),
    /// The document's child's code actions (if it has a child), then the agent's.
    CodeActions {
        params: Value,
        child: Option<Result<routing::Dispatch, ResponseError>>,
    },
    /// Every running child's symbols, merged.
    Symbols(Vec<(Arc<Child>, SentRequest)>),
    /// The server's own: an agent command, `@path` completion in a prompt document.
    Own { method: String, params: Value },
}

/// Route `method` and write what goes to a child now, in arrival order. A request with a
/// numeric id for one child is forwarded as it is, like those the intake forwards: `None`,
/// the child answers the editor itself.
pub(super) async fn dispatch(
    shared: &Arc<Shared>,
    id: &Value,
    method: &str,
    params: Value,
) -> Option<Pending> {
    let prompt_document = shared.is_prompt_document(&params);
    let pending = match method {
        "workspace/executeCommand" => match commands::child_for_command(shared, &params) {
            Some(child) => Pending::Child(
                child
                    .send(method, &params)
                    .map(|request| routing::Dispatch::Sent {
                        child,
                        method: method.to_owned(),
                        request,
                    })
                    .map_err(routing::error_reply),
            ),
            None => Pending::Own {
                method: method.to_owned(),
                params,
            },
        },
        "textDocument/codeAction" => {
            let child = if prompt_document {
                None
            } else {
                routing::dispatch_to_child(shared, method, &params, None)
                    .await
                    .transpose()
            };
            Pending::CodeActions { params, child }
        }
        "textDocument/completion" if prompt_document => Pending::Own {
            method: method.to_owned(),
            params,
        },
        "workspace/symbol" => {
            let mut sent = Vec::new();
            if let Ok(bridge) = shared.bridge() {
                for child in bridge.running() {
                    match child.send(method, &params) {
                        Ok(request) => sent.push((child, request)),
                        Err(error) => tracing::warn!(
                            server = child.name(),
                            "workspace/symbol not sent: {error}"
                        ),
                    }
                }
            }
            Pending::Symbols(sent)
        }
        _ if routing::items_need_origin(shared, method) => {
            match routing::dispatch_to_child(shared, method, &params, None).await {
                Ok(Some(dispatch)) => Pending::Tagged(dispatch),
                Ok(None) => return None,
                Err(error) => Pending::Child(Err(error)),
            }
        }
        _ => {
            let forward_as = id
                .as_i64()
                .filter(|id| (0..lsp_bridge::FIRST_OWN_ID).contains(id));
            match routing::dispatch_to_child(shared, method, &params, forward_as).await {
                Ok(Some(dispatch)) => Pending::Child(Ok(dispatch)),
                Ok(None) => return None,
                Err(error) => Pending::Child(Err(error)),
            }
        }
    };
    Some(pending)
}

impl Pending {
    /// Wait for the answers and make the reply.
    pub(super) async fn finish(self, shared: &Arc<Shared>, cancel: &CancellationToken) -> Answer {
        match self {
            Pending::Child(dispatch) => match dispatch {
                Ok(dispatch) => match routing::answer(shared, dispatch, cancel).await {
                    Ok(raw) => Answer::Raw(raw),
                    Err(error) => Answer::Reply(Err(error)),
                },
                Err(error) => Answer::Reply(Err(error)),
            },
            Pending::Tagged(dispatch) => {
                let child = dispatch.child().cloned();
                let answer = routing::answer(shared, dispatch, cancel)
                    .await
                    .and_then(|raw| parse(&raw));
                Answer::Reply(answer.map(|mut result| {
                    if let Some(child) = &child {
                        routing::tag_items(&mut result, child);
                    }
                    result
                }))
            }
            Pending::CodeActions { params, child } => {
                let tag = routing::items_need_origin(shared, "textDocument/codeAction");
                let from_child = match child {
                    Some(Ok(dispatch)) => {
                        let child = dispatch.child().cloned();
                        routing::answer(shared, dispatch, cancel)
                            .await
                            .and_then(|raw| parse(&raw))
                            .map(|mut actions| {
                                if let Some(child) = child.filter(|_| tag) {
                                    routing::tag_items(&mut actions, &child);
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
                Answer::Reply(actions::code_actions(shared, &params, child_actions))
            }
            Pending::Symbols(sent) => {
                let mut merged = Vec::new();
                for (child, request) in sent {
                    let answer = child
                        .answer(request, CHILD_REQUEST_TIMEOUT, cancel)
                        .await
                        .map_err(routing::error_reply)
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
            Pending::Own { method, params } => Answer::Reply(match method.as_str() {
                "workspace/executeCommand" => {
                    Box::pin(commands::execute(shared, params, cancel)).await
                }
                _ => Box::pin(actions::complete_mention(shared, &params)).await,
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
