//! One tool of an MCP server as a tool of the catalog: `mcp__SERVER__TOOL`, the server's
//! description and input schema, and its calls sent to the server. The runtime's guard,
//! timeout, output cap and log apply to it as to every tool; a timeout or a cancelled turn drops
//! the request, which tells the server `notifications/cancelled`.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::Value;

use super::client::{self, Server};
use super::state::CachedTool;
use crate::llm::ToolDef;
use crate::plugin::outcomes::ToolOutput;
use crate::plugin::tool::{CallArgs, Tool, ToolContext};

/// A server's tool in the catalog.
pub struct McpTool {
    /// The server that runs the tool, started on the first call that needs it.
    pub server: Arc<Server>,
    /// The tool as the model sees it: `mcp__SERVER__TOOL` and the server's description and
    /// schema, as the session's cached list recorded them.
    pub def: ToolDef,
    /// The server's own name for the tool.
    pub remote: String,
    /// Whether the server marked the tool read-only (`readOnlyHint`), so its calls may run
    /// beside the step's other reads.
    pub read_only: bool,
    /// How long a call may take, the server's start included.
    pub timeout: Duration,
    /// How long connecting to (starting) the server may take before the call says it could
    /// not; part of `timeout`, which bounds the whole call.
    pub start_timeout: Duration,
    /// Why calls are refused without reaching the server (a workspace file not approved).
    pub blocked: Option<String>,
}

impl McpTool {
    /// The catalog entry of `tool` of `server`, named `name`.
    pub fn new(
        server: Arc<Server>,
        name: String,
        tool: &CachedTool,
        timeout: Duration,
        start_timeout: Duration,
    ) -> McpTool {
        let mut parameters = tool.input_schema.clone();
        // Providers want an object schema; a server that gives none takes no arguments.
        if !parameters.is_object() {
            parameters = serde_json::json!({"type": "object", "properties": {}});
        }
        McpTool {
            def: ToolDef {
                name,
                description: tool.description.clone(),
                parameters,
            },
            server,
            remote: tool.name.clone(),
            read_only: tool.read_only,
            timeout,
            start_timeout,
            blocked: None,
        }
    }
}

impl Tool for McpTool {
    fn def(&self) -> ToolDef {
        self.def.clone()
    }

    /// Only what the server annotates as `readOnlyHint` runs beside other reads.
    fn read_only(&self) -> bool {
        self.read_only
    }

    fn timeout(&self, _args: &CallArgs) -> Option<Duration> {
        Some(self.timeout)
    }

    fn run(&self, ctx: ToolContext, args: CallArgs) -> BoxFuture<'static, ToolOutput> {
        // The server's own schema: the arguments go to it as the model sent them.
        let args = args.into_json();
        let server = self.server.clone();
        let remote = self.remote.clone();
        let start_timeout = self.start_timeout;
        let blocked = self.blocked.clone();
        Box::pin(async move {
            if let Some(blocked) = blocked {
                return ToolOutput::error(blocked).with_meta("mcp_server", server.name.clone());
            }
            let arguments = match args {
                Value::Object(map) => Some(map),
                Value::Null => None,
                other => {
                    return ToolOutput::error(format!(
                        "the arguments must be a JSON object, not {other}"
                    ));
                }
            };
            let name = server.name.clone();
            let call = {
                let server = server.clone();
                client::spawn_abortable(async move {
                    server.call(&remote, arguments, start_timeout).await
                })
            };
            let result = tokio::select! {
                result = call => result,
                () = ctx.cancel.cancelled() => return ToolOutput::error("cancelled"),
            };
            match result {
                Some(Ok(result)) => output(result),
                Some(Err(error)) => ToolOutput::error(error),
                None => ToolOutput::error(format!("the call to MCP server `{name}` was aborted")),
            }
            .with_meta("mcp_server", name)
        })
    }
}

/// A server's result as the model reads it: its text blocks joined, other blocks described in
/// a line each; `isError` makes it an error.
pub fn output(result: CallToolResult) -> ToolOutput {
    let mut parts = Vec::new();
    for block in &result.content {
        parts.push(match block {
            ContentBlock::Text(text) => text.text.clone(),
            ContentBlock::Image(image) => {
                format!(
                    "[image: {}, {} bytes base64]",
                    image.mime_type,
                    image.data.len()
                )
            }
            ContentBlock::Audio(audio) => {
                format!(
                    "[audio: {}, {} bytes base64]",
                    audio.mime_type,
                    audio.data.len()
                )
            }
            ContentBlock::Resource(resource) => match &resource.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => {
                    format!("[resource {uri}]\n{text}")
                }
                ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    ..
                } => format!(
                    "[resource {uri}: {}, {} bytes base64]",
                    mime_type.as_deref().unwrap_or("binary"),
                    blob.len()
                ),
                other => serde_json::to_string(other).unwrap_or_default(),
            },
            ContentBlock::ResourceLink(link) => {
                format!("[resource link {}: {}]", link.uri, link.name)
            }
            // A kind of content newer than this client: shown as the server sent it.
            other => serde_json::to_string(other).unwrap_or_default(),
        });
    }
    if parts.is_empty()
        && let Some(structured) = &result.structured_content
    {
        parts.push(structured.to_string());
    }
    let text = parts.join("\n");
    if result.is_error == Some(true) {
        ToolOutput::error(text)
    } else {
        ToolOutput::ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_joined_and_the_rest_described() {
        let result: CallToolResult = serde_json::from_value(serde_json::json!({
            "content": [
                {"type": "text", "text": "one"},
                {"type": "image", "data": "aGk=", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///a", "text": "body"}},
                {"type": "text", "text": "two"},
            ]
        }))
        .unwrap();
        let out = output(result);
        assert!(!out.is_error);
        assert_eq!(
            out.text,
            "one\n[image: image/png, 4 bytes base64]\n[resource file:///a]\nbody\ntwo"
        );
        let failed: CallToolResult = serde_json::from_value(serde_json::json!({
            "content": [{"type": "text", "text": "no such file"}], "isError": true
        }))
        .unwrap();
        let out = output(failed);
        assert!(out.is_error);
        assert_eq!(out.text, "error: no such file");
    }
}
