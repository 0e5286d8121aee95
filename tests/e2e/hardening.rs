//! The file tools against an adversary on the same machine: a symlink swapped in while a tool
//! checks and opens a path, through the real `serve` and its `agent.tool` command, as fast as
//! the editor can ask.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use agent_tests::editor::Editor;
use serde_json::{Value, json};

const SECRET: &str = "THE-SECRET-OUTSIDE-THE-WORKSPACE";

/// Swap `race.txt` between a file inside and a link to the secret outside, and `dir` between a
/// directory inside and a link to the secret's directory, each in one atomic exchange (so the
/// name always exists, as one or the other), until `stop` is set. Returns the swaps made.
fn swapper(root: &Path, outside: &Path, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    let (root, outside) = (root.to_owned(), outside.to_owned());
    std::os::unix::fs::symlink(outside.join("secret.txt"), root.join(".race-link")).unwrap();
    std::fs::create_dir(root.join("dir")).unwrap();
    std::fs::write(root.join("dir/secret.txt"), "inside\n").unwrap();
    std::os::unix::fs::symlink(&outside, root.join(".dir-link")).unwrap();
    std::thread::spawn(move || {
        let exchange = |a: &str, b: &str| {
            rustix::fs::renameat_with(
                rustix::fs::CWD,
                root.join(a),
                rustix::fs::CWD,
                root.join(b),
                rustix::fs::RenameFlags::EXCHANGE,
            )
            .expect("renameat2 RENAME_EXCHANGE");
        };
        let mut swaps = 0;
        while !stop.load(Ordering::Relaxed) {
            exchange("race.txt", ".race-link");
            exchange("dir", ".dir-link");
            swaps += 1;
        }
        swaps
    })
}

fn tool(editor: &mut Editor, name: &str, arguments: Value) -> String {
    let answer = editor.request(
        "workspace/executeCommand",
        json!({"command": "agent.tool", "arguments": [{"name": name, "arguments": arguments}]}),
    );
    answer.to_string()
}

#[test]
fn a_symlink_swapped_in_during_the_check_never_lets_read_or_grep_out() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), format!("{SECRET}\n")).unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    std::fs::write(root.join("race.txt"), "inside\n").unwrap();
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let mut command = Command::new(agent_tests::workspace_bin("agent-lsp"));
    command
        .env("AGENT_LSP_STATE_DIR", state.path())
        .env("AGENT_LSP_CONFIG", &config)
        .env_remove("DEEPSEEK_API_KEY")
        .args(["--workspace", root.to_str().unwrap(), "serve"]);
    let mut editor = Editor::start(command);
    editor.initialize_with(&root, Value::Null);

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = swapper(&root, outside.path(), stop.clone());
    let (mut calls, mut escapes, mut inside) = (0, Vec::new(), 0);
    let deadline = Instant::now() + Duration::from_secs(4);
    while Instant::now() < deadline {
        for (name, arguments) in [
            ("read", json!({"path": "race.txt"})),
            ("read", json!({"path": "dir/secret.txt"})),
            (
                "grep",
                json!({"pattern": "SECRET|inside", "path": "race.txt"}),
            ),
            ("grep", json!({"pattern": "SECRET|inside"})),
        ] {
            let answer = tool(&mut editor, name, arguments);
            calls += 1;
            if answer.contains(SECRET) {
                escapes.push(answer);
            } else if answer.contains("inside") {
                inside += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swaps.join().unwrap();
    editor.shutdown();
    assert!(
        escapes.is_empty(),
        "{} of {calls} calls escaped: {:?}",
        escapes.len(),
        &escapes[..1]
    );
    // The race was real: the tools did read the file inside between swaps, many times.
    assert!(
        swaps > 100 && inside > 10,
        "{swaps} swaps, {inside} reads inside of {calls}"
    );
}
