//! Nesting the definitions of one file into the symbol tree a document outline shows.
//!
//! Separate from finding definitions because the rules here (enclosing scopes, Rust `impl`
//! members and Go methods under their type) work on any language's [`Definition`]s.

use std::collections::HashMap;

use super::definitions::{Definition, type_name};
use super::{Language, SyntaxSymbol};

/// Turns definitions into a tree: each one goes under its nearest enclosing definition, except
/// Rust `impl` members and Go methods, which go under the type they belong to when that type is
/// defined at the same level of the same file.
pub(super) fn assemble(
    language: Language,
    definitions: Vec<Definition<'_>>,
    text: &str,
) -> Vec<SyntaxSymbol> {
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
