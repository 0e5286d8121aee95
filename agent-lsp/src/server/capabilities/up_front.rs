//! Capabilities for an editor that reads them at `initialize` only (Helix, Emacs eglot,
//! Kakoune's kak-lsp), feature by feature: children start later, so such an editor is told at
//! `initialize` what the workspace's servers will provide, and a request a child turns out not
//! to support gets the method's empty result instead of the child's error.
//!
//! A feature is announced up front ([`up_front`]) when the editor takes dynamic registration
//! for no `textDocument` feature at all (Helix, eglot), or when it names the feature in its
//! capabilities without taking its registration (Neovim 0.11's `references`, `signatureHelp`,
//! `documentSymbol`, …). Every other feature is left as before: registered as each child starts
//! (`registration::register_late`), precisely, where the editor takes that; requests it was not
//! told about reach the child as they are.
//!
//! What the servers will provide: every configured server whose command is installed, with the
//! capabilities it announced when it last started here ([`last_seen`]), else the built-in
//! table ([`known_servers`]), merged into one union. Semantic tokens are left out: each server
//! numbers token types by a legend of its own, and one legend announced at `initialize` would
//! need every answer remapped; an editor that reads capabilities at `initialize` only gets no
//! semantic tokens (Helix 25.07 does not ask for them anyway).

use std::path::Path;

use lsp_bridge::ServerConfig;
use serde_json::{Map, Value};

use super::super::Shared;
use super::super::lanes::Target;
use super::super::router::ToChild;
use super::registration::REGISTRABLE;
use super::{known_servers, last_seen};

/// Providers that cannot be announced for servers not yet running (see the module doc).
const LEFT_OUT: [&str; 1] = ["semanticTokensProvider"];

/// Whether the editor takes dynamic registration for any `textDocument` feature.
fn takes_registrations(client: &Value) -> bool {
    client["textDocument"].as_object().is_some_and(|features| {
        features
            .values()
            .any(|feature| feature["dynamicRegistration"] == true)
    })
}

/// Whether the feature whose client capabilities live at `pointer` (`/textDocument/hover`) is
/// announced at `initialize` (see the module doc).
pub(super) fn up_front(client: &Value, pointer: &str) -> bool {
    if !takes_registrations(client) {
        return true;
    }
    client
        .pointer(pointer)
        .is_some_and(|feature| feature["dynamicRegistration"] != true)
}

/// What of `expected` (see [`expected`]) the editor with capabilities `client` is told at
/// `initialize`: the features it cannot get by registration.
pub(super) fn for_editor(client: &Value, expected: Map<String, Value>) -> Map<String, Value> {
    expected
        .into_iter()
        .filter(|(capability, _)| {
            let pointer = if capability == "completionProvider" {
                "/textDocument/completion"
            } else {
                match REGISTRABLE.iter().find(|(name, _, _)| name == capability) {
                    Some((_, _, pointer)) => pointer,
                    None => return false,
                }
            };
            up_front(client, pointer)
        })
        .collect()
}

/// The providers `servers` will bring, merged: recorded capabilities where a server started
/// here before (`state_root`), else the built-in table's.
pub(super) fn expected(servers: &[&ServerConfig], state_root: Option<&Path>) -> Map<String, Value> {
    let announced = servers.iter().filter_map(|server| {
        state_root
            .and_then(|root| last_seen::load(root, &server.name))
            .or_else(|| known_servers::capabilities(&server.name))
    });
    merged(announced)
}

/// The union of several servers' capabilities as one editor-facing set: the providers that make
/// an editor send requests (a provider any server has is announced), completion and signature
/// trigger characters united, semantic tokens left out, and rename's `prepareProvider` only
/// when every renaming server has it (an editor that prepares would otherwise ask a server that
/// cannot answer, and give up on renaming).
pub(super) fn merged(servers: impl IntoIterator<Item = Value>) -> Map<String, Value> {
    let mut union = Map::new();
    let mut prepare_everywhere = true;
    for capabilities in servers {
        let mut kept = Map::new();
        for (capability, _, _) in REGISTRABLE {
            let offered = &capabilities[capability];
            if LEFT_OUT.contains(&capability) || offered.is_null() || *offered == false {
                continue;
            }
            if capability == "renameProvider" && offered["prepareProvider"] != true {
                prepare_everywhere = false;
            }
            kept.insert(capability.to_owned(), offered.clone());
        }
        if let Some(triggers) = capabilities["completionProvider"].get("triggerCharacters") {
            kept.insert(
                "completionProvider".into(),
                serde_json::json!({"triggerCharacters": triggers}),
            );
        }
        super::merge(&mut union, &Value::Object(kept));
    }
    if !prepare_everywhere && union.contains_key("renameProvider") {
        union.insert("renameProvider".into(), Value::Bool(true));
    }
    union
}

/// Whether the server `to` is for lacks the feature of `method` that `initialize` announced to
/// an editor that cannot get it by registration: the request is then answered with the
/// method's empty result, never the child's "method not found", which editors show as an
/// error. The running child's own capabilities decide; while its lane still starts it, the
/// server's as last seen here (or the built-in table's), so that the answer does not wait for
/// the child. A server whose capabilities are not known yet gets the request.
pub(in crate::server) fn unsupported(shared: &Shared, to: &ToChild, method: &str) -> bool {
    let (capability, pointer) = if method == "textDocument/prepareRename" {
        ("renameProvider", "/textDocument/rename")
    } else {
        match REGISTRABLE.iter().find(|(_, name, _)| *name == method) {
            Some((capability, _, pointer)) => (*capability, *pointer),
            None => return false,
        }
    };
    if !shared
        .client_capabilities
        .get()
        .is_some_and(|client| up_front(client, pointer))
    {
        return false;
    }
    let child = match &to.target {
        Target::Instance { child, .. } => Some(child.clone()),
        Target::Document(_) => to.lane.running_child(),
    };
    let capabilities = match (&child, &to.target) {
        (Some(child), _) => child.initialize_result()["capabilities"].clone(),
        (None, Target::Document(path)) => match server_capabilities(shared, path) {
            Some(capabilities) => capabilities,
            None => return false,
        },
        (None, Target::Instance { .. }) => return false,
    };
    let offered = &capabilities[capability];
    if method == "textDocument/prepareRename" {
        return offered["prepareProvider"] != true;
    }
    offered.is_null() || *offered == false
}

/// The capabilities of the server for `path` before its child runs: as last seen here, else
/// the built-in table's.
fn server_capabilities(shared: &Shared, path: &Path) -> Option<Value> {
    let server = shared.bridge().ok()?.config_for(path)?;
    let store = shared.host.store().ok();
    let state_root = store
        .as_ref()
        .and_then(|store| crate::session::store::state_root_of(store.workspace_dir()));
    state_root
        .and_then(|root| last_seen::load(root, &server.name))
        .or_else(|| known_servers::capabilities(&server.name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn two_servers_merge_into_one_union_without_semantic_tokens() {
        let python = json!({
            "hoverProvider": {"workDoneProgress": true}, "definitionProvider": true,
            "renameProvider": {"prepareProvider": true},
            "completionProvider": {"triggerCharacters": [".", "[", "'"], "resolveProvider": true},
            "signatureHelpProvider": {"triggerCharacters": ["(", ","]},
            "semanticTokensProvider": {"legend": {"tokenTypes": ["class", "function"], "tokenModifiers": []}, "full": true},
            "textDocumentSync": 2,
        });
        let c = json!({
            "hoverProvider": true, "referencesProvider": true, "renameProvider": true,
            "documentFormattingProvider": false,
            "completionProvider": {"triggerCharacters": [".", ">", ":"]},
            "signatureHelpProvider": {"triggerCharacters": ["(", "<"], "retriggerCharacters": [")"]},
            "semanticTokensProvider": {"legend": {"tokenTypes": ["variable", "class"], "tokenModifiers": ["static"]}, "full": {"delta": true}},
        });
        assert_eq!(
            Value::Object(merged([python, c])),
            json!({
                "hoverProvider": {"workDoneProgress": true},
                "definitionProvider": true,
                "referencesProvider": true,
                // clangd renames without preparing, so no editor is told to prepare.
                "renameProvider": true,
                "completionProvider": {"triggerCharacters": [".", "[", "'", ">", ":"]},
                "signatureHelpProvider": {"triggerCharacters": ["(", ",", "<"], "retriggerCharacters": [")"]},
            })
        );
    }

    #[test]
    fn recorded_capabilities_win_over_the_built_in_table() {
        let state = tempfile::tempdir().unwrap();
        let pyright = ServerConfig::new("pyright", "pyright-langserver");
        let mine = ServerConfig::new("my-lsp", "my-lsp");
        let built_in = expected(&[&pyright, &mine], Some(state.path()));
        assert_eq!(built_in["renameProvider"], json!({"prepareProvider": true}));
        assert!(built_in.get("foldingRangeProvider").is_none());
        last_seen::record(
            state.path(),
            "my-lsp",
            &json!({"capabilities": {"foldingRangeProvider": true, "completionProvider": {"triggerCharacters": ["#"]}}}),
        )
        .unwrap();
        let recorded = expected(&[&pyright, &mine], Some(state.path()));
        assert_eq!(recorded["foldingRangeProvider"], true);
        assert_eq!(
            recorded["completionProvider"]["triggerCharacters"],
            json!([".", "[", "\"", "'", "#"])
        );
    }

    #[test]
    fn features_are_announced_where_the_editor_cannot_register_them() {
        // Helix: only file watching is registered dynamically, so every feature.
        let helix = json!({
            "workspace": {"didChangeWatchedFiles": {"dynamicRegistration": true}},
            "textDocument": {"hover": {"contentFormat": ["markdown"]}, "rename": {"dynamicRegistration": false}},
        });
        assert!(up_front(&helix, "/textDocument/definition"));
        assert!(up_front(&json!({}), "/textDocument/hover"));
        // Neovim 0.11: hover is registered, references cannot be.
        let neovim = json!({"textDocument": {
            "hover": {"dynamicRegistration": true},
            "references": {"dynamicRegistration": false},
            "signatureHelp": {"signatureInformation": {}},
        }});
        assert!(!up_front(&neovim, "/textDocument/hover"));
        assert!(up_front(&neovim, "/textDocument/references"));
        assert!(up_front(&neovim, "/textDocument/signatureHelp"));
        // A feature such an editor does not name stays as before.
        assert!(!up_front(&neovim, "/textDocument/definition"));
        let expected = merged([json!({"hoverProvider": true, "referencesProvider": true,
            "definitionProvider": true, "completionProvider": {"triggerCharacters": ["."]}})]);
        assert_eq!(
            Value::Object(for_editor(&neovim, expected)),
            json!({"referencesProvider": true})
        );
    }
}
