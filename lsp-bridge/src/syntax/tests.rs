//! Tests for the tree-sitter fallback: real snippets per language, and an index over a tempdir.

use std::path::PathBuf;

use tokio_util::sync::CancellationToken;

use super::*;

/// One line per symbol, indented by depth: `kind name line:column-end_line in container`.
fn render(symbols: &[SyntaxSymbol]) -> String {
    fn walk(symbols: &[SyntaxSymbol], depth: usize, out: &mut String) {
        for symbol in symbols {
            let container = symbol
                .container
                .as_deref()
                .map(|c| format!(" in {c}"))
                .unwrap_or_default();
            out.push_str(&format!(
                "{}{} {} {}:{}-{}{}\n",
                "  ".repeat(depth),
                symbol.kind.as_str(),
                symbol.name,
                symbol.line,
                symbol.column,
                symbol.end_line,
                container
            ));
            walk(&symbol.children, depth + 1, out);
        }
    }
    let mut out = String::new();
    walk(symbols, 0, &mut out);
    out
}

/// Checks the symbol tree of `source` (named `path`, which picks the language) against
/// `expected`, written indented like the test itself.
#[track_caller]
fn check(path: &str, source: &str, expected: &str) {
    let symbols = document_symbols(Path::new(path), source).expect("a supported language");
    let indent = expected
        .lines()
        .find(|line| !line.trim().is_empty())
        .map_or(0, |line| line.len() - line.trim_start().len());
    let expected: String = expected
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| format!("{}\n", &line[indent.min(line.len())..]))
        .collect();
    assert_eq!(render(&symbols), expected, "symbols of {path}");
}

#[test]
fn every_language_query_compiles() {
    for language in Language::ALL {
        assert!(DefinitionQuery::get(language).is_some(), "{language:?}");
    }
}

#[test]
fn language_from_path() {
    for (path, language) in [
        ("src/main.rs", Some(Language::Rust)),
        ("a/b.py", Some(Language::Python)),
        ("stubs.pyi", Some(Language::Python)),
        ("app.ts", Some(Language::TypeScript)),
        ("types.d.ts", Some(Language::TypeScript)),
        ("view.tsx", Some(Language::Tsx)),
        ("index.mjs", Some(Language::JavaScript)),
        ("view.jsx", Some(Language::JavaScript)),
        ("main.go", Some(Language::Go)),
        ("lib.c", Some(Language::C)),
        ("lib.h", Some(Language::C)),
        ("notes.txt", None),
        ("Makefile", None),
        ("README.md", None),
    ] {
        assert_eq!(Language::from_path(Path::new(path)), language, "{path}");
    }
}

#[test]
fn unsupported_language_has_no_symbols() {
    assert_eq!(
        document_symbols(Path::new("notes.txt"), "fn main() {}"),
        None
    );
    assert_eq!(
        document_symbols(Path::new("Makefile"), "all:\n\tcc main.c\n"),
        None
    );
}

#[test]
fn rust() {
    check(
        "lib.rs",
        r#"//! Doc.
use std::fmt;

pub const LIMIT: usize = 10;
static mut COUNTER: u32 = 0;

pub struct Point {
    pub x: f64,
    y: f64,
}

impl Point {
    pub fn new(x: f64, y: f64) -> Self { Point { x, y } }
    fn café(&self) -> f64 { self.x }
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.x)
    }
}

pub trait Shape {
    type Unit;
    fn area(&self) -> f64;
    fn name(&self) -> &str { "shape" }
}

enum Color { Red, Green }

type Meters = f64;

mod geometry {
    pub fn distance() {}
}

macro_rules! square { ($x:expr) => { $x * $x }; }

fn größe() -> u8 { 1 } fn über() {}

impl<T> Shape for Vec<T> {
    type Unit = T;
    fn area(&self) -> f64 { 0.0 }
}
"#,
        // `über` is at byte 29 of its line but character 27; the `impl` for `Vec`, which this
        // file does not define, keeps its members at the top level.
        "
        constant LIMIT 4:11-4
        variable COUNTER 5:12-5
        struct Point 7:12-10
          field x 8:9-8 in Point
          field y 9:5-9 in Point
          method new 13:12-13 in Point
          method café 14:8-14 in Point
          method fmt 18:8-20 in Point
        trait Shape 23:11-27
          type Unit 24:10-24 in Shape
          method area 25:8-25 in Shape
          method name 26:8-26 in Shape
        enum Color 29:6-29
        type Meters 31:6-31
        module geometry 33:5-35
          function distance 34:12-34 in geometry
        macro square 37:14-37
        function größe 39:4-39
        function über 39:27-39
        type Unit 42:10-42 in Vec
        method area 43:8-43 in Vec
        ",
    );
}

#[test]
fn rust_impl_before_its_type() {
    check(
        "lib.rs",
        "impl Later {\n    fn first(&self) {}\n}\n\nstruct Later;\n",
        "
        struct Later 5:8-5
          method first 2:8-2 in Later
        ",
    );
}

#[test]
fn python() {
    check(
        "shapes.py",
        r#"import os

MAX_SIZE = 10
default_name = "x"

class Größe:
    """Doc."""

    def __init__(self, wert):
        self.wert = wert

    @property
    def größe(self):
        return self.wert

def helper():
    def inner():
        pass
    return inner

x = 1; def_ = 2; ÄÖÜ = 3
"#,
        "
        constant MAX_SIZE 3:1-3
        variable default_name 4:1-4
        class Größe 6:7-14
          method __init__ 9:9-10 in Größe
          method größe 13:9-14 in Größe
        function helper 16:5-19
          function inner 17:9-18 in helper
        variable x 21:1-21
        variable def_ 21:8-21
        constant ÄÖÜ 21:18-21
        ",
    );
}

#[test]
fn typescript() {
    check(
        "shapes.ts",
        r#"export interface Shape {
  area(): number;
  name: string;
}

export type Id = string | number;

export enum Color { Red, Green }

export class Circle implements Shape {
  name = "circle";
  constructor(private radius: number) {}
  area(): number { return Math.PI * this.radius ** 2; }
  onClick = () => { this.radius++; };
}

export const TAU = 6.28;
export const double = (x: number) => x * 2;
let counter = 0;

namespace Geometry {
  export function distance(): number { return 0; }
}

declare function external(x: string): void;

abstract class Base { abstract run(): void; }

function main(options: { verbose: boolean }) {}
"#,
        // The bundled JavaScript query leaves constructors out; an object type in a parameter
        // list defines nothing.
        "
        interface Shape 1:18-4
          method area 2:3-2 in Shape
          field name 3:3-3 in Shape
        type Id 6:13-6
        enum Color 8:13-8
        class Circle 10:14-15
          field name 11:3-11 in Circle
          method area 13:3-13 in Circle
          method onClick 14:3-14 in Circle
        constant TAU 17:14-17
        function double 18:14-18
        variable counter 19:5-19
        module Geometry 21:11-23
          function distance 22:19-22 in Geometry
        function external 25:18-25
        class Base 27:16-27
          method run 27:32-27 in Base
        function main 29:10-29
        ",
    );
}

#[test]
fn tsx() {
    check(
        "App.tsx",
        r#"import React from "react";

export function Button(props: { label: string }) {
  return <button>{props.label}</button>;
}

export const App = () => <Button label="héllo" />; const Ünter = () => <div />;

class Widget extends React.Component {
  render() { return <span />; }
}
"#,
        // `Ünter` comes after an `é` on its line: character 58, byte 59.
        "
        function Button 3:17-5
        function App 7:14-7
        function Ünter 7:58-7
        class Widget 9:7-11
          method render 10:3-10 in Widget
        ",
    );
}

#[test]
fn javascript() {
    check(
        "counter.js",
        r#"class Counter {
  count = 0;
  increment() { this.count++; }
}

function makeCounter() { return new Counter(); }

const handler = function () {};
let mutable = 1;
var legacy = 2;
module.exports.helper = () => 1;

const api = {
  get: () => 1,
};

function* gen() { yield 1; }
"#,
        "
        class Counter 1:7-4
          field count 2:3-2 in Counter
          method increment 3:3-3 in Counter
        function makeCounter 6:10-6
        function handler 8:7-8
        variable mutable 9:5-9
        variable legacy 10:5-10
        function helper 11:16-11
        constant api 13:7-15
          function get 14:3-14 in api
        function gen 17:11-17
        ",
    );
}

#[test]
fn go() {
    check(
        "shapes.go",
        "package shapes

import \"math\"

const Pi = 3.14

const (
\tA = iota
\tB
)

var registry = map[string]Shape{}

type Shape interface {
\tArea() float64
}

type Circle struct {
\tRadius float64
\tx, y   int
}

func (c *Circle) Area() float64 {
\treturn math.Pi * c.Radius * c.Radius
}

type Celsius float64

func (t Celsius) String() string { return \"\" }

type Alias = Circle

func NewCircle(r float64) *Circle { return &Circle{Radius: r} }

func (s *Stack[T]) Push(v T) {}

func größe() {}
",
        // Methods go under their receiver's type; a tab is one character. `Stack` is defined
        // elsewhere, so `Push` stays at the top level.
        "
        constant Pi 5:7-5
        constant A 8:2-8
        constant B 9:2-9
        variable registry 12:5-12
        interface Shape 14:6-16
          method Area 15:2-15 in Shape
        struct Circle 18:6-21
          field Radius 19:2-19 in Circle
          field x 20:2-20 in Circle
          field y 20:5-20 in Circle
          method Area 23:18-25 in Circle
        type Celsius 27:6-27
          method String 29:18-29 in Celsius
        type Alias 31:6-31
        function NewCircle 33:6-33
        method Push 35:20-35 in Stack
        function größe 37:6-37
        ",
    );
}

#[test]
fn c() {
    check(
        "shapes.c",
        r#"#include <stdio.h>
#define MAX 10
#define SQUARE(x) ((x) * (x))

struct point {
    int x;
    int *y;
    char name[16];
};

typedef struct { int w; } size2;

typedef struct node { struct node *next; } node_t;

union value { int i; float f; };

enum color { RED, GREEN };

int counter = 0;
static const char *names[] = {"a"};
int a, b;

static int add(int a, int b) { return a + b; }

int prototype(int);

int *pointer_returning(void) { return 0; }

void takes_callback(int callback(int)) {}

int main(void) {
    enum color c = RED;
    struct point p;
    return add(1, 2);
}
"#,
        // Uses of `enum color` and `struct point` in `main` are not definitions, and neither is
        // the parameter `callback`.
        "
        constant MAX 2:9-2
        macro SQUARE 3:9-3
        struct point 5:8-9
          field x 6:9-6 in point
          field y 7:10-7 in point
          field name 8:10-8 in point
        type size2 11:27-11
          field w 11:22-11 in size2
        type node_t 13:44-13
          struct node 13:16-13 in node_t
            field next 13:36-13 in node
        struct value 15:7-15
          field i 15:19-15 in value
          field f 15:28-15 in value
        enum color 17:6-17
        variable counter 19:5-19
        variable names 20:20-20
        variable a 21:5-21
        variable b 21:8-21
        function add 23:12-23
        function prototype 25:5-25
        function pointer_returning 27:6-27
        function takes_callback 29:6-29
        function main 31:5-35
        ",
    );
}

/// The names in a symbol tree, flattened, for checks that should not depend on how tree-sitter
/// recovers the broken part.
fn names(symbols: &[SyntaxSymbol]) -> Vec<String> {
    symbols
        .iter()
        .flat_map(|symbol| std::iter::once(symbol.name.clone()).chain(names(&symbol.children)))
        .collect()
}

#[test]
fn syntax_errors_keep_what_tree_sitter_recovers() {
    let python = "def good_one():\n    return 1\n\ndef broken(:\n    pass\n\nclass StillHere:\n    def method(self):\n        pass\n";
    let symbols = document_symbols(Path::new("broken.py"), python).unwrap();
    let found = names(&symbols);
    for name in ["good_one", "StillHere", "method"] {
        assert!(
            found.iter().any(|found| found == name),
            "{name} in {found:?}"
        );
    }
    let still_here = symbols
        .iter()
        .find(|symbol| symbol.name == "StillHere")
        .unwrap();
    assert_eq!((still_here.line, still_here.column), (7, 7));

    let rust = "fn before() {}\n\nfn broken( {\n\nstruct After { field: u8 }\n\nfn after() {}\n";
    let found = names(&document_symbols(Path::new("broken.rs"), rust).unwrap());
    for name in ["before", "after"] {
        assert!(
            found.iter().any(|found| found == name),
            "{name} in {found:?}"
        );
    }

    let typescript = "export class Ok { run() {} }\nconst = ;\nfunction later() {}\n";
    let found = names(&document_symbols(Path::new("broken.ts"), typescript).unwrap());
    for name in ["Ok", "run", "later"] {
        assert!(
            found.iter().any(|found| found == name),
            "{name} in {found:?}"
        );
    }
}

/// A small workspace: `parse` is defined in two files, and names that start with or contain it
/// in others.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        (
            "src/lib.rs",
            "pub struct Parser;\n\nimpl Parser {\n    pub fn parse(&self) {}\n}\n\nfn parse_all() {}\n",
        ),
        (
            "tools/parse.py",
            "class ParserError(Exception):\n    pass\n\ndef parse(text):\n    return text\n",
        ),
        (
            "web/app.ts",
            "export function reparse(): void {}\nexport class View { parse() {} }\n",
        ),
        ("cmd/main.go", "package main\n\nfunc PARSE() {}\n"),
        ("notes.txt", "parse everything\n"),
    ];
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    // Over the size limit: never indexed, although it defines `parse_big`.
    let big = format!(
        "def parse_big():\n    pass\n{}",
        "# padding\n".repeat(110_000)
    );
    std::fs::write(dir.path().join("big.py"), big).unwrap();
    dir
}

fn all_files(root: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out)
            } else {
                out.push(path)
            }
        }
    }
    let mut out = Vec::new();
    walk(root, &mut out);
    out
}

/// `path:line:column kind name in container` per result, for compact comparisons.
fn locations(results: &[(PathBuf, SyntaxSymbol)]) -> Vec<String> {
    results
        .iter()
        .map(|(path, symbol)| {
            let container = symbol
                .container
                .as_deref()
                .map(|c| format!(" in {c}"))
                .unwrap_or_default();
            format!(
                "{}:{}:{} {} {}{container}",
                path.display(),
                symbol.line,
                symbol.column,
                symbol.kind.as_str(),
                symbol.name
            )
        })
        .collect()
}

#[test]
fn index_ranks_exact_then_prefix_then_substring() {
    let dir = workspace();
    let index = SymbolIndex::build(dir.path(), all_files(dir.path()), &CancellationToken::new());
    assert_eq!(index.file_count(), 4, "big.py and notes.txt are skipped");
    assert!(index.children_are_flat());

    // Ties break by path, then line: the order is the same on every call.
    let expected = [
        "cmd/main.go:3:6 function PARSE",
        "src/lib.rs:4:12 method parse in Parser",
        "tools/parse.py:4:5 function parse",
        "web/app.ts:2:21 method parse in View",
        "src/lib.rs:1:12 struct Parser",
        "src/lib.rs:7:4 function parse_all",
        "tools/parse.py:1:7 class ParserError",
        "web/app.ts:1:17 function reparse",
    ];
    assert_eq!(locations(&index.workspace_symbols("Parse", 100)), expected);
    assert_eq!(
        locations(&index.workspace_symbols("parse", 3)),
        expected[..3]
    );
    assert_eq!(
        locations(&index.workspace_symbols("REPARSE", 10)),
        ["web/app.ts:1:17 function reparse"]
    );
    assert!(index.workspace_symbols("nothing_like_this", 10).is_empty());
    assert_eq!(index.workspace_symbols("", 100).len(), index.len());
}

#[test]
fn index_finds_definitions_by_name() {
    let dir = workspace();
    // Relative paths are read from the root too.
    let files = ["src/lib.rs", "tools/parse.py", "web/app.ts", "cmd/main.go"].map(PathBuf::from);
    let index = SymbolIndex::build(dir.path(), files, &CancellationToken::new());

    assert_eq!(
        locations(&index.definitions("parse")),
        [
            "src/lib.rs:4:12 method parse in Parser",
            "tools/parse.py:4:5 function parse",
            "web/app.ts:2:21 method parse in View",
        ],
        "case-sensitive: PARSE is another name",
    );
    assert_eq!(
        locations(&index.definitions("Parser::parse")),
        ["src/lib.rs:4:12 method parse in Parser"]
    );
    assert_eq!(
        locations(&index.definitions("View.parse")),
        ["web/app.ts:2:21 method parse in View"]
    );
    assert_eq!(
        locations(&index.definitions("Parser")),
        ["src/lib.rs:1:12 struct Parser"]
    );
    // No container is called `crate` (or `parse`, the Python module): the bare name answers.
    assert_eq!(
        locations(&index.definitions("crate::Parser")),
        ["src/lib.rs:1:12 struct Parser"]
    );
    assert_eq!(
        locations(&index.definitions("parse.ParserError")),
        ["tools/parse.py:1:7 class ParserError"]
    );
    assert!(index.definitions("missing").is_empty());
}

#[test]
fn index_follows_updates_and_removals() {
    let dir = workspace();
    let root = dir.path();
    let mut index = SymbolIndex::build(root, all_files(root), &CancellationToken::new());

    // The editor renames `reparse` in its buffer, with a non-ASCII name before the new one.
    index.update_file(
        root,
        &root.join("web/app.ts"),
        "const é = 1; export function parse(): void {}\n",
    );
    assert_eq!(
        locations(&index.definitions("parse")),
        [
            "src/lib.rs:4:12 method parse in Parser",
            "tools/parse.py:4:5 function parse",
            "web/app.ts:1:30 function parse",
        ]
    );
    assert!(index.definitions("reparse").is_empty());
    assert!(index.definitions("View").is_empty());

    // A new file, given relative to the root.
    index.update_file(
        root,
        Path::new("lib/extra.c"),
        "int parse(const char *text) { return 0; }\n",
    );
    assert_eq!(index.definitions("parse").len(), 4);

    index.remove_file(&root.join("tools/parse.py"));
    index.remove_file(Path::new("lib/extra.c"));
    assert_eq!(
        locations(&index.definitions("parse")),
        [
            "src/lib.rs:4:12 method parse in Parser",
            "web/app.ts:1:30 function parse"
        ]
    );
    assert!(index.workspace_symbols("ParserError", 10).is_empty());

    // A file renamed to an unsupported extension or grown past the limit leaves the index.
    index.update_file(
        root,
        Path::new("src/lib.rs"),
        &format!("fn parse() {{}}\n{}", "//\n".repeat(400_000)),
    );
    assert_eq!(
        locations(&index.definitions("parse")),
        ["web/app.ts:1:30 function parse"]
    );
    assert_eq!(index.file_count(), 2);
}

#[test]
fn cancelled_build_stops() {
    let dir = workspace();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let index = SymbolIndex::build(dir.path(), all_files(dir.path()), &cancel);
    assert!(index.is_empty());
    assert_eq!(index.file_count(), 0);
}

impl SymbolIndex {
    fn children_are_flat(&self) -> bool {
        self.files
            .values()
            .flatten()
            .all(|indexed| indexed.symbol.children.is_empty())
    }
}
