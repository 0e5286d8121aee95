//! The `lsp_*` tools over the workspace's shared bridge: a query goes to the process that owns
//! the bridge when another one does, and the owner answers its clients with these same tools.

use std::path::Path;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::{LspKind, LspTool, LspTools};
use crate::plugin::outcomes::ToolOutput;
use crate::plugin::tool::Tool;
use crate::plugin::tool::ToolContext;
use crate::shared_bridge::LocalBridge;
use crate::shared_bridge::wire::{Answer, Request};
use crate::workspace::Workspace;

/// The owner's answer to the tool `name`, marked with who gave it; `None` when this process
/// answers (it owns the bridge, shares none, or no owner can be reached).
pub(super) async fn run(tools: &LspTools, name: &str, arguments: &Value) -> Option<ToolOutput> {
    let shared = tools.shared.as_ref()?;
    let local: Arc<dyn LocalBridge> = Arc::new(tools.clone());
    let (answer, owner) = shared
        .forward(&local, || Request::Tool {
            name: name.to_owned(),
            arguments: arguments.clone(),
        })
        .await?;
    match answer {
        Answer::Tool { output } => {
            Some(output.with_meta("bridge", json!({"owner": owner.role, "pid": owner.pid})))
        }
        other => {
            tracing::warn!("shared bridge: `{name}` was answered with {other:?}");
            None
        }
    }
}

/// The owner's diagnostics after this process wrote `path`: the owner's servers are the ones
/// that must hear of the write. `None` when this process answers.
pub(super) async fn after_write(tools: &LspTools, path: &Path) -> Option<Option<String>> {
    let shared = tools.shared.as_ref()?;
    let local: Arc<dyn LocalBridge> = Arc::new(tools.clone());
    let path = path.display().to_string();
    match shared
        .forward(&local, || Request::AfterWrite { path: path.clone() })
        .await?
    {
        (Answer::AfterWrite { diagnostics }, _) => Some(diagnostics),
        (other, _) => {
            tracing::warn!("shared bridge: a write was answered with {other:?}");
            None
        }
    }
}

impl LocalBridge for LspTools {
    fn run_tool(
        &self,
        name: &str,
        context: ToolContext,
        arguments: Value,
    ) -> Option<BoxFuture<'static, ToolOutput>> {
        let kind = *LspKind::ALL.iter().find(|kind| kind.name() == name)?;
        // The owner's own copy answers: it never forwards what a client forwarded to it, and
        // shows no wait on its board for a client's call.
        let tools = LspTools {
            shared: None,
            waiting: None,
            ..self.clone()
        };
        // Parsed here, with the wording the client's own parse would have had.
        Some(LspTool::new(kind, tools).run(context, arguments.into()))
    }

    fn after_write(
        &self,
        workspace: &Workspace,
        path: &Path,
    ) -> BoxFuture<'static, Option<String>> {
        let tools = LspTools {
            shared: None,
            ..self.clone()
        };
        crate::tools::WriteObserver::after_write(&tools, workspace, path)
    }

    fn health(&self) -> Value {
        serde_json::to_value(self.queries.bridge.health()).unwrap_or(Value::Null)
    }
}
