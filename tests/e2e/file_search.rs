//! `agent-lsp files` through the real binary: ranked candidates, ignore files (git's global
//! excludes included), the `[files]` configuration, the entry cap, and refused queries.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

/// A workspace and a home of its own, so that the user's git and agent-lsp configuration
/// cannot change what the tests see.
struct Tree {
    _tmp: tempfile::TempDir,
    root: std::path::PathBuf,
    home: std::path::PathBuf,
    config: std::path::PathBuf,
}

impl Tree {
    fn new(paths: &[&str]) -> Tree {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ws");
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(home.join(".config")).unwrap();
        for path in paths {
            let full = root.join(path);
            if path.ends_with('/') {
                std::fs::create_dir_all(&full).unwrap();
            } else {
                std::fs::create_dir_all(full.parent().unwrap()).unwrap();
                std::fs::write(&full, "x\n").unwrap();
            }
        }
        let config = tmp.path().join("config.toml");
        Tree {
            _tmp: tmp,
            root,
            home,
            config,
        }
    }

    fn write(&self, path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn files(&self, args: &[&str]) -> Output {
        Command::new(agent_tests::workspace_bin("agent-lsp"))
            .env("AGENT_LSP_CONFIG", &self.config)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env_remove("GIT_DIR")
            .arg("files")
            .arg("--workspace")
            .arg(&self.root)
            .args(args)
            .output()
            .expect("run agent-lsp files")
    }

    /// The printed candidates, one per line; the command must succeed.
    fn lines(&self, args: &[&str]) -> Vec<String> {
        let output = self.files(args);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let output = self.files(&all);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).unwrap()
    }
}

#[test]
fn candidates_are_ranked_and_printed_one_per_line() {
    let tree = Tree::new(&[
        "src/main.rs",
        "src/domain/mod.rs",
        "main_module/lib.rs",
        "docs/maintenance.md",
        "target/debug/main",
        "name with spaces.md",
    ]);
    tree.write(&tree.root.join(".gitignore"), "target/\n");
    assert_eq!(
        tree.lines(&["main"]),
        [
            "src/main.rs",
            "main_module/",
            // The file name starts with the query: that beats a match in a directory name.
            "docs/maintenance.md",
            "src/domain/",
            "main_module/lib.rs",
            "src/domain/mod.rs",
        ]
    );
    assert_eq!(
        tree.lines(&["--limit", "2", "main"]),
        ["src/main.rs", "main_module/"]
    );
    // Several words must all match (fzf syntax).
    assert_eq!(tree.lines(&["src", "mod"]), ["src/domain/mod.rs"]);
    // No query: the shortest paths.
    assert_eq!(
        tree.lines(&["--limit", "3"]),
        ["src/", "docs/", ".gitignore"]
    );

    let value = tree.json(&["spaces"]);
    assert_eq!(value["query"], "spaces");
    assert_eq!(value["status"]["truncated"], false);
    assert_eq!(value["status"]["entries"], 10);
    assert_eq!(value["status_message"], Value::Null);
    let first = &value["candidates"][0];
    assert_eq!(first["path"], "name with spaces.md");
    assert_eq!(first["kind"], "file");
    assert_eq!(first["insert_text"], "@\"name with spaces.md\"");
    assert!(first["score"].as_u64().unwrap() > 0);
}

#[test]
fn global_git_excludes_and_configured_globs_are_honoured() {
    let tree = Tree::new(&[
        "keep.rs",
        "notes.secret",
        "vendor/dep.rs",
        "web/app.min.js",
        "web/app.js",
    ]);
    // git's default global excludes file, `$XDG_CONFIG_HOME/git/ignore`.
    tree.write(&tree.home.join(".config/git/ignore"), "*.secret\n");
    tree.write(
        &tree.config,
        "[files]\nexclude = [\"vendor\", \"*.min.js\"]\n",
    );
    let mut all = tree.lines(&["--limit", "50"]);
    all.sort();
    assert_eq!(all, ["keep.rs", "web/", "web/app.js"]);

    // A `core.excludesFile` named in `~/.gitconfig` works as well.
    std::fs::remove_file(tree.home.join(".config/git/ignore")).unwrap();
    tree.write(&tree.home.join("my-excludes"), "keep.rs\n");
    tree.write(
        &tree.home.join(".gitconfig"),
        &format!(
            "[core]\n\texcludesFile = {}\n",
            tree.home.join("my-excludes").display()
        ),
    );
    let mut all = tree.lines(&["--limit", "50"]);
    all.sort();
    assert_eq!(all, ["notes.secret", "web/", "web/app.js"]);
}

#[test]
fn the_entry_cap_reports_a_truncated_index() {
    let paths: Vec<String> = (0..40).map(|i| format!("d{}/f{i}.rs", i % 4)).collect();
    let tree = Tree::new(&paths.iter().map(String::as_str).collect::<Vec<_>>());
    tree.write(
        &tree.config,
        "[files]\nmax_entries = 5\nmax_candidates = 3\n",
    );
    let value = tree.json(&["--limit", "100", "rs"]);
    assert_eq!(value["status"]["truncated"], true);
    assert_eq!(value["status"]["entries"], 5);
    assert!(
        value["status_message"]
            .as_str()
            .unwrap()
            .contains("index truncated at 5 entries"),
        "{value}"
    );
    assert!(value["candidates"].as_array().unwrap().len() <= 3);

    let output = tree.files(&["rs"]);
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("index truncated at 5 entries"), "{stderr}");

    tree.write(&tree.config, "[files]\nexclude = [\"a/{b\"]\n");
    let output = tree.files(&["rs"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("invalid glob `a/{b`"), "{stderr}");
}

#[test]
fn queries_and_links_that_leave_the_workspace_are_refused() {
    let tree = Tree::new(&["inside.rs", "sub/x.rs"]);
    let outside = tree.root.parent().unwrap().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.rs"), "x\n").unwrap();
    std::os::unix::fs::symlink(&outside, tree.root.join("out_dir")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.rs"), tree.root.join("out_file.rs")).unwrap();
    std::os::unix::fs::symlink("sub", tree.root.join("in_dir")).unwrap();

    let mut all = tree.lines(&["--limit", "50"]);
    all.sort();
    assert_eq!(all, ["in_dir/", "inside.rs", "sub/", "sub/x.rs"]);
    let value = tree.json(&["secret"]);
    assert_eq!(value["candidates"], Value::Array(vec![]));
    assert_eq!(value["status"]["refused_symlinks"], 2);

    let outside_query = format!("{}/secret.rs", outside.display());
    for (query, reason) in [
        ("../outside/secret.rs", "climbs above"),
        ("..", "climbs above"),
        ("/etc/passwd", "absolute path outside"),
        (outside_query.as_str(), "absolute path outside"),
        ("..\\outside", "Windows"),
        ("~/x", "`~`"),
    ] {
        let output = tree.files(&[query]);
        assert_eq!(output.status.code(), Some(1), "{query}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("is refused") && stderr.contains(reason),
            "{query}: {stderr}"
        );
        assert!(output.stdout.is_empty(), "{query}");
    }
    // An absolute path inside the workspace is a fine query.
    let inside = format!("{}/sub/x.rs", tree.root.display());
    assert_eq!(tree.lines(&["--limit", "1", &inside]), ["sub/x.rs"]);
}
