//! Writing to the children: a request routed to one child is forwarded with the editor's id
//! (its answer goes to the editor from the thread that reads the child, in order with the
//! child's notifications) or sent with an id of the bridge's when the answer is merged or
//! rewritten here. Who writes when is the lanes' (`lanes`); how a new child is wired to the
//! editor is `attach`.

use std::sync::Arc;

use lsp_bridge::framing::RawResult;
use lsp_bridge::{Child, Error, SentRequest};
use tokio_util::sync::CancellationToken;

use super::{CHILD_REQUEST_TIMEOUT, ResponseError, Shared, codes, items};

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
