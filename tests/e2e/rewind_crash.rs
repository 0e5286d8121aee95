//! Rewind across crashes, through the real binary: a process that dies during a capture (its
//! objects written, its `files/checkpoint` not) leaves the last whole checkpoint to rewind to,
//! and a process that dies during a rewind leaves a `rewind/end` `interrupted` on reopen that
//! `--undo` still gives back.

use agent_lsp::session::event::EventBody;
use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, ModelTurn, Reply};
use serde_json::json;

use crate::sandbox::World;

fn read(world: &World, path: &str) -> Option<String> {
    std::fs::read_to_string(world.root.join(path)).ok()
}

#[test]
fn a_process_killed_during_a_capture_still_rewinds_to_the_last_whole_checkpoint() {
    let world = World::new();
    std::fs::write(world.root.join("a.txt"), "a old\n").unwrap();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all::<Reply>([
        ModelTurn::thinking_call(
            "edit",
            json!({"path": "a.txt", "old_string": "a old", "new_string": "a NEW"}),
        )
        .into(),
        ModelTurn::new().reasoning("Done.").content("Done.").into(),
        ModelTurn::thinking_call("shell", json!({"command": "echo b > b.txt"})).into(),
    ]);
    let base = endpoint.base_url();
    world.run_ok(&["run", "--yes", "--base-url", &base, "Edit a"]);
    // The second turn dies right after its command, in the capture that closes its window.
    let output = world
        .command(&[
            "run",
            "--yes",
            "--base-url",
            &base,
            "--session",
            "last",
            "Write b",
        ])
        .env("AGENT_LSP_CRASH_AT", "after_call")
        .output()
        .unwrap();
    assert!(!output.status.success(), "the process was to abort");
    assert_eq!(read(&world, "b.txt").unwrap(), "b\n");

    // What happened after the last whole checkpoint is nobody's known work: it is left alone.
    let shown = world.run_ok(&["rewind", "last", "--turn", "1", "--files"]);
    assert_eq!(read(&world, "a.txt").unwrap(), "a old\n", "{shown}");
    assert_eq!(read(&world, "b.txt").unwrap(), "b\n", "{shown}");
    assert!(shown.contains("left b.txt: yours, untouched"), "{shown}");
}

#[test]
fn a_process_killed_during_a_rewind_is_closed_as_interrupted_and_undone() {
    let world = World::new();
    std::fs::write(world.root.join("a.txt"), "a old\n").unwrap();
    std::fs::write(world.root.join("b.txt"), "b old\n").unwrap();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all::<Reply>([
        ModelTurn::thinking_call(
            "shell",
            json!({"command": "echo a NEW > a.txt && echo b NEW > b.txt"}),
        )
        .into(),
        ModelTurn::new().reasoning("Done.").content("Done.").into(),
    ]);
    world.run_ok(&[
        "run",
        "--yes",
        "--base-url",
        &endpoint.base_url(),
        "Change both",
    ]);

    // The rewind dies after restoring its first path.
    let output = world
        .command(&["rewind", "last", "--files"])
        .env("AGENT_LSP_CRASH_AT", "rewind-write")
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert_eq!(read(&world, "a.txt").unwrap(), "a old\n");
    assert_eq!(
        read(&world, "b.txt").unwrap(),
        "b NEW\n",
        "the second path was not reached"
    );

    // Reopened, the rewind is closed as interrupted; the undo gives back what it did write.
    world.run_ok(&["rewind", "last", "--undo"]);
    assert_eq!(read(&world, "a.txt").unwrap(), "a NEW\n");
    assert_eq!(read(&world, "b.txt").unwrap(), "b NEW\n");
    let store = agent_lsp::session::store::Store::for_workspace_in(world.state.path(), &world.root)
        .unwrap();
    let history = store.load("last").unwrap();
    let outcomes: Vec<String> = history
        .events()
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::RewindEnd(end) => Some(end.outcome.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(outcomes, ["interrupted", "applied"]);
}
