//! Items that `*/resolve` requests carry back (completion items, code actions, code lenses,
//! inlay hints, document links), and which child made each: a resolve goes to that child.
//!
//! With one child that resolves a kind of item, its answers pass untouched and the child that
//! last answered the originating request is the one. With two (Python and TypeScript open side
//! by side), each item's `data` is wrapped with its child's name ([`ORIGIN_KEY`]) on the way to
//! the editor and unwrapped on the way back.

use std::sync::Arc;

use lsp_bridge::Child;
use serde_json::Value;

use super::Shared;

/// `*/resolve` requests and the request whose items they resolve.
const RESOLVES: [(&str, &str); 5] = [
    ("completionItem/resolve", "textDocument/completion"),
    ("codeAction/resolve", "textDocument/codeAction"),
    ("codeLens/resolve", "textDocument/codeLens"),
    ("inlayHint/resolve", "textDocument/inlayHint"),
    ("documentLink/resolve", "textDocument/documentLink"),
];

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
/// intake's hot path only looks it up), or another lane's child is still starting.
pub(super) fn items_need_origin(shared: &Shared, method: &str) -> bool {
    if shared
        .ambiguous_origins
        .lock()
        .expect("ambiguous origins")
        .contains(method)
    {
        return true;
    }
    // A server still starting in another lane may resolve such items too, and a later
    // resolve could not tell whose an untagged item is: tag them until every lane has said.
    RESOLVES.iter().any(|(_, origin)| *origin == method) && {
        let lanes = shared.lanes.lock().expect("lanes");
        lanes.len() > 1 && lanes.values().any(|lane| lane.running_child().is_none())
    }
}

/// A child started: the originating methods whose items two running children now resolve.
pub(super) fn note_resolvers(shared: &Shared) {
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
pub(super) fn untag(shared: &Shared, item: &Value) -> Option<(Option<Arc<Child>>, Value)> {
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
