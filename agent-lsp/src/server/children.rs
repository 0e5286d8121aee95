//! Writing to the children and wiring them to the editor: a request routed to one child is
//! forwarded with the editor's id (its answer goes to the editor from the thread that reads the
//! child, in order with the child's notifications) or sent with an id of the bridge's when the
//! answer is merged or rewritten here; notifications are forwarded; what a child asks of the
//! editor goes there with fresh ids.

use std::sync::Arc;

use lsp_bridge::framing::RawResult;
use lsp_bridge::{Child, Error, SentRequest};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::router::{self, Kind, Lookup, Route, ToChild};
use super::{CHILD_REQUEST_TIMEOUT, ResponseError, Shared, codes, items};

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

/// Every running child (none before `initialize`).
pub(super) fn running(shared: &Shared) -> Vec<Arc<Child>> {
    shared
        .bridge()
        .map(|bridge| bridge.running())
        .unwrap_or_default()
}

pub(super) fn error_reply(error: Error) -> ResponseError {
    match error {
        Error::Response { code, message, .. } => ResponseError::new(code, message),
        Error::Cancelled => ResponseError::new(codes::REQUEST_CANCELLED, "cancelled"),
        other => ResponseError::new(codes::INTERNAL_ERROR, other.to_string()),
    }
}

/// A request written to a child with an id of the bridge's: its answer comes back here.
pub(super) struct Sent {
    pub(super) child: Arc<Child>,
    method: String,
    request: SentRequest,
}

/// Forward the editor's request `body` (with the editor's numeric `id`) to `child` as it is:
/// the child's answer goes to the editor as the child wrote it.
pub(super) fn forward(
    shared: &Shared,
    child: &Arc<Child>,
    id: i64,
    method: &str,
    body: &[u8],
) -> Result<(), Error> {
    child.forward(id, method, body, &shared.out, CHILD_REQUEST_TIMEOUT)?;
    items::remember_resolve_route(shared, method, child);
    Ok(())
}

/// Write `method` to the routed child, now, before the editor's next message is read: with
/// `forward_as` (the editor's numeric id) and nothing to rewrite, forwarded (`None`: the child
/// answers the editor itself); else sent, and the answer waited for with [`answer`]. Fails
/// only before the request was written: the child never saw it.
pub(super) fn write(
    shared: &Shared,
    to: &ToChild,
    method: &str,
    params: &Value,
    forward_as: Option<i64>,
) -> Result<Option<Sent>, Error> {
    let params = to.params.as_ref().unwrap_or(params);
    match forward_as.filter(|_| to.is_verbatim()) {
        Some(id) => {
            let body = serde_json::to_vec(
                &serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
            )
            .expect("a Value serializes");
            forward(shared, &to.child, id, method, &body)?;
            Ok(None)
        }
        None => Ok(Some(Sent {
            request: to.child.send(method, params)?,
            method: method.to_owned(),
            child: to.child.clone(),
        })),
    }
}

/// Wait for the answer to a sent request: as the child wrote it, `ContentModified` and every
/// other error included (the editor decides what to ask again).
pub(super) async fn answer(
    shared: &Shared,
    sent: Sent,
    cancel: &CancellationToken,
) -> Result<RawResult, ResponseError> {
    let raw = sent
        .child
        .answer(sent.request, CHILD_REQUEST_TIMEOUT, cancel)
        .await
        .map_err(error_reply)?;
    items::remember_resolve_route(shared, &sent.method, &sent.child);
    Ok(raw)
}

/// Forward an editor notification: to the document's child, or to every child.
pub(super) async fn forward_notification(shared: &Arc<Shared>, method: &str, params: Value) {
    let route = router::route(shared, Kind::Notification, method, &params, Lookup::Start).await;
    match route {
        Some(Route::Child(to)) => {
            let mut notified = to.child.notify(method, params.clone()).await;
            // It never reached a child that was gone: a delivery retry, as for requests, to
            // the restarted child (the router's lookup gives it the editor's documents first).
            if let Err(error) = &notified
                && error.is_server_gone()
                && let Some(Route::Child(restarted)) =
                    router::route(shared, Kind::Notification, method, &params, Lookup::Start).await
            {
                notified = restarted.child.notify(method, params).await;
            }
            if let Err(error) = notified {
                tracing::warn!(server = to.child.name(), method, "cannot forward: {error}");
            }
        }
        Some(Route::FanOut(children)) => {
            for child in children {
                if let Err(error) = child.notify(method, params.clone()).await {
                    tracing::warn!(server = child.name(), method, "cannot forward: {error}");
                }
            }
        }
        _ => {}
    }
}

/// Wire a newly started child to the editor: its notifications are forwarded, and the requests
/// the editor should answer are sent there with fresh ids.
pub(super) fn attach_child(shared: &Arc<Shared>, child: &Arc<Child>) {
    items::note_resolvers(shared);
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
