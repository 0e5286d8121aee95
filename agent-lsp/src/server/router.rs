//! The one routing decision: for every editor message `serve` does not handle itself on the
//! loop, who answers it ([`route`]). The intake asks it about each request it could forward at
//! once ([`Lookup::Known`]); the loop asks it about every other request and every notification
//! it forwards ([`Lookup::Lane`]). Nothing else decides where a message goes. Routing never
//! waits for a child: a message for a child goes to that child's lane (`lanes`), which starts
//! the child if need be.
//!
//! | message | route |
//! |---|---|
//! | a request about a document | [`Route::Child`]: the lane of the document's server; [`Route::NoServer`] with the method's empty result when no server handles the file |
//! | `*/resolve` | the child that made the item ([`items`]); the server's own items, and items whose child does not resolve, are answered as they are |
//! | `textDocument/codeAction` | [`Own::CodeActions`]: the document's child's actions, then the agent's |
//! | `textDocument/completion` in a prompt document | [`Own::Mention`] |
//! | `textDocument/inlineCompletion` | [`Own::Inline`], always: the server's own feature |
//! | `workspace/executeCommand` | [`Own::Command`] for ours, else the child that announced the command |
//! | `workspace/symbol` | [`Route::FanOut`]: every running child (and every lane starting one), answers merged |
//! | a request of a feature announced up front that the document's server lacks | [`Route::NoServer`] with the method's empty result (`capabilities::up_front`) |
//! | a notification | the document's lane, or every running child (and every lane starting one) when it names no document |

use std::sync::Arc;

use lsp_bridge::Child;
use lsp_bridge::framing::RawResult;
use lsp_bridge::jsonrpc;
use lsp_bridge::lsp_types::{CodeAction, CompletionItem};
use serde_json::Value;

use super::lanes::{Lane, Target};
use super::{
    ResponseError, Shared, capabilities, children, codes, commands, document_path, document_uri,
    items,
};

/// Who answers an editor message.
pub(super) enum Route {
    /// One child.
    Child(ToChild),
    /// Every running child, through its lane (and every lane starting one): their answers
    /// merged, or each told.
    FanOut(Vec<(Arc<Lane>, Option<Arc<Child>>)>),
    /// The server itself.
    Agent(Own),
    /// No child: the answer is known (an item that needs no resolving, the empty result for a
    /// document no server handles), or the error saying why there is none.
    NoServer(Result<RawResult, ResponseError>),
}

/// A message for one child.
pub(super) struct ToChild {
    /// Where it waits until the child can take it.
    pub(super) lane: Arc<Lane>,
    pub(super) target: Target,
    /// What the child gets instead of the editor's params: an item as that child made it,
    /// without the origin tag the editor saw.
    pub(super) params: Option<Value>,
    /// Whether the answer's items are tagged with their child (two children resolve them).
    pub(super) tag_items: bool,
}

impl ToChild {
    /// For `child` itself (it made the item, or announced the command); `fallback` answers
    /// the request if it is gone by the time its lane delivers.
    fn instance(
        shared: &Arc<Shared>,
        child: Arc<Child>,
        params: Option<Value>,
        fallback: Option<Value>,
    ) -> ToChild {
        ToChild {
            lane: shared.lane_of(&child),
            target: Target::Instance { child, fallback },
            params,
            tag_items: false,
        }
    }

    /// The running child the intake forwards to.
    pub(super) fn running_child(&self) -> Option<&Arc<Child>> {
        match &self.target {
            Target::Instance { child, .. } => Some(child),
            Target::Document(_) => None,
        }
    }

    /// Whether the editor's message goes to the child byte for byte and its answer back the
    /// same way: what the intake forwards itself.
    pub(super) fn is_verbatim(&self) -> bool {
        self.params.is_none() && !self.tag_items
    }
}

/// What the server answers itself.
pub(super) enum Own {
    /// One of its commands, or a command no child announced.
    Command,
    /// `@path` completion in a prompt document.
    Mention,
    /// Inline completion (ghost text), for every document: never a child's.
    Inline,
    /// The document's child's code actions (none for a prompt document or a file no server
    /// handles), then the agent's.
    CodeActions(Option<ToChild>),
}

/// How a document's child is found.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Lookup {
    /// The lane of the document's server, which starts the child if need be: the loop's.
    Lane,
    /// Only a running child whose lane is empty, and that a request about the document went to
    /// before: the intake's, which must not wait. `route` then answers `None` when it would
    /// have to look further.
    Known,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Request,
    Notification,
}

/// Where `method` goes. `None` only with [`Lookup::Known`]: the loop decides.
pub(super) async fn route(
    shared: &Arc<Shared>,
    kind: Kind,
    method: &str,
    params: &Value,
    lookup: Lookup,
) -> Option<Route> {
    if kind == Kind::Notification {
        if document_uri(params).is_none() {
            return Some(Route::FanOut(fan_out(shared)));
        }
        return by_document(shared, method, params, lookup, false).await;
    }
    // A prompt document never has a known route (only the loop routes to its child), so with
    // `Lookup::Known` it is never taken for another document.
    let prompt_document = || lookup == Lookup::Lane && shared.is_prompt_document(params);
    match method {
        "workspace/executeCommand" => return Some(command(shared, params)),
        "workspace/symbol" => return Some(Route::FanOut(fan_out(shared))),
        "textDocument/completion" if prompt_document() => return Some(Route::Agent(Own::Mention)),
        "textDocument/inlineCompletion" => return Some(Route::Agent(Own::Inline)),
        "textDocument/codeAction" => {
            let child = if prompt_document() {
                None
            } else {
                let tag = items::items_need_origin(shared, method);
                match by_document(shared, method, params, lookup, tag).await? {
                    Route::Child(to) => Some(to),
                    Route::NoServer(Err(error)) => {
                        tracing::debug!("no child code actions: {}", error.message);
                        None
                    }
                    _ => None,
                }
            };
            return Some(Route::Agent(Own::CodeActions(child)));
        }
        _ => {}
    }
    if let Some(origin) = items::resolve_origin(method) {
        return Some(resolve(shared, method, origin, params));
    }
    let tag = items::items_need_origin(shared, method);
    match by_document(shared, method, params, lookup, tag).await? {
        // Announced at `initialize` for servers not yet running, and this one lacks it.
        Route::Child(to) if capabilities::up_front::unsupported(shared, &to, method) => {
            Some(Route::NoServer(Ok(empty_result(method))))
        }
        route => Some(route),
    }
}

/// Every running child with its lane, and every lane that is starting one (its messages so
/// far start it; the broadcast follows them).
fn fan_out(shared: &Arc<Shared>) -> Vec<(Arc<Lane>, Option<Arc<Child>>)> {
    let mut members: Vec<(Arc<Lane>, Option<Arc<Child>>)> = children::running(shared)
        .into_iter()
        .map(|child| (shared.lane_of(&child), Some(child)))
        .collect();
    let lanes: Vec<Arc<Lane>> = shared
        .lanes
        .lock()
        .expect("lanes")
        .values()
        .cloned()
        .collect();
    for lane in lanes {
        if !lane.idle() && !members.iter().any(|(member, _)| Arc::ptr_eq(member, &lane)) {
            members.push((lane, None));
        }
    }
    members
}

/// A command goes to the child that announced it, unless it is ours.
fn command(shared: &Arc<Shared>, params: &Value) -> Route {
    let Some(command) = params["command"].as_str() else {
        // Refused with what is wrong by the command parser.
        return Route::Agent(Own::Command);
    };
    if commands::COMMANDS.contains(&command) {
        return Route::Agent(Own::Command);
    }
    let announced = children::running(shared).into_iter().find(|child| {
        child.initialize_result()["capabilities"]["executeCommandProvider"]["commands"]
            .as_array()
            .is_some_and(|commands| commands.iter().any(|name| name == command))
    });
    match announced {
        Some(child) => Route::Child(ToChild::instance(shared, child, None, None)),
        None => Route::Agent(Own::Command),
    }
}

/// A `*/resolve` request goes to the child that made the item it carries.
fn resolve(shared: &Arc<Shared>, method: &str, origin: &str, params: &Value) -> Route {
    // The item itself is the answer: resolving it gives nothing more.
    let as_it_is = |item: &Value| {
        Route::NoServer(
            serde_json::value::to_raw_value(item)
                .map_err(|error| ResponseError::internal(error.to_string())),
        )
    };
    // The agent's own code actions carry their command already, and the `@path` completion
    // items are complete as they are.
    let agent_action = method == "codeAction/resolve"
        && params["command"]["command"]
            .as_str()
            .is_some_and(|command| command.starts_with("agent."));
    // The server made them, so it reads them: a malformed one is refused.
    if agent_action {
        return match jsonrpc::decode_params::<CodeAction>(method, params.clone()) {
            Ok(_) => as_it_is(params),
            Err(error) => Route::NoServer(Err(error)),
        };
    }
    if items::is_own_item(params) {
        return match jsonrpc::decode_params::<CompletionItem>(method, params.clone()) {
            Ok(_) => as_it_is(params),
            Err(error) => Route::NoServer(Err(error)),
        };
    }
    if let Some((child, original)) = items::untag(shared, params) {
        // Its child is gone (restarted since) or does not resolve: the item as it made it.
        return match child.filter(|child| items::resolves(child, origin)) {
            Some(child) => Route::Child(ToChild::instance(
                shared,
                child,
                Some(original.clone()),
                Some(original),
            )),
            None => as_it_is(&original),
        };
    }
    match items::resolve_route(shared, origin) {
        None => Route::NoServer(Err(ResponseError::invalid_params(format!(
            "`{method}` for an item no server produced"
        )))),
        Some(child) if !items::resolves(&child, origin) => as_it_is(params),
        Some(child) => Route::Child(ToChild::instance(shared, child, None, Some(params.clone()))),
    }
}

/// The document's lane, if the message names a document.
async fn by_document(
    shared: &Arc<Shared>,
    method: &str,
    params: &Value,
    lookup: Lookup,
    tag_items: bool,
) -> Option<Route> {
    if lookup == Lookup::Known {
        // The intake's hot path: the URI as the editor spells it, no parsing, no path; only
        // while nothing waits in the lane, and the child has room for it.
        let lane = shared
            .document_routes
            .lock()
            .expect("document routes")
            .get(document_uri(params)?)
            .cloned()
            .filter(|lane| lane.idle())?;
        let child = lane.running_child().filter(|child| child.has_room())?;
        return Some(Route::Child(ToChild {
            lane,
            target: Target::Instance {
                child,
                fallback: None,
            },
            params: None,
            tag_items,
        }));
    }
    let Some(path) = document_path(params) else {
        return Some(Route::NoServer(Err(no_child(method))));
    };
    let Some(lane) = shared.lane_for(&path).await else {
        // No server handles the document (a README, a prompt document, a JSON file): the
        // editor asked about a document, not for a method nobody has, so it gets the method's
        // empty result. An error here is shown to the user by editors (VS Code pops up every
        // failed documentSymbol), for a file they merely opened.
        return Some(Route::NoServer(Ok(empty_result(method))));
    };
    if let Some(uri) = params["textDocument"]["uri"].as_str()
        && !shared.prompt_documents.matches(&path)
    {
        shared
            .document_routes
            .lock()
            .expect("document routes")
            .insert(uri.to_owned(), lane.clone());
    }
    Some(Route::Child(ToChild {
        lane,
        target: Target::Document(path),
        params: None,
        tag_items,
    }))
}

/// The result meaning "nothing here" for a request about a document: `null` where the
/// method's result type allows it (LSP 3.17), else its empty value.
fn empty_result(method: &str) -> RawResult {
    let empty = match method {
        "textDocument/documentColor" | "textDocument/colorPresentation" => "[]",
        "textDocument/diagnostic" => r#"{"kind":"full","items":[]}"#,
        _ => "null",
    };
    serde_json::value::RawValue::from_string(empty.to_owned()).expect("the empty results are JSON")
}

fn no_child(method: &str) -> ResponseError {
    if method.starts_with("textDocument/") {
        ResponseError::invalid_params(format!(
            "`{method}` needs params.textDocument.uri naming a file"
        ))
    } else {
        ResponseError::new(
            codes::METHOD_NOT_FOUND,
            format!("no language server handles `{method}` without a document"),
        )
    }
}
