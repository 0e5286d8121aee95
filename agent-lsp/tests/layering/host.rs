//! One host: an agent is made, its session created and its tool catalog built in `host/`
//! alone, so every front end (and any later one) is a client of the host rather than another
//! copy of it. Each call below that makes one of those things is refused outside the files
//! that own it; tests are not read.

use std::path::Path;

/// A call that starts an agent or a piece of one, and the files allowed to make it.
const OWNED: &[(&str, &[&str])] = &[
    ("Agent::new(", &["host.rs"]),
    (".create_session(&", &["host.rs", "session/store.rs"]),
    (".create_session_under(", &["host.rs", "session/store.rs"]),
    ("catalog::build(", &["host/tools.rs", "host/assembly.rs"]),
    ("ToolRuntime::new(", &["host/tools.rs"]),
];

#[test]
fn agents_sessions_and_catalogs_are_made_by_the_host_alone() {
    let (_, sources) = super::tree();
    let mut problems = Vec::new();
    for (path, text) in &sources {
        if is_test_file(path) {
            continue;
        }
        for (number, line) in code_lines(text) {
            for (call, owners) in OWNED {
                if line.contains(call) && !owners.iter().any(|owner| path == Path::new(owner)) {
                    problems.push(format!(
                        "{}:{number}: `{call}` outside {}",
                        path.display(),
                        owners.join(", ")
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "only the host starts agents (docs/architecture.md, \"Where things start\"):\n{}",
        problems.join("\n")
    );
}

/// A test file: `tests.rs` or anything under a `tests/` folder.
fn is_test_file(path: &Path) -> bool {
    path.file_name().is_some_and(|name| name == "tests.rs")
        || path.components().any(|part| part.as_os_str() == "tests")
}

/// The lines of `text` before its `#[cfg(test)]` module, without line comments, numbered
/// from 1.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .take_while(|line| line.trim() != "#[cfg(test)]")
        .enumerate()
        .map(|(index, line)| (index + 1, line.split("//").next().unwrap_or_default()))
}
