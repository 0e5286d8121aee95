//! Crash test: a child process appending to a session is killed with SIGKILL at random moments,
//! many times over the same file. Reopening must never lose an acknowledged event (one whose seq
//! the child printed after `append` returned) and never yield an inconsistent surface. And a
//! full disk (a real tmpfs) under a long-lived `serve`: the turn that hits it fails with the
//! reason, the next one after space comes back succeeds, and the log reads back whole.

use std::process::Command;

use agent_lsp::session::Session;
use agent_lsp::session::log::{Durability, read_log};
use agent_tests::assert_tool_pairing;

const KILLS: u64 = 60;

#[test]
fn sigkill_at_random_moments_loses_no_acknowledged_event() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.jsonl");
    let writer = agent_tests::workspace_bin("log-writer");
    let mut acknowledged = Vec::new();
    let mut torn_tails = 0;
    let mut seed = 0x9e37_79b9_u64;

    for round in 0..KILLS {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let lines = agent_tests::processes::kill_while_writing(
            Command::new(&writer).arg(&path).arg(seed.to_string()),
            seed,
            40,
            200,
        );
        acknowledged.extend(lines.iter().map(|line| line.parse::<u64>().expect("seq")));

        if read_log(&path)
            .map(|log| log.torn_tail.is_some())
            .unwrap_or(false)
        {
            torn_tails += 1;
        }
        let mut session = Session::open(&path, Durability::Sync)
            .unwrap_or_else(|error| panic!("round {round}: reopening failed: {error:#}"));
        let history = session.history();
        for seq in &acknowledged {
            assert!(
                history.event(*seq).is_some(),
                "round {round}: acknowledged event {seq} was lost"
            );
        }
        // The file holds nothing torn any more, and the surface is consistent.
        assert!(read_log(&path).unwrap().torn_tail.is_none());
        assert_tool_pairing(session.derive_messages());
    }
    assert!(
        acknowledged.len() as u64 > KILLS,
        "the writer acknowledged too few events to test anything"
    );
    eprintln!(
        "{} acknowledged events over {KILLS} kills; {torn_tails} torn tails cut",
        acknowledged.len()
    );
}

/// A tmpfs of `kib` KiB mounted on a fresh directory, unmounted when dropped. The tests run as
/// root (CI does); a full disk is a real one here, not an injected error.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(kib: u32) -> SmallDisk {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("run mount");
        assert!(
            status.success(),
            "mounting a tmpfs failed ({status}): this test needs root (or CAP_SYS_ADMIN), as CI has"
        );
        SmallDisk { dir }
    }

    fn path(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Fill every free byte with a file of its own; returns its path.
    fn fill(&self) -> std::path::PathBuf {
        use std::io::Write;
        let filler = self.path().join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        let block = vec![b'x'; 4096];
        while file.write_all(&block).is_ok() {}
        while file.write_all(b"x").is_ok() {}
        filler
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

#[test]
fn a_full_disk_fails_one_turn_under_serve_and_the_session_stays_whole() {
    use agent_tests::editor::Editor;
    use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, Reply};
    use serde_json::json;

    let disk = SmallDisk::mount(512);
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    std::fs::write(root.join("notes.md"), "notes\n").unwrap();
    let state = disk.path().join("state");
    let config = root.join("config.toml");
    std::fs::write(&config, "").unwrap();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all([Reply::text("first answer"), Reply::text("third answer")]);
    let mut command = Command::new(agent_tests::workspace_bin("agent-lsp"));
    command
        .env("AGENT_LSP_STATE_DIR", &state)
        .env("AGENT_LSP_CONFIG", &config)
        .env_remove("DEEPSEEK_API_KEY")
        .args(["--workspace", root.to_str().unwrap(), "serve"]);
    let mut editor = Editor::start(command);
    editor.initialize_with(
        &root,
        json!({"baseUrl": endpoint.base_url(), "apiKey": "sk-test", "model": "deepseek-v4-flash"}),
    );
    let ask = |editor: &mut Editor, prompt: &str| {
        editor.request(
            "workspace/executeCommand",
            json!({"command": "agent.ask", "arguments": [{"prompt": prompt}]}),
        )
    };
    let first = ask(&mut editor, "first prompt");
    assert_eq!(first["result"]["outcome"], "answered", "{first}");

    // The disk fills up: the next turn fails, saying why. Its prompt is longer than any slack
    // left in the log's last page, so its line is written in part before the disk refuses.
    let filler = disk.fill();
    let long_prompt = format!("second prompt {}", "y".repeat(20_000));
    let second = ask(&mut editor, &long_prompt);
    let message = second["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("No space left on device"), "{second}");

    // Space comes back; the same server runs another turn in the same session.
    std::fs::remove_file(filler).unwrap();
    let third = ask(&mut editor, "third prompt");
    assert_eq!(third["result"]["outcome"], "answered", "{third}");
    let session = third["result"]["session"].as_str().unwrap().to_owned();
    assert_eq!(first["result"]["session"], session);
    editor.shutdown();

    // Reopened, the log is whole: both answered turns are there, the refused prompt is not.
    let store = agent_lsp::session::store::Store::for_workspace_in(&state, &root).unwrap();
    let path = store.path_of(&session);
    let log = read_log(&path).unwrap_or_else(|error| panic!("the log does not read: {error:#}"));
    assert!(log.torn_tail.is_none());
    let prompts: Vec<String> = log
        .events
        .iter()
        .filter_map(|event| match &event.body {
            agent_lsp::session::event::EventBody::UserMessage(message) => {
                Some(message.text.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(prompts, ["first prompt", "third prompt"]);
    Session::open(&path, Durability::Sync).unwrap();
    endpoint.assert_no_violations();
}
