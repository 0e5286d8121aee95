//! Unit tests of path confinement: `..`, absolute paths, symlinks out of the workspace, and read roots.

use super::*;
use std::os::unix::fs::symlink;

/// `tmp/ws` is the workspace, `tmp/outside` holds what must stay out of reach.
struct Fixture {
    _tmp: tempfile::TempDir,
    ws: Workspace,
    outside: PathBuf,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ws");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(root.join("a.txt"), "a\n").unwrap();
    std::fs::write(outside.join("secret.txt"), "secret\n").unwrap();
    symlink(outside.join("secret.txt"), root.join("link_file")).unwrap();
    symlink(&outside, root.join("link_dir")).unwrap();
    symlink("sub", root.join("inner_link")).unwrap();
    symlink("a.txt", root.join("inner_file_link")).unwrap();
    symlink(outside.join("nothing.txt"), root.join("dangling")).unwrap();
    let ws = Workspace::new(&root).unwrap();
    Fixture {
        _tmp: tmp,
        ws,
        outside,
    }
}

#[track_caller]
fn check_ok(fx: &Fixture, input: &str, expected_relative: &str) {
    let resolved = fx
        .ws
        .resolve(input)
        .unwrap_or_else(|err| panic!("{input:?} refused: {err}"));
    assert!(resolved.starts_with(fx.ws.root()), "{}", resolved.display());
    assert_eq!(fx.ws.display(&resolved), expected_relative, "{input:?}");
}

#[track_caller]
fn check_refused(fx: &Fixture, input: &str, expected_message: &str) {
    match fx.ws.resolve(input) {
        Ok(path) => panic!("{input:?} resolved to {}", path.display()),
        Err(err) => assert!(
            err.to_string().contains(expected_message),
            "{input:?}: `{err}` does not contain `{expected_message}`"
        ),
    }
}

#[test]
fn paths_inside_resolve_to_physical_paths() {
    let fx = fixture();
    let root = fx.ws.root().display().to_string();
    check_ok(&fx, "a.txt", "a.txt");
    check_ok(&fx, "./a.txt", "a.txt");
    check_ok(&fx, ".", ".");
    check_ok(&fx, "sub/deeper/../../a.txt", "a.txt");
    check_ok(&fx, "sub/", "sub");
    check_ok(&fx, "new_dir/new_file.txt", "new_dir/new_file.txt");
    check_ok(&fx, "new_dir/../a.txt", "a.txt");
    check_ok(&fx, "inner_link/x.txt", "sub/x.txt");
    check_ok(&fx, "inner_link/../a.txt", "a.txt");
    check_ok(&fx, "inner_file_link", "a.txt");
    check_ok(&fx, &format!("{root}/sub/deeper"), "sub/deeper");
    check_ok(&fx, &root, ".");
    check_ok(&fx, "./~", "~");
    check_ok(&fx, "a~b", "a~b");
    check_ok(&fx, "file:name", "file:name");
    check_ok(&fx, &"x".repeat(255), &"x".repeat(255));
}

#[test]
fn hostile_paths_are_refused_with_a_reason() {
    let fx = fixture();
    let outside = fx.outside.display().to_string();
    let cases: &[(&str, &str)] = &[
        ("", "empty"),
        ("..", "climbs above"),
        ("../outside/secret.txt", "climbs above"),
        ("../ws/a.txt", "climbs above"),
        ("./../x", "climbs above"),
        ("a/../../x", "climbs above"),
        ("sub/deeper/../../../x", "climbs above"),
        ("/etc/passwd", "absolute path outside"),
        ("/", "absolute path outside"),
        ("link_file", "symlink `link_file`"),
        ("link_dir", "symlink `link_dir`"),
        ("link_dir/secret.txt", "points outside"),
        ("link_dir/../ws/a.txt", "points outside"),
        ("link_dir/new.txt", "points outside"),
        ("dangling", "does not exist"),
        ("a\0b", "NUL"),
        ("..\\..\\x", "Windows"),
        ("C:\\Windows", "Windows"),
        ("c:/Windows/x", "drive letter"),
        ("\\\\server\\share", "UNC"),
        ("//server/share", "UNC"),
        ("~/x", "`~`"),
        ("~root/.ssh", "`~`"),
        ("file:///etc/passwd", "URL"),
        ("http://example.com/x", "URL"),
    ];
    for (input, message) in cases {
        check_refused(&fx, input, message);
    }
    check_refused(
        &fx,
        &format!("{outside}/secret.txt"),
        "absolute path outside",
    );
    check_refused(&fx, &"a/".repeat(2100), "at most 4096");
    check_refused(&fx, &"y".repeat(300), "at most 255");
    check_refused(&fx, &format!("sub/{}/z", "y".repeat(256)), "`yyyy");
    // The root's own parent, named absolutely, is outside too.
    let parent = fx.ws.root().parent().unwrap().display().to_string();
    check_refused(&fx, &parent, "absolute path outside");
    check_refused(
        &fx,
        &format!("{}/../outside", fx.ws.root().display()),
        "climbs above",
    );
}

#[test]
fn a_symlinked_root_still_accepts_absolute_paths_through_the_link() {
    let fx = fixture();
    let tmp = fx.ws.root().parent().unwrap();
    let alias = tmp.join("alias");
    symlink(fx.ws.root(), &alias).unwrap();
    let ws = Workspace::new(&alias).unwrap();
    assert_eq!(ws.root(), fx.ws.root());
    let resolved = ws.resolve(&format!("{}/a.txt", alias.display())).unwrap();
    assert_eq!(resolved, fx.ws.root().join("a.txt"));
}

#[test]
fn a_file_used_as_a_directory_resolves_and_fails_later() {
    let fx = fixture();
    check_ok(&fx, "a.txt/x", "a.txt/x");
}

#[test]
fn the_root_must_be_an_existing_directory() {
    let fx = fixture();
    let err = Workspace::new(fx.ws.root().join("a.txt")).unwrap_err();
    assert!(err.to_string().contains("not a directory"), "{err}");
    let err = Workspace::new(fx.ws.root().join("missing")).unwrap_err();
    assert!(err.to_string().contains("cannot be resolved"), "{err}");
}
