//! The client capabilities a child is initialized with: the bridge's own, said honestly, and
//! for a child an editor uses through `serve`, the editor's beneath them.

use serde_json::{Value, json};

/// What this client can do, said honestly: servers shape their answers (and whether they push
/// or expect pulls) by it.
///
/// Pull diagnostics are announced without dynamic registration: servers that offer
/// `diagnosticProvider` statically can be pulled, while pyright (which switches to pull-only
/// when dynamic registration is offered) keeps pushing into the store.
pub fn client_capabilities(encodings: &[crate::position::PositionEncoding]) -> Value {
    let symbol_kinds: Vec<u32> = (1..=26).collect();
    let encodings = encodings
        .iter()
        .map(|encoding| encoding.to_lsp().as_str().to_owned())
        .collect::<Vec<_>>();
    json!({
        "general": {
            "positionEncodings": encodings,
        },
        // clangd before version 15 negotiates with its own extension.
        "offsetEncoding": encodings,
        "window": {
            "workDoneProgress": true,
            "showMessage": {"messageActionItem": {"additionalPropertiesSupport": false}},
            "showDocument": {"support": false},
        },
        "workspace": {
            // The editor proxy forwards `workspace/applyEdit`; without an editor it is refused.
            "applyEdit": true,
            "workspaceEdit": {
                "documentChanges": true,
                "resourceOperations": ["create", "rename", "delete"],
                "failureHandling": "abort",
            },
            "workspaceFolders": true,
            "configuration": true,
            "didChangeConfiguration": {"dynamicRegistration": false},
            "symbol": {
                "dynamicRegistration": false,
                "symbolKind": {"valueSet": symbol_kinds},
                "tagSupport": {"valueSet": [1]},
            },
            "executeCommand": {"dynamicRegistration": false},
        },
        "textDocument": {
            "synchronization": {
                "dynamicRegistration": false,
                "willSave": false,
                "willSaveWaitUntil": false,
                "didSave": true,
            },
            "publishDiagnostics": {
                "relatedInformation": true,
                "versionSupport": true,
                "tagSupport": {"valueSet": [1, 2]},
                "codeDescriptionSupport": true,
                "dataSupport": true,
            },
            "diagnostic": {"dynamicRegistration": false, "relatedDocumentSupport": false},
            "definition": {"dynamicRegistration": false, "linkSupport": true},
            "declaration": {"dynamicRegistration": false, "linkSupport": true},
            "typeDefinition": {"dynamicRegistration": false, "linkSupport": true},
            "implementation": {"dynamicRegistration": false, "linkSupport": true},
            "references": {"dynamicRegistration": false},
            "hover": {"dynamicRegistration": false, "contentFormat": ["markdown", "plaintext"]},
            "documentSymbol": {
                "dynamicRegistration": false,
                "hierarchicalDocumentSymbolSupport": true,
                "symbolKind": {"valueSet": symbol_kinds},
                "tagSupport": {"valueSet": [1]},
            },
            "callHierarchy": {"dynamicRegistration": false},
            "rename": {
                "dynamicRegistration": false,
                "prepareSupport": true,
                "prepareSupportDefaultBehavior": 1,
                "honorsChangeAnnotations": false,
            },
        },
    })
}

/// The bridge's capabilities with the editor's `textDocument` ones beneath them: the editor's
/// fill in what the bridge does not say; where both say something the bridge's stays, and
/// `dynamicRegistration` stays the bridge's (the bridge registers for the editor itself).
pub fn with_editor_capabilities(mut ours: Value, editor: Option<&Value>) -> Value {
    fn fill(into: &mut Value, from: &Value) {
        let (Value::Object(into), Value::Object(from)) = (into, from) else {
            return;
        };
        for (key, value) in from {
            if key == "dynamicRegistration" {
                continue;
            }
            match into.get_mut(key) {
                Some(existing) => fill(existing, value),
                None => {
                    let mut value = value.clone();
                    strip_dynamic_registration(&mut value);
                    into.insert(key.clone(), value);
                }
            }
        }
    }
    fn strip_dynamic_registration(value: &mut Value) {
        if let Value::Object(object) = value {
            object.remove("dynamicRegistration");
            object.values_mut().for_each(strip_dynamic_registration);
        }
    }
    if let Some(editor) = editor {
        fill(&mut ours["textDocument"], editor);
    }
    ours
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_editors_capabilities_fill_in_under_the_bridges() {
        let editor = json!({
            "completion": {"dynamicRegistration": true,
                           "completionItem": {"snippetSupport": true}},
            "documentSymbol": {"hierarchicalDocumentSymbolSupport": false},
            "codeAction": {"codeActionLiteralSupport": {"codeActionKind": {"valueSet": ["quickfix"]}}},
        });
        let merged = with_editor_capabilities(
            client_capabilities(&[crate::position::PositionEncoding::Utf16]),
            Some(&editor),
        );
        let text_document = &merged["textDocument"];
        assert_eq!(
            text_document["completion"]["completionItem"]["snippetSupport"],
            true
        );
        assert!(
            text_document["completion"]
                .get("dynamicRegistration")
                .is_none()
        );
        assert_eq!(
            text_document["codeAction"]["codeActionLiteralSupport"]["codeActionKind"]["valueSet"],
            json!(["quickfix"])
        );
        // The agent reads document symbols as a tree.
        assert_eq!(
            text_document["documentSymbol"]["hierarchicalDocumentSymbolSupport"],
            true
        );
        let _: lsp_types::ClientCapabilities = serde_json::from_value(merged).unwrap();
    }

    #[test]
    fn client_capabilities_are_well_formed_lsp() {
        let capabilities: lsp_types::ClientCapabilities =
            serde_json::from_value(client_capabilities(&[
                crate::position::PositionEncoding::Utf8,
                crate::position::PositionEncoding::Utf16,
            ]))
            .unwrap();
        let general = capabilities.general.unwrap();
        assert_eq!(
            general.position_encodings.unwrap(),
            [
                lsp_types::PositionEncodingKind::UTF8,
                lsp_types::PositionEncodingKind::UTF16
            ]
        );
        assert_eq!(capabilities.window.unwrap().work_done_progress, Some(true));
        let workspace = capabilities.workspace.unwrap();
        assert_eq!(
            (workspace.workspace_folders, workspace.configuration),
            (Some(true), Some(true))
        );
        let text = capabilities.text_document.unwrap();
        assert_eq!(
            text.publish_diagnostics.unwrap().version_support,
            Some(true)
        );
        assert!(text.diagnostic.is_some());
        assert_eq!(text.synchronization.unwrap().did_save, Some(true));
        assert_eq!(
            text.document_symbol
                .unwrap()
                .hierarchical_document_symbol_support,
            Some(true)
        );
        assert_eq!(text.rename.unwrap().prepare_support, Some(true));
        assert_eq!(
            text.hover.unwrap().content_format.unwrap()[0],
            lsp_types::MarkupKind::Markdown
        );
        for present in [
            text.definition.is_some(),
            text.declaration.is_some(),
            text.type_definition.is_some(),
            text.implementation.is_some(),
            text.references.is_some(),
            text.call_hierarchy.is_some(),
            workspace.symbol.is_some(),
        ] {
            assert!(present);
        }
    }
}
