//! The layering of `agent-lsp/src`, checked against its one statement: the table under
//! "Layers" in `docs/architecture.md` (a tidy test, as rust-analyzer's `tidy.rs`).
//!
//! Every `crate::` path of every file (a `use`, a path in code, each name of a
//! `use crate::{…}` group) is an import of the top-level module it names; comments and string
//! literals are not read. A `super::` path that climbs out of its top-level module would hide an
//! import, so it is refused: such a path is written `crate::…`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod host;
mod paths;

use paths::{Found, paths};

/// One row of the table: a layer's number (1 is the ground), its modules, and whether they may
/// import one another.
struct Layer {
    number: u32,
    modules: Vec<String>,
    one_another: bool,
}

/// An import of module `to` by module `from`, first seen at `at` (`path:line`).
struct Import {
    from: String,
    to: String,
    at: String,
}

#[test]
fn the_modules_keep_the_layering_of_the_architecture_doc() {
    let (layers, sources) = tree();
    let problems = check(&layers, &modules(&sources), &sources);
    assert!(
        problems.is_empty(),
        "the imports of agent-lsp/src break the layering written in docs/architecture.md \
         (\"Layers\"):\n{}",
        problems.join("\n")
    );
}

/// The seven imports that made the module graph circular until they were taken out each
/// come back here, one at a time, and each is refused.
#[test]
fn each_import_that_closed_a_circle_is_refused_if_it_comes_back() {
    let (layers, sources) = tree();
    let modules = modules(&sources);
    let comebacks = [
        (
            "session/store.rs",
            "use crate::preset::Preset;",
            "session",
            "preset",
        ),
        (
            "llm.rs",
            "use crate::session::event::ToolCallRef;",
            "llm",
            "session",
        ),
        (
            "tokens.rs",
            "fn f() { crate::context::system_prompt::catalog_json(&[]); }",
            "tokens",
            "context",
        ),
        (
            "web.rs",
            "fn f() { crate::config::Config::path(); }",
            "web",
            "config",
        ),
        (
            "mcp.rs",
            "fn f() { crate::config::Config::load(); }",
            "mcp",
            "config",
        ),
        (
            "server/agent/setup.rs",
            "use crate::cli::run::{ModelArgs, provider_config};",
            "server",
            "cli",
        ),
        (
            "mcp_serve/tools.rs",
            "fn f() { crate::cli::session::list_json(&store); }",
            "mcp_serve",
            "cli",
        ),
    ];
    for (file, line, from, to) in comebacks {
        let mut sources = sources.clone();
        let text = sources
            .get_mut(Path::new(file))
            .unwrap_or_else(|| panic!("{file} is gone; name its import's new home here"));
        text.push('\n');
        text.push_str(line);
        text.push('\n');
        let problems = check(&layers, &modules, &sources);
        assert!(
            problems
                .iter()
                .any(|problem| problem.contains(&format!("`{from}` -> `{to}`"))),
            "`{line}` in {file} was not refused; the problems were:\n{}",
            problems.join("\n")
        );
    }
}

/// The table of `docs/architecture.md` and the text of every file of `agent-lsp/src`, by its
/// path under `src`.
fn tree() -> (Vec<Layer>, BTreeMap<PathBuf, String>) {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc_path = crate_dir.join("../docs/architecture.md");
    let doc = std::fs::read_to_string(&doc_path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", doc_path.display()));
    let layers = layers(&doc);
    let src = crate_dir.join("src");
    let mut sources = BTreeMap::new();
    let mut folders = vec![src.clone()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("read src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                let text = std::fs::read_to_string(&path).expect("read a source file");
                sources.insert(path.strip_prefix(&src).unwrap().to_owned(), text);
            }
        }
    }
    (layers, sources)
}

/// The rows of the first table under the `## Layers` heading.
fn layers(doc: &str) -> Vec<Layer> {
    let section = doc
        .split("\n## ")
        .find(|section| section.starts_with("Layers\n"))
        .expect("docs/architecture.md has a \"## Layers\" section");
    let rows = section
        .lines()
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .skip(2)
        .map(|line| {
            let cells = line
                .trim_matches('|')
                .split('|')
                .map(str::trim)
                .collect::<Vec<_>>();
            let number = cells[0]
                .parse()
                .unwrap_or_else(|_| panic!("a layer's number is a number: `{line}`"));
            let modules = cells[1]
                .split(',')
                .map(|name| name.trim().trim_matches('`').to_owned())
                .collect();
            let one_another = match cells[2] {
                "yes" => true,
                "no" => false,
                other => panic!("\"import one another\" is yes or no, not `{other}`: `{line}`"),
            };
            Layer {
                number,
                modules,
                one_another,
            }
        })
        .collect::<Vec<_>>();
    assert!(!rows.is_empty(), "the Layers section has a table");
    rows
}

/// The top-level modules `lib.rs` declares, public or not.
fn modules(sources: &BTreeMap<PathBuf, String>) -> BTreeSet<String> {
    sources[Path::new("lib.rs")]
        .lines()
        .filter_map(|line| {
            let declared = line.trim_start();
            let declared = match declared.strip_prefix("pub") {
                Some(rest) if rest.starts_with('(') => rest.split_once(')')?.1,
                Some(rest) => rest,
                None => declared,
            };
            declared
                .trim_start()
                .strip_prefix("mod ")?
                .trim()
                .strip_suffix(';')
        })
        .map(str::to_owned)
        .collect()
}

/// Everything wrong with the imports of `sources` against `layers`, one line each.
fn check(
    layers: &[Layer],
    modules: &BTreeSet<String>,
    sources: &BTreeMap<PathBuf, String>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut layer_of = BTreeMap::new();
    for layer in layers {
        for module in &layer.modules {
            if layer_of.insert(module.clone(), layer).is_some() {
                problems.push(format!("`{module}` stands in two layers of the table"));
            }
            if !modules.contains(module) {
                problems.push(format!(
                    "`{module}` is in the table but lib.rs declares no such module"
                ));
            }
        }
    }
    for module in modules {
        if !layer_of.contains_key(module) {
            problems.push(format!(
                "`{module}` is in no layer of the table: give it one"
            ));
        }
    }
    let imports = imports(modules, sources, &mut problems);
    for import in imports.values() {
        let (Some(from), Some(to)) = (layer_of.get(&import.from), layer_of.get(&import.to)) else {
            continue;
        };
        if to.number > from.number {
            problems.push(format!(
                "`{}` -> `{}`: layer {} imports layer {} above it, at {}",
                import.from, import.to, from.number, to.number, import.at
            ));
        } else if to.number == from.number && !from.one_another {
            problems.push(format!(
                "`{}` -> `{}`: the modules of layer {} import none of one another, at {}",
                import.from, import.to, from.number, import.at
            ));
        }
    }
    for circle in circles(modules, &imports) {
        let ties = imports
            .values()
            .filter(|import| circle.contains(&import.from) && circle.contains(&import.to))
            .map(|import| format!("`{}` -> `{}` at {}", import.from, import.to, import.at))
            .collect::<Vec<_>>();
        problems.push(format!(
            "`{}` import each other in a circle: {}",
            circle.iter().cloned().collect::<Vec<_>>().join("`, `"),
            ties.join("; ")
        ));
    }
    problems
}

/// The imports between top-level modules, one per pair, each with the first place it is made.
fn imports(
    modules: &BTreeSet<String>,
    sources: &BTreeMap<PathBuf, String>,
    problems: &mut Vec<String>,
) -> BTreeMap<(String, String), Import> {
    let mut imports = BTreeMap::new();
    for (path, text) in sources {
        let mut parts = path.iter().map(|part| part.to_string_lossy().into_owned());
        let first = parts.next().unwrap_or_default();
        let from = first.strip_suffix(".rs").unwrap_or(&first).to_owned();
        if !modules.contains(&from) {
            continue; // lib.rs, main.rs
        }
        for found in paths(text, path.components().count()) {
            match found {
                Found::Crate { module, line } => {
                    if module != from && modules.contains(&module) {
                        imports
                            .entry((from.clone(), module.clone()))
                            .or_insert_with(|| Import {
                                from: from.clone(),
                                to: module,
                                at: format!("agent-lsp/src/{}:{line}", path.display()),
                            });
                    }
                }
                Found::Escape { line } => problems.push(format!(
                    "`{from}` climbs out of its module with `super::` at agent-lsp/src/{}:{line}: write the path `crate::…`",
                    path.display()
                )),
            }
        }
    }
    imports
}

/// Every circle of modules that import each other (the strongly connected components of more
/// than one module, Tarjan's algorithm).
fn circles(
    modules: &BTreeSet<String>,
    imports: &BTreeMap<(String, String), Import>,
) -> Vec<BTreeSet<String>> {
    struct Walk<'a> {
        edges: BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        circles: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(walk: &mut Walk<'a>, module: &'a str) {
        let n = walk.index.len();
        walk.index.insert(module, n);
        walk.low.insert(module, n);
        walk.stack.push(module);
        for next in walk.edges.get(module).cloned().unwrap_or_default() {
            if !walk.index.contains_key(next) {
                visit(walk, next);
                let low = walk.low[module].min(walk.low[next]);
                walk.low.insert(module, low);
            } else if walk.stack.contains(&next) {
                let low = walk.low[module].min(walk.index[next]);
                walk.low.insert(module, low);
            }
        }
        if walk.low[module] == walk.index[module] {
            let mut circle = BTreeSet::new();
            while let Some(top) = walk.stack.pop() {
                circle.insert(top.to_owned());
                if top == module {
                    break;
                }
            }
            if circle.len() > 1 {
                walk.circles.push(circle);
            }
        }
    }
    let mut walk = Walk {
        edges: BTreeMap::new(),
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        circles: Vec::new(),
    };
    for (from, to) in imports.keys() {
        walk.edges
            .entry(from.as_str())
            .or_default()
            .push(to.as_str());
    }
    for module in modules {
        if !walk.index.contains_key(module.as_str()) {
            visit(&mut walk, module);
        }
    }
    walk.circles
}
