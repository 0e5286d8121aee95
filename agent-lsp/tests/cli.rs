//! Smoke tests of the `agent-lsp` binary itself (this also makes `cargo test --workspace` build
//! the binary, which the end-to-end tests in `tests/` run).

use std::process::Command;

fn agent_lsp(state: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_agent-lsp"))
        .env("AGENT_LSP_STATE_DIR", state)
        .args(args)
        .output()
        .expect("run agent-lsp")
}

#[test]
fn help_names_the_session_commands() {
    let state = tempfile::tempdir().unwrap();
    let output = agent_lsp(state.path(), &["session", "--help"]);
    assert!(output.status.success());
    let help = String::from_utf8(output.stdout).unwrap();
    for command in ["list", "show", "replay"] {
        assert!(help.contains(command), "{help}");
    }
}

#[test]
fn an_empty_workspace_has_no_sessions_and_says_so() {
    let state = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let dir = workspace.path().to_str().unwrap();
    let output = agent_lsp(state.path(), &["--workspace", dir, "session", "list"]);
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("no sessions yet"));

    let output = agent_lsp(
        state.path(),
        &["--workspace", dir, "session", "show", "abcd"],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no sessions yet for workspace"));
}

#[test]
fn a_missing_workspace_is_a_clear_error() {
    let state = tempfile::tempdir().unwrap();
    let output = agent_lsp(
        state.path(),
        &["--workspace", "/definitely/not/here", "session", "list"],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("workspace /definitely/not/here does not exist")
    );
}
