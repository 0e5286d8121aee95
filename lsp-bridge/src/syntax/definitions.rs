//! Finding definitions in a syntax tree: the compiled per-language query, and the rules that
//! turn each match into a [`SymbolKind`] and the node the definition spans.
//!
//! This is the language-specific half of the fallback (node kinds differ per grammar); nesting
//! the definitions into a tree is language-neutral and lives in `outline`.

use std::collections::HashMap;
use std::sync::OnceLock;

use tree_sitter::{Node, Query, QueryCursor, StreamingIterator};

use super::{Language, SymbolKind};

/// A compiled definition query with its captures looked up once.
pub(super) struct DefinitionQuery {
    query: Query,
    name_capture: u32,
    /// For each capture index, the kind of a `@definition.*` capture, `None` for other captures.
    definition_kinds: Vec<Option<SymbolKind>>,
}

/// A definition as found in the tree, before it becomes a [`SyntaxSymbol`](super::SyntaxSymbol).
pub(super) struct Definition<'tree> {
    pub(super) name: String,
    pub(super) kind: SymbolKind,
    pub(super) name_node: Node<'tree>,
    /// The node spanning the whole definition, whose ancestors decide nesting.
    pub(super) range: Node<'tree>,
    /// The type a Go method's receiver names, which is not among its ancestors.
    pub(super) owner: Option<String>,
}

impl DefinitionQuery {
    /// The query for `language`, compiled on first use: compiling the TypeScript one takes
    /// milliseconds, too much to repeat per file.
    pub(super) fn get(language: Language) -> Option<&'static DefinitionQuery> {
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
    pub(super) fn definitions<'tree>(
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
pub(super) fn type_name(node: Node<'_>, text: &str) -> Option<String> {
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
