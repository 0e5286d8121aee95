//! The `shell` tool through the real binary (`agent-lsp tool shell`): a command that timed out
//! leaves no process behind, not even one that left its process group with `setsid` or a
//! double fork.

use std::time::Duration;

use agent_tests::processes::live_processes;

#[test]
fn a_timed_out_command_leaves_no_process_even_after_setsid_or_a_double_fork() {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let command = "setsid sleep 1000 & (sh -c 'sleep 1001 &' &); echo started; sleep 30";
    let args = serde_json::json!({ "command": command, "timeout_secs": 1 }).to_string();
    let output = agent_tests::agent_lsp_command(
        state.path(),
        &config,
        &root,
        &["tool", "--yes", "shell", "--args", &args],
    )
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("timed out after 1 s") && stdout.contains("started"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // SIGKILL is delivered before `kill` returns, but a process may take a moment to exit.
    let mut left = Vec::new();
    for _ in 0..50 {
        left = [&["sleep", "1000"][..], &["sleep", "1001"], &["sleep", "30"]]
            .iter()
            .flat_map(|argv| live_processes(argv, &root))
            .collect();
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for pid in &left {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    assert!(
        left.is_empty(),
        "processes of the command survived: {left:?}"
    );
}
