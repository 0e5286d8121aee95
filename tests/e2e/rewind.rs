//! Rewind through the real binary and the loopback model: a turn that edits, writes and runs
//! commands is taken back byte for byte, the user's own changes are kept (or, forced, kept in
//! the store for `--undo`), a rewind and its undo are in the log, and every request of the
//! session still replays byte-identically.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use agent_lsp::session::event::{CheckpointReason, EventBody};
use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, ModelTurn, Reply};
use serde_json::json;

use crate::sandbox::World;

const FILES: [(&str, &str); 6] = [
    ("a.txt", "alpha old\n"),
    ("b.txt", "beta old\n"),
    ("d.txt", "delta old\n"),
    ("e.sh", "#!/bin/sh\necho epsilon\n"),
    ("f.txt", "the user's own\n"),
    ("g.bin", "\u{0}\u{1}binary\u{ff}"),
];

fn seed(root: &Path) {
    for (path, text) in FILES {
        std::fs::write(root.join(path), text).unwrap();
    }
    std::fs::set_permissions(root.join("e.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Every file under the user's `.git`, with its bytes and modification time.
fn git_dir(root: &Path) -> Vec<(std::path::PathBuf, Vec<u8>, std::time::SystemTime)> {
    let mut files: Vec<_> = ignore::WalkBuilder::new(root.join(".git"))
        .standard_filters(false)
        .build()
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_some_and(|kind| kind.is_file()))
        .map(|entry| {
            let path = entry.into_path();
            let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
            (path.clone(), std::fs::read(&path).unwrap(), modified)
        })
        .collect();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    files
}

fn read(root: &Path, path: &str) -> Option<String> {
    std::fs::read(root.join(path))
        .ok()
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
}

/// One turn: `edit` a.txt and b.txt, `write` c.txt, and one `shell` that `sed -i`s d.txt and
/// removes e.sh.
fn one_turn(world: &World, endpoint: &ModelEndpoint, prompt: &str) {
    endpoint.push_all::<Reply>([
        ModelTurn::thinking_call(
            "edit",
            json!({"path": "a.txt", "old_string": "alpha old", "new_string": "alpha NEW"}),
        )
        .into(),
        ModelTurn::thinking_call(
            "edit",
            json!({"path": "b.txt", "old_string": "beta old", "new_string": "beta NEW"}),
        )
        .into(),
        ModelTurn::thinking_call("write", json!({"path": "c.txt", "content": "gamma\n"})).into(),
        ModelTurn::thinking_call(
            "shell",
            json!({"command": "sed -i 's/delta old/delta NEW/' d.txt && rm e.sh"}),
        )
        .into(),
        ModelTurn::new().reasoning("Done.").content("Done.").into(),
    ]);
    world.run_ok(&["run", "--yes", "--base-url", &endpoint.base_url(), prompt]);
}

fn rewind(world: &World, args: &[&str]) -> (i32, String) {
    let mut all = vec!["rewind", "last"];
    all.extend_from_slice(args);
    let output = world.command(&all).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        matches!(output.status.code(), Some(0 | 3)),
        "{all:?}: {stdout}{stderr}"
    );
    (output.status.code().unwrap(), stdout)
}

#[test]
fn a_turns_edits_writes_and_commands_are_taken_back_and_the_users_work_is_kept() {
    let world = World::new();
    seed(&world.root);
    let git_before = git_dir(&world.root);
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    one_turn(&world, &endpoint, "Change the files");
    endpoint.assert_no_violations();
    assert_eq!(read(&world.root, "a.txt").unwrap(), "alpha NEW\n");
    assert_eq!(read(&world.root, "d.txt").unwrap(), "delta NEW\n");
    assert!(read(&world.root, "e.sh").is_none());

    // The user changes a file the agent did not touch, and one it did.
    std::fs::write(world.root.join("f.txt"), "the user's own, changed\n").unwrap();
    std::fs::write(world.root.join("b.txt"), "beta by the user\n").unwrap();

    // A dry run lists the conflict with what forcing it would lose, and changes nothing.
    let (code, shown) = rewind(&world, &["--files", "--dry-run"]);
    assert_eq!(code, 0);
    assert!(
        shown.contains("kept b.txt: you changed it too after the turn began"),
        "{shown}"
    );
    assert!(shown.contains("-beta by the user"), "{shown}");
    assert!(shown.contains("left f.txt: yours, untouched"), "{shown}");
    assert_eq!(read(&world.root, "a.txt").unwrap(), "alpha NEW\n");

    // Without --force the conflict is kept and the rest goes back byte for byte.
    let (code, shown) = rewind(&world, &["--files"]);
    assert_eq!(code, 3, "{shown}");
    assert_eq!(read(&world.root, "a.txt").unwrap(), "alpha old\n");
    assert_eq!(read(&world.root, "b.txt").unwrap(), "beta by the user\n");
    assert!(
        read(&world.root, "c.txt").is_none(),
        "the written file is gone"
    );
    assert_eq!(read(&world.root, "d.txt").unwrap(), "delta old\n");
    assert_eq!(
        read(&world.root, "e.sh").unwrap(),
        "#!/bin/sh\necho epsilon\n"
    );
    let mode = std::fs::metadata(world.root.join("e.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o111,
        0o111,
        "the removed script comes back executable"
    );
    assert_eq!(
        read(&world.root, "f.txt").unwrap(),
        "the user's own, changed\n"
    );

    // The undo gives back exactly the files of before the rewind.
    rewind(&world, &["--undo"]);
    assert_eq!(read(&world.root, "a.txt").unwrap(), "alpha NEW\n");
    assert_eq!(read(&world.root, "c.txt").unwrap(), "gamma\n");
    assert_eq!(read(&world.root, "d.txt").unwrap(), "delta NEW\n");
    assert!(read(&world.root, "e.sh").is_none());
    assert_eq!(read(&world.root, "b.txt").unwrap(), "beta by the user\n");

    // Forced, the user's change goes too; its text is in the store, and the undo brings it back.
    let (code, _) = rewind(&world, &["--files", "--force"]);
    assert_eq!(code, 0);
    for (path, text) in FILES {
        if path != "f.txt" {
            assert_eq!(
                read(&world.root, path).unwrap(),
                String::from_utf8_lossy(text.as_bytes()),
                "{path}"
            );
        }
    }
    rewind(&world, &["--undo"]);
    assert_eq!(read(&world.root, "b.txt").unwrap(), "beta by the user\n");
    assert_eq!(
        read(&world.root, "f.txt").unwrap(),
        "the user's own, changed\n"
    );

    // The log holds the checkpoints around the command, the rewinds and their undos, and every
    // request still replays byte for byte.
    let store = agent_lsp::session::store::Store::for_workspace_in(world.state.path(), &world.root)
        .unwrap();
    let session = store.resolve("last").unwrap();
    let history = store.load(&session).unwrap();
    let reasons: Vec<CheckpointReason> = history
        .events()
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::FileCheckpoint(checkpoint) if event.turn == 1 => Some(checkpoint.reason),
            _ => None,
        })
        .take(4)
        .collect();
    use CheckpointReason::*;
    assert_eq!(reasons, [TurnStart, BeforeCall, AfterCall, TurnEnd]);
    let outcomes: Vec<(bool, String)> = history
        .events()
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::RewindEnd(end) => Some((end.kept.is_empty(), end.outcome.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            (false, "partial".to_owned()),
            (true, "applied".to_owned()),
            (true, "applied".to_owned()),
            (true, "applied".to_owned())
        ]
    );
    assert_eq!(endpoint.chat_requests().len(), 5);
    world.assert_every_request_replays(&session, &endpoint);
    // The checkpoints live in a store of their own: the user's `.git` is as it was, byte for
    // byte and to the modification time.
    assert!(
        git_dir(&world.root) == git_before,
        "the user's .git changed"
    );
}

/// Four turns: a rewind of turn 2 takes back what turns 2 to 4 changed, to the files of before
/// turn 2, and the conversation with them; a third turn's change of turn 1's file is kept out.
#[test]
fn a_rewind_of_turn_two_of_four_takes_back_every_later_turn_and_the_conversation() {
    let world = World::new();
    std::fs::write(world.root.join("log.txt"), "0\n").unwrap();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    for turn in 1..=4 {
        endpoint.push_all::<Reply>([
            ModelTurn::thinking_call(
                "shell",
                json!({"command": format!("echo {turn} >> log.txt && echo {turn} > turn{turn}.txt")}),
            )
            .into(),
            ModelTurn::new().reasoning("Done.").content(format!("turn {turn} done")).into(),
        ]);
        let base = endpoint.base_url();
        let prompt = format!("Turn {turn}");
        let mut args = vec!["run", "--yes", "--base-url", &base];
        if turn > 1 {
            args.extend(["--session", "last"]);
        }
        args.push(&prompt);
        world.run_ok(&args);
    }
    assert_eq!(read(&world.root, "log.txt").unwrap(), "0\n1\n2\n3\n4\n");

    let (code, shown) = rewind(&world, &["--turn", "2"]);
    assert_eq!(code, 0, "{shown}");
    assert_eq!(read(&world.root, "log.txt").unwrap(), "0\n1\n");
    assert!(read(&world.root, "turn1.txt").is_some());
    for turn in 2..=4 {
        assert!(
            read(&world.root, &format!("turn{turn}.txt")).is_none(),
            "turn {turn}"
        );
    }
    let context = world.run_ok(&["context", "show", "last"]);
    assert!(context.contains("Turn 1"), "{context}");
    assert!(!context.contains("Turn 2"), "{context}");

    // The turns list says which were taken back; the undo gives back files and conversation.
    let shown = world.run_ok(&["session", "show", "last"]);
    let marked: Vec<&str> = shown
        .lines()
        .filter(|line| line.contains("[taken back by rewind-"))
        .collect();
    assert_eq!(marked.len(), 3, "turns 2 to 4 are marked: {shown}");
    assert!(marked[0].contains("Turn 2"), "{shown}");
    let trajectory = world.run_ok(&["session", "trajectory", "last", "--format", "json"]);
    assert!(
        trajectory.contains("prompt (turn 3) — taken back by rewind-"),
        "{trajectory}"
    );
    rewind(&world, &["--undo"]);
    let shown = world.run_ok(&["session", "show", "last"]);
    assert!(
        !shown.contains("[taken back by"),
        "the undo clears the marks: {shown}"
    );
    assert_eq!(read(&world.root, "log.txt").unwrap(), "0\n1\n2\n3\n4\n");
    let context = world.run_ok(&["context", "show", "last"]);
    assert!(context.contains("Turn 4"), "{context}");
}

/// `[checkpoints]` in the user's configuration: a file over `max_file_bytes` is not captured,
/// and a rewind names it rather than guess; `enabled = false` takes no checkpoints at all.
#[test]
fn the_configured_size_cap_and_switch_are_honoured() {
    let world = World::new();
    std::fs::write(&world.config, "[checkpoints]\nmax_file_bytes = 16\n").unwrap();
    std::fs::write(world.root.join("big.txt"), "twenty bytes, more.\n").unwrap();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all::<Reply>([
        ModelTurn::thinking_call(
            "shell",
            json!({"command": "echo more >> big.txt && echo small > s.txt"}),
        )
        .into(),
        ModelTurn::new().reasoning("Done.").content("Done.").into(),
    ]);
    world.run_ok(&[
        "run",
        "--yes",
        "--base-url",
        &endpoint.base_url(),
        "Grow it",
    ]);
    let (code, shown) = rewind(&world, &["--files"]);
    assert_eq!(code, 3, "{shown}");
    assert!(read(&world.root, "s.txt").is_none(), "{shown}");
    assert!(
        shown.contains(
            "kept big.txt: over the size cap: it was not captured and cannot be restored"
        ),
        "{shown}"
    );
    assert_eq!(
        read(&world.root, "big.txt").unwrap(),
        "twenty bytes, more.\nmore\n"
    );

    std::fs::write(&world.config, "[checkpoints]\nenabled = false\n").unwrap();
    endpoint.push_all::<Reply>([ModelTurn::new().reasoning("Done.").content("Done.").into()]);
    world.run_ok(&["run", "--base-url", &endpoint.base_url(), "Nothing"]);
    let store = agent_lsp::session::store::Store::for_workspace_in(world.state.path(), &world.root)
        .unwrap();
    let history = store.load("last").unwrap();
    assert!(
        !history
            .events()
            .iter()
            .any(|event| matches!(event.body, EventBody::FileCheckpoint(_))),
        "no checkpoint with enabled = false"
    );
}

/// After a files-only rewind the model keeps the conversation, so it is told which files went
/// back (runtime context, once); an undo takes the note away again.
#[test]
fn after_a_files_only_rewind_the_model_is_told_which_files_went_back() {
    let world = World::new();
    std::fs::write(world.root.join("a.txt"), "a old\n").unwrap();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let base = endpoint.base_url();
    endpoint.push_all::<Reply>([
        ModelTurn::thinking_call("shell", json!({"command": "echo a NEW > a.txt"})).into(),
        ModelTurn::new().reasoning("Done.").content("Done.").into(),
        ModelTurn::new().reasoning("Ok.").content("Ok.").into(),
        ModelTurn::new().reasoning("Ok.").content("Ok.").into(),
    ]);
    world.run_ok(&["run", "--yes", "--base-url", &base, "Change a"]);
    rewind(&world, &["--files"]);
    world.run_ok(&["run", "--base-url", &base, "--session", "last", "What now?"]);
    rewind(&world, &["--undo"]);
    world.run_ok(&["run", "--base-url", &base, "--session", "last", "And now?"]);
    // The runtime contexts of request `index`, as its body carries them.
    let contexts = |index: usize| -> String {
        let raw = String::from_utf8_lossy(&endpoint.chat_requests()[index].raw).into_owned();
        raw.split("<runtime-context>")
            .skip(1)
            .collect::<Vec<_>>()
            .join("\n---\n")
    };
    let note = "files_rewound: the user took back what turn 1 did to these files, which are as they were before turn 1: a.txt";
    assert!(!contexts(1).contains("files_rewound"), "{}", contexts(1));
    assert!(contexts(2).contains(note), "{}", contexts(2));
    // After the undo the latest runtime context has no note (the earlier one stays in history).
    let last = contexts(3);
    let latest = last.rsplit("---").next().unwrap();
    assert!(!latest.contains("files_rewound"), "{last}");
    endpoint.assert_no_violations();
    // Every request still replays byte for byte.
    world.assert_every_request_replays("last", &endpoint);
}

/// The loose objects of the checkpoint store.
fn objects(state: &Path) -> usize {
    let mut count = 0;
    for store in std::fs::read_dir(state.join("workspaces")).unwrap() {
        let objects = store.unwrap().path().join("checkpoints/git/objects");
        for fan in std::fs::read_dir(objects).unwrap() {
            let fan = fan.unwrap();
            if fan.file_name().len() == 2 {
                count += std::fs::read_dir(fan.path()).unwrap().count();
            }
        }
    }
    count
}

/// A generated tree of 20,000 files (`bench/files/gen.py`): after the first walk, a capture
/// after a one-file change comes from the file watcher's journal, reads that one file, and
/// writes only its blob, the trees on its path and the checkpoint's commit.
#[test]
fn a_checkpoint_after_a_one_file_change_in_a_big_tree_writes_only_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tree");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let generated = std::process::Command::new("python3")
        .arg(repo.join("bench/files/gen.py"))
        .arg(&root)
        .args(["--files", "20000", "--ignored", "2000"])
        .output()
        .unwrap();
    assert!(generated.status.success(), "{generated:?}");
    let root = root.canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    // A file four folders down, and its folders.
    let deep = ignore::WalkBuilder::new(&root)
        .build()
        .filter_map(Result::ok)
        .map(|entry| entry.into_path())
        .find(|path| path.is_file() && path.strip_prefix(&root).unwrap().components().count() == 5)
        .expect("a file four folders down");
    let relative = deep
        .strip_prefix(&root)
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let run = |command: &str| {
        let output = agent_tests::agent_lsp_command(
            state.path(),
            &config,
            &root,
            &[
                "tool",
                "shell",
                "--yes",
                "--args",
                &json!({"command": command}).to_string(),
            ],
        )
        .output()
        .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    run("true");
    let before = objects(state.path());
    run(&format!("echo changed >> '{relative}'"));
    let store = agent_lsp::session::store::Store::for_workspace_in(state.path(), &root).unwrap();
    let history = store.load("last").unwrap();
    let checkpoints: Vec<_> = history
        .events()
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::FileCheckpoint(checkpoint) => Some(checkpoint.clone()),
            _ => None,
        })
        .collect();
    let after_call = checkpoints
        .iter()
        .rev()
        .find(|c| c.reason == CheckpointReason::AfterCall)
        .unwrap();
    assert_eq!(after_call.scan, "journal");
    assert_eq!(after_call.changed, std::slice::from_ref(&relative));
    assert_eq!(after_call.read, 1, "only the changed file is read");
    // The process's four captures write four commits and, for the change, its blob, the four
    // folders' trees and the workspace's tree, and the checkpoint's own root tree.
    assert_eq!(objects(state.path()) - before, 4 + 1 + 5 + 1);
}
