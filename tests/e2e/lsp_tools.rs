//! The `lsp_*` tools against real language servers (pyright, clangd, typescript-language-server)
//! on the fixture projects, whose lines put non-ASCII text and emoji before the symbols asked
//! about: every tool returns the right locations in character columns, diagnostics appear after
//! an edit that breaks the code and clear after the fix, a killed server is restarted, and the
//! tools work from the terminal through `agent-lsp tool`.

use std::process::Command;

use agent_lsp::plugin::outcomes::ToolOutput;
use agent_lsp::preset::Preset;
use agent_lsp::session::Session;
use agent_lsp::session::event::{SCHEMA_VERSION, SessionHeader};
use agent_lsp::session::log::Durability;
use agent_lsp::tools::ToolRuntime;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

struct Harness {
    workspace: tempfile::TempDir,
    _state: tempfile::TempDir,
    runtime: ToolRuntime,
    bridge: lsp_bridge::Bridge,
    session: Session,
}

impl Harness {
    fn new(fixture: &str) -> Harness {
        // AGENT_LSP_LOG=debug shows the traffic when a test fails.
        agent_lsp::logging::init();
        let workspace = agent_tests::fixture(fixture);
        let state = tempfile::tempdir().unwrap();
        let preset = Preset::builtin("standard").unwrap();
        let (runtime, bridge) =
            agent_tests::tool_runtime(&preset, workspace.path(), agent_tests::bridge_config());
        let header = SessionHeader {
            schema: SCHEMA_VERSION,
            session_id: "lsp".into(),
            workspace: workspace.path().display().to_string(),
            preset: "standard".into(),
            preset_text: None,
            agent_version: "test".into(),
            parent: None,
        };
        let session =
            Session::create(&state.path().join("s.jsonl"), header, Durability::Batched).unwrap();
        Harness {
            workspace,
            _state: state,
            runtime,
            bridge,
            session,
        }
    }

    async fn call(&mut self, tool: &str, args: Value) -> ToolOutput {
        let outcome = self
            .runtime
            .run_one(
                &mut self.session,
                tool,
                &args.to_string(),
                &CancellationToken::new(),
            )
            .await
            .unwrap();
        outcome.output
    }

    async fn ok(&mut self, tool: &str, args: Value) -> String {
        let output = self.call(tool, args.clone()).await;
        assert!(!output.is_error, "{tool} {args} failed: {}", output.text);
        output.text
    }

    /// 1-based character column of `needle` on 1-based `line` of `path`.
    fn column(&self, path: &str, line: usize, needle: &str) -> usize {
        let text = std::fs::read_to_string(self.workspace.path().join(path)).unwrap();
        let line = text.lines().nth(line - 1).unwrap();
        line[..line.find(needle).unwrap()].chars().count() + 1
    }

    async fn finish(self) {
        self.bridge.shutdown_all().await;
    }
}

fn assert_has(text: &str, expected: &str) {
    assert!(text.contains(expected), "expected `{expected}` in:\n{text}");
}

#[tokio::test]
async fn pyright_answers_every_tool_with_character_columns() {
    let mut h = Harness::new("python");
    // `Fläche` on main.py line 3 comes after "café ☕ 😀": column 28 in characters (29 in UTF-16).
    let column = h.column("main.py", 3, "Fläche");
    assert_eq!(column, 28);
    let text = h
        .ok(
            "lsp_definition",
            json!({"path": "main.py", "line": 3, "symbol": "Fläche", "column": column}),
        )
        .await;
    assert_has(&text, "[pyright; computed on main.py v");
    assert_has(&text, "pkg/geometry.py\n  4:7  class Fläche:");
    assert!(!text.contains("corrected"), "{text}");

    // A near-miss column is corrected and the result says so.
    let text = h
        .ok(
            "lsp_definition",
            json!({"path": "main.py", "line": 3, "symbol": "Fläche", "column": 20}),
        )
        .await;
    assert_has(
        &text,
        "column corrected: `Fläche` is at line 3 column 28, not column 20",
    );
    assert_has(&text, "4:7  class Fläche:");

    let text = h
        .ok(
            "lsp_references",
            json!({"path": "pkg/geometry.py", "line": 4, "symbol": "Fläche"}),
        )
        .await;
    assert_has(
        &text,
        "main.py\n  1:26  from pkg.geometry import Fläche, größe_von",
    );
    assert_has(&text, "  3:28  label = \"café ☕ 😀\"; eins = Fläche(1.0)");
    assert_has(&text, "pkg/geometry.py\n  4:7  class Fläche:");

    let text = h
        .ok(
            "lsp_references",
            json!({"path": "pkg/geometry.py", "line": 14, "symbol": "größe_von"}),
        )
        .await;
    assert_has(&text, "4 result(s)");
    assert_has(
        &text,
        "5:14  print(label, größe_von(zwei), größe_von(eins))",
    );
    assert_has(&text, "5:31  print(label");

    // Pagination: a page of 2, then the rest through the cursor; the full set is in the meta.
    let output = h
        .call(
            "lsp_references",
            json!({"path": "pkg/geometry.py", "line": 14, "symbol": "größe_von", "limit": 2}),
        )
        .await;
    assert_has(
        &output.text,
        "1–2 of 4 shown; call again with cursor=\"2\" for more",
    );
    assert_eq!(output.meta["total"], 4);
    assert_eq!(output.meta["results"].as_array().unwrap().len(), 4);
    let text = h.ok("lsp_references", json!({"path": "pkg/geometry.py", "line": 14, "symbol": "größe_von", "limit": 2, "cursor": "2"})).await;
    assert_has(&text, "3–4 of 4 shown");
    assert!(!text.contains("call again"), "{text}");
    let text = h
        .ok(
            "lsp_hover",
            json!({"path": "main.py", "line": 5, "symbol": "größe_von"}),
        )
        .await;
    assert_has(&text, "def größe_von(fläche: Fläche) -> float");

    let text = h
        .ok(
            "lsp_type_definition",
            json!({"path": "main.py", "line": 4, "symbol": "eins"}),
        )
        .await;
    assert_has(&text, "pkg/geometry.py\n  4:7  class Fläche:");

    let text = h
        .ok("lsp_document_symbols", json!({"path": "pkg/geometry.py"}))
        .await;
    assert_has(&text, "  class Fläche (4:7)\n    method __init__ (7:9)");
    assert_has(&text, "    method doppelt (10:9)");
    assert_has(&text, "  function größe_von (14:5)");

    let text = h
        .ok("lsp_workspace_symbols", json!({"query": "größe_von"}))
        .await;
    let first = text.lines().find(|line| line.starts_with("  ")).unwrap();
    assert_eq!(
        first, "  14:5  function größe_von — def größe_von(fläche: Fläche) -> float:",
        "{text}"
    );

    let text = h.ok("lsp_call_hierarchy", json!({"path": "pkg/geometry.py", "line": 10, "symbol": "doppelt", "direction": "outgoing"})).await;
    assert_has(&text, "Fläche");
    let text = h.ok("lsp_call_hierarchy", json!({"path": "pkg/geometry.py", "line": 14, "symbol": "größe_von", "direction": "incoming"})).await;
    assert_has(&text, "main.py");

    let before = std::fs::read_to_string(h.workspace.path().join("main.py")).unwrap();
    let text = h.ok("lsp_rename_preview", json!({"path": "pkg/geometry.py", "line": 14, "symbol": "größe_von", "new_name": "size_of"})).await;
    assert_has(
        &text,
        "2 file(s) would change (preview only, nothing applied)",
    );
    assert_has(&text, "+print(label, size_of(zwei), size_of(eins))");
    assert_has(&text, "+def size_of(fläche: Fläche) -> float:");
    assert_eq!(
        std::fs::read_to_string(h.workspace.path().join("main.py")).unwrap(),
        before
    );

    // Diagnostics: clean, broken by an edit (reported in the edit's own result), clean again.
    let text = h.ok("lsp_diagnostics", json!({"path": "main.py"})).await;
    assert_has(&text, "diagnostics of main.py (version");
    assert_has(&text, "): none");
    let text = h.ok("edit", json!({"path": "main.py", "old_string": "größe_von(zwei)", "new_string": "größe_von(zwei, 1)"})).await;
    assert_has(&text, "diagnostics of main.py (version");
    assert_has(&text, "5:");
    assert_has(&text, "error");
    let text = h.ok("edit", json!({"path": "main.py", "old_string": "größe_von(zwei, 1)", "new_string": "größe_von(zwei)"})).await;
    assert_has(&text, "pyright): none");
    h.finish().await;
}

#[tokio::test]
async fn clangd_answers_with_utf8_offsets_converted_to_characters() {
    let mut h = Harness::new("c");
    let column = h.column("main.c", 5, "rect_area");
    let text = h
        .ok(
            "lsp_definition",
            json!({"path": "main.c", "line": 5, "symbol": "rect_area", "declaration": true}),
        )
        .await;
    assert_has(&text, "[clangd; computed on main.c v");
    assert_has(&text, "shapes.h\n  10:5  int rect_area(const rect *r);");

    let text = h
        .ok(
            "lsp_references",
            json!({"path": "main.c", "line": 5, "symbol": "rect_area"}),
        )
        .await;
    assert_has(
        &text,
        &format!(
            "5:{column}  rect r = {{2, 3}}; const char *s = \"größe 😀\"; int a = rect_area(&r);"
        ),
    );
    assert_has(&text, "7:12  return rect_area(&r) - 6;");

    let text = h
        .ok(
            "lsp_hover",
            json!({"path": "main.c", "line": 7, "symbol": "rect_area"}),
        )
        .await;
    assert_has(&text, "int rect_area(const rect *r)");

    let text = h
        .ok(
            "lsp_type_definition",
            json!({"path": "main.c", "line": 6, "symbol": "a"}),
        )
        .await;
    // `a` is an int: no type definition to go to, and the tool says so rather than failing.
    assert!(
        text.contains("no results") || text.contains("result(s)"),
        "{text}"
    );

    let text = h
        .ok("lsp_document_symbols", json!({"path": "shapes.h"}))
        .await;
    assert_has(&text, "rect_area (10:5)");

    let text = h.ok("lsp_diagnostics", json!({"path": "main.c"})).await;
    assert_has(&text, "): none");
    let text = h.ok("edit", json!({"path": "main.c", "old_string": "int a = rect_area(&r);", "new_string": "int a = rect_area(r);"})).await;
    assert_has(&text, "error");
    assert_has(&text, &format!("5:{}", column + 10));
    let text = h.ok("edit", json!({"path": "main.c", "old_string": "int a = rect_area(r);", "new_string": "int a = rect_area(&r);"})).await;
    assert_has(&text, "clangd): none");

    // A server killed between calls: the next call restarts it and succeeds.
    for child in h.bridge.running() {
        let pid = child.pid().expect("running child has a pid");
        Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap();
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let text = h
        .ok(
            "lsp_hover",
            json!({"path": "main.c", "line": 7, "symbol": "rect_area"}),
        )
        .await;
    assert_has(&text, "int rect_area(const rect *r)");
    assert!(
        h.bridge.health().iter().any(|server| server.restarts >= 1),
        "{:?}",
        h.bridge.health()
    );
    h.finish().await;
}

#[tokio::test]
async fn typescript_language_server_answers_across_astral_characters() {
    let mut h = Harness::new("ts");
    // `größe` on main.ts line 3 follows "😀😀": UTF-16 offsets are 2 larger than characters.
    let column = h.column("src/main.ts", 3, "größe(k)");
    let text = h
        .ok(
            "lsp_definition",
            json!({"path": "src/main.ts", "line": 3, "symbol": "größe", "column": column}),
        )
        .await;
    assert_has(
        &text,
        "src/shapes.ts\n  12:17  export function größe(form: Form): number {",
    );

    let text = h
        .ok(
            "lsp_references",
            json!({"path": "src/shapes.ts", "line": 12, "symbol": "größe"}),
        )
        .await;
    assert_has(&text, &format!("3:{column}  const emoji"));
    assert_has(&text, "4:23  console.log(emoji, g, größe(new Kreis(1)));");

    let text = h
        .ok(
            "lsp_implementation",
            json!({"path": "src/shapes.ts", "line": 1, "symbol": "Form"}),
        )
        .await;
    assert_has(&text, "5:14  export class Kreis implements Form {");

    let text = h
        .ok(
            "lsp_hover",
            json!({"path": "src/main.ts", "line": 3, "symbol": "größe"}),
        )
        .await;
    assert_has(&text, "größe(form: Form): number");

    let text = h.ok("lsp_call_hierarchy", json!({"path": "src/shapes.ts", "line": 12, "symbol": "größe", "direction": "incoming"})).await;
    assert_has(&text, "src/main.ts");

    let text = h
        .ok(
            "lsp_rename_preview",
            json!({"path": "src/shapes.ts", "line": 5, "symbol": "Kreis", "new_name": "Circle"}),
        )
        .await;
    assert_has(&text, "+import { Circle, größe } from \"./shapes\";");

    let text = h.ok("edit", json!({"path": "src/main.ts", "old_string": "const g = größe(k);", "new_string": "const g: string = größe(k);"})).await;
    assert_has(&text, "error");
    assert_has(&text, "3:");
    let text = h.ok("edit", json!({"path": "src/main.ts", "old_string": "const g: string = größe(k);", "new_string": "const g = größe(k);"})).await;
    assert_has(&text, "none");
    h.finish().await;
}

#[tokio::test]
async fn without_a_server_symbols_come_from_tree_sitter_labelled_approximate() {
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(
        workspace.path().join("lib.go"),
        "package lib\n\n// Größe is documented.\nfunc Größe() int { return 1 }\n",
    )
    .unwrap();
    let preset = Preset::builtin("standard").unwrap();
    // No server configured at all: every language falls back.
    let (runtime, _bridge) = agent_tests::tool_runtime(
        &preset,
        workspace.path(),
        lsp_bridge::BridgeConfig {
            servers: vec![],
            ..lsp_bridge::BridgeConfig::builtin()
        },
    );
    let state = tempfile::tempdir().unwrap();
    let header = SessionHeader {
        schema: SCHEMA_VERSION,
        session_id: "ts".into(),
        workspace: "/w".into(),
        preset: "standard".into(),
        preset_text: None,
        agent_version: "test".into(),
        parent: None,
    };
    let mut session =
        Session::create(&state.path().join("s.jsonl"), header, Durability::Batched).unwrap();
    let cancel = CancellationToken::new();
    let mut call = async |tool: &str, args: Value| {
        runtime
            .run_one(&mut session, tool, &args.to_string(), &cancel)
            .await
            .unwrap()
            .output
    };
    let output = call(
        "lsp_definition",
        json!({"path": "lib.go", "line": 4, "symbol": "Größe"}),
    )
    .await;
    assert_has(&output.text, "approximate definition of `Größe`");
    assert_has(&output.text, "lib.go\n  4:6  func Größe() int { return 1 }");
    let output = call("lsp_document_symbols", json!({"path": "lib.go"})).await;
    assert_has(
        &output.text,
        "approximate (tree-sitter; no configured language server handles go files",
    );
    assert_has(&output.text, "Größe (4:6)");
    let output = call("lsp_workspace_symbols", json!({"query": "größe"})).await;
    assert_has(
        &output.text,
        "4:6  func Größe() int { return 1 } (approximate)",
    );
    let output = call(
        "lsp_references",
        json!({"path": "lib.go", "line": 4, "symbol": "Größe"}),
    )
    .await;
    assert!(output.is_error, "{}", output.text);
    assert_has(&output.text, "lsp_references could not be answered");
}

#[test]
fn lsp_tools_work_from_the_terminal() {
    let workspace = agent_tests::fixture("python");
    let state = tempfile::tempdir().unwrap();
    let output = Command::new(agent_tests::workspace_bin("agent-lsp"))
        .env("PATH", agent_tests::tools_path())
        .env("AGENT_LSP_STATE_DIR", state.path())
        .env("AGENT_LSP_CONFIG", state.path().join("none.toml"))
        .args([
            "--workspace",
            workspace.path().to_str().unwrap(),
            "tool",
            "lsp_definition",
            "--args",
        ])
        .arg(r#"{"path":"main.py","line":5,"symbol":"größe_von"}"#)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    assert_has(
        &text,
        "pkg/geometry.py\n  14:5  def größe_von(fläche: Fläche) -> float:",
    );
}
