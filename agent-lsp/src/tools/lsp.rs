//! The `lsp_*` tools: code navigation answered by the workspace's real language servers.
//!
//! A position is a path, a 1-based line and the symbol's name (the column is optional), because
//! models name symbols well and count columns badly; a near miss is corrected and the result
//! says so. Results are compact (`line:col  code`, grouped by file), de-duplicated, stamped with
//! the server and document versions they were computed on, and paginated with a cursor; the
//! full answer goes into the result's meta, which the log keeps and the model does not see.
//!
//! Where no server handles a language (or it failed), document symbols, workspace symbols and
//! definitions come from tree-sitter tags instead, labelled approximate; the other tools say
//! which server is missing or failed and why.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use lsp_bridge::queries::{
    CallDirection, DocumentDiagnostics, Location, Navigation, OutlineSymbol, Queries,
    SymbolPosition,
};
use lsp_bridge::syntax::{SymbolIndex, SyntaxSymbol};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolOutput, WriteObserver, parse_args};
use crate::llm::ToolDef;
use crate::shared_bridge::SharedBridge;
use crate::workspace::Workspace;

mod shared;
mod waiting;

/// Results shown per page unless the call asks for another `limit`.
const DEFAULT_LIMIT: usize = 40;
const MAX_LIMIT: usize = 200;

/// The shared state of the LSP tools: queries over the bridge, the tree-sitter index built
/// on first use, and the workspace's shared bridge when queries may be answered by another
/// process's warm servers.
#[derive(Clone)]
pub struct LspTools {
    pub queries: Queries,
    index: Arc<Mutex<Option<SymbolIndex>>>,
    shared: Option<Arc<SharedBridge>>,
    /// Shows the servers a slow call waits for on the host's activity board.
    waiting: Option<Arc<waiting::Waiting>>,
}

impl LspTools {
    pub fn new(queries: Queries) -> LspTools {
        LspTools {
            queries,
            index: Arc::new(Mutex::new(None)),
            shared: None,
            waiting: None,
        }
    }

    /// Show on `board` the servers a call waits for when it waits long (a cold server
    /// starting or indexing), so the turn is not silent meanwhile (see `tools/lsp/waiting.rs`).
    pub fn with_activity(mut self, board: Arc<crate::activity::Activity>) -> LspTools {
        self.waiting = Some(waiting::Waiting::new(board, self.queries.bridge.clone()));
        self
    }

    /// Answer from the owner of `shared` when another process owns it, and publish this
    /// process's bridge when nobody does (see [`crate::shared_bridge`]).
    pub fn with_shared(mut self, shared: Arc<SharedBridge>) -> LspTools {
        self.shared = Some(shared);
        self
    }

    /// Every `lsp_*` tool, for registration.
    pub fn all(&self) -> Vec<LspTool> {
        LspKind::ALL
            .iter()
            .map(|kind| LspTool {
                kind: *kind,
                tools: self.clone(),
            })
            .collect()
    }

    /// Run `f` on the tree-sitter index, built on first use from the files (honouring
    /// .gitignore) that no available language server covers: the index is the fallback, so
    /// files a server answers for are not parsed twice.
    fn with_index<T>(&self, root: &Path, f: impl FnOnce(&SymbolIndex) -> T) -> T {
        let mut index = self.index.lock().expect("symbol index lock");
        let index = index.get_or_insert_with(|| {
            let bridge = &self.queries.bridge;
            let files = ignore::WalkBuilder::new(root)
                .build()
                .filter_map(Result::ok)
                .filter(|entry| entry.file_type().is_some_and(|kind| kind.is_file()))
                .map(|entry| entry.into_path())
                .filter(|path| {
                    lsp_bridge::syntax::Language::from_path(path).is_some()
                        && bridge.config_for(path).is_none()
                });
            SymbolIndex::build(root, files, &tokio_util::sync::CancellationToken::new())
        });
        f(index)
    }
}

impl WriteObserver for LspTools {
    /// Tell the servers that the agent wrote `path`, and render its fresh diagnostics for the
    /// edit/write tools' results. `None` when no server handles the file.
    fn after_write(
        &self,
        workspace: &Workspace,
        path: &Path,
    ) -> BoxFuture<'static, Option<String>> {
        if let Ok(mut index) = self.index.lock()
            && let Some(index) = index.as_mut()
            && let Ok(text) = std::fs::read_to_string(path)
        {
            index.update_file(workspace.root(), path, &text);
        }
        let tools = self.clone();
        let shown = workspace.display(path);
        let path = path.to_owned();
        Box::pin(async move {
            if let Some(answer) = shared::after_write(&tools, &path).await {
                return answer;
            }
            tools.queries.bridge.config_for(&path)?;
            Some(match tools.queries.after_write(&path).await {
                Ok(answer) => render_diagnostics(&shown, &answer.value, &answer.server),
                Err(error) => {
                    tracing::warn!("diagnostics after a write: {error}");
                    format!("diagnostics of {shown}: unavailable ({})", error.brief())
                }
            })
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LspKind {
    Definition,
    References,
    Implementation,
    TypeDefinition,
    Hover,
    DocumentSymbols,
    WorkspaceSymbols,
    Diagnostics,
    CallHierarchy,
    RenamePreview,
}

impl LspKind {
    const ALL: [LspKind; 10] = [
        LspKind::Definition,
        LspKind::References,
        LspKind::Implementation,
        LspKind::TypeDefinition,
        LspKind::Hover,
        LspKind::DocumentSymbols,
        LspKind::WorkspaceSymbols,
        LspKind::Diagnostics,
        LspKind::CallHierarchy,
        LspKind::RenamePreview,
    ];

    fn name(self) -> &'static str {
        match self {
            LspKind::Definition => "lsp_definition",
            LspKind::References => "lsp_references",
            LspKind::Implementation => "lsp_implementation",
            LspKind::TypeDefinition => "lsp_type_definition",
            LspKind::Hover => "lsp_hover",
            LspKind::DocumentSymbols => "lsp_document_symbols",
            LspKind::WorkspaceSymbols => "lsp_workspace_symbols",
            LspKind::Diagnostics => "lsp_diagnostics",
            LspKind::CallHierarchy => "lsp_call_hierarchy",
            LspKind::RenamePreview => "lsp_rename_preview",
        }
    }
}

/// The names of the LSP tools, in catalog order.
pub fn lsp_tool_names() -> Vec<&'static str> {
    LspKind::ALL.iter().map(|kind| kind.name()).collect()
}

pub struct LspTool {
    kind: LspKind,
    tools: LspTools,
}

/// The schema of a tool that takes a symbol position, plus its own properties.
fn position_schema(extra: Value, extra_required: &[&str]) -> Value {
    let mut properties = json!({
        "path": {"type": "string", "description": "File path relative to the workspace root."},
        "line": {"type": "integer", "minimum": 1, "description": "1-based line where the symbol appears."},
        "symbol": {"type": "string", "description": "The symbol's name exactly as written on that line."},
        "column": {"type": "integer", "minimum": 1, "description": "Optional 1-based column (in characters) of the symbol; corrected if it misses."},
    });
    if let (Value::Object(properties), Value::Object(extra)) = (&mut properties, extra) {
        properties.extend(extra);
    }
    let mut required = vec!["path", "line", "symbol"];
    required.extend_from_slice(extra_required);
    json!({ "type": "object", "properties": properties, "required": required, "additionalProperties": false })
}

fn paging() -> Value {
    json!({
        "cursor": {"type": "string", "description": "From a previous answer's \"call again with cursor=...\" to see the next page."},
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "Results per page (default 40)."},
    })
}

fn merge(a: Value, b: Value) -> Value {
    let mut a = a;
    if let (Value::Object(a), Value::Object(b)) = (&mut a, b) {
        a.extend(b);
    }
    a
}

impl Tool for LspTool {
    fn def(&self) -> ToolDef {
        let (description, parameters) = match self.kind {
            LspKind::Definition => (
                "Go to the definition of a symbol, answered by the language server (set `declaration` for the declaration, e.g. a C prototype). Returns path:line:col with the code line.",
                position_schema(
                    merge(
                        paging(),
                        json!({"declaration": {"type": "boolean", "description": "Ask for the declaration instead of the definition."}}),
                    ),
                    &[],
                ),
            ),
            LspKind::References => (
                "Find every reference to a symbol (declaration included), grouped by file.",
                position_schema(paging(), &[]),
            ),
            LspKind::Implementation => (
                "Find the implementations of an interface, trait or abstract method.",
                position_schema(paging(), &[]),
            ),
            LspKind::TypeDefinition => (
                "Go to the definition of the type of a symbol.",
                position_schema(paging(), &[]),
            ),
            LspKind::Hover => (
                "The language server's hover for a symbol: its type, signature and documentation.",
                position_schema(json!({}), &[]),
            ),
            LspKind::DocumentSymbols => (
                "The outline of a file as a tree: classes, functions, methods with their lines.",
                json!({"type": "object", "properties": {"path": {"type": "string", "description": "File path relative to the workspace root."}}, "required": ["path"], "additionalProperties": false}),
            ),
            LspKind::WorkspaceSymbols => (
                "Find symbols by name across the workspace, from every language server (exact matches first).",
                json!({"type": "object", "properties": merge(json!({"query": {"type": "string", "description": "Symbol name or part of it."}}), paging()), "required": ["query"], "additionalProperties": false}),
            ),
            LspKind::Diagnostics => (
                "Errors and warnings the language server reports for a file as it is now (waits for the current version).",
                json!({"type": "object", "properties": {"path": {"type": "string", "description": "File path relative to the workspace root."}}, "required": ["path"], "additionalProperties": false}),
            ),
            LspKind::CallHierarchy => (
                "Who calls a function (incoming) or what it calls (outgoing), with the call sites.",
                position_schema(
                    merge(
                        paging(),
                        json!({"direction": {"type": "string", "enum": ["incoming", "outgoing"], "description": "incoming: callers; outgoing: callees."}}),
                    ),
                    &["direction"],
                ),
            ),
            LspKind::RenamePreview => (
                "Preview renaming a symbol everywhere: the edit the server would make, as a diff. Nothing is changed.",
                position_schema(
                    json!({"new_name": {"type": "string", "description": "The new name."}}),
                    &["new_name"],
                ),
            ),
        };
        ToolDef {
            name: self.kind.name().to_owned(),
            description: description.to_owned(),
            parameters,
        }
    }

    fn read_only(&self) -> bool {
        true
    }

    fn run(&self, ctx: ToolContext, args: Value) -> BoxFuture<'static, ToolOutput> {
        let kind = self.kind;
        let tools = self.tools.clone();
        // The file the call is about: its server is the one it waits for.
        let file = args
            .get("path")
            .and_then(Value::as_str)
            .and_then(|path| ctx.workspace.resolve(path).ok());
        Box::pin(async move {
            let call = async {
                if let Some(output) = shared::run(&tools, kind.name(), &args).await {
                    return output;
                }
                run_here(kind, &tools, ctx, args).await
            };
            match tools.waiting.clone() {
                Some(waiting) => waiting.around(file, call).await,
                None => call.await,
            }
        })
    }
}

/// Answer `kind` from this process's own bridge.
async fn run_here(kind: LspKind, tools: &LspTools, ctx: ToolContext, args: Value) -> ToolOutput {
    let result = match kind {
        LspKind::WorkspaceSymbols => workspace_symbols(tools, &ctx, args).await,
        LspKind::DocumentSymbols => document_symbols(tools, &ctx, args).await,
        LspKind::Diagnostics => diagnostics(tools, &ctx, args).await,
        _ => positional(kind, tools, &ctx, args).await,
    };
    result.unwrap_or_else(|output| output)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PositionArgs {
    path: String,
    line: u32,
    symbol: String,
    column: Option<u32>,
    cursor: Option<String>,
    limit: Option<usize>,
    #[serde(default)]
    declaration: bool,
    direction: Option<String>,
    new_name: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PathArgs {
    path: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QueryArgs {
    query: String,
    cursor: Option<String>,
    limit: Option<usize>,
}

/// The error output for a query that failed: one line (two with the server's last stderr
/// line) for the model, and what to do; the full error, with the server's stderr, goes to the
/// log, and the servers' health into the result's meta (the session log keeps it; the model
/// does not see it).
fn failure(tools: &LspTools, tool: &str, error: &lsp_bridge::error::Error) -> ToolOutput {
    tracing::warn!(tool, "language server query failed: {error}");
    let health = serde_json::to_value(tools.queries.bridge.health()).unwrap_or(Value::Null);
    ToolOutput::error(format!("{tool} could not be answered: {}", error.brief()))
        .with_meta("servers", health)
}

async fn positional(
    kind: LspKind,
    tools: &LspTools,
    ctx: &ToolContext,
    args: Value,
) -> Result<ToolOutput, ToolOutput> {
    let args: PositionArgs = parse_args(kind.name(), args)?;
    let path = ctx.resolve(&args.path)?;
    let shown = ctx.workspace.display(&path);
    let position = SymbolPosition {
        path: path.clone(),
        line: args.line,
        symbol: args.symbol.clone(),
        column: args.column,
    };
    let queries = &tools.queries;
    let has_server = queries.bridge.config_for(&path).is_some();

    let navigation = match kind {
        LspKind::Definition if args.declaration => Some(Navigation::Declaration),
        LspKind::Definition => Some(Navigation::Definition),
        LspKind::References => Some(Navigation::References),
        LspKind::Implementation => Some(Navigation::Implementation),
        LspKind::TypeDefinition => Some(Navigation::TypeDefinition),
        _ => None,
    };
    if let Some(navigation) = navigation {
        if !has_server && kind == LspKind::Definition {
            let why = queries.bridge.no_server_reason(&path);
            return Ok(approximate_definition(tools, ctx, &args.symbol, &why));
        }
        return match queries.navigate(navigation, &position).await {
            Ok(answer) => {
                let what = format!(
                    "{} of `{}` ({shown}:{})",
                    kind.name().trim_start_matches("lsp_").replace('_', " "),
                    args.symbol,
                    args.line
                );
                Ok(render_locations(
                    ctx,
                    &what,
                    &answer.value,
                    &answer.server,
                    &answer.versions,
                    &answer.notes,
                    &args.cursor,
                    args.limit,
                ))
            }
            // The server failed rather than answered: tree-sitter tags stand in, labelled.
            Err(error) if kind == LspKind::Definition && error.is_server_failure() => {
                tracing::warn!("lsp_definition: the language server failed: {error}");
                let why = format!("the language server failed: {}", error.brief());
                Ok(approximate_definition(tools, ctx, &args.symbol, &why)
                    .with_meta("server_error", error.to_string()))
            }
            Err(error) => Err(failure(tools, kind.name(), &error)),
        };
    }
    match kind {
        LspKind::Hover => match queries.hover(&position).await {
            Ok(answer) => {
                let mut text = stamp(&answer.server, &answer.versions, ctx);
                notes(&mut text, &answer.notes);
                if answer.value.trim().is_empty() {
                    text.push_str(&format!("no hover information for `{}`", args.symbol));
                } else {
                    text.push_str(answer.value.trim());
                }
                Ok(ToolOutput::ok(text).with_meta("server", answer.server))
            }
            Err(error) => Err(failure(tools, kind.name(), &error)),
        },
        LspKind::CallHierarchy => {
            let direction = match args.direction.as_deref() {
                Some("incoming") => CallDirection::Incoming,
                Some("outgoing") => CallDirection::Outgoing,
                other => {
                    return Err(ToolOutput::error(format!(
                        "direction must be \"incoming\" or \"outgoing\", not {other:?}"
                    )));
                }
            };
            match queries.call_hierarchy(&position, direction).await {
                Ok(answer) => {
                    let locations = answer
                        .value
                        .iter()
                        .map(|call| Location {
                            code: format!("{} {} — {}", call.kind, call.name, call.location.code),
                            ..call.location.clone()
                        })
                        .collect::<Vec<_>>();
                    let what = format!(
                        "{} calls of `{}`",
                        if direction == CallDirection::Incoming {
                            "incoming"
                        } else {
                            "outgoing"
                        },
                        args.symbol
                    );
                    let output = render_locations(
                        ctx,
                        &what,
                        &locations,
                        &answer.server,
                        &answer.versions,
                        &answer.notes,
                        &args.cursor,
                        args.limit,
                    );
                    Ok(output.with_meta(
                        "calls",
                        serde_json::to_value(&answer.value).unwrap_or(Value::Null),
                    ))
                }
                Err(error) => Err(failure(tools, kind.name(), &error)),
            }
        }
        LspKind::RenamePreview => {
            let Some(new_name) = args.new_name.as_deref() else {
                return Err(ToolOutput::error("give `new_name`"));
            };
            match queries.rename_preview(&position, new_name).await {
                Ok(answer) => {
                    let mut text = stamp(&answer.server, &answer.versions, ctx);
                    notes(&mut text, &answer.notes);
                    if answer.value.is_empty() {
                        text.push_str("the server proposes no change");
                    }
                    let mut n_files = 0;
                    for edit in &answer.value {
                        n_files += 1;
                        let shown = ctx.workspace.display(&edit.path);
                        let diff = similar::TextDiff::from_lines(&edit.old_text, &edit.new_text);
                        let _ = write!(
                            text,
                            "{}",
                            diff.unified_diff()
                                .context_radius(1)
                                .header(&format!("a/{shown}"), &format!("b/{shown}"))
                        );
                    }
                    Ok(ToolOutput::ok(format!(
                        "rename `{}` → `{new_name}`: {n_files} file(s) would change (preview only, nothing applied)\n{text}",
                        args.symbol
                    )))
                }
                Err(error) => Err(failure(tools, kind.name(), &error)),
            }
        }
        _ => unreachable!("navigation kinds are handled above"),
    }
}

async fn document_symbols(
    tools: &LspTools,
    ctx: &ToolContext,
    args: Value,
) -> Result<ToolOutput, ToolOutput> {
    let args: PathArgs = parse_args("lsp_document_symbols", args)?;
    let path = ctx.resolve(&args.path)?;
    let shown = ctx.workspace.display(&path);
    let server_answer = match tools.queries.bridge.config_for(&path) {
        Some(_) => Some(tools.queries.document_symbols(&path).await),
        None => None,
    };
    match server_answer {
        Some(Ok(answer)) => {
            let mut text = stamp(&answer.server, &answer.versions, ctx);
            let _ = writeln!(text, "outline of {shown}:");
            render_outline(&mut text, &answer.value, 1);
            Ok(ToolOutput::ok(text.trim_end().to_owned()).with_meta("server", answer.server))
        }
        other => {
            let why = match &other {
                Some(Err(error)) => {
                    tracing::warn!("lsp_document_symbols: the language server failed: {error}");
                    format!("the language server failed: {}", error.brief())
                }
                _ => tools.queries.bridge.no_server_reason(&path),
            };
            let text = std::fs::read_to_string(&path)
                .map_err(|error| ToolOutput::error(format!("cannot read {shown}: {error}")))?;
            let Some(symbols) = lsp_bridge::syntax::document_symbols(&path, &text) else {
                return Err(ToolOutput::error(format!(
                    "{why}, and tree-sitter has no grammar for {shown}"
                )));
            };
            let mut out = format!("approximate (tree-sitter; {why}): outline of {shown}:\n");
            render_syntax_outline(&mut out, &symbols, 1);
            Ok(ToolOutput::ok(out.trim_end().to_owned()).with_meta("approximate", true))
        }
    }
}

async fn workspace_symbols(
    tools: &LspTools,
    ctx: &ToolContext,
    args: Value,
) -> Result<ToolOutput, ToolOutput> {
    let args: QueryArgs = parse_args("lsp_workspace_symbols", args)?;
    let mut symbols = Vec::new();
    let mut errors = Vec::new();
    let mut indexing = Vec::new();
    for answer in tools.queries.workspace_symbols(&args.query).await {
        match answer {
            Ok(found) => {
                if found.still_indexing {
                    indexing.push(found.server.clone());
                }
                symbols.extend(found.symbols)
            }
            Err(error) => {
                tracing::warn!("lsp_workspace_symbols: a language server failed: {error}");
                errors.push(error.brief())
            }
        }
    }
    let query = args.query.to_lowercase();
    let rank = |name: &str| {
        let name = name.to_lowercase();
        if name == query {
            0
        } else if name.starts_with(&query) {
            1
        } else if name.contains(&query) {
            2
        } else {
            3
        }
    };
    let mut rows = symbols
        .iter()
        .map(|symbol| {
            let container = symbol
                .container
                .as_deref()
                .map(|c| format!(" in {c}"))
                .unwrap_or_default();
            let location = Location {
                code: format!(
                    "{} {}{container} — {}",
                    symbol.kind, symbol.name, symbol.location.code
                ),
                ..symbol.location.clone()
            };
            (rank(&symbol.name), location)
        })
        .collect::<Vec<_>>();
    // Languages without a running server are covered by tree-sitter tags, labelled as such.
    let root = ctx.workspace.root().to_owned();
    let approximate = tools.with_index(&root, |index| {
        index.workspace_symbols(&args.query, MAX_LIMIT)
    });
    let mut n_approximate = 0;
    for (path, symbol) in approximate {
        n_approximate += 1;
        rows.push((
            rank(&symbol.name),
            syntax_location(&root, &path, &symbol, true),
        ));
    }
    rows.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    rows.dedup_by(|a, b| a.1.path == b.1.path && a.1.line == b.1.line);
    let locations = rows
        .into_iter()
        .map(|(_, location)| location)
        .collect::<Vec<_>>();
    let mut extra = Vec::new();
    if n_approximate > 0 {
        extra.push(format!("{n_approximate} result(s) marked (approximate) come from tree-sitter tags, for files no language server covers"));
    }
    extra.extend(
        errors
            .into_iter()
            .map(|error| format!("a server failed: {error}")),
    );
    let servers = tools
        .queries
        .bridge
        .running()
        .iter()
        .map(|child| child.name().to_owned())
        .collect::<Vec<_>>()
        .join(", ");
    if locations.is_empty() && !indexing.is_empty() {
        // An empty answer from a server that has not finished indexing is not "no results".
        return Ok(ToolOutput::ok(format!(
            "workspace symbols matching `{}`: none yet, {} still indexing the workspace; call again in a few seconds (or look in a file with lsp_document_symbols)",
            args.query,
            indexing.join(", ")
        ))
        .with_meta("total", 0)
        .with_meta("still_indexing", indexing));
    }
    let what = format!("workspace symbols matching `{}`", args.query);
    Ok(render_locations(
        ctx,
        &what,
        &locations,
        &servers,
        &[],
        &extra,
        &args.cursor,
        args.limit,
    ))
}

async fn diagnostics(
    tools: &LspTools,
    ctx: &ToolContext,
    args: Value,
) -> Result<ToolOutput, ToolOutput> {
    let args: PathArgs = parse_args("lsp_diagnostics", args)?;
    let path = ctx.resolve(&args.path)?;
    let shown = ctx.workspace.display(&path);
    match tools.queries.diagnostics(&path).await {
        Ok(answer) => {
            let text = render_diagnostics(&shown, &answer.value, &answer.server);
            Ok(ToolOutput::ok(text).with_meta("diagnostics", diagnostics_meta(&answer.value)))
        }
        Err(error) => Err(failure(tools, "lsp_diagnostics", &error)),
    }
}

fn diagnostics_meta(value: &DocumentDiagnostics) -> Value {
    match value {
        DocumentDiagnostics::Current {
            version,
            diagnostics,
        } => json!({"version": version, "items": diagnostics}),
        DocumentDiagnostics::Pending { version } => json!({"version": version, "pending": true}),
    }
}

/// Diagnostics as the model reads them, in edit results and `lsp_diagnostics`.
pub fn render_diagnostics(shown: &str, value: &DocumentDiagnostics, server: &str) -> String {
    match value {
        DocumentDiagnostics::Pending { version } => format!(
            "diagnostics of {shown} (version {version}): pending — {server} has not reported on this version yet; do not assume it is clean, check again with lsp_diagnostics"
        ),
        DocumentDiagnostics::Current {
            version,
            diagnostics,
        } if diagnostics.is_empty() => {
            format!("diagnostics of {shown} (version {version}, {server}): none")
        }
        DocumentDiagnostics::Current {
            version,
            diagnostics,
        } => {
            let mut text = format!(
                "diagnostics of {shown} (version {version}, {server}): {}\n",
                diagnostics.len()
            );
            for diagnostic in diagnostics {
                let code = diagnostic
                    .code
                    .as_deref()
                    .map(|code| format!(" [{code}]"))
                    .unwrap_or_default();
                let _ = writeln!(
                    text,
                    "  {}:{} {}{code}: {}",
                    diagnostic.line, diagnostic.column, diagnostic.severity, diagnostic.message
                );
            }
            text.trim_end().to_owned()
        }
    }
}

/// Definitions from tree-sitter tags, labelled approximate with `why` no server answered.
fn approximate_definition(
    tools: &LspTools,
    ctx: &ToolContext,
    symbol: &str,
    why: &str,
) -> ToolOutput {
    let root = ctx.workspace.root().to_owned();
    let found = tools.with_index(&root, |index| index.definitions(symbol));
    let locations = found
        .iter()
        .map(|(path, symbol)| syntax_location(&root, path, symbol, false))
        .collect::<Vec<_>>();
    let what = format!("approximate definition of `{symbol}` (tree-sitter tags; {why})");
    render_locations(ctx, &what, &locations, "tree-sitter", &[], &[], &None, None)
        .with_meta("approximate", true)
}

fn syntax_location(root: &Path, path: &Path, symbol: &SyntaxSymbol, label: bool) -> Location {
    let absolute = root.join(path);
    let code = std::fs::read_to_string(&absolute)
        .ok()
        .and_then(|text| {
            text.lines()
                .nth(symbol.line.saturating_sub(1) as usize)
                .map(|line| line.trim().to_owned())
        })
        .unwrap_or_default();
    let code = if label {
        format!("{code} (approximate)")
    } else {
        code
    };
    Location {
        path: absolute,
        line: symbol.line,
        column: symbol.column,
        code,
    }
}

/// The header line naming the server and the versions an answer was computed on.
fn stamp(server: &str, versions: &[(PathBuf, i32)], ctx: &ToolContext) -> String {
    if versions.is_empty() {
        return format!("[{server}]\n");
    }
    let versions = versions
        .iter()
        .map(|(path, version)| format!("{} v{version}", ctx.workspace.display(path)))
        .collect::<Vec<_>>()
        .join(", ");
    format!("[{server}; computed on {versions}]\n")
}

fn notes(text: &mut String, notes: &[String]) {
    for note in notes {
        let _ = writeln!(text, "note: {note}");
    }
}

/// Locations grouped by file, one page of them, with the cursor to the next page.
#[allow(clippy::too_many_arguments)]
fn render_locations(
    ctx: &ToolContext,
    what: &str,
    locations: &[Location],
    server: &str,
    versions: &[(PathBuf, i32)],
    extra: &[String],
    cursor: &Option<String>,
    limit: Option<usize>,
) -> ToolOutput {
    let offset = cursor
        .as_deref()
        .and_then(|cursor| cursor.parse::<usize>().ok())
        .unwrap_or(0)
        .min(locations.len());
    let limit = limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let page = &locations[offset..(offset + limit).min(locations.len())];
    let mut text = stamp(server, versions, ctx);
    notes(&mut text, extra);
    if locations.is_empty() {
        let _ = write!(text, "{what}: no results");
        return ToolOutput::ok(text).with_meta("total", 0);
    }
    let _ = writeln!(text, "{what}: {} result(s)", locations.len());
    let mut by_file: BTreeMap<String, Vec<&Location>> = BTreeMap::new();
    for location in page {
        by_file
            .entry(ctx.workspace.display(&location.path))
            .or_default()
            .push(location);
    }
    for (file, locations) in by_file {
        let _ = writeln!(text, "{file}");
        for location in locations {
            let _ = writeln!(
                text,
                "  {}:{}  {}",
                location.line, location.column, location.code
            );
        }
    }
    let shown_to = offset + page.len();
    if shown_to < locations.len() || offset > 0 {
        let _ = write!(
            text,
            "{}–{} of {} shown",
            offset + 1,
            shown_to,
            locations.len()
        );
        if shown_to < locations.len() {
            let _ = write!(text, "; call again with cursor=\"{shown_to}\" for more");
        }
    }
    let all = locations
        .iter()
        .map(|location| json!({"path": ctx.workspace.display(&location.path), "line": location.line, "column": location.column, "code": location.code}))
        .collect::<Vec<_>>();
    ToolOutput::ok(text.trim_end().to_owned())
        .with_meta("total", locations.len())
        .with_meta("server", server)
        .with_meta("results", Value::Array(all))
}

fn render_outline(text: &mut String, symbols: &[OutlineSymbol], depth: usize) {
    for symbol in symbols {
        let detail = symbol
            .detail
            .as_deref()
            .map(|detail| format!(" — {detail}"))
            .unwrap_or_default();
        let _ = writeln!(
            text,
            "{}{} {} ({}:{}){detail}",
            "  ".repeat(depth),
            symbol.kind,
            symbol.name,
            symbol.line,
            symbol.column
        );
        render_outline(text, &symbol.children, depth + 1);
    }
}

fn render_syntax_outline(text: &mut String, symbols: &[SyntaxSymbol], depth: usize) {
    for symbol in symbols {
        let _ = writeln!(
            text,
            "{}{:?} {} ({}:{})",
            "  ".repeat(depth),
            symbol.kind,
            symbol.name,
            symbol.line,
            symbol.column
        );
        render_syntax_outline(text, &symbol.children, depth + 1);
    }
}
