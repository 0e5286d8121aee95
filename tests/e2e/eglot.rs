//! Emacs eglot, another editor that reads a server's capabilities from its `initialize` answer
//! only, against `agent-lsp serve` with pyright behind it: definition (`xref-find-definitions`)
//! and hover (eglot's eldoc function) in `emacs --batch` (`tests/emacs/eglot.el`). Emacs and
//! eglot come from Debian (`emacs-nox`, `elpa-eglot`), installed by `.ci/tools.sh`.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::editors::{repo, wait_bounded};
use crate::helix::SHAPES;

#[test]
fn eglot_goes_to_definition_and_shows_hover_through_agent_lsp() {
    let emacs = Command::new("emacs")
        .arg("--version")
        .output()
        .expect("emacs is missing: run `bash .ci/tools.sh` (it installs emacs-nox and elpa-eglot)");
    assert!(emacs.status.success(), "{emacs:?}");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap().join("project");
    agent_tests::write_tree(&root, &[("pyproject.toml", ""), ("shapes.py", SHAPES)]);
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let results = dir.path().join("results.json");

    let mut child = Command::new("emacs")
        .arg("--batch")
        .arg("-l")
        .arg(repo().join("tests/emacs/eglot.el"))
        .current_dir(&root)
        .env("HOME", dir.path())
        .env("PATH", agent_tests::tools_path())
        .env("AGENT_LSP_STATE_DIR", state.path())
        .env("AGENT_LSP_CONFIG", &config)
        .env_remove("DEEPSEEK_API_KEY")
        .env("AGENT_TEST_SERVER", agent_tests::workspace_bin("agent-lsp"))
        .env("AGENT_TEST_ROOT", &root)
        .env("AGENT_TEST_RESULTS", &results)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let status = wait_bounded(&mut child, Duration::from_secs(180));
    let text = std::fs::read_to_string(&results)
        .unwrap_or_else(|error| panic!("no results from emacs ({status}): {error}"));
    let results: Value = serde_json::from_str(&text).unwrap();
    assert!(results.get("error").is_none(), "{results}");
    assert!(status.success(), "{status}: {results}");
    // Announced at `initialize`, before pyright started.
    assert_eq!(results["definitionProvider"], true, "{results}");
    assert_eq!(results["hoverProvider"], true, "{results}");
    // `describe` in `print(describe(square))` leads to `def describe` (line 10, column 4).
    assert_eq!(
        results["definition"],
        json!({"file": "shapes.py", "line": 10, "column": 4}),
        "{results}"
    );
    let hover = results["hover"].as_str().unwrap_or_default();
    assert!(
        hover.contains("def area() -> int") && hover.contains("The area of the square."),
        "{results}"
    );
}
