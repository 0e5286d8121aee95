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

/// A preset with `[sandbox] mode = "workspace-write"`: through `agent-lsp tool shell`, the
/// command writes the workspace but not outside it nor `.git/`, and the result's record names
/// the policy and the mechanism; the same command under `standard` (no sandbox) writes outside.
#[test]
fn a_sandboxed_preset_keeps_a_command_in_the_workspace_and_records_how() {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
    let presets = root.join(".agent-lsp/presets");
    std::fs::create_dir_all(&presets).unwrap();
    let standard = agent_lsp::preset::catalog::builtin_text("standard").unwrap();
    std::fs::write(
        presets.join("boxed.toml"),
        format!("{standard}\n[sandbox]\nmode = \"workspace-write\"\n"),
    )
    .unwrap();
    let outside = tempfile::tempdir_in("/var/tmp").unwrap();
    let escaped = outside.path().join("escaped");
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let shell = |preset: &str, command: &str| {
        let args = serde_json::json!({ "command": command }).to_string();
        let output = agent_tests::agent_lsp_command(
            state.path(),
            &config,
            &root,
            &[
                "tool", "--json", "--yes", "--preset", preset, "shell", "--args", &args,
            ],
        )
        .output()
        .unwrap();
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        serde_json::from_str::<serde_json::Value>(&text)
            .unwrap_or_else(|_| panic!("{text}\n{}", String::from_utf8_lossy(&output.stderr)))
    };

    let inside = shell("boxed", "echo made > made.txt");
    assert_eq!(inside["is_error"], false, "{inside}");
    assert_eq!(
        inside["meta"]["sandbox"],
        serde_json::json!({"mode": "workspace-write", "network": false, "mechanism": "bubblewrap"})
    );
    assert!(root.join("made.txt").exists());
    let out = shell("boxed", &format!("echo x > {}", escaped.display()));
    assert_eq!(out["is_error"], true, "{out}");
    assert!(!escaped.exists());
    let hook = shell("boxed", "echo x >> .git/config");
    assert_eq!(hook["is_error"], true, "{hook}");
    assert_eq!(
        std::fs::read_to_string(root.join(".git/config")).unwrap(),
        "[core]\n"
    );

    let unboxed = shell("standard", &format!("echo x > {}", escaped.display()));
    assert_eq!(unboxed["is_error"], false, "{unboxed}");
    assert!(unboxed["meta"].get("sandbox").is_none(), "{unboxed}");
    assert!(escaped.exists());
}

/// A preset that names `mechanism = "landlock"`: through `agent-lsp tool shell` the command runs
/// under Landlock and its seccomp filter, not bubblewrap (which is installed here too). It
/// writes a subfolder of the workspace but not outside it, not `.git/` nor the preset itself,
/// opens no network socket, and the record names Landlock.
#[test]
fn a_preset_naming_landlock_is_held_by_landlock() {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
    let presets = root.join(".agent-lsp/presets");
    std::fs::create_dir_all(&presets).unwrap();
    let standard = agent_lsp::preset::catalog::builtin_text("standard").unwrap();
    let preset =
        format!("{standard}\n[sandbox]\nmode = \"workspace-write\"\nmechanism = \"landlock\"\n");
    std::fs::write(presets.join("locked.toml"), &preset).unwrap();
    let outside = tempfile::tempdir_in("/var/tmp").unwrap();
    let escaped = outside.path().join("escaped");
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let shell = |command: &str| {
        let args = serde_json::json!({ "command": command }).to_string();
        let output = agent_tests::agent_lsp_command(
            state.path(),
            &config,
            &root,
            &[
                "tool", "--json", "--yes", "--preset", "locked", "shell", "--args", &args,
            ],
        )
        .output()
        .unwrap();
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        serde_json::from_str::<serde_json::Value>(&text)
            .unwrap_or_else(|_| panic!("{text}\n{}", String::from_utf8_lossy(&output.stderr)))
    };

    let inside = shell("echo made > src/made.txt");
    assert_eq!(inside["is_error"], false, "{inside}");
    let sandbox = &inside["meta"]["sandbox"];
    assert_eq!(sandbox["mode"], "workspace-write", "{inside}");
    assert!(
        sandbox["mechanism"]
            .as_str()
            .is_some_and(|mechanism| mechanism.starts_with("landlock (ABI ")),
        "{inside}"
    );
    assert!(root.join("src/made.txt").exists());
    for refused in [
        format!("echo x > {}", escaped.display()),
        "echo x >> .git/config".to_owned(),
        "echo '[sandbox]' > .agent-lsp/presets/locked.toml".to_owned(),
        "python3 -c 'import socket; socket.socket(socket.AF_INET)'".to_owned(),
    ] {
        let out = shell(&refused);
        assert_eq!(out["is_error"], true, "`{refused}`: {out}");
    }
    assert!(!escaped.exists());
    assert_eq!(
        std::fs::read_to_string(root.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert_eq!(
        std::fs::read_to_string(presets.join("locked.toml")).unwrap(),
        preset
    );
}
