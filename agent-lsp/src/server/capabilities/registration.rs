//! Dynamic registration: the features of a child that starts after `initialize` answered,
//! registered with an editor that takes registrations, and the table of which server
//! capability stands for which method.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::super::{ResponseError, Shared, commands};

/// Server capabilities, the methods they stand for, and where the client says it can register
/// them dynamically.
pub(super) const REGISTRABLE: [(&str, &str, &str); 24] = [
    ("hoverProvider", "textDocument/hover", "/textDocument/hover"),
    (
        "definitionProvider",
        "textDocument/definition",
        "/textDocument/definition",
    ),
    (
        "declarationProvider",
        "textDocument/declaration",
        "/textDocument/declaration",
    ),
    (
        "typeDefinitionProvider",
        "textDocument/typeDefinition",
        "/textDocument/typeDefinition",
    ),
    (
        "implementationProvider",
        "textDocument/implementation",
        "/textDocument/implementation",
    ),
    (
        "referencesProvider",
        "textDocument/references",
        "/textDocument/references",
    ),
    (
        "documentHighlightProvider",
        "textDocument/documentHighlight",
        "/textDocument/documentHighlight",
    ),
    (
        "documentSymbolProvider",
        "textDocument/documentSymbol",
        "/textDocument/documentSymbol",
    ),
    (
        "signatureHelpProvider",
        "textDocument/signatureHelp",
        "/textDocument/signatureHelp",
    ),
    (
        "renameProvider",
        "textDocument/rename",
        "/textDocument/rename",
    ),
    (
        "documentFormattingProvider",
        "textDocument/formatting",
        "/textDocument/formatting",
    ),
    (
        "documentRangeFormattingProvider",
        "textDocument/rangeFormatting",
        "/textDocument/rangeFormatting",
    ),
    (
        "foldingRangeProvider",
        "textDocument/foldingRange",
        "/textDocument/foldingRange",
    ),
    (
        "callHierarchyProvider",
        "textDocument/prepareCallHierarchy",
        "/textDocument/callHierarchy",
    ),
    (
        "inlayHintProvider",
        "textDocument/inlayHint",
        "/textDocument/inlayHint",
    ),
    (
        "workspaceSymbolProvider",
        "workspace/symbol",
        "/workspace/symbol",
    ),
    // Since children start when their first document opens, after `initialize`, these too
    // reach the editor only by registration.
    (
        "semanticTokensProvider",
        "textDocument/semanticTokens",
        "/textDocument/semanticTokens",
    ),
    (
        "codeLensProvider",
        "textDocument/codeLens",
        "/textDocument/codeLens",
    ),
    (
        "documentLinkProvider",
        "textDocument/documentLink",
        "/textDocument/documentLink",
    ),
    (
        "selectionRangeProvider",
        "textDocument/selectionRange",
        "/textDocument/selectionRange",
    ),
    (
        "documentOnTypeFormattingProvider",
        "textDocument/onTypeFormatting",
        "/textDocument/onTypeFormatting",
    ),
    (
        "linkedEditingRangeProvider",
        "textDocument/linkedEditingRange",
        "/textDocument/linkedEditingRange",
    ),
    (
        "typeHierarchyProvider",
        "textDocument/prepareTypeHierarchy",
        "/textDocument/typeHierarchy",
    ),
    (
        "diagnosticProvider",
        "textDocument/diagnostic",
        "/textDocument/diagnostic",
    ),
];

/// The `announced` entry saying a server's commands are known to the editor.
pub(super) fn commands_key(child: &lsp_bridge::Child) -> String {
    format!("executeCommand:{}", child.name())
}

/// A child that started after `initialize` answered (a slow server, or the first file of a new
/// language) may bring features the editor was not told about: register them dynamically
/// where the editor supports that. Features announced already are not registered again (the
/// editor would ask twice and show everything twice).
pub(super) fn register_late(shared: &Arc<Shared>, child: &Arc<lsp_bridge::Child>) {
    let capabilities = child.initialize_result()["capabilities"].clone();
    let mut registrations = Vec::new();
    {
        let mut announced = shared.announced.lock().expect("announced");
        if announced.is_empty() {
            // Still initializing: this child's capabilities go into the initialize answer.
            return;
        }
        for (capability, method, client) in REGISTRABLE {
            let offered = &capabilities[capability];
            if offered.is_null() || *offered == json!(false) || announced.contains(capability) {
                continue;
            }
            if !shared.client_supports(&format!("{client}/dynamicRegistration")) {
                continue;
            }
            let mut options = match offered {
                Value::Object(options) => options.clone(),
                _ => Map::new(),
            };
            if method.starts_with("textDocument/") {
                options.insert("documentSelector".into(), Value::Null);
            }
            announced.insert(capability.to_owned());
            registrations.push(json!({
                "id": format!("agent-lsp/{}/{method}", child.name()),
                "method": method,
                "registerOptions": options,
            }));
        }
        // `executeCommandProvider` is always announced (our commands), so a late child's
        // commands are registered on their own, once per server (a restarted child's are
        // registered already).
        let commands: Vec<Value> = capabilities["executeCommandProvider"]["commands"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|name| !commands::COMMANDS.iter().any(|ours| *name == ours))
            .cloned()
            .collect();
        if !commands.is_empty()
            && shared.client_supports("/workspace/executeCommand/dynamicRegistration")
            && announced.insert(commands_key(child))
        {
            registrations.push(json!({
                "id": format!("agent-lsp/{}/workspace/executeCommand", child.name()),
                "method": "workspace/executeCommand",
                "registerOptions": {"commands": commands},
            }));
        }
    }
    if registrations.is_empty() {
        return;
    }
    tracing::info!(
        server = child.name(),
        n = registrations.len(),
        "registering a late server's features"
    );
    let shared = shared.clone();
    tokio::spawn(async move {
        if let Err(ResponseError {
            message: problem, ..
        }) = shared
            .request_editor(
                "client/registerCapability",
                json!({"registrations": registrations}),
            )
            .await
        {
            tracing::warn!("the editor refused dynamic registration: {problem}");
        }
    });
}
