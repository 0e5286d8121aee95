//! The languages the tree-sitter fallback knows: which files they cover, their grammars and the
//! definition queries they are read with.
//!
//! Kept apart from the symbol extraction so that adding a language is an edit here (and a
//! `*.scm` query beside this file), not a search through the classification code.

use std::path::Path;

use serde::Serialize;

/// A language this module has a grammar for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    /// Rust (`.rs`).
    Rust,
    /// Python (`.py`, `.pyi`, `.pyw`).
    Python,
    /// TypeScript without JSX (`.ts`, `.mts`, `.cts`).
    TypeScript,
    /// TypeScript with JSX, which needs its own grammar.
    Tsx,
    /// JavaScript, JSX included (one grammar parses both).
    JavaScript,
    /// Go (`.go`).
    Go,
    /// C, headers included: a `.h` file is read as C even in a C++ project, which is good enough
    /// for the declarations an approximate answer needs.
    C,
}

impl Language {
    pub(super) const ALL: [Language; 7] = [
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

    pub(super) fn index(self) -> usize {
        Language::ALL
            .iter()
            .position(|&language| language == self)
            .unwrap_or(0)
    }

    pub(super) fn grammar(self) -> tree_sitter::Language {
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
    pub(super) fn query_sources(self) -> &'static [&'static str] {
        const RUST: &str = include_str!("rust.scm");
        const ECMASCRIPT: &str = include_str!("ecmascript.scm");
        const JAVASCRIPT: &str = include_str!("javascript.scm");
        const TYPESCRIPT: &str = include_str!("typescript.scm");
        const GO: &str = include_str!("go.scm");
        const C: &str = include_str!("c.scm");
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
