//! What a new user meets first: `serve` starts a child only for a document the
//! editor opens, the agent's first workspace-symbol query finds what a fresh pyright has not
//! indexed yet, and a server that is on PATH but cannot run (rustup's shim) leaves the tools
//! answering from tree-sitter with its failure in one line.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use agent_tests::editor::{Editor, url};
use agent_tests::processes::descendants_running;
use serde_json::json;

fn write(root: &Path, files: &[(&str, &str)]) {
    agent_tests::write_tree(root, files);
}

/// `agent-lsp --workspace ROOT ARGS…` with `path` as PATH, no config file, its own state.
fn agent_lsp(root: &Path, state: &Path, path: &std::ffi::OsStr, args: &[&str]) -> Command {
    let mut command = agent_tests::agent_lsp_command(state, &state.join("none.toml"), root, args);
    command.env("PATH", path);
    command
}

#[test]
fn serve_starts_a_child_only_for_the_documents_the_editor_opens() {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    // C in one root, Python in two (the kernel's root and its Documentation/sphinx).
    write(
        &root,
        &[
            ("compile_flags.txt", "-std=c11\n"),
            ("kernel/fork.c", "int fork_count(void) { return 1; }\n"),
            ("pyproject.toml", "[project]\nname = \"top\"\n"),
            ("scripts/tool.py", "def tool() -> int:\n    return 1\n"),
            (
                "Documentation/sphinx/pyproject.toml",
                "[project]\nname = \"docs\"\n",
            ),
            ("Documentation/sphinx/conf.py", "project = \"docs\"\n"),
        ],
    );
    let state = tempfile::tempdir().unwrap();
    std::fs::write(state.path().join("config.toml"), "").unwrap();
    let mut command = Command::new(agent_tests::workspace_bin("agent-lsp"));
    command
        .env("PATH", agent_tests::tools_path())
        .env("AGENT_LSP_STATE_DIR", state.path())
        .env("AGENT_LSP_CONFIG", state.path().join("config.toml"))
        .args(["--workspace", root.to_str().unwrap(), "serve"]);
    let mut editor = Editor::start(command);
    editor.initialize(&root);
    assert!(
        descendants_running(editor.pid(), "").is_empty(),
        "initialize started children: {:?}",
        agent_tests::processes::descendants(editor.pid())
    );

    let c_file = root.join("kernel/fork.c");
    editor.open(&c_file, "c");
    // clangd's diagnostics for the file: it runs, and it has the document.
    editor.wait_for("clangd's diagnostics of fork.c", |message| {
        message["method"] == "textDocument/publishDiagnostics"
            && message["params"]["uri"] == url(&c_file)
    });
    assert_eq!(descendants_running(editor.pid(), "clangd").len(), 1);
    assert_eq!(
        descendants_running(editor.pid(), "pyright").len(),
        0,
        "no Python document is open: {:?}",
        agent_tests::processes::descendants(editor.pid())
    );

    // Opening a Python file starts the one pyright of its root.
    let python_file = root.join("Documentation/sphinx/conf.py");
    editor.open(&python_file, "python");
    editor.wait_for("pyright's diagnostics of conf.py", |message| {
        message["method"] == "textDocument/publishDiagnostics"
            && message["params"]["uri"] == url(&python_file)
    });
    assert_eq!(descendants_running(editor.pid(), "pyright").len(), 1);
    editor.shutdown();
}

#[test]
fn the_first_workspace_symbol_query_of_a_fresh_process_finds_what_pyright_indexes() {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path();
    write(
        root,
        &[
            ("pyproject.toml", "[project]\nname = \"shapes\"\n"),
            (
                "main.py",
                "from shapes import Rectangle\n\nprint(Rectangle(2, 3).area())\n",
            ),
            (
                "shapes.py",
                "class Rectangle:\n    def __init__(self, width, height):\n        self.width, self.height = width, height\n\n    def area(self):\n        return self.width * self.height\n",
            ),
        ],
    );
    let state = tempfile::tempdir().unwrap();
    let path = agent_tests::tools_path();
    let run = |query: &str| {
        let output = agent_lsp(
            root,
            state.path(),
            &path,
            &[
                "tool",
                "lsp_workspace_symbols",
                "--args",
                &json!({"query": query}).to_string(),
            ],
        )
        .output()
        .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    };
    let text = run("Rectangle");
    assert!(
        text.contains("shapes.py\n  1:7  class Rectangle — class Rectangle:"),
        "{text}"
    );
    // A name nobody defines: pyright has indexed (it finds a canary), so "no results" stands.
    let text = run("NoSuchSymbolAnywhere");
    assert!(text.ends_with("no results\n"), "{text}");
}

#[tokio::test]
async fn a_server_that_answers_nothing_while_it_may_be_indexing_is_reported_as_still_indexing() {
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("a.fake"), "nothing to tag\n").unwrap();
    let server = lsp_bridge::ServerConfig {
        args: vec!["no-symbols".into()],
        file_patterns: vec!["*.fake".into()],
        ..lsp_bridge::ServerConfig::new("fake", env!("CARGO_BIN_EXE_fake-lsp"))
    };
    let bridge = lsp_bridge::Bridge::new(
        lsp_bridge::BridgeConfig {
            servers: vec![server],
            ..Default::default()
        },
        vec![workspace.path().to_owned()],
    );
    let mut queries = lsp_bridge::queries::Queries::new(
        Arc::new(bridge.clone()),
        Arc::new(lsp_bridge::documents::DocumentMirror::new()),
    );
    queries.index_wait = Duration::from_millis(500);
    let answers = queries.workspace_symbols("Anything").await;
    let [Ok(answer)] = answers.as_slice() else {
        panic!("{answers:?}")
    };
    assert!(
        answer.symbols.is_empty() && answer.still_indexing,
        "{answer:?}"
    );
    // Past its index_wait a server stays "may be indexing" (nothing says otherwise), and the
    // tool says so instead of "no results".
    let preset = agent_lsp::preset::Preset::builtin("standard").unwrap();
    let mut host = agent_lsp::host::ToolHost::standalone(
        workspace.path(),
        lsp_bridge::BridgeConfig::builtin(),
    )
    .unwrap();
    host.bridge = bridge.clone();
    host.documents = queries.documents.clone();
    let runtime = host
        .runtime(
            &preset,
            &agent_tests::plugin_assembly(&preset, workspace.path()),
            &Arc::default(),
        )
        .unwrap();
    let state = tempfile::tempdir().unwrap();
    let header = agent_lsp::session::event::SessionHeader {
        schema: agent_lsp::session::event::SCHEMA_VERSION,
        session_id: "indexing".into(),
        workspace: workspace.path().display().to_string(),
        preset: "standard".into(),
        preset_text: None,
        agent_version: "test".into(),
        parent: None,
    };
    let mut session = agent_lsp::session::Session::create(
        &state.path().join("s.jsonl"),
        header,
        agent_lsp::session::log::Durability::Batched,
    )
    .unwrap();
    let output = runtime
        .run_one(
            &mut session,
            "lsp_workspace_symbols",
            &json!({"query": "Anything"}).to_string(),
            &tokio_util::sync::CancellationToken::new(),
        )
        .await
        .unwrap()
        .output;
    assert!(
        output
            .text
            .contains("none yet, fake still indexing the workspace"),
        "{}",
        output.text
    );
    bridge.shutdown_all().await;
}

/// rustup's `rust-analyzer` proxy when the component is not installed: an error line, then
/// a backtrace (rustup prints one with `RUST_BACKTRACE`; the shim always does), and exit
/// status 1.
const RUSTUP_SHIM: &str = r#"#!/bin/sh
echo "error: Unknown binary 'rust-analyzer' in official toolchain 'stable-x86_64-unknown-linux-gnu'." >&2
echo "" >&2
echo "Stack backtrace:" >&2
for frame in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do echo "  $frame: rustup::toolchain::frame" >&2; done
exit 1
"#;

#[test]
fn a_server_on_path_that_cannot_run_leaves_the_tools_on_tree_sitter_with_one_line_of_why() {
    use std::os::unix::fs::PermissionsExt;
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path();
    write(
        root,
        &[
            (
                "Cargo.toml",
                "[package]\nname = \"shapes\"\nversion = \"0.1.0\"\n",
            ),
            (
                "src/lib.rs",
                "pub struct Rectangle {\n    pub width: u32,\n}\n\npub fn width(rectangle: &Rectangle) -> u32 {\n    rectangle.width\n}\n",
            ),
        ],
    );
    let shims = tempfile::tempdir().unwrap();
    let shim = shims.path().join("rust-analyzer");
    std::fs::write(&shim, RUSTUP_SHIM).unwrap();
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut paths = vec![shims.path().to_owned()];
    paths.extend(std::env::split_paths(&agent_tests::tools_path()));
    let path = std::env::join_paths(paths).unwrap();
    let state = tempfile::tempdir().unwrap();
    let tool = |name: &str, args: serde_json::Value| {
        let output = agent_lsp(
            root,
            state.path(),
            &path,
            &["tool", name, "--args", &args.to_string()],
        )
        .output()
        .unwrap();
        let text = String::from_utf8(output.stdout).unwrap();
        assert!(
            output.status.success(),
            "{name}: {text}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            !text.contains("Stack backtrace") && !text.contains("frame"),
            "{name}: {text}"
        );
        text
    };
    let why = "`rust-analyzer` is installed but cannot run (`rust-analyzer --version` ended with exit status: 1): error: Unknown binary 'rust-analyzer'";

    let text = tool(
        "lsp_definition",
        json!({"path": "src/lib.rs", "line": 5, "symbol": "Rectangle"}),
    );
    assert!(
        text.contains("approximate definition of `Rectangle` (tree-sitter tags; "),
        "{text}"
    );
    assert!(text.contains(why), "{text}");
    assert!(
        text.contains("src/lib.rs\n  1:12  pub struct Rectangle {"),
        "{text}"
    );
    // The failure takes one line of the answer.
    assert_eq!(
        text.lines()
            .filter(|line| line.contains("rust-analyzer"))
            .count(),
        1,
        "{text}"
    );

    let text = tool("lsp_workspace_symbols", json!({"query": "Rectangle"}));
    assert!(
        text.contains("1:12  pub struct Rectangle { (approximate)"),
        "{text}"
    );

    let text = tool("lsp_document_symbols", json!({"path": "src/lib.rs"}));
    assert!(
        text.starts_with(&format!("approximate (tree-sitter; {why}")),
        "{text}"
    );
    assert!(text.contains("Rectangle (1:12)"), "{text}");
    assert_eq!(
        text.lines()
            .filter(|line| line.contains("rust-analyzer"))
            .count(),
        1,
        "{text}"
    );

    // `agent-lsp servers` says it in one line, with how to add the component, and so does its
    // log: the backtrace helps nobody fix the installation.
    let output = agent_lsp(root, state.path(), &path, &["servers"])
        .env("AGENT_LSP_LOG", "warn")
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    let log = String::from_utf8(output.stderr).unwrap();
    let row: Vec<&str> = text
        .lines()
        .skip_while(|line| !line.starts_with("rust-analyzer "))
        .take_while(|line| line.starts_with("rust-analyzer ") || line.starts_with("    |"))
        .collect();
    assert_eq!(row.len(), 1, "{text}");
    assert!(
        row[0].contains("cannot run: `rust-analyzer` is installed but cannot run")
            && row[0].ends_with(". Add it with `rustup component add rust-analyzer`"),
        "{text}"
    );
    let warned: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("rust-analyzer") || line.contains("frame"))
        .collect();
    assert_eq!(warned.len(), 1, "{log}");
    assert!(
        warned[0].contains("WARN") && warned[0].contains("rustup component add rust-analyzer"),
        "{log}"
    );
    assert!(
        !text.contains("backtrace") && !log.contains("backtrace"),
        "{text}{log}"
    );
}
