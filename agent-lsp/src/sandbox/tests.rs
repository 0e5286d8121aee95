//! The policies through real bubblewrap: each rule refuses what it names, and `off` shows what
//! each would have prevented.

use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::time::Duration;

use super::*;

struct World {
    workspace: tempfile::TempDir,
    outside: tempfile::TempDir,
    home: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        let world = World {
            workspace: tempfile::tempdir().unwrap(),
            // Not under /tmp, which the sandbox replaces by a private one: a folder the
            // sandbox still sees, read-only.
            outside: tempfile::tempdir_in("/var/tmp").unwrap(),
            home: tempfile::tempdir_in("/var/tmp").unwrap(),
        };
        std::fs::create_dir_all(world.workspace.path().join(".git/hooks")).unwrap();
        std::fs::write(world.workspace.path().join(".git/config"), "[core]\n").unwrap();
        std::fs::create_dir_all(world.home.path().join(".ssh")).unwrap();
        std::fs::write(world.home.path().join(".ssh/id_rsa"), "SECRET KEY").unwrap();
        world
    }

    fn sandbox(&self, mode: Mode, network: bool) -> Sandbox {
        Sandbox::detect(Policy { mode, network }, self.workspace.path()).with_home(self.home.path())
    }

    /// Run `command` in the workspace; whether it succeeded, and what it printed.
    fn run(&self, sandbox: &Sandbox, command: &str) -> (bool, String) {
        let output = sandbox
            .sh(self.workspace.path(), command)
            .output()
            .expect("the command starts");
        let text = String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr);
        (output.status.success(), text)
    }
}

fn bwrap_here() -> Sandbox {
    let workspace = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::detect(
        Policy {
            mode: Mode::WorkspaceWrite,
            network: false,
        },
        workspace.path(),
    );
    assert!(
        matches!(sandbox.mechanism(), Mechanism::Bubblewrap(_)),
        "bubblewrap is installed by .ci/tools.sh: {:?}",
        sandbox.mechanism()
    );
    sandbox
}

#[test]
fn workspace_write_writes_the_workspace_and_nothing_else() {
    bwrap_here();
    let world = World::new();
    let sandbox = world.sandbox(Mode::WorkspaceWrite, false);
    let outside = world.outside.path().join("escaped");
    let cases = [
        ("echo ok > made.txt", true),
        ("mkdir -p target/debug && echo ok > target/debug/out", true),
        ("echo x >> .git/config", false),
        ("echo 'rm -rf /' > .git/hooks/pre-commit", false),
        (&*format!("echo x > {}", outside.display()), false),
        (
            &*format!("echo x >> {}/.bashrc", world.home.path().display()),
            false,
        ),
        ("echo x > /tmp/private && cat /tmp/private", true),
    ];
    for (command, allowed) in cases {
        let (ok, text) = world.run(&sandbox, command);
        assert_eq!(ok, allowed, "`{command}`: {text}");
    }
    assert!(world.workspace.path().join("made.txt").exists());
    assert_eq!(
        std::fs::read_to_string(world.workspace.path().join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!outside.exists());
    assert!(
        !world
            .workspace
            .path()
            .join(".git/hooks/pre-commit")
            .exists()
    );
}

#[test]
fn read_only_writes_nothing_but_its_temp_folder() {
    bwrap_here();
    let world = World::new();
    let sandbox = world.sandbox(Mode::ReadOnly, false);
    let (ok, text) = world.run(&sandbox, "echo ok > made.txt");
    assert!(!ok, "{text}");
    let (ok, text) = world.run(&sandbox, "cat .git/config && echo x > /tmp/t && cat /tmp/t");
    assert!(ok, "{text}");
    assert!(!world.workspace.path().join("made.txt").exists());
}

#[test]
fn the_home_secrets_are_not_readable() {
    bwrap_here();
    let world = World::new();
    let sandbox = world.sandbox(Mode::WorkspaceWrite, false);
    let key = world.home.path().join(".ssh/id_rsa");
    let (_, text) = world.run(&sandbox, &format!("cat {}", key.display()));
    assert!(!text.contains("SECRET KEY"), "{text}");
    let unconfined = world.sandbox(Mode::Off, false);
    let (ok, text) = world.run(&unconfined, &format!("cat {}", key.display()));
    assert!(ok && text.contains("SECRET KEY"), "{text}");
}

#[test]
fn without_network_a_loopback_listener_sees_no_connection() {
    bwrap_here();
    let world = World::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let connect = format!(
        "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=2).send(b\"hi\")'"
    );
    let (ok, text) = world.run(&world.sandbox(Mode::WorkspaceWrite, false), &connect);
    assert!(!ok, "{text}");
    std::thread::sleep(Duration::from_millis(200));
    assert!(listener.accept().is_err(), "the listener saw a connection");

    let (ok, text) = world.run(&world.sandbox(Mode::WorkspaceWrite, true), &connect);
    assert!(ok, "{text}");
    listener.set_nonblocking(false).unwrap();
    let (mut stream, _) = listener.accept().unwrap();
    let mut got = String::new();
    stream.read_to_string(&mut got).unwrap();
    assert_eq!(got, "hi");
}

#[test]
fn a_symlink_made_inside_does_not_lead_out() {
    bwrap_here();
    let world = World::new();
    let sandbox = world.sandbox(Mode::WorkspaceWrite, false);
    let target = world.outside.path().join("victim");
    std::fs::write(&target, "untouched").unwrap();
    let (_, text) = world.run(
        &sandbox,
        &format!("ln -s {} link && echo changed > link", target.display()),
    );
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "untouched",
        "{text}"
    );
    assert!(Path::new(&world.workspace.path().join("link")).is_symlink());
}

#[test]
fn off_is_unconfined_and_says_so() {
    let world = World::new();
    let sandbox = world.sandbox(Mode::Off, false);
    assert_eq!(
        sandbox.mechanism(),
        &Mechanism::Unconfined("the policy is `off`".to_owned())
    );
    let outside = world.outside.path().join("escaped");
    let (ok, _) = world.run(&sandbox, &format!("echo x > {}", outside.display()));
    assert!(ok && outside.exists());
}
