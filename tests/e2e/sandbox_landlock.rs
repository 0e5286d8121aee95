//! The sandbox's second mechanism through the real binary: the hostile suite and the ordinary
//! work under Landlock and its seccomp filter (named by the preset), and `standard` falling
//! back to it on a machine without bubblewrap.

use serde_json::Value;

use crate::sandbox::{World, ordinary_work_in, suite_in};

#[test]
fn landlock_workspace_write_refuses_every_hostile_command() {
    suite_in(
        World::new,
        "mode = \"workspace-write\"\nmechanism = \"landlock\"",
        "landlock (ABI ",
    );
}

#[test]
fn landlock_read_only_refuses_every_hostile_command() {
    suite_in(
        World::new,
        "mode = \"read-only\"\nmechanism = \"landlock\"",
        "landlock (ABI ",
    );
}

/// Under Landlock a command cannot make an entry at the workspace's root (`presets/README.md`):
/// the crate lives in a folder, as in a workspace of several.
#[test]
fn ordinary_work_passes_inside_landlock() {
    ordinary_work_in(
        "mode = \"workspace-write\"\nmechanism = \"landlock\"",
        "crates/demo",
    );
}

/// Where bubblewrap is not installed, `standard` (`mechanism = "auto"`) holds its commands with
/// Landlock: `servers` says so, and the hostile suite is refused all the same.
#[test]
fn without_bubblewrap_standard_falls_back_to_landlock() {
    let world = World::new().without_bubblewrap();
    let servers = world.command(&["servers", "--json"]).output().unwrap();
    let servers: Value = serde_json::from_slice(&servers.stdout).unwrap();
    assert!(
        servers["sandbox"]["mechanism"]
            .as_str()
            .is_some_and(|mechanism| mechanism.starts_with("landlock (ABI ")),
        "{servers}"
    );
    suite_in(
        || World::new().without_bubblewrap(),
        "mode = \"workspace-write\"",
        "landlock (ABI ",
    );
}

/// A preset that names bubblewrap on a machine without it: the editor is told when the session
/// starts that its commands run with every right of the user, and why; the command is then
/// asked for as `shell`'s permission says (the editor's plain answer declines it).
#[test]
fn the_editor_is_told_when_the_sandbox_the_preset_asks_for_cannot_be_had() {
    let world = World::new().without_bubblewrap();
    world.preset(
        "needs-bwrap",
        "mode = \"workspace-write\"\nmechanism = \"bubblewrap\"",
    );
    std::fs::write(&world.config, "preset = \"needs-bwrap\"\n").unwrap();
    let mut editor = agent_tests::editor::Editor::start(world.command(&["serve"]));
    editor.initialize(&world.root);
    let ran = editor.request(
        "workspace/executeCommand",
        serde_json::json!({"command": "agent.tool", "arguments": [{"name": "shell", "arguments": {"command": "touch ran"}}]}),
    );
    let shown = editor.wait_for("the sandbox warning", |message| {
        message["method"] == "window/showMessage"
            && message["params"]["message"]
                .as_str()
                .is_some_and(|text| text.contains("asks for a sandbox"))
    });
    let text = shown["params"]["message"].as_str().unwrap();
    assert!(
        text.contains("preset `needs-bwrap` asks for a sandbox, but its commands run with every right of the user: the policy asks for bubblewrap, which is not available"),
        "{text}"
    );
    assert_eq!(shown["params"]["type"], 2);
    assert_eq!(ran["result"]["is_error"], true, "{ran}");
    assert!(!world.root.join("ran").exists());
    editor.shutdown();
}
