//! Definition, declaration, type definition, implementation, references and hover: the queries
//! that take one position and answer with locations or text about it.
//!
//! They share one request shape (a `TextDocumentPositionParams`), which is why they are grouped.

use serde_json::{Value, json};

use super::resolve::{resolve_position, text_document_position};
use super::{Answer, FileCache, Location, Queries, SymbolPosition, locations_of, require};
use crate::documents::Lease;
use crate::error::Result;

/// The navigation requests that share one shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Navigation {
    /// Where the symbol is defined (`textDocument/definition`).
    Definition,
    /// Where it is declared, for languages that tell the two apart (a C header).
    Declaration,
    /// Where the type of the symbol is defined.
    TypeDefinition,
    /// The implementations of an interface, trait or abstract method.
    Implementation,
    /// Every place that refers to the symbol.
    References,
}

impl Navigation {
    /// The LSP request for this navigation.
    pub(crate) fn method(self) -> &'static str {
        match self {
            Navigation::Definition => "textDocument/definition",
            Navigation::Declaration => "textDocument/declaration",
            Navigation::TypeDefinition => "textDocument/typeDefinition",
            Navigation::Implementation => "textDocument/implementation",
            Navigation::References => "textDocument/references",
        }
    }

    fn capability(self) -> &'static str {
        match self {
            Navigation::Definition => "definitionProvider",
            Navigation::Declaration => "declarationProvider",
            Navigation::TypeDefinition => "typeDefinitionProvider",
            Navigation::Implementation => "implementationProvider",
            Navigation::References => "referencesProvider",
        }
    }
}

impl Queries {
    /// Definition, declaration, type definition, implementation or references of a symbol.
    pub async fn navigate(
        &self,
        kind: Navigation,
        position: &SymbolPosition,
    ) -> Result<Answer<Vec<Location>>> {
        self.once_more("navigate", || self.navigate_once(kind, position))
            .await
    }

    async fn navigate_once(
        &self,
        kind: Navigation,
        position: &SymbolPosition,
    ) -> Result<Answer<Vec<Location>>> {
        let lease = self.lease(&position.path).await?;
        let result = self.navigate_leased(kind, position, &lease).await;
        self.documents.release(lease).await?;
        result
    }

    async fn navigate_leased(
        &self,
        kind: Navigation,
        position: &SymbolPosition,
        lease: &Lease,
    ) -> Result<Answer<Vec<Location>>> {
        let child = lease.child();
        require(child, kind.capability(), kind.method())?;
        let resolved = resolve_position(&lease.snapshot, position)?;
        let mut params = text_document_position(&lease.snapshot, &resolved, child.encoding());
        if kind == Navigation::References {
            params["context"] = json!({ "includeDeclaration": true });
        }
        let value = child.request(kind.method(), params).await?;
        let mut files = FileCache::new(&self.documents);
        let mut locations = Vec::new();
        for (uri, range) in locations_of(&value) {
            locations.push(files.location(&uri, range.start, child.encoding()));
        }
        locations.sort();
        locations.dedup();
        Ok(self.answer(locations, child, lease, resolved.correction))
    }

    /// Hover text (types, docs) at a symbol.
    pub async fn hover(&self, position: &SymbolPosition) -> Result<Answer<String>> {
        self.once_more("hover", || self.hover_once(position)).await
    }

    async fn hover_once(&self, position: &SymbolPosition) -> Result<Answer<String>> {
        let lease = self.lease(&position.path).await?;
        let result = async {
            let child = lease.child();
            require(child, "hoverProvider", "textDocument/hover")?;
            let resolved = resolve_position(&lease.snapshot, position)?;
            let params = text_document_position(&lease.snapshot, &resolved, child.encoding());
            let value = child.request("textDocument/hover", params).await?;
            Ok(self.answer(
                hover_text(&value["contents"]),
                child,
                &lease,
                resolved.correction,
            ))
        }
        .await;
        self.documents.release(lease).await?;
        result
    }
}

fn hover_text(contents: &Value) -> String {
    match contents {
        Value::String(text) => text.clone(),
        Value::Array(items) => items
            .iter()
            .map(hover_text)
            .collect::<Vec<_>>()
            .join("\n\n"),
        Value::Object(object) => match (object.get("language"), object.get("value")) {
            (Some(language), Some(Value::String(value))) => {
                format!("```{}\n{value}\n```", language.as_str().unwrap_or_default())
            }
            (_, Some(Value::String(value))) => value.clone(),
            _ => String::new(),
        },
        _ => String::new(),
    }
}
