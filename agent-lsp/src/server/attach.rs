//! Wiring a newly started child to the editor: its notifications are forwarded, what it asks
//! of the editor goes there with fresh ids (written by the thread that reads the child), and a
//! forwarded request it exits without answering goes back to its lane. Apart from `children`
//! (which only writes to a child) because it hands work to the lanes, which write through
//! `children`.

use std::sync::Arc;

use lsp_bridge::Child;
use serde_json::Value;

use super::lanes::Job;
use super::{Shared, items};

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

/// Wire a newly started child to the editor: its notifications are forwarded, the requests
/// the editor should answer are sent there with fresh ids, and a forwarded request it exits
/// without answering goes to its lane, to be delivered to the restarted child.
pub(super) fn attach_child(shared: &Arc<Shared>, child: &Arc<Child>) {
    items::note_resolvers(shared);
    let lane = Arc::downgrade(&shared.lane_of(child));
    child.on_undelivered(Arc::new(move |id, method, body| {
        // The document, whose server the lane starts again.
        let path = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|request| super::document_path(&request["params"]));
        let (Some(lane), Some(path)) = (lane.upgrade(), path) else {
            return false;
        };
        let method = method.to_owned();
        lane.try_push(Job::Again {
            id,
            method,
            body,
            path,
        })
        .is_ok()
    }));
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
