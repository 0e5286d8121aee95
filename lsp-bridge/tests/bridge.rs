//! lsp-bridge against the real servers `.ci/run` installs (pyright, clangd,
//! typescript-language-server), on small fixture projects with non-ASCII identifiers and
//! strings: the handshake, readiness, definition through raw JSON params at positions in the
//! negotiated encoding, pushed diagnostics, root detection, one instance per (server, root),
//! recovery from a server killed mid-request, and clean shutdown.
//!
//! A missing server fails these tests (with how to install it); it never skips them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lsp_bridge::lsp_types::{GotoDefinitionResponse, Range, Url};
use lsp_bridge::position::{PositionEncoding, to_char_index, to_server_offset};
use lsp_bridge::{
    Bridge, BridgeConfig, Child, ChildState, DiagnosticsEntry, Error, ServerConfig, language_id,
};
use serde_json::json;

/// Bound on waits for real servers (pyright and tsserver take a few seconds on 2 cores).
const BOUND: Duration = Duration::from_secs(60);

/// The built-in configuration of `name`, with its command resolved: on PATH, or in the tools
/// folder `.ci/tools.sh` installs into.
fn server(name: &str) -> ServerConfig {
    let mut config = BridgeConfig::builtin()
        .servers
        .into_iter()
        .find(|server| server.name == name)
        .unwrap();
    if !config.is_available() {
        let local = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../.ci/tools/node_modules/.bin")
            .join(&config.command);
        assert!(
            local.exists(),
            "`{}` is not installed: run `.ci/tools.sh` (it puts the test servers in .ci/tools)",
            config.command
        );
        config.command = local.to_string_lossy().into_owned();
    }
    config
}

fn bridge_with(names: &[&str], workspace: &Path) -> Bridge {
    let config = BridgeConfig {
        servers: names.iter().map(|name| server(name)).collect(),
        ..Default::default()
    };
    Bridge::new(config, vec![workspace.to_path_buf()])
}

fn write(root: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

fn uri(path: &Path) -> Url {
    Url::from_file_path(path).unwrap()
}

async fn open(child: &Child, path: &Path) {
    let text = std::fs::read_to_string(path).unwrap();
    let params = json!({"textDocument": {
        "uri": uri(path),
        "languageId": language_id(path).unwrap(),
        "version": 1,
        "text": text,
    }});
    child.notify("textDocument/didOpen", params).await.unwrap();
}

/// Go to the definition of the `occurrence`-th `needle` on 0-based `line` of `path`; the
/// position is sent in the child's negotiated encoding. Servers still loading a project may
/// answer empty at first, so an empty answer is asked again (bounded).
async fn definition(child: &Child, path: &Path, line: u32, needle: &str) -> Vec<(Url, Range)> {
    let text = std::fs::read_to_string(path).unwrap();
    let line_text = text.lines().nth(line as usize).unwrap();
    let byte = line_text
        .find(needle)
        .unwrap_or_else(|| panic!("{needle} not on line {line}"));
    let char_index = line_text[..byte].chars().count();
    let character = to_server_offset(line_text, char_index, child.encoding());
    let params = json!({"textDocument": {"uri": uri(path)}, "position": {"line": line, "character": character}});
    let deadline = Instant::now() + BOUND;
    loop {
        let answer = child
            .request("textDocument/definition", params.clone())
            .await
            .unwrap();
        let locations: Vec<(Url, Range)> =
            match serde_json::from_value::<Option<GotoDefinitionResponse>>(answer).unwrap() {
                None => vec![],
                Some(GotoDefinitionResponse::Scalar(location)) => {
                    vec![(location.uri, location.range)]
                }
                Some(GotoDefinitionResponse::Array(locations)) => locations
                    .into_iter()
                    .map(|location| (location.uri, location.range))
                    .collect(),
                Some(GotoDefinitionResponse::Link(links)) => links
                    .into_iter()
                    .map(|link| (link.target_uri, link.target_selection_range))
                    .collect(),
            };
        if !locations.is_empty() || Instant::now() > deadline {
            return locations;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Assert that a definition lands on `needle` on `line` of `path`, in characters: the server's
/// offset is converted back with the negotiated encoding.
fn assert_lands_on(child: &Child, found: &[(Url, Range)], path: &Path, line: u32, needle: &str) {
    let (target, range) = found
        .iter()
        .find(|(target, _)| target.to_file_path().unwrap() == path)
        .unwrap_or_else(|| {
            panic!(
                "{}: no definition in {}: {found:?}",
                child.name(),
                path.display()
            )
        });
    assert_eq!(
        range.start.line,
        line,
        "{}: {target} {range:?}",
        child.name()
    );
    let text = std::fs::read_to_string(path).unwrap();
    let line_text = text.lines().nth(line as usize).unwrap();
    let expected = line_text[..line_text.find(needle).unwrap()].chars().count();
    let got = to_char_index(line_text, range.start.character, child.encoding());
    assert_eq!(
        got,
        expected,
        "{}: column of `{needle}` in {:?} ({:?})",
        child.name(),
        line_text,
        child.encoding()
    );
}

/// Wait (bounded) for published diagnostics for `path` that satisfy `wanted`.
async fn published(
    child: &Child,
    path: &Path,
    wanted: impl Fn(&DiagnosticsEntry) -> bool,
) -> DiagnosticsEntry {
    let uri = uri(path);
    let mut changes = child.diagnostics().subscribe();
    let deadline = Instant::now() + BOUND;
    loop {
        if let Some(entry) = child.diagnostics().get(&uri).filter(|entry| wanted(entry)) {
            return entry;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let changed = tokio::time::timeout(left, changes.changed()).await;
        assert!(
            matches!(changed, Ok(Ok(()))),
            "{}: no diagnostics for {} within {BOUND:?}; have {:?}; stderr: {:?}",
            child.name(),
            path.display(),
            child.diagnostics().all(),
            child.stderr_tail()
        );
    }
}

/// The whole round for one server: start through the registry, readiness, definition across
/// files, diagnostics of a broken file, clean shutdown.
async fn round_trip(
    name: &str,
    encoding: PositionEncoding,
    workspace: &Path,
    usage: (&str, u32, &str),
    target: (&str, u32, &str),
    broken: &str,
) {
    let bridge = bridge_with(&[name], workspace);
    let usage_path = workspace.join(usage.0);
    let child = bridge
        .child_for(&usage_path)
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(child.name(), name);
    assert_eq!(child.state(), ChildState::Ready);
    assert_eq!(
        child.encoding(),
        encoding,
        "{name}: negotiated position encoding"
    );
    assert!(child.wait_ready(BOUND).await, "{name} never became ready");

    open(&child, &usage_path).await;
    // Servers load the project when the first file opens (tsserver answers with the import
    // binding until then); their first diagnostics for the file say that it is done.
    published(&child, &usage_path, |_| true).await;
    let found = definition(&child, &usage_path, usage.1, usage.2).await;
    assert_lands_on(
        &child,
        &found,
        &workspace.join(target.0),
        target.1,
        target.2,
    );

    let broken_path = workspace.join(broken);
    open(&child, &broken_path).await;
    let entry = published(&child, &broken_path, |entry| !entry.diagnostics.is_empty()).await;
    assert!(
        entry.version.is_none_or(|version| version == 1),
        "{name}: {entry:?}"
    );

    let pid = child.pid().unwrap();
    bridge.shutdown_all().await;
    assert_eq!(child.state(), ChildState::Exited);
    assert_eq!(child.pid(), None);
    assert!(bridge.running().is_empty());
    // The process is gone (reaped), not left behind.
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "{name} (pid {pid}) still runs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pyright_answers_definition_and_diagnostics() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("py");
    write(
        &workspace,
        &[
            ("pyproject.toml", "[project]\nname = \"geometrie\"\n"),
            (
                "geometrie.py",
                "\"\"\"Geometrie mit Umlauten: größe und höhe.\"\"\"\ngröße = 2; flächeninhalt = lambda breite, höhe: breite * höhe * größe\n",
            ),
            (
                "main.py",
                "from geometrie import flächeninhalt\n\ngruß = \"😀 grüße\"; ergebnis = flächeninhalt(2.0, 3.0)\n",
            ),
            ("kaputt.py", "wert = nicht_definiert_ü + 1\n"),
        ],
    );
    // pyright offers only UTF-16; clangd takes the UTF-8 we prefer.
    round_trip(
        "pyright",
        PositionEncoding::Utf16,
        &workspace,
        ("main.py", 2, "flächeninhalt("),
        ("geometrie.py", 1, "flächeninhalt ="),
        "kaputt.py",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clangd_answers_definition_and_diagnostics() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("c");
    write(
        &workspace,
        &[
            ("compile_flags.txt", "-std=c11\n"),
            ("geo.h", "int flächeninhalt(int breite, int höhe);\n"),
            (
                "geo.c",
                "#include \"geo.h\"\n/* größe */ int flächeninhalt(int breite, int höhe) { return breite * höhe; }\n",
            ),
            (
                "main.c",
                "#include \"geo.h\"\nint main(void) { const char *gruß = \"😀\"; (void)gruß; return flächeninhalt(2, 3); }\n",
            ),
            ("kaputt.c", "int wert = nicht_definiert_ü + 1;\n"),
        ],
    );
    round_trip(
        "clangd",
        PositionEncoding::Utf8,
        &workspace,
        ("main.c", 1, "flächeninhalt("),
        ("geo.h", 0, "flächeninhalt("),
        "kaputt.c",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_language_server_answers_definition_and_diagnostics() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ts");
    write(
        &workspace,
        &[
            (
                "tsconfig.json",
                r#"{"compilerOptions": {"strict": true, "target": "es2020", "module": "commonjs"}, "include": ["*.ts"]}"#,
            ),
            (
                "geometrie.ts",
                "export const größe = 2; export function flächeninhalt(breite: number, höhe: number): number { return breite * höhe * größe; }\n",
            ),
            (
                "main.ts",
                "import { flächeninhalt } from \"./geometrie\";\nconst gruß = \"😀 grüße\"; export const ergebnis = flächeninhalt(2, 3) + gruß.length;\n",
            ),
            ("kaputt.ts", "export const wert: number = \"ü\";\n"),
        ],
    );
    round_trip(
        "typescript-language-server",
        PositionEncoding::Utf16,
        &workspace,
        ("main.ts", 1, "flächeninhalt("),
        ("geometrie.ts", 0, "flächeninhalt("),
        "kaputt.ts",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_come_from_markers_with_one_instance_per_root() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("multi");
    write(
        &workspace,
        &[
            ("alpha/compile_flags.txt", "-std=c11\n"),
            ("alpha/src/a.c", "int α(void) { return 1; }\n"),
            ("alpha/src/b.c", "int β(void) { return 2; }\n"),
            ("beta/compile_flags.txt", "-std=c11\n"),
            ("beta/b.c", "int γ(void) { return 3; }\n"),
            ("loose/c.c", "int δ(void) { return 4; }\n"),
        ],
    );
    let bridge = bridge_with(&["clangd", "pyright"], &workspace);
    let clangd = bridge.config_for(&workspace.join("alpha/src/a.c")).unwrap();
    assert_eq!(clangd.name, "clangd");
    assert_eq!(
        bridge.config_for(&workspace.join("x.py")).unwrap().name,
        "pyright"
    );
    assert_eq!(
        bridge.root_for(&clangd, &workspace.join("alpha/src/a.c")),
        workspace.join("alpha")
    );
    assert_eq!(
        bridge.root_for(&clangd, &workspace.join("beta/b.c")),
        workspace.join("beta")
    );
    assert_eq!(
        bridge.root_for(&clangd, &workspace.join("loose/c.c")),
        workspace
    );

    let paths = [
        workspace.join("alpha/src/a.c"),
        workspace.join("alpha/src/b.c"),
        workspace.join("beta/b.c"),
    ];
    let (a, b, beta) = tokio::join!(
        bridge.child_for(&paths[0]),
        bridge.child_for(&paths[1]),
        bridge.child_for(&paths[2])
    );
    let (a, b, beta) = (a.unwrap(), b.unwrap(), beta.unwrap());
    assert!(Arc::ptr_eq(&a, &b), "one instance per (server, root)");
    assert!(!Arc::ptr_eq(&a, &beta));
    assert_eq!(
        (a.root(), beta.root()),
        (
            workspace.join("alpha").as_path(),
            workspace.join("beta").as_path()
        )
    );
    assert_ne!(a.pid(), beta.pid());
    let mut roots: Vec<PathBuf> = bridge
        .running()
        .iter()
        .map(|child| child.root().to_path_buf())
        .collect();
    roots.sort();
    assert_eq!(roots, [workspace.join("alpha"), workspace.join("beta")]);
    let health = bridge.health();
    assert!(
        health
            .iter()
            .all(|health| health.state == "ready" && health.pid.is_some()),
        "{health:?}"
    );
    let json = serde_json::to_value(&health).unwrap();
    assert_eq!(json[0]["name"], "clangd");
    bridge.shutdown_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_request_fails_clearly_and_is_restarted() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("c");
    write(
        &workspace,
        &[
            ("compile_flags.txt", "-std=c11\n"),
            (
                "main.c",
                "int größe(void) { return 1; }\nint main(void) { return größe(); }\n",
            ),
        ],
    );
    let bridge = bridge_with(&["clangd"], &workspace);
    let main = workspace.join("main.c");
    let child = bridge.child_for(&main).await.unwrap();
    open(&child, &main).await;
    assert_lands_on(
        &child,
        &definition(&child, &main, 1, "größe()").await,
        &main,
        0,
        "größe",
    );

    // Stop it first so that the request is certainly in flight (unanswered) when it dies.
    let pid = Pid::from_raw(child.pid().unwrap() as i32);
    kill(pid, Signal::SIGSTOP).unwrap();
    let request = tokio::spawn({
        let child = child.clone();
        async move {
            let params = json!({"textDocument": {"uri": uri(&workspace.join("main.c"))}, "position": {"line": 1, "character": 25}});
            child.request("textDocument/definition", params).await
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let killed_at = Instant::now();
    kill(pid, Signal::SIGKILL).unwrap();
    let error = request.await.unwrap().unwrap_err();
    assert!(
        killed_at.elapsed() < Duration::from_secs(5),
        "pending requests fail at once"
    );
    assert!(
        matches!(error, Error::ServerExited { ref server, .. } if server == "clangd"),
        "{error:?}"
    );
    assert!(error.to_string().contains("`clangd` exited"), "{error}");
    assert_eq!(child.state(), ChildState::Exited);

    let restarted = bridge.child_for(&main).await.unwrap();
    assert!(!Arc::ptr_eq(&child, &restarted));
    open(&restarted, &main).await;
    assert_lands_on(
        &restarted,
        &definition(&restarted, &main, 1, "größe()").await,
        &main,
        0,
        "größe",
    );
    assert_eq!(bridge.health()[0].restarts, 1);
    bridge.shutdown_all().await;
}
