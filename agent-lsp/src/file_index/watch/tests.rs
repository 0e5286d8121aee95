//! Tests of the live index: the watcher and the editor's notifications, with bounded waits.

use std::time::Duration;

use std::path::PathBuf;

use super::*;
use crate::file_index::EntryKind;
use crate::file_index::tests::{Fixture, labels};

/// Every wait is bounded; a watcher on a loaded machine can take a while, never this long.
const WAIT: Duration = Duration::from_secs(20);

fn live(fx: &Fixture) -> LiveIndex {
    let live = LiveIndex::start(&fx.workspace(), FilesConfig::default(), true).unwrap();
    assert!(live.wait_ready(WAIT), "the first walk did not finish");
    live
}

#[track_caller]
fn wait_for(live: &LiveIndex, what: &str, condition: impl FnMut(&FileIndex) -> bool) {
    assert!(
        live.wait_until(WAIT, condition),
        "timed out waiting for {what}: {:#?}",
        labels(&live.read())
    );
}

#[test]
fn the_watcher_follows_create_rename_and_delete() {
    let fx = Fixture::new();
    fx.create(&["src/lib.rs", "target/x.o"]);
    fx.write(".gitignore", "target/\n");
    let live = live(&fx);
    assert_eq!(live.status().entries, 3);
    assert!(!live.status().indexing);

    fx.create(&["src/new.rs"]);
    wait_for(&live, "a created file", |index| {
        index.kind_of("src/new.rs").is_some()
    });

    std::fs::rename(fx.root.join("src/new.rs"), fx.root.join("src/renamed.rs")).unwrap();
    wait_for(&live, "a renamed file", |index| {
        index.kind_of("src/renamed.rs").is_some() && index.kind_of("src/new.rs").is_none()
    });

    // A directory tree made at once, then files inside the new directories (watched as the
    // index admits them).
    fx.create(&["pkg/a/b/c.rs"]);
    wait_for(&live, "a new tree", |index| {
        index.kind_of("pkg/a/b/c.rs").is_some()
    });
    fx.create(&["pkg/a/b/d.rs"]);
    wait_for(&live, "a file in a new directory", |index| {
        index.kind_of("pkg/a/b/d.rs").is_some()
    });

    // A renamed directory: the old watches must not report under the old name.
    std::fs::rename(fx.root.join("pkg/a"), fx.root.join("pkg/moved")).unwrap();
    wait_for(&live, "a renamed directory", |index| {
        index.kind_of("pkg/moved/b/c.rs").is_some() && index.kind_of("pkg/a").is_none()
    });
    fx.create(&["pkg/moved/b/e.rs"]);
    wait_for(&live, "a file in a renamed directory", |index| {
        index.kind_of("pkg/moved/b/e.rs").is_some()
    });
    assert_eq!(live.read().kind_of("pkg/a/b/e.rs"), None);

    // Ignored paths stay out; ordering within a directory lets a later file prove it.
    fx.create(&["target/y.o", "src/scratch.log"]);
    fx.write("src/.gitignore", "*.log\n");
    fx.create(&["after.rs"]);
    wait_for(&live, "the file after the ignored ones", |index| {
        index.kind_of("after.rs").is_some()
    });
    assert_eq!(live.read().kind_of("target/y.o"), None);
    wait_for(&live, "the new ignore rule", |index| {
        index.kind_of("src/.gitignore").is_some() && index.kind_of("src/scratch.log").is_none()
    });

    std::fs::remove_dir_all(fx.root.join("pkg")).unwrap();
    wait_for(&live, "a deleted tree", |index| {
        !labels(index).iter().any(|label| label.starts_with("pkg"))
    });
    std::fs::remove_file(fx.root.join("src/lib.rs")).unwrap();
    wait_for(&live, "a deleted file", |index| {
        index.kind_of("src/lib.rs").is_none()
    });
    assert_eq!(live.status().full_walks, 1, "no rescan happened");
}

#[test]
fn links_created_while_watching_are_checked() {
    let fx = Fixture::new();
    fx.create(&["a.rs", "sub/b.rs"]);
    let live = live(&fx);
    std::os::unix::fs::symlink(fx.outside.join("dir"), fx.root.join("out")).unwrap();
    std::os::unix::fs::symlink(fx.outside.join("secret.txt"), fx.root.join("sub/secret")).unwrap();
    std::os::unix::fs::symlink("sub", fx.root.join("in")).unwrap();
    fx.create(&["sub/sentinel.rs"]);
    wait_for(&live, "the link inside and the sentinel", |index| {
        index.kind_of("in") == Some(EntryKind::Directory)
            && index.kind_of("sub/sentinel.rs").is_some()
    });
    let index = live.read();
    assert_eq!(index.kind_of("out"), None);
    assert_eq!(index.kind_of("sub/secret"), None);
    assert!(
        labels(&index)
            .iter()
            .all(|label| label == "in/" || !label.starts_with("in/"))
    );
}

#[test]
fn editor_notifications_apply_through_the_same_door() {
    let fx = Fixture::new();
    fx.create(&["a.rs"]);
    // Without a watcher: only the editor's notifications move the index.
    let live = LiveIndex::from_index(fx.index(FilesConfig::default()));
    fx.create(&["b.rs", "dir/c.rs"]);
    let outcome = live.apply(&[
        FileChange::new(fx.root.join("b.rs"), ChangeKind::Created),
        FileChange::new(fx.root.join("dir"), ChangeKind::Created),
    ]);
    assert_eq!(outcome.added_dirs, [fx.root.join("dir")]);
    assert_eq!(labels(&live.read()), ["a.rs", "b.rs", "dir/", "dir/c.rs"]);
    std::fs::remove_file(fx.root.join("a.rs")).unwrap();
    live.apply(&[FileChange::new(fx.root.join("a.rs"), ChangeKind::Deleted)]);
    assert_eq!(live.read().kind_of("a.rs"), None);
    live.boost_recent(fx.root.join("dir/c.rs"));
    live.set_open([fx.root.join("b.rs")]);
    let best: Vec<String> = live
        .query("", 2)
        .unwrap()
        .iter()
        .map(|candidate| candidate.label())
        .collect();
    assert_eq!(best, ["b.rs", "dir/c.rs"]);
    assert!(live.query("../x", 2).is_err());
}

#[test]
fn changes_during_the_first_walk_are_applied_after_it() {
    let fx = Fixture::new();
    fx.create(&["a.rs"]);
    let live = LiveIndex::start(&fx.workspace(), FilesConfig::default(), false).unwrap();
    // Whether the walk is still running or done, the change ends up applied.
    fx.create(&["late.rs"]);
    live.apply(&[FileChange::new(
        fx.root.join("late.rs"),
        ChangeKind::Created,
    )]);
    wait_for(&live, "the queued change", |index| {
        index.kind_of("late.rs").is_some()
    });
}

#[test]
fn dropping_a_live_index_stops_its_threads() {
    let fx = Fixture::new();
    fx.create(&["a.rs"]);
    let live = LiveIndex::start(&fx.workspace(), FilesConfig::default(), true).unwrap();
    drop(live);
    // Nothing to assert beyond returning: `drop` joins the worker, so a hang fails the test
    // through the test runner's timeout.
}

#[test]
fn watcher_events_map_to_changes() {
    use notify::event::{CreateKind, RemoveKind};
    let mut changes = Vec::new();
    let event = |kind, paths: &[&str]| {
        let mut event = notify::Event::new(kind);
        for path in paths {
            event = event.add_path(PathBuf::from(path));
        }
        event
    };
    changes_of(
        event(EventKind::Create(CreateKind::File), &["/w/a"]),
        &mut changes,
    );
    changes_of(
        event(EventKind::Remove(RemoveKind::Folder), &["/w/b"]),
        &mut changes,
    );
    changes_of(
        event(
            EventKind::Modify(ModifyKind::Name(RenameMode::Both)),
            &["/w/c", "/w/d"],
        ),
        &mut changes,
    );
    changes_of(
        event(
            EventKind::Modify(ModifyKind::Name(RenameMode::From)),
            &["/w/e"],
        ),
        &mut changes,
    );
    changes_of(
        event(
            EventKind::Modify(ModifyKind::Name(RenameMode::To)),
            &["/w/f"],
        ),
        &mut changes,
    );
    changes_of(
        event(EventKind::Access(notify::event::AccessKind::Any), &["/w/g"]),
        &mut changes,
    );
    changes_of(event(EventKind::Any, &["/w/h"]), &mut changes);
    use ChangeKind::{Changed, Created, Deleted};
    let expected: Vec<FileChange> = [
        ("/w/a", Created),
        ("/w/b", Deleted),
        ("/w/c", Deleted),
        ("/w/d", Created),
        ("/w/e", Deleted),
        ("/w/f", Created),
        ("/w/h", Changed),
    ]
    .into_iter()
    .map(|(path, kind)| FileChange::new(path, kind))
    .collect();
    assert_eq!(changes, expected);
}
