//! Approximate code navigation from tree-sitter syntax trees, for languages with no language server.
//!
//! When no language server is available for a file's language (none installed, or one that failed
//! for good), the agent still needs document symbols, workspace symbols and definition-by-name.
//! This module parses files with tree-sitter and finds definitions with each grammar's bundled
//! tags query (`TAGS_QUERY`), plus a small query of our own per language (`syntax/*.scm`) for the
//! definitions the bundled one leaves out (Rust constants and fields, TypeScript enums, C macros,
//! ...). The query decides *what* is a definition; the node kind then decides its
//! [`SymbolKind`], because the bundled queries are coarse (a Rust `struct` is a "class" there).
//!
//! **Every result of this module is APPROXIMATE.** There is no name resolution and no type
//! information: "the definition of `parse`" is every definition named `parse`, a method's
//! container is what the syntax says (the enclosing class, the `impl` block's type, the Go
//! receiver's type), and a file with syntax errors yields whatever tree-sitter could recover.
//! Callers must label these results as approximate wherever the model sees them.
//!
//! The per-language table and grammars are in `language`, finding definitions in a tree in
//! `definitions`, nesting them into a document's outline in `outline`, and the workspace-wide
//! index in `index`; this module holds the result types and the one parse that joins them.

use std::path::Path;

use serde::Serialize;
use tree_sitter::Parser;

mod definitions;
mod index;
mod language;
mod outline;
#[cfg(test)]
mod tests;

use definitions::DefinitionQuery;
pub use index::SymbolIndex;
pub use language::Language;
use outline::assemble;

/// Files larger than this are not indexed: they are almost always generated or vendored, and a
/// single one could hold up a whole index build.
pub const MAX_FILE_SIZE: u64 = 1024 * 1024;

/// What a definition is, as far as its syntax tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SymbolKind {
    /// A free function (or an arrow function bound to a name).
    Function,
    /// A function inside a class, `impl`, trait or interface, or a Go function with a receiver.
    Method,
    /// A class (Python, TypeScript, JavaScript, C++).
    Class,
    /// Rust structs and unions, Go struct types, C structs and unions.
    Struct,
    /// An enum of any of the languages.
    Enum,
    /// A TypeScript or Go interface.
    Interface,
    /// A Rust trait.
    Trait,
    /// Rust `mod`, TypeScript `namespace`/`module`.
    Module,
    /// C `#define NAME value`, Python upper-case module assignments, Rust/Go/JS `const`.
    Constant,
    /// A global: a Rust `static`, a Go `var`, a C global, a top-level Python or JavaScript
    /// variable.
    Variable,
    /// Type aliases and `typedef`s, and Go named types that are neither struct nor interface.
    Type,
    /// A field of a struct or class.
    Field,
    /// Rust `macro_rules!`, C function-like `#define`.
    Macro,
}

impl SymbolKind {
    /// A lowercase name for the model and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            SymbolKind::Function => "function",
            SymbolKind::Method => "method",
            SymbolKind::Class => "class",
            SymbolKind::Struct => "struct",
            SymbolKind::Enum => "enum",
            SymbolKind::Interface => "interface",
            SymbolKind::Trait => "trait",
            SymbolKind::Module => "module",
            SymbolKind::Constant => "constant",
            SymbolKind::Variable => "variable",
            SymbolKind::Type => "type",
            SymbolKind::Field => "field",
            SymbolKind::Macro => "macro",
        }
    }

    /// The nearest LSP kind, following rust-analyzer where LSP has no exact match (traits are
    /// interfaces, type aliases type parameters, macros functions).
    pub fn to_lsp(self) -> lsp_types::SymbolKind {
        match self {
            SymbolKind::Function | SymbolKind::Macro => lsp_types::SymbolKind::FUNCTION,
            SymbolKind::Method => lsp_types::SymbolKind::METHOD,
            SymbolKind::Class => lsp_types::SymbolKind::CLASS,
            SymbolKind::Struct => lsp_types::SymbolKind::STRUCT,
            SymbolKind::Enum => lsp_types::SymbolKind::ENUM,
            SymbolKind::Interface | SymbolKind::Trait => lsp_types::SymbolKind::INTERFACE,
            SymbolKind::Module => lsp_types::SymbolKind::MODULE,
            SymbolKind::Constant => lsp_types::SymbolKind::CONSTANT,
            SymbolKind::Variable => lsp_types::SymbolKind::VARIABLE,
            SymbolKind::Type => lsp_types::SymbolKind::TYPE_PARAMETER,
            SymbolKind::Field => lsp_types::SymbolKind::FIELD,
        }
    }

    /// The kind a bundled query's `@definition.<suffix>` capture suggests, before the node kind
    /// refines it.
    fn from_capture(suffix: &str) -> SymbolKind {
        match suffix {
            "function" => SymbolKind::Function,
            "method" => SymbolKind::Method,
            "class" => SymbolKind::Class,
            "struct" => SymbolKind::Struct,
            "enum" => SymbolKind::Enum,
            "interface" => SymbolKind::Interface,
            "trait" => SymbolKind::Trait,
            "module" => SymbolKind::Module,
            "constant" => SymbolKind::Constant,
            "type" => SymbolKind::Type,
            "field" => SymbolKind::Field,
            "macro" => SymbolKind::Macro,
            _ => SymbolKind::Variable,
        }
    }

    /// Kinds that Rust `impl` blocks and Go methods can belong to.
    fn is_type(self) -> bool {
        matches!(
            self,
            SymbolKind::Class
                | SymbolKind::Struct
                | SymbolKind::Enum
                | SymbolKind::Interface
                | SymbolKind::Trait
                | SymbolKind::Type
        )
    }
}

/// One definition found in a file. Approximate: see the module docs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SyntaxSymbol {
    /// The defined name, as written.
    pub name: String,
    /// What the definition is, as far as its syntax tells.
    pub kind: SymbolKind,
    /// 1-based line of the definition's name (not of its decorators or doc comment), so that
    /// `path:line:column` lands on the identifier.
    pub line: u32,
    /// 1-based column of the name, counted in characters (not bytes or UTF-16 units), like every
    /// column the model sees.
    pub column: u32,
    /// 1-based last line of the whole definition (body included).
    pub end_line: u32,
    /// The enclosing definition's name (class, module, function), or for Rust `impl` members and
    /// Go methods the name of the type they belong to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// Nested definitions, in source order. Always empty in a [`SymbolIndex`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<SyntaxSymbol>,
}

/// The definitions in `text` as a tree: class members under their class, Rust `impl` members
/// under the type of that name when the file defines it (else at the `impl`'s level), Go methods
/// under their receiver type likewise. Approximate: see the module docs.
///
/// `path` only chooses the language. `None` if the language has no grammar here.
pub fn document_symbols(path: &Path, text: &str) -> Option<Vec<SyntaxSymbol>> {
    let language = Language::from_path(path)?;
    let mut parser = Parser::new();
    symbols(&mut parser, language, text)
}

/// Parses `text` with `parser` (reused across files by the index) and returns the symbol tree.
/// `None` only if the language's query does not compile or the grammar does not load, which is a
/// bug logged once.
fn symbols(parser: &mut Parser, language: Language, text: &str) -> Option<Vec<SyntaxSymbol>> {
    let definition_query = DefinitionQuery::get(language)?;
    if let Err(error) = parser.set_language(&language.grammar()) {
        tracing::error!(language = language.name(), %error, "tree-sitter grammar does not load");
        return None;
    }
    // `parse` returns `None` only when cancelled through parse options, which we do not set.
    let tree = parser.parse(text, None)?;
    let definitions = definition_query.definitions(language, tree.root_node(), text);
    Some(assemble(language, definitions, text))
}
