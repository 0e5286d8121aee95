//! Incoming and outgoing calls of a symbol, from `textDocument/prepareCallHierarchy` and the
//! `callHierarchy/*` requests that follow it.
//!
//! Separate because it is the one query that takes several requests per answer and reports call
//! sites in a different file from the symbol.

use lsp_types::Url;
use serde_json::json;

use super::resolve::{resolve_position, text_document_position};
use super::{Answer, FileCache, Location, Queries, SymbolPosition, range_of, require, symbol_kind};
use crate::error::Result;

/// Which way a call hierarchy goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallDirection {
    /// Who calls the symbol (`callHierarchy/incomingCalls`).
    Incoming,
    /// What the symbol calls (`callHierarchy/outgoingCalls`).
    Outgoing,
}

/// One edge of a call hierarchy.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Call {
    /// The other end's name: the caller for incoming calls, the callee for outgoing ones.
    pub name: String,
    /// Its symbol kind in words (`function`, `method`), as the model reads it.
    pub kind: String,
    /// Where the other end is defined.
    pub location: Location,
    /// Where the calls happen (in the caller for incoming, in the item for outgoing).
    pub call_sites: Vec<Location>,
}

impl Queries {
    /// Incoming or outgoing calls of the symbol at a position.
    pub async fn call_hierarchy(
        &self,
        position: &SymbolPosition,
        direction: CallDirection,
    ) -> Result<Answer<Vec<Call>>> {
        self.once_more("call_hierarchy", || {
            self.call_hierarchy_once(position, direction)
        })
        .await
    }

    async fn call_hierarchy_once(
        &self,
        position: &SymbolPosition,
        direction: CallDirection,
    ) -> Result<Answer<Vec<Call>>> {
        let lease = self.lease(&position.path).await?;
        let result = async {
            let child = lease.child();
            require(
                child,
                "callHierarchyProvider",
                "textDocument/prepareCallHierarchy",
            )?;
            let resolved = resolve_position(&lease.snapshot, position)?;
            let params = text_document_position(&lease.snapshot, &resolved, child.encoding());
            let items = child
                .request("textDocument/prepareCallHierarchy", params)
                .await?;
            let mut files = FileCache::new(&self.documents);
            let mut calls = Vec::new();
            for item in items.as_array().into_iter().flatten() {
                let (method, peer) = match direction {
                    CallDirection::Incoming => ("callHierarchy/incomingCalls", "from"),
                    CallDirection::Outgoing => ("callHierarchy/outgoingCalls", "to"),
                };
                let edges = child.request(method, json!({ "item": item })).await?;
                for edge in edges.as_array().into_iter().flatten() {
                    let target = &edge[peer];
                    let Some(uri) = target["uri"].as_str().and_then(|uri| Url::parse(uri).ok())
                    else {
                        continue;
                    };
                    let Some(range) = range_of(&target["selectionRange"]) else {
                        continue;
                    };
                    // Call sites are in the caller's file for incoming calls, in the item's for outgoing.
                    let site_uri = match direction {
                        CallDirection::Incoming => uri.clone(),
                        CallDirection::Outgoing => item["uri"]
                            .as_str()
                            .and_then(|u| Url::parse(u).ok())
                            .unwrap_or(uri.clone()),
                    };
                    let call_sites = edge["fromRanges"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(range_of)
                        .map(|range| files.location(&site_uri, range.start, child.encoding()))
                        .collect();
                    calls.push(Call {
                        name: target["name"].as_str().unwrap_or_default().to_owned(),
                        kind: symbol_kind(target["kind"].as_u64().unwrap_or(0)).to_owned(),
                        location: files.location(&uri, range.start, child.encoding()),
                        call_sites,
                    });
                }
            }
            Ok(self.answer(calls, child, &lease, resolved.correction))
        }
        .await;
        self.documents.release(lease).await?;
        result
    }
}
