//! The tools only the MCP server adds (`files`, `session_list`, `session_show`), which tools of
//! the catalog it exposes, and how a catalog entry becomes an MCP tool.
//!
//! The added tools are [`TypedTool`]s registered on the server's runtime like every other, so their
//! calls pass the same guard, timeout and cap and are recorded in the server's session. They
//! answer with what the terminal prints for the same question (`agent-lsp files`,
//! `agent-lsp session list --json`, `agent-lsp session show --json`), so a script and an
//! agent see one format.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::file_index::LiveIndex;
use crate::llm::ToolDef;
use crate::plugin::outcomes::ToolOutput;
use crate::plugin::tool::ToolContext;
use crate::plugin::typed::TypedTool;
use crate::session::store::Store;
use crate::tools::blocking;

/// The catalog's tools a client may call without `--allow-write`: they only read.
const READ_TOOLS: &[&str] = &[
    "read",
    "list",
    "glob",
    "grep",
    "files",
    "session_list",
    "session_show",
];

/// The tools `--allow-write` adds. `shell` is not among them: a command line runs with every
/// right of this user, far beyond the workspace's files.
const WRITE_TOOLS: &[&str] = &["write", "edit"];

/// How long a `files` call waits for the first walk of a large workspace before it answers
/// from what is indexed so far (the status then says so).
const FIRST_WALK_WAIT: Duration = Duration::from_secs(20);

/// Whether the server lists and runs the catalog's tool `name`.
pub fn exposed(name: &str, allow_write: bool) -> bool {
    name.starts_with("lsp_")
        || READ_TOOLS.contains(&name)
        || (allow_write && WRITE_TOOLS.contains(&name))
}

/// A catalog entry as MCP lists it: the same name, description and schema the model sees,
/// with `readOnlyHint` (and, for a writing tool, `destructiveHint: false`, since `write` and
/// `edit` change only what they name and `edit` refuses an ambiguous match).
pub fn to_mcp(def: ToolDef, read_only: bool) -> rmcp::model::Tool {
    let schema = match def.parameters {
        Value::Object(schema) => schema,
        // Every catalog schema is an object; a tool without parameters still takes `{}`.
        _ => serde_json::Map::from_iter([("type".to_owned(), json!("object"))]),
    };
    let annotations = rmcp::model::ToolAnnotations::new().read_only(read_only);
    let annotations = if read_only {
        annotations
    } else {
        annotations.destructive(false)
    };
    rmcp::model::Tool::new(def.name, def.description, Arc::new(schema))
        .with_annotations(annotations)
}

/// `files {query, limit?}`: the ranked `@path` candidates, from an index kept current by a
/// watcher (file_index/watch.rs) so that later calls cost no walk.
pub struct FilesTool {
    /// The workspace's path index, started with the server and kept current by its watcher.
    pub index: Arc<LiveIndex>,
}

/// The arguments of `files`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FilesArgs {
    /// The fuzzy query.
    query: String,
    /// Paths to return at most (default 20).
    #[serde(default)]
    #[schemars(range(min = 1))]
    limit: Option<usize>,
}

impl TypedTool for FilesTool {
    type Args = FilesArgs;

    fn name(&self) -> &str {
        "files"
    }

    fn description(&self) -> String {
        "Rank the workspace's paths (files and directories) for a fuzzy query, as `@path` completion does: fzf syntax (`^prefix`, `suffix$`, `'exact`, `!not`), several words must all match, an empty query gives the shortest paths. One path per line, best first; directories end in `/`. Ignored files (.gitignore) are not listed.".into()
    }

    fn read_only(&self) -> bool {
        true
    }

    fn run(&self, _ctx: ToolContext, args: FilesArgs) -> BoxFuture<'static, ToolOutput> {
        let index = Arc::clone(&self.index);
        Box::pin(async move {
            blocking(move || {
                index.wait_ready(FIRST_WALK_WAIT);
                let candidates = match index.query(&args.query, args.limit.unwrap_or(20)) {
                    Ok(candidates) => candidates,
                    Err(error) => {
                        return ToolOutput::error(format!(
                            "the query `{}` is refused: {error}",
                            args.query
                        ));
                    }
                };
                let status = index.status();
                let mut text = String::new();
                if let Some(message) = status.message() {
                    text.push_str(&format!("({message})\n"));
                }
                if candidates.is_empty() {
                    text.push_str("no path matches the query\n");
                }
                for candidate in &candidates {
                    text.push_str(&candidate.label());
                    text.push('\n');
                }
                let listed: Vec<Value> = candidates
                    .iter()
                    .map(|candidate| {
                        json!({"path": candidate.path, "kind": candidate.kind, "score": candidate.score})
                    })
                    .collect();
                ToolOutput::ok(text)
                    .with_meta("candidates", listed)
                    .with_meta("status", json!(status))
            })
            .await
        })
    }
}

/// `session_list {}`: the workspace's sessions, as `agent-lsp session list --json` prints them.
pub struct SessionListTool {
    /// The workspace's sessions.
    pub store: Store,
}

impl TypedTool for SessionListTool {
    type Args = NoArgs;

    fn name(&self) -> &str {
        "session_list"
    }

    fn description(&self) -> String {
        "List the agent's recorded sessions of this workspace, oldest first, as JSON: id, preset, created, last activity, event and request counts, first prompt, parent (for a sub-agent's session). The same as `agent-lsp session list --json`.".into()
    }

    fn read_only(&self) -> bool {
        true
    }

    fn run(&self, _ctx: ToolContext, _args: NoArgs) -> BoxFuture<'static, ToolOutput> {
        let store = self.store.clone();
        Box::pin(async move {
            blocking(move || match crate::session_report::list_json(&store) {
                Ok(rows) => pretty(&Value::Array(rows)),
                Err(error) => ToolOutput::error(format!("failed to list the sessions: {error:#}")),
            })
            .await
        })
    }
}

/// The arguments of `session_list`: none.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// `session_show {session}`: one session, as `agent-lsp session show ID --json` prints it.
pub struct SessionShowTool {
    /// The workspace's sessions, the one to show among them.
    pub store: Store,
}

/// The arguments of `session_show`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowArgs {
    /// A session id, a unique prefix or suffix of one, or `last`.
    session: String,
}

impl TypedTool for SessionShowTool {
    type Args = ShowArgs;

    fn name(&self) -> &str {
        "session_show"
    }

    fn description(&self) -> String {
        "Show one recorded session as JSON: header, counts, requests with token and cache figures, the surface and the timeline. The same as `agent-lsp session show ID --json`.".into()
    }

    fn read_only(&self) -> bool {
        true
    }

    fn run(&self, _ctx: ToolContext, args: ShowArgs) -> BoxFuture<'static, ToolOutput> {
        let store = self.store.clone();
        Box::pin(async move {
            blocking(move || match store.load(&args.session) {
                Ok(mut history) => pretty(&crate::session_report::show_json(&mut history, &store)),
                Err(error) => ToolOutput::error(format!(
                    "no session `{}`: {error:#}; session_list shows them",
                    args.session
                )),
            })
            .await
        })
    }
}

/// JSON as the terminal prints it with `--json`.
fn pretty(value: &Value) -> ToolOutput {
    match serde_json::to_string_pretty(value) {
        Ok(text) => ToolOutput::ok(text),
        Err(error) => ToolOutput::error(format!("failed to encode the answer: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{FilesArgs, NoArgs, ShowArgs};
    use crate::plugin::typed::parameters_schema;

    /// The schemas derived from the argument types say what the hand-written ones said.
    #[test]
    fn the_added_tools_schemas_are_derived_from_their_argument_types() {
        assert_eq!(
            parameters_schema::<FilesArgs>(),
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "The fuzzy query."},
                    "limit": {"type": "integer", "minimum": 1, "description": "Paths to return at most (default 20)."}
                },
                "required": ["query"],
                "additionalProperties": false
            })
        );
        assert_eq!(
            parameters_schema::<NoArgs>(),
            json!({"type": "object", "properties": {}, "additionalProperties": false})
        );
        assert_eq!(
            parameters_schema::<ShowArgs>(),
            json!({
                "type": "object",
                "properties": {
                    "session": {"type": "string", "description": "A session id, a unique prefix or suffix of one, or `last`."}
                },
                "required": ["session"],
                "additionalProperties": false
            })
        );
    }
}
