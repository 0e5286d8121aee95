use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::*;

struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    snapshots: Arc<Snapshots>,
}

fn world(options: Options) -> World {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    std::fs::create_dir(&root).unwrap();
    let root = root.canonicalize().unwrap();
    let snapshots = Snapshots::new(&root, dir.path().join("state/checkpoints"), options);
    World {
        _dir: dir,
        root,
        snapshots,
    }
}

fn write(root: &Path, path: &str, text: &str) {
    let full = root.join(path);
    std::fs::create_dir_all(full.parent().unwrap()).unwrap();
    std::fs::write(full, text).unwrap();
}

/// Makes the next capture's stat differ even within the same second as the last write.
fn settle() {
    std::thread::sleep(std::time::Duration::from_millis(5));
}

#[test]
fn a_capture_names_what_changed_and_a_restore_puts_back_every_kind_of_file() {
    let w = world(Options::default());
    write(&w.root, "src/a.rs", "fn a() {}\n");
    write(&w.root, "empty.txt", "");
    write(&w.root, "run.sh", "#!/bin/sh\necho hi\n");
    std::fs::set_permissions(
        w.root.join("run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::os::unix::fs::symlink("src/a.rs", w.root.join("link")).unwrap();
    write(&w.root, ".gitignore", "target/\n");
    write(&w.root, "target/big.o", "ignored");
    write(&w.root, "notes.agent.md", "# a conversation\n");

    let first = w.snapshots.capture("s1", None, &[]).unwrap();
    assert_eq!(
        first.changed,
        [".gitignore", "empty.txt", "link", "run.sh", "src/a.rs"],
        "ignored files and prompt documents are not captured"
    );

    settle();
    write(&w.root, "src/a.rs", "fn a() { changed }\n");
    std::fs::remove_file(w.root.join("run.sh")).unwrap();
    std::fs::remove_file(w.root.join("link")).unwrap();
    write(&w.root, "src/new/b.rs", "new\n");
    let second = w.snapshots.capture("s1", Some(&first.id), &[]).unwrap();
    assert_eq!(
        second.changed,
        ["link", "run.sh", "src/a.rs", "src/new/b.rs"]
    );
    assert_eq!(
        w.snapshots.changes(&first.id, &second.id).unwrap(),
        second.changed
    );

    let before = w.snapshots.files_of(&first.id).unwrap();
    for path in &second.changed {
        w.snapshots.restore(path, before.effective(path)).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(w.root.join("src/a.rs")).unwrap(),
        "fn a() {}\n"
    );
    let mode = std::fs::metadata(w.root.join("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111, "the executable bit comes back");
    assert_eq!(
        std::fs::read_link(w.root.join("link")).unwrap(),
        Path::new("src/a.rs")
    );
    assert!(
        !w.root.join("src/new").exists(),
        "a folder the change brought goes with it"
    );
    assert_eq!(std::fs::read(w.root.join("empty.txt")).unwrap(), b"");

    settle();
    let third = w.snapshots.capture("s1", Some(&second.id), &[]).unwrap();
    assert!(
        w.snapshots
            .changes(&first.id, &third.id)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_file_over_the_cap_is_named_not_captured() {
    let w = world(Options {
        max_file_bytes: 8,
        ..Options::default()
    });
    write(&w.root, "small", "1234");
    write(&w.root, "large", "123456789");
    let checkpoint = w.snapshots.capture("s1", None, &[]).unwrap();
    assert_eq!(checkpoint.changed, ["small"]);
    assert_eq!(
        checkpoint.uncaptured,
        [Uncaptured {
            path: "large".into(),
            bytes: 9
        }]
    );
}

#[test]
fn a_new_process_trusts_the_saved_stat_cache_and_still_sees_a_change() {
    let w = world(Options::default());
    write(&w.root, "a", "one\n");
    write(&w.root, "b", "two\n");
    // Modified well before the capture, so no entry is racy.
    let past = filetime::FileTime::from_unix_time(1_700_000_000, 0);
    for name in ["a", "b"] {
        filetime::set_file_mtime(w.root.join(name), past).unwrap();
    }
    let first = w.snapshots.capture("s1", None, &[]).unwrap();
    assert_eq!(first.read, 2);
    // Saved at the turn's end; a second instance reads it: only the changed file is read.
    w.snapshots.save().unwrap();
    let again = Snapshots::new(&w.root, w.snapshots.dir().to_owned(), Options::default());
    write(&w.root, "b", "TWO\n");
    let second = again.capture("s1", Some(&first.id), &[]).unwrap();
    assert_eq!(second.changed, ["b"]);
    assert_eq!(second.read, 1, "`a` is vouched for by the saved stat cache");
    settle();
    let third = again.capture("s1", Some(&second.id), &[]).unwrap();
    assert!(third.changed.is_empty());
}

#[test]
fn a_buffer_that_differs_from_the_disk_is_what_the_user_saw() {
    let w = world(Options::default());
    write(&w.root, "a.rs", "disk\n");
    let first = w.snapshots.capture("s1", None, &[]).unwrap();
    let second = w
        .snapshots
        .capture(
            "s1",
            Some(&first.id),
            &[("a.rs".into(), "unsaved\n".into())],
        )
        .unwrap();
    assert_eq!(second.changed, ["a.rs"]);
    let files = w.snapshots.files_of(&second.id).unwrap();
    let shown = files.effective("a.rs").unwrap();
    assert_eq!(w.snapshots.blob(&shown.id).unwrap(), b"unsaved\n");
    assert_eq!(files.disk["a.rs"].id, Snapshots::hash(b"disk\n"));
}

#[test]
fn a_restore_never_leaves_the_workspace() {
    let w = world(Options::default());
    let outside = w.root.parent().unwrap().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, w.root.join("out")).unwrap();
    write(&w.root, "e", "");
    let checkpoint = w.snapshots.capture("s1", None, &[]).unwrap();
    let files = w.snapshots.files_of(&checkpoint.id).unwrap();
    let entry = files.effective("e").unwrap();
    for path in ["../escape", "/etc/passwd", "out/file"] {
        let error = w.snapshots.restore(path, Some(entry));
        assert!(
            matches!(error, Err(RestoreError::Refused(_))),
            "{path}: {error:?}"
        );
    }
    assert!(std::fs::read_dir(&outside).unwrap().next().is_none());
}

#[test]
fn after_the_first_walk_the_journal_names_what_changed_and_nothing_is_missed() {
    let w = world(Options::default());
    write(&w.root, "src/a.rs", "a\n");
    write(&w.root, "src/deep/b.rs", "b\n");
    write(&w.root, "gone/c.rs", "c\n");
    write(&w.root, ".gitignore", "*.o\n");
    let first = w.snapshots.capture("s1", None, &[]).unwrap();
    assert_eq!(first.scan, "walk");

    // One changed file: the journal names its folder, and nothing else is read.
    settle();
    write(&w.root, "src/a.rs", "a changed\n");
    let second = w.snapshots.capture("s1", Some(&first.id), &[]).unwrap();
    assert_eq!(
        (second.scan, second.changed.clone(), second.read),
        ("journal", vec!["src/a.rs".to_owned()], 1)
    );

    // A new folder tree, a removed one and an ignored file.
    std::fs::create_dir_all(w.root.join("new/inner")).unwrap();
    write(&w.root, "new/inner/d.rs", "d\n");
    write(&w.root, "new/e.rs", "e\n");
    std::fs::remove_dir_all(w.root.join("gone")).unwrap();
    write(&w.root, "src/x.o", "object\n");
    let third = w.snapshots.capture("s1", Some(&second.id), &[]).unwrap();
    assert_eq!(third.scan, "journal");
    assert_eq!(third.changed, ["gone/c.rs", "new/e.rs", "new/inner/d.rs"]);

    // The new folders are watched: a change inside one is seen.
    settle();
    write(&w.root, "new/inner/d.rs", "d changed\n");
    let fourth = w.snapshots.capture("s1", Some(&third.id), &[]).unwrap();
    assert_eq!(
        (fourth.scan, fourth.changed.clone()),
        ("journal", vec!["new/inner/d.rs".to_owned()])
    );

    // An ignore file changes what is admitted anywhere: the capture walks.
    write(&w.root, ".gitignore", "*.o\nsrc/\n");
    let fifth = w.snapshots.capture("s1", Some(&fourth.id), &[]).unwrap();
    assert_eq!(fifth.scan, "walk");
    assert_eq!(fifth.changed, [".gitignore", "src/a.rs", "src/deep/b.rs"]);

    // What the journal built is what a walk of a fresh store finds.
    let fresh = Snapshots::new(
        &w.root,
        w.snapshots.dir().join("../fresh"),
        Options::default(),
    );
    let walked = fresh.capture("s2", None, &[]).unwrap();
    assert_eq!(
        w.snapshots.files_of(&fifth.id).unwrap().disk,
        fresh.files_of(&walked.id).unwrap().disk
    );
}

/// A warmed process's first capture lists only what the journal saw change, as any later
/// capture does, and reads only that.
#[test]
fn after_a_warm_up_the_first_capture_reads_only_what_changed_since() {
    let w = world(Options::default());
    for n in 0..20 {
        write(&w.root, &format!("src/f{n}.rs"), "fn f() {}\n");
    }
    // Files written in the second of a walk are read again by the next one (racy, as in
    // git); a workspace's files are older than its first session.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    w.snapshots.warm().unwrap();
    settle();
    write(&w.root, "src/f3.rs", "fn f() { changed }\n");
    let first = w.snapshots.capture("s1", None, &[]).unwrap();
    assert_eq!(first.scan, "journal");
    assert_eq!(first.read, 1, "only the changed file is read");
    assert_eq!(
        first.changed.len(),
        20,
        "a session's first checkpoint has every file"
    );
    let files = w.snapshots.files_of(&first.id).unwrap();
    let changed = &files.disk["src/f3.rs"];
    assert_eq!(
        w.snapshots.blob(&changed.id).unwrap(),
        b"fn f() { changed }\n"
    );
}
