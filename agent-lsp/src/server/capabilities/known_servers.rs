//! What the built-in servers announce at `initialize`, for an editor that reads capabilities
//! at `initialize` only when a server has never started here (nothing recorded under the state
//! root yet, see [`super::last_seen`]).
//!
//! Only the parts an editor acts on are kept: the providers that make it send a request, and
//! the trigger characters. pyright 1.1.414, clangd 14 and typescript-language-server 5.3 are
//! copied from their `initialize` answers; rust-analyzer and gopls from their documented
//! features (neither runs on the machines this was written on). A server that announces less
//! than this gets the method's empty result for what it lacks (`up_front::unsupported`), and
//! one that announces more is recorded at its first start and announced in full from the next
//! `serve` on.

use serde_json::{Value, json};

/// The capabilities a built-in server announces, by its configured name.
pub(super) fn capabilities(name: &str) -> Option<Value> {
    Some(match name {
        "pyright" => json!({
            "hoverProvider": true, "definitionProvider": true, "declarationProvider": true,
            "typeDefinitionProvider": true, "referencesProvider": true,
            "documentHighlightProvider": true, "documentSymbolProvider": true,
            "workspaceSymbolProvider": true, "callHierarchyProvider": true,
            "renameProvider": {"prepareProvider": true},
            "signatureHelpProvider": {"triggerCharacters": ["(", ",", ")"]},
            "completionProvider": {"triggerCharacters": [".", "[", "\"", "'"], "resolveProvider": true},
        }),
        "clangd" => json!({
            "hoverProvider": true, "definitionProvider": true, "declarationProvider": true,
            "typeDefinitionProvider": true, "implementationProvider": true,
            "referencesProvider": true, "documentHighlightProvider": true,
            "documentSymbolProvider": true, "workspaceSymbolProvider": true,
            "callHierarchyProvider": true, "typeHierarchyProvider": true, "renameProvider": true,
            "documentFormattingProvider": true, "documentRangeFormattingProvider": true,
            "selectionRangeProvider": true, "documentLinkProvider": {"resolveProvider": false},
            "signatureHelpProvider": {"triggerCharacters": ["(", ")", "{", "}", "<", ">", ","]},
            "completionProvider": {"triggerCharacters": [".", "<", ">", ":", "\"", "/", "*"]},
        }),
        "typescript-language-server" => json!({
            "hoverProvider": true, "definitionProvider": true, "typeDefinitionProvider": true,
            "implementationProvider": true, "referencesProvider": true,
            "documentHighlightProvider": true, "documentSymbolProvider": true,
            "workspaceSymbolProvider": true, "renameProvider": true,
            "documentFormattingProvider": true, "documentRangeFormattingProvider": true,
            "foldingRangeProvider": true, "selectionRangeProvider": true, "inlayHintProvider": true,
            "signatureHelpProvider": {"triggerCharacters": ["(", ",", "<"], "retriggerCharacters": [")"]},
            "completionProvider": {"triggerCharacters": [".", "\"", "'", "/", "@", "<"], "resolveProvider": true},
        }),
        "rust-analyzer" => json!({
            "hoverProvider": true, "definitionProvider": true, "declarationProvider": true,
            "typeDefinitionProvider": true, "implementationProvider": true,
            "referencesProvider": true, "documentHighlightProvider": true,
            "documentSymbolProvider": true, "workspaceSymbolProvider": true,
            "callHierarchyProvider": true, "renameProvider": {"prepareProvider": true},
            "documentFormattingProvider": true, "foldingRangeProvider": true,
            "selectionRangeProvider": true, "inlayHintProvider": {"resolveProvider": true},
            "signatureHelpProvider": {"triggerCharacters": ["(", ",", "<"]},
            "completionProvider": {"triggerCharacters": [":", ".", "'", "("], "resolveProvider": true},
        }),
        "gopls" => json!({
            "hoverProvider": true, "definitionProvider": true, "typeDefinitionProvider": true,
            "implementationProvider": true, "referencesProvider": true,
            "documentHighlightProvider": true, "documentSymbolProvider": true,
            "workspaceSymbolProvider": true, "callHierarchyProvider": true,
            "renameProvider": {"prepareProvider": true}, "documentFormattingProvider": true,
            "foldingRangeProvider": true, "documentLinkProvider": {}, "inlayHintProvider": {},
            "signatureHelpProvider": {"triggerCharacters": ["(", ","]},
            "completionProvider": {"triggerCharacters": ["."]},
        }),
        _ => return None,
    })
}
