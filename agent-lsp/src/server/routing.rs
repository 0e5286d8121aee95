//! Which child gets an editor message, and how child messages get back to the editor.

use std::path::PathBuf;
use std::sync::Arc;

use lsp_bridge::lsp_types::Url;
use lsp_bridge::{Child, Error, SentRequest};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{CHILD_REQUEST_TIMEOUT, ResponseError, Shared, codes};
use lsp_bridge::framing::RawResult;

/// Child → editor requests the editor answers (with the ids mapped); anything else the child
/// asks is answered by the bridge itself.
const TO_EDITOR: [&str; 11] = [
    "workspace/applyEdit",
    "workspace/configuration",
    "window/workDoneProgress/create",
    "window/showMessageRequest",
    "window/showDocument",
    "client/registerCapability",
    "client/unregisterCapability",
    "workspace/semanticTokens/refresh",
    "workspace/inlayHint/refresh",
    "workspace/codeLens/refresh",
    "workspace/diagnostic/refresh",
];

/// `*/resolve` requests and the request whose items they resolve.
const RESOLVES: [(&str, &str); 5] = [
    ("completionItem/resolve", "textDocument/completion"),
    ("codeAction/resolve", "textDocument/codeAction"),
    ("codeLens/resolve", "textDocument/codeLens"),
    ("inlayHint/resolve", "textDocument/inlayHint"),
    ("documentLink/resolve", "textDocument/documentLink"),
];

/// The document a request or notification is about, if its params name one.
pub(super) fn document_path(params: &Value) -> Option<PathBuf> {
    let uri = params["textDocument"]["uri"]
        .as_str()
        .or_else(|| params["item"]["uri"].as_str())
        .or_else(|| params["uri"].as_str())?;
    Url::parse(uri).ok()?.to_file_path().ok()
}

pub(super) fn error_reply(error: Error) -> ResponseError {
    match error {
        Error::Response { code, message, .. } => ResponseError::new(code, message),
        Error::Cancelled => ResponseError::new(codes::REQUEST_CANCELLED, "cancelled"),
        other => ResponseError::new(codes::INTERNAL_ERROR, other.to_string()),
    }
}

/// The child that answered the last `origin` request (`textDocument/completion`, ...), whose
/// items a `*/resolve` request resolves.
pub(super) fn resolve_route(shared: &Shared, origin: &str) -> Option<Arc<Child>> {
    shared
        .resolve_routes
        .lock()
        .expect("resolve routes")
        .get(origin)
        .cloned()
}

/// The `data` key that marks an item the server made itself (the `@path` completion items), so
/// that resolving it never reaches a child, whichever child answered the last completion.
pub(super) const OWN_ITEM_KEY: &str = "agentLsp";

/// Whether the item a `*/resolve` request carries is one the server made itself.
pub(super) fn is_own_item(item: &Value) -> bool {
    item["data"][OWN_ITEM_KEY].is_string()
}

/// The `data` key that names the child an item came from, when two children that resolve the
/// same kind of item run at once; the item's own `data` is kept under [`ORIGINAL_DATA_KEY`].
/// With one such child there is nothing to tell apart, and its answers pass untouched.
pub(super) const ORIGIN_KEY: &str = "agentLsp.origin";
const ORIGINAL_DATA_KEY: &str = "agentLsp.data";

/// Whether the items of `method`'s answers must say which child made them: more than one child
/// that resolves them has started (decided as children start, [`note_resolvers`], so the
/// intake's hot path only looks it up).
pub(super) fn items_need_origin(shared: &Shared, method: &str) -> bool {
    shared
        .ambiguous_origins
        .lock()
        .expect("ambiguous origins")
        .contains(method)
}

/// A child started: the originating methods whose items two running children now resolve.
fn note_resolvers(shared: &Shared) {
    let Ok(bridge) = shared.bridge() else { return };
    let running = bridge.running();
    let mut ambiguous = shared.ambiguous_origins.lock().expect("ambiguous origins");
    for (_, origin) in RESOLVES {
        if running
            .iter()
            .filter(|child| resolves(child, origin))
            .count()
            > 1
        {
            ambiguous.insert(origin);
        }
    }
}

fn child_key(child: &Child) -> String {
    format!("{}#{}", child.name(), child.instance())
}

/// Mark every item of `result` (an answer to `origin`) as `child`'s.
pub(super) fn tag_items(result: &mut Value, child: &Child) {
    let key = Value::String(child_key(child));
    let items = match result {
        Value::Array(items) => items,
        Value::Object(list) => match list.get_mut("items") {
            Some(Value::Array(items)) => items,
            _ => return,
        },
        _ => return,
    };
    for item in items.iter_mut().filter(|item| item.is_object()) {
        let original = item["data"].take();
        item["data"] = serde_json::json!({ORIGIN_KEY: key, ORIGINAL_DATA_KEY: original});
    }
}

/// The child a tagged item came from (`None` when it is gone: restarted since), and the item
/// as that child made it; `None` for an untagged item.
fn untag(shared: &Shared, item: &Value) -> Option<(Option<Arc<Child>>, Value)> {
    let key = item["data"][ORIGIN_KEY].as_str()?;
    let mut original = item.clone();
    original["data"] = item["data"][ORIGINAL_DATA_KEY].clone();
    if original["data"].is_null() {
        original.as_object_mut()?.remove("data");
    }
    let child = shared
        .bridge()
        .ok()?
        .running()
        .into_iter()
        .find(|child| child_key(child) == key);
    Some((child, original))
}

/// Whether `child` resolves the items of `origin` (its provider says `resolveProvider`). The
/// editor is told at `initialize` that completion items resolve, before any child runs; the
/// item of a child that does not resolve is answered as it is, which is what resolving it
/// would give.
pub(super) fn resolves(child: &Child, origin: &str) -> bool {
    let provider = match origin {
        "textDocument/completion" => "completionProvider",
        "textDocument/codeAction" => "codeActionProvider",
        "textDocument/codeLens" => "codeLensProvider",
        "textDocument/inlayHint" => "inlayHintProvider",
        "textDocument/documentLink" => "documentLinkProvider",
        _ => return true,
    };
    child.initialize_result()["capabilities"][provider]["resolveProvider"] == true
}

/// The request whose items `method` (a `*/resolve` request) resolves.
pub(super) fn resolve_origin(method: &str) -> Option<&'static str> {
    RESOLVES
        .iter()
        .find(|(resolve, _)| *resolve == method)
        .map(|(_, origin)| *origin)
}

/// After `child` answered `method`: if that request produces items that `*/resolve` requests
/// resolve, those go to `child`.
pub(super) fn remember_resolve_route(shared: &Shared, method: &str, child: &Arc<Child>) {
    if let Some((_, origin)) = RESOLVES.iter().find(|(_, origin)| *origin == method) {
        shared
            .resolve_routes
            .lock()
            .expect("resolve routes")
            .insert(origin, child.clone());
    }
}

/// Whether `method` is answered by exactly one child, whose result can be forwarded raw
/// ([`forward_raw`]); the others are answered here or merged from several children.
pub(super) fn is_plain(method: &str) -> bool {
    !matches!(
        method,
        "workspace/executeCommand" | "textDocument/codeAction" | "workspace/symbol"
    )
}

/// An editor request on its way to one child: written to it, or answered without it.
pub(super) enum Dispatch {
    Sent {
        child: Arc<Child>,
        method: String,
        request: SentRequest,
    },
    /// An item that needs no resolving, a document no server handles: the answer is known.
    Answered(RawResult),
}

impl Dispatch {
    /// The child it was written to.
    pub(super) fn child(&self) -> Option<&Arc<Child>> {
        match self {
            Dispatch::Sent { child, .. } => Some(child),
            Dispatch::Answered(_) => None,
        }
    }
}

/// Write a request to the one child it is about (by document, or for `*/resolve` the child
/// that produced the item), on the loop, before the editor's next message is read. With
/// `forward_as`, the editor's numeric id, it is forwarded (`None`: the child's answer goes to
/// the editor as the child wrote it, from the thread that reads the child, in order with its
/// notifications); else it gets an id of the bridge's and the answer comes back here.
pub(super) async fn dispatch_to_child(
    shared: &Arc<Shared>,
    method: &str,
    params: &Value,
    forward_as: Option<i64>,
) -> Result<Option<Dispatch>, ResponseError> {
    let write = |child: Arc<Child>, params: &Value| -> Result<Option<Dispatch>, Error> {
        match forward_as {
            Some(id) => {
                let body = serde_json::to_vec(
                    &serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
                )
                .expect("a Value serializes");
                child.forward(id, method, &body, &shared.out, CHILD_REQUEST_TIMEOUT)?;
                remember_resolve_route(shared, method, &child);
                Ok(None)
            }
            None => Ok(Some(Dispatch::Sent {
                request: child.send(method, params)?,
                method: method.to_owned(),
                child,
            })),
        }
    };
    shared.bridge()?;
    // The item itself is the answer: resolving it gives nothing more.
    let as_it_is = |item: &Value| {
        serde_json::value::to_raw_value(item)
            .map(|raw| Some(Dispatch::Answered(raw)))
            .map_err(|error| ResponseError::new(codes::INTERNAL_ERROR, error.to_string()))
    };
    if let Some(origin) = resolve_origin(method) {
        // The agent's own code actions carry their command already: nothing to resolve.
        if method == "codeAction/resolve"
            && params["command"]["command"]
                .as_str()
                .is_some_and(|command| command.starts_with("agent."))
        {
            return as_it_is(params);
        }
        // The `@path` completion items are the server's own and complete as they are.
        if is_own_item(params) {
            return as_it_is(params);
        }
        if let Some((child, original)) = untag(shared, params) {
            // Its child is gone (or does not resolve): the item as it made it.
            return match child.filter(|child| resolves(child, origin)) {
                Some(child) => write(child, &original).map_err(error_reply),
                None => as_it_is(&original),
            };
        }
        let Some(child) = resolve_route(shared, origin) else {
            return Err(ResponseError::new(
                codes::INVALID_PARAMS,
                format!("`{method}` for an item no server produced"),
            ));
        };
        if !resolves(&child, origin) {
            return as_it_is(params);
        }
        return write(child, params).map_err(error_reply);
    }
    let Some(path) = document_path(params) else {
        return Err(no_child(method));
    };
    // At most two sends: the second only when the first never reached the child, which was
    // gone (killed, crashed) before the request was written. That is a delivery retry: the
    // restarted child is asked what the dead one never saw. A request the child received and
    // then died on is answered with the error, never sent again (it may have had effects, and
    // the editor decides what to ask again).
    let mut delivery_retried = false;
    loop {
        // No child serves the document (a README, a prompt document, a JSON file): the editor
        // asked about a document, not for a method nobody has, so it gets the method's empty
        // result. An error here is shown to the user by editors (VS Code pops up every failed
        // documentSymbol), for a file they merely opened.
        let Some(child) = document_child(shared, &path, params, method).await? else {
            return Ok(Some(Dispatch::Answered(empty_result(method))));
        };
        match write(child, params) {
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
            written => return written.map_err(error_reply),
        }
    }
}

/// Wait for the answer to a dispatched request: as the child wrote it, `ContentModified` and
/// every other error included (the editor decides what to ask again).
pub(super) async fn answer(
    shared: &Shared,
    dispatch: Dispatch,
    cancel: &CancellationToken,
) -> Result<RawResult, ResponseError> {
    match dispatch {
        Dispatch::Answered(raw) => Ok(raw),
        Dispatch::Sent {
            child,
            method,
            request,
        } => {
            let raw = child
                .answer(request, CHILD_REQUEST_TIMEOUT, cancel)
                .await
                .map_err(error_reply)?;
            remember_resolve_route(shared, &method, &child);
            Ok(raw)
        }
    }
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

/// The child of the document at `path` (started, or restarted, if need be), or `None` when no
/// server handles it; the intake forwards the next requests about the document to it itself,
/// found by the URI as the editor spells it (no parsing, no path on its hot path).
async fn document_child(
    shared: &Arc<Shared>,
    path: &std::path::Path,
    params: &Value,
    method: &str,
) -> Result<Option<Arc<Child>>, ResponseError> {
    let child = match shared.child_for(path).await {
        Ok(child) => child,
        Err(Error::NoServer { reason, .. }) => {
            tracing::debug!(method, path = %path.display(), "answered empty: {reason}");
            return Ok(None);
        }
        Err(other) => return Err(error_reply(other)),
    };
    if let Some(uri) = params["textDocument"]["uri"].as_str()
        && !shared.prompt_documents.matches(path)
    {
        shared
            .document_routes
            .lock()
            .expect("document routes")
            .insert(uri.to_owned(), child.clone());
    }
    Ok(Some(child))
}

fn no_child(method: &str) -> ResponseError {
    if method.starts_with("textDocument/") {
        ResponseError::new(
            codes::INVALID_PARAMS,
            format!("`{method}` needs params.textDocument.uri naming a file"),
        )
    } else {
        ResponseError::new(
            codes::METHOD_NOT_FOUND,
            format!("no language server handles `{method}` without a document"),
        )
    }
}

/// Forward an editor notification: to the document's child, or to every child.
pub(super) async fn forward_notification(shared: &Arc<Shared>, method: &str, params: Value) {
    let Ok(bridge) = shared.bridge() else { return };
    let children = match document_path(&params) {
        // Through the server's lookup, which reopens the editor's documents in a restarted
        // child before anything is said about them.
        Some(path) => shared
            .child_for(&path)
            .await
            .into_iter()
            .collect::<Vec<_>>(),
        None => bridge.running(),
    };
    for child in children {
        let mut notified = child.notify(method, params.clone()).await;
        // It never reached a child that was gone: a delivery retry, as for requests, to the
        // restarted child (given the editor's documents first).
        if let (Err(error), Some(path)) = (&notified, document_path(&params))
            && error.is_server_gone()
            && let Ok(restarted) = shared.child_for(&path).await
        {
            notified = restarted.notify(method, params.clone()).await;
        }
        if let Err(error) = notified {
            tracing::warn!(server = child.name(), method, "cannot forward: {error}");
        }
    }
}

/// Wire a newly started child to the editor: its notifications are forwarded, and the requests
/// the editor should answer are sent there with fresh ids.
pub(super) fn attach_child(shared: &Arc<Shared>, child: &Arc<Child>) {
    note_resolvers(shared);
    // Protocol-internal `$/` notifications stay between bridge and child, except progress.
    child.notify_to(shared.out.clone(), |method| {
        method == "$/progress" || !method.starts_with('$')
    });
    let weak = Arc::downgrade(shared);
    let progress = shared.client_supports("/window/workDoneProgress");
    child.set_request_handler(Arc::new(move |method: &str, params: &Value| {
        if !TO_EDITOR.contains(&method) || (method == "window/workDoneProgress/create" && !progress)
        {
            return None;
        }
        let shared = weak.upgrade()?;
        let method = method.to_owned();
        let params = params.clone();
        Some(Box::pin(async move {
            shared.request_editor(&method, params).await
        }))
    }));
}
