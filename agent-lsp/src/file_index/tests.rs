//! Tests of the file index: ignore rules, caps, the hostile corpus, incremental updates.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use super::changes::ApplyOutcome;
use super::*;
use crate::workspace::Workspace;

/// `tmp/ws` is the workspace, `tmp/outside` what must stay out of reach.
pub(crate) struct Fixture {
    pub(crate) _tmp: tempfile::TempDir,
    pub(crate) root: PathBuf,
    pub(crate) outside: PathBuf,
}

impl Fixture {
    pub(crate) fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ws");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(outside.join("dir")).unwrap();
        std::fs::write(outside.join("secret.txt"), "secret\n").unwrap();
        std::fs::write(outside.join("dir/inner.txt"), "inner\n").unwrap();
        let root = std::fs::canonicalize(root).unwrap();
        let outside = std::fs::canonicalize(outside).unwrap();
        Fixture {
            _tmp: tmp,
            root,
            outside,
        }
    }

    /// Create files (and their directories); a path ending in `/` is a directory.
    pub(crate) fn create(&self, paths: &[&str]) {
        for path in paths {
            let full = self.root.join(path);
            if path.ends_with('/') {
                std::fs::create_dir_all(&full).unwrap();
            } else {
                std::fs::create_dir_all(full.parent().unwrap()).unwrap();
                std::fs::write(&full, format!("{path}\n")).unwrap();
            }
        }
    }

    pub(crate) fn write(&self, path: &str, text: &str) {
        std::fs::write(self.root.join(path), text).unwrap();
    }

    pub(crate) fn link(&self, target: impl AsRef<Path>, link: &str) {
        symlink(target, self.root.join(link)).unwrap();
    }

    pub(crate) fn workspace(&self) -> Workspace {
        Workspace::new(&self.root).unwrap()
    }

    pub(crate) fn index(&self, config: FilesConfig) -> FileIndex {
        FileIndex::build(&self.workspace(), config).unwrap()
    }

    /// The symlink layouts and odd names of the hostile corpus. Returns the labels that must
    /// be indexed and the names that must not.
    pub(crate) fn hostile_layout(&self) -> (Vec<&'static str>, Vec<&'static str>) {
        self.create(&["a.txt", "sub/x.txt", "sub/deeper/y.txt"]);
        let outside = &self.outside;
        self.link(outside.join("dir"), "link_out_dir");
        self.link(outside.join("secret.txt"), "link_out_file");
        self.link(outside.join("missing.txt"), "dangling");
        self.link("loop_b", "loop_a");
        self.link("loop_a", "loop_b");
        self.link("self_loop", "self_loop");
        self.link("..", "link_up");
        self.link("../outside/secret.txt", "rel_out");
        self.link("../../../outside", "sub/deeper/deep_out");
        self.link("link_out_dir", "chain_out");
        self.link("sub", "link_in_dir");
        self.link("a.txt", "link_in_file");
        self.link(".", "link_root");
        self.link("link_in_dir", "chain_in");
        self.link(self.root.join("sub/deeper"), "abs_in");
        self.link("/", "link_fs_root");
        self.link("/etc/passwd", "link_passwd");
        self.create(&[
            "back\\slash.txt",
            "~tilde.txt",
            "c:/drive.txt",
            "name with spaces.md",
            "quote\"d.md",
            "ünïcødé/文件.rs",
            "@scope/pkg.json",
        ]);
        self.create(&[&format!("long/{}", "n".repeat(255))]);
        let indexed = vec![
            "a.txt",
            "sub/",
            "sub/x.txt",
            "sub/deeper/",
            "sub/deeper/y.txt",
            "link_in_dir/",
            "link_in_file",
            "link_root/",
            "chain_in/",
            "abs_in/",
            "~tilde.txt",
            "c:/",
            "c:/drive.txt",
            "name with spaces.md",
            "quote\"d.md",
            "ünïcødé/",
            "ünïcødé/文件.rs",
            "@scope/",
            "@scope/pkg.json",
            "long/",
        ];
        let refused = vec![
            "link_out_dir",
            "link_out_file",
            "dangling",
            "loop_a",
            "loop_b",
            "self_loop",
            "link_up",
            "rel_out",
            "sub/deeper/deep_out",
            "chain_out",
            "link_fs_root",
            "link_passwd",
            "back\\slash.txt",
        ];
        (indexed, refused)
    }
}

/// Every label of the index (directories end in `/`), sorted.
pub(crate) fn labels(index: &FileIndex) -> Vec<String> {
    index.keys().map(str::to_owned).collect()
}

#[track_caller]
fn check_labels(index: &FileIndex, expected: &[&str]) {
    let mut expected: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(labels(index), expected);
}

fn config_with(exclude: &[&str]) -> FilesConfig {
    FilesConfig {
        exclude: exclude.iter().map(|s| s.to_string()).collect(),
        ..FilesConfig::default()
    }
}

#[test]
fn ignore_files_and_exclude_globs_decide_what_is_indexed() {
    let fx = Fixture::new();
    fx.create(&[
        "src/main.rs",
        "src/generated.rs",
        "target/debug/app",
        "app.log",
        "keep.log",
        "secret_notes.md",
        "local_only.txt",
        "vendor/lib.js",
        "web/app.min.js",
        "web/vendor/x.js",
        "web/static/vendor/y.js",
        "docs/vendor/z.md",
        ".github/workflows/ci.yml",
        ".git/HEAD",
        ".git/info/",
        "empty_dir/",
    ]);
    fx.write(".gitignore", "target/\n*.log\n!keep.log\n");
    fx.write(".ignore", "secret_notes.md\n");
    fx.write("src/.gitignore", "generated.rs\n");
    fx.write(".git/info/exclude", "local_only.txt\n");
    let index = fx.index(config_with(&["*.min.js", "vendor", "web/static/**"]));
    check_labels(
        &index,
        &[
            ".github/",
            ".github/workflows/",
            ".github/workflows/ci.yml",
            ".gitignore",
            ".ignore",
            "docs/",
            "empty_dir/",
            "keep.log",
            "src/",
            "src/.gitignore",
            "src/main.rs",
            "web/",
            "web/static/",
        ],
    );
    let status = index.status();
    assert_eq!((status.files, status.directories), (6, 7));
    assert!(!status.truncated);
    assert_eq!(status.message(), None);
}

#[test]
fn invalid_exclude_globs_are_configuration_errors() {
    let fx = Fixture::new();
    let error = FileIndex::build(&fx.workspace(), config_with(&["a/{b"])).unwrap_err();
    assert!(
        error.to_string().contains("invalid glob `a/{b`"),
        "{error:#}"
    );
    let error = FileIndex::build(&fx.workspace(), config_with(&["/"])).unwrap_err();
    assert!(error.to_string().contains("is empty"), "{error:#}");
}

#[test]
fn the_entry_cap_truncates_and_says_so() {
    let fx = Fixture::new();
    let paths: Vec<String> = (0..50).map(|i| format!("d{}/f{i}.rs", i % 5)).collect();
    fx.create(&paths.iter().map(String::as_str).collect::<Vec<_>>());
    let config = FilesConfig {
        max_entries: 7,
        ..FilesConfig::default()
    };
    let mut index = fx.index(config);
    let status = index.status();
    assert_eq!(status.entries, 7);
    assert!(status.truncated);
    let message = status.message().unwrap();
    assert!(
        message.contains("index truncated at 7 entries"),
        "{message}"
    );

    // Incremental additions respect the cap too.
    fx.create(&["new.rs"]);
    index.apply(&[FileChange::new("new.rs", ChangeKind::Created)]);
    assert_eq!(index.len(), 7);
    assert!(index.status().truncated);

    // Under the cap, nothing is truncated.
    let index = fx.index(FilesConfig {
        max_entries: 56,
        ..FilesConfig::default()
    });
    assert_eq!(index.len(), 56);
    assert!(!index.status().truncated);
}

#[test]
fn the_candidate_cap_bounds_every_query() {
    let fx = Fixture::new();
    let paths: Vec<String> = (0..30).map(|i| format!("f{i:02}.rs")).collect();
    fx.create(&paths.iter().map(String::as_str).collect::<Vec<_>>());
    let index = fx.index(FilesConfig {
        max_candidates: 4,
        ..FilesConfig::default()
    });
    assert_eq!(index.query("rs", 100).unwrap().len(), 4);
    assert_eq!(index.query("rs", 2).unwrap().len(), 2);
    assert_eq!(index.query("", 100).unwrap().len(), 4);
}

#[test]
fn hostile_corpus_is_kept_out_of_the_index() {
    let fx = Fixture::new();
    let (indexed, refused) = fx.hostile_layout();
    let index = fx.index(FilesConfig::default());
    let labels = labels(&index);
    for label in &indexed {
        assert!(
            labels.contains(&label.to_string()),
            "{label} missing: {labels:#?}"
        );
    }
    for name in &refused {
        assert!(
            !labels
                .iter()
                .any(|label| label == name || label.starts_with(&format!("{name}/"))),
            "{name} indexed: {labels:#?}"
        );
    }
    // Nothing is indexed through a symlinked directory, inside or out.
    for link in ["link_in_dir/", "link_root/", "chain_in/", "abs_in/"] {
        assert!(
            !labels.iter().any(|l| l.starts_with(link) && l != link),
            "{labels:#?}"
        );
    }
    // Everything indexed is one of the expected names, the long one, or what the fixture has.
    assert!(
        labels
            .iter()
            .all(|l| !l.contains("secret") && !l.contains("inner.txt"))
    );
    let status = index.status();
    assert_eq!(status.refused_symlinks, 12, "{status:?}");
    assert_eq!(status.unnameable, 1, "{status:?}");
    assert_eq!(index.kind_of("link_in_file"), Some(EntryKind::File));
    assert_eq!(index.kind_of("link_in_dir"), Some(EntryKind::Directory));
    let long = format!("long/{}", "n".repeat(255));
    assert_eq!(index.kind_of(&long), Some(EntryKind::File));
}

#[track_caller]
fn check_query_refused(index: &FileIndex, query: &str, expected: &str) {
    match index.query(query, 10) {
        Ok(found) => panic!("{query:?} answered {found:?}"),
        Err(error) => assert!(
            error.to_string().contains(expected),
            "{query:?}: `{error}` does not contain `{expected}`"
        ),
    }
}

#[test]
fn queries_that_leave_the_workspace_are_refused() {
    let fx = Fixture::new();
    fx.hostile_layout();
    let index = fx.index(FilesConfig::default());
    let outside = fx.outside.display().to_string();
    let parent = fx.root.parent().unwrap().display().to_string();
    let cases: Vec<(String, &str)> = vec![
        ("..".into(), "climbs above"),
        ("../outside".into(), "climbs above"),
        ("sub/../../x".into(), "climbs above"),
        ("./../ws/a.txt".into(), "climbs above"),
        ("a.txt ../secret".into(), "climbs above"),
        ("!../secret".into(), "climbs above"),
        ("^../secret".into(), "climbs above"),
        ("/etc/passwd".into(), "absolute path outside"),
        ("/".into(), "absolute path outside"),
        (format!("{outside}/secret.txt"), "absolute path outside"),
        (parent, "absolute path outside"),
        (format!("{}/../outside", fx.root.display()), "climbs above"),
        ("a\0b".into(), "NUL"),
        ("\0".into(), "NUL"),
        ("..\\..\\x".into(), "Windows"),
        ("C:\\Windows".into(), "Windows"),
        ("c:/Windows".into(), "drive letter"),
        ("\\\\server\\share".into(), "UNC"),
        ("~/x".into(), "`~`"),
        ("file:///etc/passwd".into(), "URL"),
        ("x".repeat(5000), "at most 4096"),
        ("y".repeat(300), "at most 255"),
    ];
    for (query, expected) in &cases {
        check_query_refused(&index, query, expected);
    }
    assert!(cases.len() >= 20);
}

#[test]
fn queries_inside_the_workspace_are_answered() {
    let fx = Fixture::new();
    fx.hostile_layout();
    let index = fx.index(FilesConfig::default());
    let best = |query: &str| {
        index
            .query(query, 1)
            .unwrap()
            .first()
            .map(Candidate::label)
            .unwrap_or_default()
    };
    // An absolute path inside the root is matched as the path under it.
    assert_eq!(
        best(&format!("{}/sub/deeper/y.txt", fx.root.display())),
        "sub/deeper/y.txt"
    );
    assert_eq!(best("./sub/x.txt"), "sub/x.txt");
    assert_eq!(best("文件"), "ünïcødé/文件.rs");
    assert_eq!(best("spaces"), "name with spaces.md");
    assert_eq!(best("@scope"), "@scope/");
    assert_eq!(best("tilde"), "~tilde.txt");
    assert_eq!(best("drive"), "c:/drive.txt");
    // A word that is only fzf syntax is passed on.
    assert!(index.query("!", 5).is_ok());
    assert_eq!(index.query("", 3).unwrap().len(), 3);
    assert!(index.query("nothing-like-this", 5).unwrap().is_empty());
}

/// Apply changes given as (relative path, kind) and return the outcome.
fn apply(index: &mut FileIndex, changes: &[(&str, ChangeKind)]) -> ApplyOutcome {
    let root = index.workspace().root().to_owned();
    let changes: Vec<FileChange> = changes
        .iter()
        .map(|(path, kind)| FileChange::new(root.join(path), *kind))
        .collect();
    index.apply(&changes)
}

use ChangeKind::{Changed, Created, Deleted};

#[test]
fn create_rename_and_delete_update_the_index_without_a_rescan() {
    let fx = Fixture::new();
    fx.create(&["src/lib.rs", "target/x.o"]);
    fx.write(".gitignore", "target/\n*.tmp\n");
    let mut index = fx.index(FilesConfig::default());
    check_labels(&index, &[".gitignore", "src/", "src/lib.rs"]);
    let generation = index.status().generation;

    // A new file, an ignored file, a file in an ignored directory.
    fx.create(&["src/new.rs", "src/scratch.tmp", "target/y.o"]);
    apply(
        &mut index,
        &[
            ("src/new.rs", Created),
            ("src/scratch.tmp", Created),
            ("target/y.o", Created),
        ],
    );
    check_labels(&index, &[".gitignore", "src/", "src/lib.rs", "src/new.rs"]);
    assert!(index.status().generation > generation);

    // A new directory tree arrives as one event (as a `mv` into the workspace does).
    fx.create(&["pkg/a/b/c.rs", "pkg/a/d.rs", "pkg/target/z.o"]);
    let outcome = apply(&mut index, &[("pkg", Created)]);
    check_labels(
        &index,
        &[
            ".gitignore",
            "pkg/",
            "pkg/a/",
            "pkg/a/b/",
            "pkg/a/b/c.rs",
            "pkg/a/d.rs",
            "src/",
            "src/lib.rs",
            "src/new.rs",
        ],
    );
    let mut added = outcome.added_dirs.clone();
    added.sort();
    assert_eq!(
        added,
        [
            fx.root.join("pkg"),
            fx.root.join("pkg/a"),
            fx.root.join("pkg/a/b")
        ]
    );

    // Rename a file, then a directory: a deletion and a creation each.
    std::fs::rename(fx.root.join("src/new.rs"), fx.root.join("src/renamed.rs")).unwrap();
    apply(
        &mut index,
        &[("src/new.rs", Deleted), ("src/renamed.rs", Created)],
    );
    std::fs::rename(fx.root.join("pkg/a"), fx.root.join("pkg/moved")).unwrap();
    let outcome = apply(&mut index, &[("pkg/a", Deleted), ("pkg/moved", Created)]);
    check_labels(
        &index,
        &[
            ".gitignore",
            "pkg/",
            "pkg/moved/",
            "pkg/moved/b/",
            "pkg/moved/b/c.rs",
            "pkg/moved/d.rs",
            "src/",
            "src/lib.rs",
            "src/renamed.rs",
        ],
    );
    let mut removed = outcome.removed_dirs.clone();
    removed.sort();
    assert_eq!(removed, [fx.root.join("pkg/a"), fx.root.join("pkg/a/b")]);

    // Delete a whole tree: one event for the top is enough.
    std::fs::remove_dir_all(fx.root.join("pkg")).unwrap();
    apply(&mut index, &[("pkg", Deleted)]);
    check_labels(
        &index,
        &[".gitignore", "src/", "src/lib.rs", "src/renamed.rs"],
    );
    assert_eq!(index.status().directories, 1);
    assert_eq!(index.status().full_walks, 1, "no rescan happened");
}

#[test]
fn the_disk_decides_when_events_are_lost_repeated_or_stale() {
    let fx = Fixture::new();
    fx.create(&["a.rs"]);
    let mut index = fx.index(FilesConfig::default());

    // A deletion reported for a file that is still there keeps it.
    apply(&mut index, &[("a.rs", Deleted)]);
    check_labels(&index, &["a.rs"]);
    // A change reported for a file the index never saw adds it.
    fx.create(&["b.rs"]);
    apply(&mut index, &[("b.rs", Changed)]);
    check_labels(&index, &["a.rs", "b.rs"]);
    // A creation reported for a file already gone adds nothing.
    apply(&mut index, &[("ghost.rs", Created)]);
    check_labels(&index, &["a.rs", "b.rs"]);
    // A creation deep in a directory whose own event was lost adds the directory too.
    fx.create(&["lost/inner/c.rs", "lost/d.rs"]);
    apply(&mut index, &[("lost/inner/c.rs", Created)]);
    check_labels(
        &index,
        &[
            "a.rs",
            "b.rs",
            "lost/",
            "lost/d.rs",
            "lost/inner/",
            "lost/inner/c.rs",
        ],
    );
    // The same event twice changes nothing and bumps no generation.
    let generation = index.status().generation;
    apply(&mut index, &[("b.rs", Created), ("b.rs", Changed)]);
    assert_eq!(index.status().generation, generation);
    // A file replaced by a directory of the same name.
    std::fs::remove_file(fx.root.join("b.rs")).unwrap();
    fx.create(&["b.rs/inside.rs"]);
    apply(&mut index, &[("b.rs", Created)]);
    check_labels(
        &index,
        &[
            "a.rs",
            "b.rs/",
            "b.rs/inside.rs",
            "lost/",
            "lost/d.rs",
            "lost/inner/",
            "lost/inner/c.rs",
        ],
    );
}

#[test]
fn changed_ignore_files_reload_the_rules_of_their_directory() {
    let fx = Fixture::new();
    fx.create(&[
        "src/a.rs",
        "src/b.gen.rs",
        "src/deep/c.gen.rs",
        "other/d.gen.rs",
    ]);
    let mut index = fx.index(FilesConfig::default());
    assert_eq!(index.len(), 7);

    fx.write("src/.gitignore", "*.gen.rs\n");
    apply(&mut index, &[("src/.gitignore", Created)]);
    check_labels(
        &index,
        &[
            "other/",
            "other/d.gen.rs",
            "src/",
            "src/.gitignore",
            "src/a.rs",
            "src/deep/",
        ],
    );

    fx.write("src/.gitignore", "deep/\n");
    apply(&mut index, &[("src/.gitignore", Changed)]);
    check_labels(
        &index,
        &[
            "other/",
            "other/d.gen.rs",
            "src/",
            "src/.gitignore",
            "src/a.rs",
            "src/b.gen.rs",
        ],
    );

    std::fs::remove_file(fx.root.join("src/.gitignore")).unwrap();
    apply(&mut index, &[("src/.gitignore", Deleted)]);
    assert_eq!(index.len(), 7);

    // A root `.ignore` governs everything.
    fx.write(".ignore", "other/\n");
    apply(&mut index, &[(".ignore", Created)]);
    assert_eq!(index.kind_of("other"), None);
    assert_eq!(index.kind_of(".ignore"), Some(EntryKind::File));
}

#[test]
fn changes_outside_or_through_links_out_are_ignored() {
    let fx = Fixture::new();
    let (_, refused) = fx.hostile_layout();
    let mut index = fx.index(FilesConfig::default());
    let before = labels(&index);
    let outside = fx.outside.clone();
    std::fs::write(outside.join("dir/new.txt"), "x").unwrap();
    let mut changes = vec![
        FileChange::new(outside.join("secret.txt"), Created),
        FileChange::new(outside.join("dir/new.txt"), Created),
        FileChange::new("../outside/secret.txt", Created),
        FileChange::new(fx.root.join("../outside/secret.txt"), Created),
        FileChange::new(fx.root.join("link_out_dir/new.txt"), Created),
        FileChange::new(fx.root.join("link_out_dir/inner.txt"), Changed),
        FileChange::new(fx.root.join("link_in_dir/x.txt"), Created),
        FileChange::new(fx.root.join(".git/config"), Created),
        FileChange::new(fx.root.clone(), Changed),
        FileChange::new("/etc/passwd", Created),
    ];
    changes.extend(
        refused
            .iter()
            .map(|name| FileChange::new(fx.root.join(name), Created)),
    );
    index.apply(&changes);
    assert_eq!(labels(&index), before);

    // A new link pointing out is refused like one found by the walk; one inside is indexed.
    fx.link(outside.join("dir"), "new_out");
    fx.link("sub/x.txt", "new_in");
    apply(&mut index, &[("new_out", Created), ("new_in", Created)]);
    assert_eq!(index.kind_of("new_out"), None);
    assert_eq!(index.kind_of("new_in"), Some(EntryKind::File));
    // A link that used to point inside and now points out is dropped.
    std::fs::remove_file(fx.root.join("new_in")).unwrap();
    fx.link(outside.join("secret.txt"), "new_in");
    apply(&mut index, &[("new_in", Changed)]);
    assert_eq!(index.kind_of("new_in"), None);
}

#[test]
fn boosts_follow_paths_given_absolute_or_relative() {
    let fx = Fixture::new();
    fx.create(&["a/util.rs", "b/util.rs", "c/util.rs"]);
    let mut index = fx.index(FilesConfig::default());
    let order = |index: &FileIndex| -> Vec<String> {
        index
            .query("util", 3)
            .unwrap()
            .iter()
            .map(Candidate::label)
            .collect()
    };
    assert_eq!(order(&index), ["a/util.rs", "b/util.rs", "c/util.rs"]);
    index.boost_recent(fx.root.join("c/util.rs"));
    assert_eq!(order(&index), ["c/util.rs", "a/util.rs", "b/util.rs"]);
    index.set_open(["b/util.rs"]);
    assert_eq!(order(&index), ["b/util.rs", "c/util.rs", "a/util.rs"]);
    // Paths outside are not boosted (and not an error).
    index.boost_recent("/etc/passwd");
    index.boost_recent("../x");
    assert_eq!(order(&index), ["b/util.rs", "c/util.rs", "a/util.rs"]);
}

#[test]
fn a_cancelled_walk_stops() {
    let fx = Fixture::new();
    fx.create(&["a.rs", "b/c.rs"]);
    let cancel = AtomicBool::new(true);
    let error =
        FileIndex::build_cancellable(&fx.workspace(), FilesConfig::default(), &cancel).unwrap_err();
    assert!(error.to_string().contains("cancelled"), "{error}");
}

#[test]
fn watched_dirs_are_the_real_directories() {
    let fx = Fixture::new();
    fx.hostile_layout();
    let index = fx.index(FilesConfig::default());
    let dirs = index.watched_dirs();
    assert_eq!(dirs[0], fx.root);
    assert!(dirs.contains(&fx.root.join("sub/deeper")));
    assert!(!dirs.contains(&fx.root.join("link_in_dir")));
    assert!(dirs.iter().all(|dir| dir.starts_with(&fx.root)));
}

#[test]
fn typing_narrows_from_the_last_query_without_changing_answers() {
    let fx = Fixture::new();
    let paths: Vec<String> = (0..300)
        .map(|i| {
            format!(
                "{}/{}_{i}.{}",
                ["src", "lib/sub", "test"][i % 3],
                ["parser", "print", "spa"][i % 7 % 3],
                ["rs", "md"][i % 2]
            )
        })
        .collect();
    fx.create(&paths.iter().map(String::as_str).collect::<Vec<_>>());
    let mut index = fx.index(FilesConfig::default());
    let typed = [
        "p",
        "pa",
        "par",
        "pars",
        "parse",
        "parse r",
        "parse rs",
        "parse rs$",
        "parse !rs",
        "parse",
        "s",
        "sp",
        "spa_1",
        "spa_",
        "x",
        "xy",
        "",
        "p",
    ];
    for query in typed {
        let narrowed = index.query(query, 20).unwrap();
        let fresh = index.query_from_scratch(query, 20).unwrap();
        assert_eq!(narrowed, fresh, "{query:?}");
        // Leave the cache as a keystroke would have.
        index.query(query, 20).unwrap();
    }
    // A change to the index voids what the last query matched.
    index.query("pri", 20).unwrap();
    fx.create(&["print_new.rs"]);
    index.apply(&[FileChange::new("print_new.rs", ChangeKind::Created)]);
    let found = index.query("prin", 50).unwrap();
    assert!(found.iter().any(|c| c.path == "print_new.rs"), "{found:?}");
    std::fs::remove_file(fx.root.join("print_new.rs")).unwrap();
    index.apply(&[FileChange::new("print_new.rs", ChangeKind::Deleted)]);
    let found = index.query("print", 50).unwrap();
    assert!(found.iter().all(|c| c.path != "print_new.rs"), "{found:?}");
}
