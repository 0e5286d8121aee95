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

use std::marker::PhantomData;
use std::path::Path;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use lsp_bridge::queries::Queries;
use lsp_bridge::syntax::SymbolIndex;
use serde_json::Value;

use super::WriteObserver;

use crate::plugin::outcomes::ToolOutput;

use crate::plugin::tool::{CallArgs, Tool, ToolContext};

use crate::llm::ToolDef;
use crate::plugin::typed::TypedTool;
use crate::shared_bridge::SharedBridge;
use crate::workspace::Workspace;
use args::{
    Call, CallHierarchyArgs, DefinitionArgs, HoverArgs, LspArgs, PagedArgs, PathArgs, QueryArgs,
    RenameArgs,
};
pub use render::render_diagnostics;

mod args;
mod navigation;
mod render;
mod shared;
mod symbols;
mod waiting;

/// Results shown per page unless the call asks for another `limit`.
/// Results on a page when the call does not say (`limit`).
const DEFAULT_LIMIT: usize = 40;
/// The most results on a page.
const MAX_LIMIT: usize = 200;

/// The shared state of the LSP tools: queries over the bridge, the tree-sitter index built
/// on first use, and the workspace's shared bridge when queries may be answered by another
/// process's warm servers.
#[derive(Clone)]
pub struct LspTools {
    /// The bridge's queries, over the host's servers and the documents they were told of.
    pub queries: Queries,
    index: Arc<Mutex<Option<SymbolIndex>>>,
    shared: Option<Arc<SharedBridge>>,
    /// Shows the servers a slow call waits for on the host's activity board.
    waiting: Option<Arc<waiting::Waiting>>,
}

impl LspTools {
    /// The `lsp_*` tools over `queries`, answered here (no shared bridge, no activity board
    /// until `with_shared` and `with_activity` say otherwise).
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
            .map(|kind| LspTool::new(*kind, self.clone()))
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

    /// What the model reads about the tool of this kind.
    fn description(self) -> &'static str {
        match self {
            LspKind::Definition => {
                "Go to the definition of a symbol, answered by the language server (set `declaration` for the declaration, e.g. a C prototype). Returns path:line:col with the code line."
            }
            LspKind::References => {
                "Find every reference to a symbol (declaration included), grouped by file."
            }
            LspKind::Implementation => {
                "Find the implementations of an interface, trait or abstract method."
            }
            LspKind::TypeDefinition => "Go to the definition of the type of a symbol.",
            LspKind::Hover => {
                "The language server's hover for a symbol: its type, signature and documentation."
            }
            LspKind::DocumentSymbols => {
                "The outline of a file as a tree: classes, functions, methods with their lines."
            }
            LspKind::WorkspaceSymbols => {
                "Find symbols by name across the workspace, from every language server (exact matches first)."
            }
            LspKind::Diagnostics => {
                "Errors and warnings the language server reports for a file as it is now (waits for the current version)."
            }
            LspKind::CallHierarchy => {
                "Who calls a function (incoming) or what it calls (outgoing), with the call sites."
            }
            LspKind::RenamePreview => {
                "Preview renaming a symbol everywhere: the edit the server would make, as a diff. Nothing is changed."
            }
        }
    }
}

/// The names of the LSP tools, in catalog order.
pub fn lsp_tool_names() -> Vec<&'static str> {
    LspKind::ALL.iter().map(|kind| kind.name()).collect()
}

/// One `lsp_*` tool, as the registry takes it: the typed tool of its kind (see `tool`).
pub struct LspTool(Arc<dyn Tool>);

impl LspTool {
    /// The tool of `kind` over `tools`; the argument type of each kind is chosen here.
    fn new(kind: LspKind, tools: LspTools) -> LspTool {
        fn typed<A: LspArgs>(kind: LspKind, tools: LspTools) -> Arc<dyn Tool> {
            Arc::new(KindTool::<A> {
                kind,
                tools,
                args: PhantomData,
            })
        }
        LspTool(match kind {
            LspKind::Definition => typed::<DefinitionArgs>(kind, tools),
            LspKind::References | LspKind::Implementation | LspKind::TypeDefinition => {
                typed::<PagedArgs>(kind, tools)
            }
            LspKind::Hover => typed::<HoverArgs>(kind, tools),
            LspKind::DocumentSymbols | LspKind::Diagnostics => typed::<PathArgs>(kind, tools),
            LspKind::WorkspaceSymbols => typed::<QueryArgs>(kind, tools),
            LspKind::CallHierarchy => typed::<CallHierarchyArgs>(kind, tools),
            LspKind::RenamePreview => typed::<RenameArgs>(kind, tools),
        })
    }
}

/// The `lsp_*` tools differ in their argument types only; [`LspTool`] hides which.
impl Tool for LspTool {
    fn def(&self) -> ToolDef {
        self.0.def()
    }

    fn read_only(&self) -> bool {
        self.0.read_only()
    }

    fn run(&self, ctx: ToolContext, args: CallArgs) -> BoxFuture<'static, ToolOutput> {
        self.0.run(ctx, args)
    }
}

/// The tool of one kind, with arguments of type `A`.
struct KindTool<A> {
    kind: LspKind,
    tools: LspTools,
    args: PhantomData<fn() -> A>,
}

impl<A: LspArgs> TypedTool for KindTool<A> {
    type Args = A;

    fn name(&self) -> &str {
        self.kind.name()
    }

    fn description(&self) -> String {
        self.kind.description().to_owned()
    }

    fn read_only(&self) -> bool {
        true
    }

    fn run(&self, ctx: ToolContext, args: A) -> BoxFuture<'static, ToolOutput> {
        let kind = self.kind;
        let tools = self.tools.clone();
        // The file the call is about: its server is the one it waits for.
        let file = args
            .path()
            .and_then(|path| ctx.workspace.resolve(path).ok());
        Box::pin(async move {
            let call = async {
                if tools.shared.is_some() {
                    // Forwarded as the JSON a model would send; the owner parses it itself.
                    let arguments = serde_json::to_value(&args).unwrap_or(Value::Null);
                    if let Some(output) = shared::run(&tools, kind.name(), &arguments).await {
                        return output;
                    }
                }
                run_here(kind, &tools, ctx, args.into_call()).await
            };
            match tools.waiting.clone() {
                Some(waiting) => waiting.around(file, call).await,
                None => call.await,
            }
        })
    }
}

/// Answer `kind` from this process's own bridge.
async fn run_here(kind: LspKind, tools: &LspTools, ctx: ToolContext, call: Call) -> ToolOutput {
    let result = match call {
        Call::Query(args) => symbols::workspace_symbols(tools, &ctx, args).await,
        Call::Path(path) if kind == LspKind::DocumentSymbols => {
            symbols::document_symbols(tools, &ctx, &path).await
        }
        Call::Path(path) => render::diagnostics(tools, &ctx, &path).await,
        Call::Position(args) => navigation::positional(kind, tools, &ctx, args).await,
    };
    result.unwrap_or_else(|output| output)
}
