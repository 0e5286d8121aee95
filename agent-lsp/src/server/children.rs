//! Writing to the children and wiring them to the editor: a request routed to one child is
//! forwarded with the editor's id (its answer goes to the editor from the thread that reads the
//! child, in order with the child's notifications) or sent with an id of the bridge's when the
//! answer is merged or rewritten here; what a child asks of the editor goes there with fresh
//! ids, written by the thread that reads the child. Who writes when is the lanes' (`lanes`).

use std::sync::Arc;

use lsp_bridge::framing::RawResult;
use lsp_bridge::{Child, Error, SentRequest};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

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

/// A request `child` was sent, to wait for with [`answer`].
pub(super) fn sent(child: &Arc<Child>, method: &str, request: SentRequest) -> Sent {
    Sent {
        request,
        method: method.to_owned(),
        child: child.clone(),
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
        // Written to the editor now, by the thread that reads the child, in order with the
        // child's notifications (a `$/progress` never overtakes the `create` of its token).
        Some(weak.upgrade()?.request_editor_now(method, params.clone()))
    }));
}
