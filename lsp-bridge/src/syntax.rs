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

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::Serialize;
use tokio_util::sync::CancellationToken;
use tree_sitter::{Node, Parser, Query, QueryCursor, StreamingIterator};

#[cfg(test)]
mod tests;

/// Files larger than this are not indexed: they are almost always generated or vendored, and a
/// single one could hold up a whole index build.
pub const MAX_FILE_SIZE: u64 = 1024 * 1024;

/// A language this module has a grammar for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    Rust,
    Python,
    TypeScript,
    /// TypeScript with JSX, which needs its own grammar.
    Tsx,
    /// JavaScript, JSX included (one grammar parses both).
    JavaScript,
    Go,
    /// C, headers included: a `.h` file is read as C even in a C++ project, which is good enough
    /// for the declarations an approximate answer needs.
    C,
}

impl Language {
    const ALL: [Language; 7] = [
        Language::Rust,
        Language::Python,
        Language::TypeScript,
        Language::Tsx,
        Language::JavaScript,
        Language::Go,
        Language::C,
    ];

    /// The language of a file, from its extension; `None` for languages without a grammar here.
    pub fn from_path(path: &Path) -> Option<Language> {
        let language = match path.extension()?.to_str()? {
            "rs" => Language::Rust,
            "py" | "pyi" | "pyw" => Language::Python,
            "ts" | "mts" | "cts" => Language::TypeScript,
            "tsx" => Language::Tsx,
            "js" | "mjs" | "cjs" | "jsx" => Language::JavaScript,
            "go" => Language::Go,
            "c" | "h" => Language::C,
            _ => return None,
        };
        Some(language)
    }

    /// A lowercase name for messages and logs.
    pub fn name(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::Python => "python",
            Language::TypeScript => "typescript",
            Language::Tsx => "tsx",
            Language::JavaScript => "javascript",
            Language::Go => "go",
            Language::C => "c",
        }
    }

    fn index(self) -> usize {
        Language::ALL
            .iter()
            .position(|&language| language == self)
            .unwrap_or(0)
    }

    fn grammar(self) -> tree_sitter::Language {
        match self {
            Language::Rust => tree_sitter_rust::LANGUAGE.into(),
            Language::Python => tree_sitter_python::LANGUAGE.into(),
            Language::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            Language::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
            Language::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
            Language::Go => tree_sitter_go::LANGUAGE.into(),
            Language::C => tree_sitter_c::LANGUAGE.into(),
        }
    }

    /// The pieces of this language's definition query, in order: bundled queries first.
    ///
    /// TypeScript's bundled query only adds to JavaScript's (the grammar extends JavaScript's),
    /// so both are used, as the tree-sitter CLI does.
    fn query_sources(self) -> &'static [&'static str] {
        const RUST: &str = include_str!("syntax/rust.scm");
        const ECMASCRIPT: &str = include_str!("syntax/ecmascript.scm");
        const JAVASCRIPT: &str = include_str!("syntax/javascript.scm");
        const TYPESCRIPT: &str = include_str!("syntax/typescript.scm");
        const GO: &str = include_str!("syntax/go.scm");
        const C: &str = include_str!("syntax/c.scm");
        match self {
            Language::Rust => &[tree_sitter_rust::TAGS_QUERY, RUST],
            Language::Python => &[tree_sitter_python::TAGS_QUERY],
            Language::TypeScript | Language::Tsx => &[
                tree_sitter_javascript::TAGS_QUERY,
                tree_sitter_typescript::TAGS_QUERY,
                ECMASCRIPT,
                TYPESCRIPT,
            ],
            Language::JavaScript => &[tree_sitter_javascript::TAGS_QUERY, ECMASCRIPT, JAVASCRIPT],
            Language::Go => &[tree_sitter_go::TAGS_QUERY, GO],
            Language::C => &[tree_sitter_c::TAGS_QUERY, C],
        }
    }
}

/// What a definition is, as far as its syntax tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SymbolKind {
    Function,
    /// A function inside a class, `impl`, trait or interface, or a Go function with a receiver.
    Method,
    Class,
    /// Rust structs and unions, Go struct types, C structs and unions.
    Struct,
    Enum,
    Interface,
    Trait,
    /// Rust `mod`, TypeScript `namespace`/`module`.
    Module,
    /// C `#define NAME value`, Python upper-case module assignments, Rust/Go/JS `const`.
    Constant,
    Variable,
    /// Type aliases and `typedef`s, and Go named types that are neither struct nor interface.
    Type,
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
    pub name: String,
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

/// A compiled definition query with its captures looked up once.
struct DefinitionQuery {
    query: Query,
    name_capture: u32,
    /// For each capture index, the kind of a `@definition.*` capture, `None` for other captures.
    definition_kinds: Vec<Option<SymbolKind>>,
}

/// A definition as found in the tree, before it becomes a [`SyntaxSymbol`].
struct Definition<'tree> {
    name: String,
    kind: SymbolKind,
    name_node: Node<'tree>,
    /// The node spanning the whole definition, whose ancestors decide nesting.
    range: Node<'tree>,
    /// The type a Go method's receiver names, which is not among its ancestors.
    owner: Option<String>,
}

impl DefinitionQuery {
    /// The query for `language`, compiled on first use: compiling the TypeScript one takes
    /// milliseconds, too much to repeat per file.
    fn get(language: Language) -> Option<&'static DefinitionQuery> {
        static QUERIES: [OnceLock<Option<DefinitionQuery>>; 7] = [const { OnceLock::new() }; 7];
        QUERIES[language.index()]
            .get_or_init(|| match DefinitionQuery::compile(language) {
                Ok(query) => Some(query),
                Err(error) => {
                    tracing::error!(language = language.name(), %error, "tree-sitter definition query does not compile");
                    None
                }
            })
            .as_ref()
    }

    fn compile(language: Language) -> Result<DefinitionQuery, tree_sitter::QueryError> {
        let source = language.query_sources().join("\n");
        let mut query = Query::new(&language.grammar(), &source)?;
        // The bundled queries also find references (calls, type uses); matching those on every
        // node would only cost time, so such patterns are switched off.
        for pattern in 0..query.pattern_count() {
            let text =
                &source[query.start_byte_for_pattern(pattern)..query.end_byte_for_pattern(pattern)];
            if !text.contains("@definition.") {
                query.disable_pattern(pattern);
            }
        }
        let definition_kinds = query
            .capture_names()
            .iter()
            .map(|name| {
                name.strip_prefix("definition.")
                    .map(SymbolKind::from_capture)
            })
            .collect();
        let name_capture = query.capture_index_for_name("name").unwrap_or(u32::MAX);
        Ok(DefinitionQuery {
            query,
            name_capture,
            definition_kinds,
        })
    }

    /// The definitions under `root`, in source order, one per name node.
    fn definitions<'tree>(
        &self,
        language: Language,
        root: Node<'tree>,
        text: &str,
    ) -> Vec<Definition<'tree>> {
        let mut cursor = QueryCursor::new();
        let mut matches = cursor.matches(&self.query, root, text.as_bytes());
        // Several patterns can match one definition (the Rust bundled query has a "method" and a
        // "function" pattern for a function in an `impl`): the name node identifies it, and the
        // innermost candidate node is the definition itself.
        let mut by_name_node: HashMap<usize, (Node<'tree>, Node<'tree>, SymbolKind)> =
            HashMap::new();
        while let Some(found) = matches.next() {
            let mut name = None;
            let mut definition = None;
            for capture in found.captures() {
                if capture.index == self.name_capture {
                    name = Some(capture.node);
                } else if let Some(Some(kind)) = self.definition_kinds.get(capture.index as usize) {
                    definition = Some((capture.node, *kind));
                }
            }
            let (Some(name), Some((node, kind))) = (name, definition) else {
                continue;
            };
            let span = |node: Node<'_>| node.end_byte() - node.start_byte();
            match by_name_node.get(&name.id()) {
                Some((existing, _, _)) if span(*existing) <= span(node) => {}
                _ => {
                    by_name_node.insert(name.id(), (node, name, kind));
                }
            }
        }
        let mut definitions: Vec<Definition<'tree>> = by_name_node
            .into_values()
            .filter_map(|(node, name_node, hint)| {
                if name_node.is_missing() {
                    return None;
                }
                let name = text.get(name_node.byte_range())?.to_owned();
                if name.is_empty() {
                    return None;
                }
                let (kind, range, owner) = classify(language, node, hint, text)?;
                Some(Definition {
                    name,
                    kind,
                    name_node,
                    range,
                    owner,
                })
            })
            .collect();
        definitions.sort_by_key(|definition| {
            (
                definition.name_node.start_byte(),
                definition.range.start_byte(),
            )
        });
        definitions
    }
}

/// The kind, the node spanning the whole definition and (Go methods) the owning type of the
/// definition `node`, or `None` when a query match is not a definition after all.
fn classify<'tree>(
    language: Language,
    node: Node<'tree>,
    hint: SymbolKind,
    text: &str,
) -> Option<(SymbolKind, Node<'tree>, Option<String>)> {
    let kind = match (language, node.kind()) {
        (Language::Rust, "struct_item" | "union_item") => SymbolKind::Struct,
        (Language::Rust, "enum_item") => SymbolKind::Enum,
        (Language::Rust, "type_item" | "associated_type") => SymbolKind::Type,
        (Language::Rust, "trait_item") => SymbolKind::Trait,
        (Language::Rust, "mod_item") => SymbolKind::Module,
        (Language::Rust, "macro_definition") => SymbolKind::Macro,
        (Language::Rust, "const_item") => SymbolKind::Constant,
        (Language::Rust, "static_item") => SymbolKind::Variable,
        (Language::Rust, "field_declaration") => SymbolKind::Field,
        (Language::Rust, "function_item" | "function_signature_item") => {
            // The bundled query calls every function in a `declaration_list` a method, but
            // `mod` and `extern` blocks have those too.
            let in_impl_or_trait = node
                .parent()
                .filter(|parent| parent.kind() == "declaration_list")
                .and_then(|list| list.parent())
                .is_some_and(|owner| matches!(owner.kind(), "impl_item" | "trait_item"));
            if in_impl_or_trait {
                SymbolKind::Method
            } else {
                SymbolKind::Function
            }
        }

        (Language::Python, "class_definition") => SymbolKind::Class,
        (Language::Python, "function_definition") => {
            let mut ancestor = node.parent();
            if ancestor.is_some_and(|parent| parent.kind() == "decorated_definition") {
                ancestor = ancestor.and_then(|decorated| decorated.parent());
            }
            let in_class = ancestor
                .filter(|block| block.kind() == "block")
                .and_then(|block| block.parent())
                .is_some_and(|class| class.kind() == "class_definition");
            if in_class {
                SymbolKind::Method
            } else {
                SymbolKind::Function
            }
        }
        (Language::Python, "assignment") => {
            // Python has no constants; upper-case module names are the convention for them.
            let name = node
                .child_by_field_name("left")
                .and_then(|left| text.get(left.byte_range()))?;
            if name.chars().any(char::is_alphabetic) && !name.chars().any(char::is_lowercase) {
                SymbolKind::Constant
            } else {
                SymbolKind::Variable
            }
        }

        (Language::TypeScript | Language::Tsx | Language::JavaScript, kind) => match kind {
            "class_declaration" | "class" | "abstract_class_declaration" => SymbolKind::Class,
            "method_definition" | "method_signature" | "abstract_method_signature" => {
                SymbolKind::Method
            }
            "function_declaration"
            | "generator_function_declaration"
            | "function_expression"
            | "generator_function"
            | "function_signature"
            | "assignment_expression"
            | "pair" => SymbolKind::Function,
            "variable_declarator" => {
                if node
                    .child_by_field_name("value")
                    .is_some_and(is_function_value)
                {
                    SymbolKind::Function
                } else if node
                    .parent()
                    .filter(|declaration| declaration.kind() == "lexical_declaration")
                    .and_then(|declaration| declaration.child_by_field_name("kind"))
                    .is_some_and(|keyword| keyword.kind() == "const")
                {
                    SymbolKind::Constant
                } else {
                    SymbolKind::Variable
                }
            }
            "field_definition" | "public_field_definition" | "property_signature" => {
                // `onClick = () => {...}` in a class is a method in all but syntax.
                if node
                    .child_by_field_name("value")
                    .is_some_and(is_function_value)
                {
                    SymbolKind::Method
                } else {
                    SymbolKind::Field
                }
            }
            "interface_declaration" => SymbolKind::Interface,
            "module" | "internal_module" => SymbolKind::Module,
            "enum_declaration" => SymbolKind::Enum,
            "type_alias_declaration" => SymbolKind::Type,
            _ => hint,
        },

        (Language::Go, "function_declaration") => SymbolKind::Function,
        (Language::Go, "method_declaration") => {
            let owner = node
                .child_by_field_name("receiver")
                .and_then(|receiver| type_name(receiver, text));
            return Some((SymbolKind::Method, node, owner));
        }
        (Language::Go, "method_elem") => SymbolKind::Method,
        (Language::Go, "type_spec") => match node.child_by_field_name("type").map(|ty| ty.kind()) {
            Some("struct_type") => SymbolKind::Struct,
            Some("interface_type") => SymbolKind::Interface,
            _ => SymbolKind::Type,
        },
        (Language::Go, "type_alias") => SymbolKind::Type,
        (Language::Go, "const_spec") => SymbolKind::Constant,
        (Language::Go, "var_spec") => SymbolKind::Variable,
        (Language::Go, "field_declaration") => SymbolKind::Field,

        // Without a body, `struct s`/`enum e` is a use of the type, not its definition.
        (Language::C, "struct_specifier" | "union_specifier") => {
            has_body(node, SymbolKind::Struct)?
        }
        (Language::C, "enum_specifier") => has_body(node, SymbolKind::Enum)?,
        (Language::C, "declaration") if hint == SymbolKind::Class => {
            let union = node.child_by_field_name("type")?;
            has_body(union, SymbolKind::Struct)?
        }
        (Language::C, "declaration") => SymbolKind::Variable,
        (Language::C, "type_definition") => SymbolKind::Type,
        (Language::C, "preproc_def") => SymbolKind::Constant,
        (Language::C, "preproc_function_def") => SymbolKind::Macro,
        (Language::C, "field_declaration") => SymbolKind::Field,
        (Language::C, "function_declarator") => {
            // The query matches the declarator; the definition is the function definition (or
            // prototype) around it. A declarator inside a parameter list declares a parameter.
            let mut ancestor = node.parent();
            while let Some(current) = ancestor {
                match current.kind() {
                    "function_definition" | "declaration" => {
                        return Some((SymbolKind::Function, current, None));
                    }
                    "pointer_declarator" | "parenthesized_declarator" | "attributed_declarator" => {
                    }
                    _ => return None,
                }
                ancestor = current.parent();
            }
            return None;
        }

        _ => hint,
    };
    Some((kind, node, None))
}

fn is_function_value(value: Node<'_>) -> bool {
    matches!(
        value.kind(),
        "arrow_function" | "function_expression" | "function" | "generator_function"
    )
}

fn has_body(node: Node<'_>, kind: SymbolKind) -> Option<SymbolKind> {
    node.child_by_field_name("body").map(|_| kind)
}

/// The first type name in `node` (a Rust `impl` type, a Go receiver): `Foo` in `Foo<T>`,
/// `&'a mut Foo`, `*Foo` or `crate::a::Foo`.
fn type_name(node: Node<'_>, text: &str) -> Option<String> {
    if node.kind() == "type_identifier" {
        return text.get(node.byte_range()).map(str::to_owned);
    }
    let mut cursor = node.walk();
    // `scoped_type_identifier` puts the path first: the name is its `name` field.
    if node.kind() == "scoped_type_identifier" {
        return node
            .child_by_field_name("name")
            .and_then(|name| type_name(name, text));
    }
    let children: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
    children
        .into_iter()
        .find_map(|child| type_name(child, text))
}

/// Turns definitions into a tree: each one goes under its nearest enclosing definition, except
/// Rust `impl` members and Go methods, which go under the type they belong to when that type is
/// defined at the same level of the same file.
fn assemble(language: Language, definitions: Vec<Definition<'_>>, text: &str) -> Vec<SyntaxSymbol> {
    let count = definitions.len();
    let by_range: HashMap<usize, usize> = definitions
        .iter()
        .enumerate()
        .map(|(index, definition)| (definition.range.id(), index))
        .collect();

    let mut scopes: Vec<Option<usize>> = Vec::with_capacity(count);
    let mut owners: Vec<Option<String>> = Vec::with_capacity(count);
    for (index, definition) in definitions.iter().enumerate() {
        let mut owner = definition.owner.clone();
        let mut scope = None;
        let mut ancestor = definition.range.parent();
        while let Some(node) = ancestor {
            if let Some(&enclosing) = by_range.get(&node.id())
                && enclosing != index
            {
                scope = Some(enclosing);
                break;
            }
            if language == Language::Rust && owner.is_none() && node.kind() == "impl_item" {
                owner = node
                    .child_by_field_name("type")
                    .and_then(|ty| type_name(ty, text));
            }
            ancestor = node.parent();
        }
        scopes.push(scope);
        owners.push(owner);
    }

    // Only definitions without an owner can take members, so that attaching never forms a cycle.
    let mut types: HashMap<(Option<usize>, &str), usize> = HashMap::new();
    for (index, definition) in definitions.iter().enumerate() {
        if definition.kind.is_type() && owners[index].is_none() {
            types
                .entry((scopes[index], definition.name.as_str()))
                .or_insert(index);
        }
    }

    let mut children: Vec<Vec<usize>> = vec![Vec::new(); count];
    let mut roots = Vec::new();
    let mut containers: Vec<Option<String>> = Vec::with_capacity(count);
    for index in 0..count {
        let parent = match &owners[index] {
            Some(owner) => types
                .get(&(scopes[index], owner.as_str()))
                .copied()
                .or(scopes[index]),
            None => scopes[index],
        };
        containers.push(
            owners[index]
                .clone()
                .or_else(|| scopes[index].map(|scope| definitions[scope].name.clone())),
        );
        match parent {
            Some(parent) => children[parent].push(index),
            None => roots.push(index),
        }
    }

    fn build(
        index: usize,
        definitions: &[Definition<'_>],
        children: &[Vec<usize>],
        containers: &mut [Option<String>],
        text: &str,
    ) -> SyntaxSymbol {
        let definition = &definitions[index];
        let start = definition.name_node.start_position();
        let end = definition.range.end_position();
        // A node that ends with its line's newline ends at column 0 of the next line.
        let end_row = if end.column == 0 && end.row > start.row {
            end.row - 1
        } else {
            end.row
        };
        SyntaxSymbol {
            name: definition.name.clone(),
            kind: definition.kind,
            line: start.row as u32 + 1,
            column: char_column(text, definition.name_node.start_byte(), start.column),
            end_line: end_row as u32 + 1,
            container: containers[index].take(),
            children: children[index]
                .iter()
                .map(|&child| build(child, definitions, children, containers, text))
                .collect(),
        }
    }
    roots
        .into_iter()
        .map(|root| build(root, &definitions, &children, &mut containers, text))
        .collect()
}

/// The 1-based character column of byte offset `byte`, which is `byte_column` bytes into its line.
fn char_column(text: &str, byte: usize, byte_column: usize) -> u32 {
    let characters = text
        .get(byte - byte_column..byte)
        .map_or(byte_column, |prefix| prefix.chars().count());
    characters as u32 + 1
}

/// Every definition in a workspace, flat, for workspace symbols and definition-by-name where no
/// language server answers. Approximate: see the module docs.
///
/// Paths are kept relative to the workspace root. Building parses every file, so it belongs on a
/// blocking thread; afterwards the editor's changes are applied file by file.
#[derive(Clone, Debug, Default)]
pub struct SymbolIndex {
    root: PathBuf,
    files: BTreeMap<PathBuf, Vec<IndexedSymbol>>,
}

#[derive(Clone, Debug)]
struct IndexedSymbol {
    symbol: SyntaxSymbol,
    /// The lowercase name, computed once for case-insensitive matching.
    folded_name: String,
}

/// How well a name matches a workspace-symbol query: lower is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum MatchQuality {
    Exact,
    Prefix,
    Substring,
}

impl SymbolIndex {
    /// Parses `files` (absolute, or relative to `root`) that have a grammar here and are at most
    /// [`MAX_FILE_SIZE`] bytes; unreadable files are skipped. The work is spread over the
    /// machine's cores.
    ///
    /// `cancel` is checked between files: a cancelled build returns the files parsed so far,
    /// which is still a correct (if partial) index.
    pub fn build(
        root: &Path,
        files: impl IntoIterator<Item = PathBuf>,
        cancel: &CancellationToken,
    ) -> SymbolIndex {
        let files: Vec<PathBuf> = files
            .into_iter()
            .filter(|path| Language::from_path(path).is_some())
            .collect();
        let next = AtomicUsize::new(0);
        let n_threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(files.len())
            .max(1);
        let parsed: Vec<(PathBuf, Vec<IndexedSymbol>)> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..n_threads)
                .map(|_| {
                    scope.spawn(|| {
                        let mut parser = Parser::new();
                        let mut parsed = Vec::new();
                        while !cancel.is_cancelled() {
                            let Some(path) = files.get(next.fetch_add(1, Ordering::Relaxed)) else {
                                break;
                            };
                            if let Some(entry) = index_file(&mut parser, root, path) {
                                parsed.push(entry);
                            }
                        }
                        parsed
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|worker| {
                    worker
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect()
        });
        SymbolIndex {
            root: root.to_path_buf(),
            files: parsed.into_iter().collect(),
        }
    }

    /// Re-indexes one file from its current text (an editor buffer or a fresh write). A file
    /// without a grammar here or over [`MAX_FILE_SIZE`] is dropped from the index instead.
    pub fn update_file(&mut self, root: &Path, path: &Path, text: &str) {
        let key = relative_to(root, path);
        let symbols = Language::from_path(path)
            .filter(|_| text.len() as u64 <= MAX_FILE_SIZE)
            .and_then(|language| symbols(&mut Parser::new(), language, text));
        match symbols {
            Some(symbols) => {
                self.files.insert(key, flatten(symbols));
            }
            None => {
                self.files.remove(&key);
            }
        }
    }

    /// Forgets a deleted file; `path` is absolute or relative to the root the index was built on.
    pub fn remove_file(&mut self, path: &Path) {
        self.files.remove(&relative_to(&self.root, path));
    }

    /// The number of files indexed.
    pub fn file_count(&self) -> usize {
        self.files.len()
    }

    /// The number of definitions indexed.
    pub fn len(&self) -> usize {
        self.files.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.files.values().all(Vec::is_empty)
    }

    /// Definitions whose name contains `query`, ignoring case: exact names first, then names
    /// starting with it, then the rest, each group by path and line. At most `limit`.
    /// An empty query matches everything.
    pub fn workspace_symbols(&self, query: &str, limit: usize) -> Vec<(PathBuf, SyntaxSymbol)> {
        let query = query.trim().to_lowercase();
        let mut found: Vec<(MatchQuality, &Path, &SyntaxSymbol)> = Vec::new();
        for (path, symbols) in &self.files {
            for indexed in symbols {
                let quality = if indexed.folded_name == query {
                    MatchQuality::Exact
                } else if indexed.folded_name.starts_with(&query) {
                    MatchQuality::Prefix
                } else if indexed.folded_name.contains(&query) {
                    MatchQuality::Substring
                } else {
                    continue;
                };
                found.push((quality, path, &indexed.symbol));
            }
        }
        // Stable and total, so that a paginated answer means the same thing on every call.
        found.sort_by(|(a_quality, a_path, a), (b_quality, b_path, b)| {
            (a_quality, a_path, a.line, a.column, &a.name)
                .cmp(&(b_quality, b_path, b.line, b.column, &b.name))
        });
        found
            .into_iter()
            .take(limit)
            .map(|(_, path, symbol)| (path.to_path_buf(), symbol.clone()))
            .collect()
    }

    /// Every definition named exactly `name` (case-sensitive, as code is), by path and line.
    ///
    /// A qualified name (`Point::new`, `Circle.area`) keeps only definitions whose container is
    /// the qualifier's last segment, which is what lets the model tell two `new`s apart; when
    /// none has that container, all definitions of the bare name are returned.
    pub fn definitions(&self, name: &str) -> Vec<(PathBuf, SyntaxSymbol)> {
        let name = name.trim();
        let (container, name) = match name.rsplit_once("::").or_else(|| name.rsplit_once('.')) {
            Some((qualifier, last)) if !last.is_empty() => {
                let container = qualifier
                    .rsplit(['.', ':'])
                    .next()
                    .filter(|segment| !segment.is_empty());
                (container, last)
            }
            _ => (None, name),
        };
        let qualified = self.definitions_in(name, container);
        if qualified.is_empty() && container.is_some() {
            // The qualifier may be a module or package (`utils.parse`, `crate::Parser`), which
            // is not a container here: the bare name is still the best guess.
            return self.definitions_in(name, None);
        }
        qualified
    }

    fn definitions_in(&self, name: &str, container: Option<&str>) -> Vec<(PathBuf, SyntaxSymbol)> {
        // `files` is ordered by path and each file's symbols by line, so no sort is needed.
        self.files
            .iter()
            .flat_map(|(path, symbols)| symbols.iter().map(move |indexed| (path, &indexed.symbol)))
            .filter(|(_, symbol)| {
                symbol.name == name
                    && container
                        .is_none_or(|container| symbol.container.as_deref() == Some(container))
            })
            .map(|(path, symbol)| (path.clone(), symbol.clone()))
            .collect()
    }
}

/// Reads and parses one file for [`SymbolIndex::build`]; `None` to leave it out.
fn index_file(
    parser: &mut Parser,
    root: &Path,
    path: &Path,
) -> Option<(PathBuf, Vec<IndexedSymbol>)> {
    let language = Language::from_path(path)?;
    let absolute = root.join(path);
    let size = std::fs::metadata(&absolute).ok()?.len();
    if size > MAX_FILE_SIZE {
        tracing::debug!(path = %absolute.display(), size, "not indexing a file over 1 MiB");
        return None;
    }
    let bytes = match std::fs::read(&absolute) {
        Ok(bytes) => bytes,
        Err(error) => {
            tracing::debug!(path = %absolute.display(), %error, "not indexing an unreadable file");
            return None;
        }
    };
    // A stray Latin-1 byte in a comment should not cost the file its symbols.
    let text = String::from_utf8_lossy(&bytes);
    let symbols = symbols(parser, language, &text)?;
    Some((relative_to(root, path), flatten(symbols)))
}

fn relative_to(root: &Path, path: &Path) -> PathBuf {
    path.strip_prefix(root).unwrap_or(path).to_path_buf()
}

/// The tree's symbols without their children, in source order.
fn flatten(symbols: Vec<SyntaxSymbol>) -> Vec<IndexedSymbol> {
    fn walk(symbols: Vec<SyntaxSymbol>, out: &mut Vec<IndexedSymbol>) {
        for mut symbol in symbols {
            let children = std::mem::take(&mut symbol.children);
            out.push(IndexedSymbol {
                folded_name: symbol.name.to_lowercase(),
                symbol,
            });
            walk(children, out);
        }
    }
    let mut out = Vec::new();
    walk(symbols, &mut out);
    // Members attached to a type defined after their `impl` would otherwise come before it.
    out.sort_by_key(|indexed| (indexed.symbol.line, indexed.symbol.column));
    out
}
