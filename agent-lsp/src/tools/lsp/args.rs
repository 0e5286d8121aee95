//! The arguments of the `lsp_*` tools, one type per shape of call; the catalog's schemas are
//! derived from them. Each becomes a [`Call`], what the answering code takes, and serializes
//! back to the JSON a model would send, for a query forwarded to the process that owns the
//! workspace's shared bridge.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::MAX_LIMIT;

/// What every `lsp_*` argument type offers the tool that runs it.
pub trait LspArgs: DeserializeOwned + JsonSchema + Serialize + Send + Sync + 'static {
    /// The file the call is about, when it is about one: its server is the one it waits for.
    fn path(&self) -> Option<&str>;

    /// The call as the answering code takes it.
    fn into_call(self) -> Call;
}

/// One call of an `lsp_*` tool, by shape.
pub enum Call {
    /// A symbol at a position (the navigations, hover, call hierarchy, rename preview).
    Position(PositionQuery),
    /// A whole file (`lsp_document_symbols`, `lsp_diagnostics`).
    Path(String),
    /// A name to look for across the workspace (`lsp_workspace_symbols`).
    Query(QueryArgs),
}

/// A call at a symbol's position, with what the kinds that take more give.
pub struct PositionQuery {
    pub(super) path: String,
    pub(super) line: u32,
    pub(super) symbol: String,
    pub(super) column: Option<u32>,
    pub(super) cursor: Option<String>,
    pub(super) limit: Option<usize>,
    pub(super) declaration: bool,
    pub(super) direction: Option<String>,
    pub(super) new_name: Option<String>,
}

/// The arguments of `lsp_hover`: a symbol's position.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HoverArgs {
    /// File path relative to the workspace root.
    path: String,
    /// 1-based line where the symbol appears.
    #[schemars(range(min = 1))]
    line: u32,
    /// The symbol's name exactly as written on that line.
    symbol: String,
    /// Optional 1-based column (in characters) of the symbol; corrected if it misses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    column: Option<u32>,
}

/// The arguments of `lsp_references`, `lsp_implementation` and `lsp_type_definition`: a
/// symbol's position and a page.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PagedArgs {
    /// File path relative to the workspace root.
    path: String,
    /// 1-based line where the symbol appears.
    #[schemars(range(min = 1))]
    line: u32,
    /// The symbol's name exactly as written on that line.
    symbol: String,
    /// Optional 1-based column (in characters) of the symbol; corrected if it misses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    column: Option<u32>,
    /// From a previous answer's "call again with cursor=..." to see the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cursor: Option<String>,
    /// Results per page (default 40).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_LIMIT))]
    limit: Option<usize>,
}

/// The arguments of `lsp_definition`: a paged position, and whether the declaration is meant.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DefinitionArgs {
    /// File path relative to the workspace root.
    path: String,
    /// 1-based line where the symbol appears.
    #[schemars(range(min = 1))]
    line: u32,
    /// The symbol's name exactly as written on that line.
    symbol: String,
    /// Optional 1-based column (in characters) of the symbol; corrected if it misses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    column: Option<u32>,
    /// From a previous answer's "call again with cursor=..." to see the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cursor: Option<String>,
    /// Results per page (default 40).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_LIMIT))]
    limit: Option<usize>,
    /// Ask for the declaration instead of the definition.
    #[serde(default)]
    declaration: bool,
}

/// The arguments of `lsp_call_hierarchy`: a paged position and the direction.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallHierarchyArgs {
    /// File path relative to the workspace root.
    path: String,
    /// 1-based line where the symbol appears.
    #[schemars(range(min = 1))]
    line: u32,
    /// The symbol's name exactly as written on that line.
    symbol: String,
    /// Optional 1-based column (in characters) of the symbol; corrected if it misses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    column: Option<u32>,
    /// From a previous answer's "call again with cursor=..." to see the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cursor: Option<String>,
    /// Results per page (default 40).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_LIMIT))]
    limit: Option<usize>,
    /// incoming: callers; outgoing: callees.
    // Checked by the tool, which says what is wrong in its own words (serde takes a missing
    // `Option` as `None`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(required, extend("enum" = ["incoming", "outgoing"]))]
    direction: Option<String>,
}

/// The arguments of `lsp_rename_preview`: a position and the new name.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RenameArgs {
    /// File path relative to the workspace root.
    path: String,
    /// 1-based line where the symbol appears.
    #[schemars(range(min = 1))]
    line: u32,
    /// The symbol's name exactly as written on that line.
    symbol: String,
    /// Optional 1-based column (in characters) of the symbol; corrected if it misses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    column: Option<u32>,
    /// The new name.
    // Checked by the tool, which says what is missing in its own words.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(required)]
    new_name: Option<String>,
}

/// The arguments of `lsp_document_symbols` and `lsp_diagnostics`: a file.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PathArgs {
    /// File path relative to the workspace root.
    path: String,
}

/// The arguments of `lsp_workspace_symbols`: a name and a page.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryArgs {
    /// Symbol name or part of it.
    pub(super) query: String,
    /// From a previous answer's "call again with cursor=..." to see the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) cursor: Option<String>,
    /// Results per page (default 40).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_LIMIT))]
    pub(super) limit: Option<usize>,
}

// The doc comments of the `limit`s are what the model reads; they state this number.
const _: () = assert!(super::DEFAULT_LIMIT == 40);

/// A position call of the fields every position shape has.
fn position(path: String, line: u32, symbol: String, column: Option<u32>) -> PositionQuery {
    PositionQuery {
        path,
        line,
        symbol,
        column,
        cursor: None,
        limit: None,
        declaration: false,
        direction: None,
        new_name: None,
    }
}

impl LspArgs for HoverArgs {
    fn path(&self) -> Option<&str> {
        Some(&self.path)
    }

    fn into_call(self) -> Call {
        Call::Position(position(self.path, self.line, self.symbol, self.column))
    }
}

impl LspArgs for PagedArgs {
    fn path(&self) -> Option<&str> {
        Some(&self.path)
    }

    fn into_call(self) -> Call {
        Call::Position(PositionQuery {
            cursor: self.cursor,
            limit: self.limit,
            ..position(self.path, self.line, self.symbol, self.column)
        })
    }
}

impl LspArgs for DefinitionArgs {
    fn path(&self) -> Option<&str> {
        Some(&self.path)
    }

    fn into_call(self) -> Call {
        Call::Position(PositionQuery {
            cursor: self.cursor,
            limit: self.limit,
            declaration: self.declaration,
            ..position(self.path, self.line, self.symbol, self.column)
        })
    }
}

impl LspArgs for CallHierarchyArgs {
    fn path(&self) -> Option<&str> {
        Some(&self.path)
    }

    fn into_call(self) -> Call {
        Call::Position(PositionQuery {
            cursor: self.cursor,
            limit: self.limit,
            direction: self.direction,
            ..position(self.path, self.line, self.symbol, self.column)
        })
    }
}

impl LspArgs for RenameArgs {
    fn path(&self) -> Option<&str> {
        Some(&self.path)
    }

    fn into_call(self) -> Call {
        Call::Position(PositionQuery {
            new_name: self.new_name,
            ..position(self.path, self.line, self.symbol, self.column)
        })
    }
}

impl LspArgs for PathArgs {
    fn path(&self) -> Option<&str> {
        Some(&self.path)
    }

    fn into_call(self) -> Call {
        Call::Path(self.path)
    }
}

impl LspArgs for QueryArgs {
    fn path(&self) -> Option<&str> {
        None
    }

    fn into_call(self) -> Call {
        Call::Query(self)
    }
}
