use std::path::Path;

use super::*;

fn memories(dir: &Path) -> Memories {
    Memories::new(dir.join("ws/memory.jsonl"), dir.join("memory.jsonl"))
}

fn from(seq: u64) -> Provenance {
    Provenance {
        session: "s1".into(),
        seq: Some(seq),
        time: "2026-11-29T10:00:00Z".into(),
    }
}

fn error_of<T: std::fmt::Debug>(result: anyhow::Result<T>) -> String {
    format!("{:#}", result.expect_err("refused"))
}

#[test]
fn remembered_memories_replay_with_ids_and_provenance() {
    let dir = tempfile::tempdir().unwrap();
    let store = memories(dir.path());
    let first = store
        .remember(Scope::Workspace, "  one  ", from(3))
        .unwrap();
    assert_eq!(first.id, "w1");
    assert_eq!(first.text, "one");
    store.remember(Scope::Workspace, "two", from(5)).unwrap();
    store.remember(Scope::User, "mine", from(6)).unwrap();
    store.forget("w1", from(8)).unwrap();
    let edited = store
        .edit("w2", "two, edited", Provenance::now(CLI, None))
        .unwrap();
    assert_eq!(
        edited.provenance,
        from(5),
        "an edit keeps where it came from"
    );
    // Ids are never given twice, also after a forget.
    assert_eq!(
        store
            .remember(Scope::Workspace, "three", from(9))
            .unwrap()
            .id,
        "w3"
    );

    let listed = memories(dir.path()).list().unwrap();
    let ids = listed.iter().map(|m| m.id.as_str()).collect::<Vec<_>>();
    assert_eq!(ids, ["w2", "w3", "u1"]);
    assert_eq!(listed[0].text, "two, edited");
    assert_eq!(listed[0].edited.as_ref().unwrap().session, CLI);
    assert_eq!(store.get("u1").unwrap().provenance, from(6));
    assert!(error_of(store.get("w1")).contains("no memory `w1`"));
    assert!(error_of(store.get("q1")).contains("not a memory id"));
    assert!(error_of(store.forget("w1", from(10))).contains("no memory `w1`"));
    // Five records in the workspace file, one in the user's: every change appended.
    let lines = std::fs::read_to_string(dir.path().join("ws/memory.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 5);
    assert!(
        lines
            .lines()
            .all(|line| serde_json::from_str::<Record>(line).is_ok())
    );
}

#[test]
fn a_torn_last_line_is_ignored_by_readers_and_cut_by_the_next_writer() {
    let dir = tempfile::tempdir().unwrap();
    let store = memories(dir.path());
    store.remember(Scope::Workspace, "kept", from(1)).unwrap();
    let path = dir.path().join("ws/memory.jsonl");
    let whole = std::fs::read(&path).unwrap();
    for torn in [
        // A prefix of a record without its newline, as a kill mid-write leaves it.
        &br#"{"op":"remember","id":"w2","scope":"works"#[..],
        // Zeros where the data never reached the disk.
        &[0u8; 40][..],
        // A last line that does not parse, newline and all.
        &b"{\"op\":\"rem\n"[..],
    ] {
        std::fs::write(&path, [whole.as_slice(), torn].concat()).unwrap();
        let listed = store.list().unwrap();
        assert_eq!(listed.len(), 1, "a reader ignores the torn tail");
        assert_eq!(
            std::fs::read(&path).unwrap().len(),
            whole.len() + torn.len(),
            "readers repair nothing"
        );
        let next = store.remember(Scope::Workspace, "after", from(2)).unwrap();
        assert_eq!(next.id, "w2");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with(std::str::from_utf8(&whole).unwrap()));
        assert_eq!(text.lines().count(), 2, "{text:?}");
        store.forget("w2", from(3)).unwrap();
        std::fs::write(&path, &whole).unwrap();
    }
}

#[test]
fn damage_before_the_last_line_is_an_error_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let store = memories(dir.path());
    for text in ["a", "b", "c"] {
        store.remember(Scope::Workspace, text, from(1)).unwrap();
    }
    let path = dir.path().join("ws/memory.jsonl");
    let lines = std::fs::read_to_string(&path).unwrap();
    let lines = lines.lines().collect::<Vec<_>>();
    let check = |text: String, expected: &str| {
        std::fs::write(&path, &text).unwrap();
        let read = error_of(store.list());
        assert!(read.contains(expected), "{read}");
        assert!(read.contains("fix or delete that line"), "{read}");
        let write = error_of(store.remember(Scope::Workspace, "d", from(2)));
        assert_eq!(read, write);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            text,
            "left as it was"
        );
    };
    check(
        format!("{}\nnot json\n{}\n", lines[0], lines[2]),
        "corrupt at line 2: it is not a memory record",
    );
    check(
        format!("{}\n{}\n", lines[0], lines[0]),
        "corrupt at line 2: `w1` was given before",
    );
    check(
        format!(
            "{}\n{{\"op\":\"forget\",\"id\":\"w9\",\"provenance\":{{\"session\":\"s\",\"time\":\"t\"}}}}\n",
            lines[0]
        ),
        "corrupt at line 2: `w9` is not a memory in force here",
    );
    check(
        format!("{}\n", lines[0].replace("\"w1\"", "\"u1\"")),
        "corrupt at line 1: `u1` is not an id of the workspace scope",
    );
}

#[test]
fn caps_refuse_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let store = memories(dir.path()).with_caps(Caps {
        max_per_scope: 2,
        max_chars: 20,
        max_scope_bytes: 4096,
    });
    store.remember(Scope::Workspace, "one", from(1)).unwrap();
    store.remember(Scope::Workspace, "two", from(2)).unwrap();
    let full = error_of(store.remember(Scope::Workspace, "three", from(3)));
    assert!(
        full.contains("the workspace memory is full (2 memories"),
        "{full}"
    );
    assert!(full.contains("forget some first"), "{full}");
    // The user's scope has its own room.
    store.remember(Scope::User, "mine", from(4)).unwrap();
    let long = error_of(store.remember(Scope::User, &"x".repeat(21), from(5)));
    assert!(
        long.contains("21 characters long and one may have at most 20"),
        "{long}"
    );
    assert!(error_of(store.remember(Scope::User, " \n ", from(5))).contains("empty"));
    assert!(
        error_of(store.remember(Scope::User, "a\u{1b}[31m", from(5))).contains("control character")
    );

    let small = memories(dir.path()).with_caps(Caps {
        max_per_scope: 100,
        max_chars: 1000,
        max_scope_bytes: 200,
    });
    let bytes = error_of(small.remember(Scope::User, &"y".repeat(150), from(6)));
    assert!(
        bytes.contains("may take at most 200; forget or shorten"),
        "{bytes}"
    );
    let edit = error_of(small.edit("w1", &"z".repeat(150), from(6)));
    assert!(edit.contains("at most 200"), "{edit}");
    small.edit("w1", "uno", from(7)).unwrap();
}

#[test]
fn secrets_are_refused_with_the_reason_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = memories(dir.path());
    let refused = error_of(store.remember(
        Scope::User,
        "the CI token is ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        from(1),
    ));
    assert!(
        refused.starts_with("refused: it looks like it contains a GitHub token"),
        "{refused}"
    );
    assert!(
        refused.contains("remember where the secret is kept instead"),
        "{refused}"
    );
    assert!(!dir.path().join("memory.jsonl").exists());
    store.remember(Scope::User, "a", from(1)).unwrap();
    assert!(
        error_of(store.edit("u1", "password=Zx8vQ2mL9kR4tP7w", from(2))).contains("`password`")
    );
}

#[test]
fn concurrent_writers_never_share_an_id_or_lose_a_record() {
    let dir = tempfile::tempdir().unwrap();
    let threads = (0..4)
        .map(|thread| {
            let store = memories(dir.path());
            std::thread::spawn(move || {
                (0..10)
                    .map(|n| {
                        store
                            .remember(Scope::Workspace, &format!("t{thread} n{n}"), from(n))
                            .unwrap()
                            .id
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect::<Vec<_>>();
    let mut ids = threads
        .into_iter()
        .flat_map(|thread| thread.join().unwrap())
        .collect::<Vec<_>>();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 40);
    assert_eq!(memories(dir.path()).list().unwrap().len(), 40);
}

#[test]
fn the_section_lists_each_memory_with_its_id_and_provenance() {
    assert_eq!(render_section(&[]), None);
    let memory = Memory {
        id: "w4".into(),
        scope: Scope::Workspace,
        text: "line one\nline two".into(),
        provenance: from(12),
        edited: Some(Provenance {
            session: EDITOR.into(),
            seq: None,
            time: "2026-11-30T08:00:00Z".into(),
        }),
    };
    let section = render_section(&[memory]).unwrap();
    assert!(section.starts_with("# Memory\n"), "{section}");
    assert!(
        section.ends_with(
            "\n- w4 (workspace; session s1 event 12, 2026-11-29T10:00:00Z; edited: editor, 2026-11-30T08:00:00Z): line one\n  line two"
        ),
        "{section}"
    );
}

#[test]
fn ids_name_their_scope() {
    assert_eq!(Scope::of_id("w12"), Some(Scope::Workspace));
    assert_eq!(Scope::of_id("u1"), Some(Scope::User));
    for bad in ["w", "w0", "w01", "x1", "w1a", "W1", ""] {
        assert_eq!(Scope::of_id(bad), None, "{bad}");
    }
}
