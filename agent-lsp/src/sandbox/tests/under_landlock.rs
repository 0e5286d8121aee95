//! The hostile suite under Landlock and its seccomp filter, through the real kernel: what a
//! command must not do is refused and leaves no trace, ordinary work still passes.

use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use super::World;
use crate::sandbox::{Mechanism, Mode, Preference};

/// Wait (at most five seconds) for `path` to exist.
fn appears(path: &Path) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        if path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn workspace_write_writes_the_subfolders_and_root_files_and_nothing_else() {
    let world = World::new();
    let sandbox = world.landlock(Mode::WorkspaceWrite, false);
    let outside = world.outside.path().join("escaped");
    let cases = [
        ("echo ok > src/new.rs", true),
        (
            "mkdir -p src/a/b && echo ok > src/a/b/c && rm src/a/b/c",
            true,
        ),
        ("echo more >> README.md", true),
        ("echo x >> .git/config", false),
        ("echo 'rm -rf /' > .git/hooks/pre-commit", false),
        ("rm -r .git/hooks", false),
        (&*format!("echo x > {}", outside.display()), false),
        (
            &*format!("echo x >> {}/.bashrc", world.home.path().display()),
            false,
        ),
        // /tmp is not private under Landlock: only the sandbox's own temp folder is writable.
        ("echo x > /tmp/agent-lsp-landlock-escape", false),
        // Known limit (module doc): no entry is created or removed at the workspace's root,
        // which is what keeps a missing `.envrc` or `.mcp.json` from being created.
        ("echo x > made.txt", false),
        ("echo x > .envrc", false),
        ("rm README.md", false),
    ];
    for (command, allowed) in cases {
        let (ok, text) = world.run(&sandbox, command);
        assert_eq!(ok, allowed, "`{command}`: {text}");
    }
    let workspace = world.workspace.path();
    assert_eq!(
        std::fs::read_to_string(workspace.join("src/new.rs")).unwrap(),
        "ok\n"
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join("README.md")).unwrap(),
        "readme\nmore\n"
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(workspace.join(".git/hooks").is_dir());
    assert!(!workspace.join(".git/hooks/pre-commit").exists());
    assert!(!outside.exists());
    assert!(!Path::new("/tmp/agent-lsp-landlock-escape").exists());
    assert!(!workspace.join(".envrc").exists());
    let mechanism = sandbox.describe()["mechanism"].as_str().unwrap().to_owned();
    assert!(mechanism.starts_with("landlock (ABI "), "{mechanism}");
}

#[test]
fn read_only_writes_nothing_but_its_private_temp_folder() {
    let world = World::new();
    let sandbox = world.landlock(Mode::ReadOnly, false);
    let (ok, text) = world.run(&sandbox, "echo ok > src/made.txt");
    assert!(!ok, "{text}");
    let (ok, text) = world.run(&sandbox, "echo more >> README.md");
    assert!(!ok, "{text}");
    let (ok, text) = world.run(
        &sandbox,
        "cat .git/config && f=$(mktemp) && echo private > \"$f\" && cat \"$f\" && echo \"$f\"",
    );
    assert!(
        ok && text.contains("[core]") && text.contains("private"),
        "{text}"
    );
    let temp = sandbox.temp.as_ref().unwrap().path();
    assert!(text.contains(&*temp.display().to_string()), "{text}");
    assert!(!world.workspace.path().join("src/made.txt").exists());
    // The private folder goes with the last clone of the sandbox.
    let temp = temp.to_owned();
    let clone = sandbox.clone();
    drop(sandbox);
    assert!(temp.is_dir());
    drop(clone);
    assert!(!temp.exists());
}

#[test]
fn the_home_secrets_are_not_readable_and_the_rest_of_the_home_is() {
    let world = World::new();
    let sandbox = world.landlock(Mode::WorkspaceWrite, false);
    let home = world.home.path().display().to_string();
    let (ok, text) = world.run(&sandbox, &format!("cat {home}/.ssh/id_rsa"));
    assert!(!ok && !text.contains("SECRET KEY"), "{text}");
    // Through /proc/self/root the path is the same file, so it is refused too.
    let (ok, text) = world.run(&sandbox, &format!("cat /proc/self/root{home}/.ssh/id_rsa"));
    assert!(!ok && !text.contains("SECRET KEY"), "{text}");
    let (ok, text) = world.run(&sandbox, &format!("cat {home}/.profile && ls -a {home}"));
    assert!(
        ok && text.contains("PROFILE") && text.contains(".ssh"),
        "{text}"
    );
    let (ok, text) = world.run(&sandbox, "cat /etc/passwd > /dev/null && git --version");
    assert!(ok, "{text}");
}

#[test]
fn without_network_a_loopback_listener_sees_no_connection() {
    let world = World::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let connect = format!(
        "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=2).send(b\"hi\")'"
    );
    let curl = format!("curl -s --max-time 2 http://127.0.0.1:{port}/");
    let udp = "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)'";
    let unix = "python3 -c 'import socket; socket.socketpair(); socket.socket(socket.AF_UNIX)'";
    let sandbox = world.landlock(Mode::WorkspaceWrite, false);
    for command in [&*connect, &*curl, udp] {
        let (ok, text) = world.run(&sandbox, command);
        assert!(!ok, "`{command}`: {text}");
    }
    let (ok, text) = world.run(&sandbox, unix);
    assert!(ok, "Unix sockets stay allowed: {text}");
    std::thread::sleep(Duration::from_millis(200));
    assert!(listener.accept().is_err(), "the listener saw a connection");

    let (ok, text) = world.run(&world.landlock(Mode::WorkspaceWrite, true), &connect);
    assert!(ok, "{text}");
    assert_eq!(super::received(&listener), "hi");
}

#[test]
fn a_detached_grandchild_stays_confined() {
    let world = World::new();
    let sandbox = world.landlock(Mode::WorkspaceWrite, false);
    let escaped = world.outside.path().join("escaped");
    let done = world.workspace.path().join("src/done");
    // The grandchild outlives the command, in a session of its own, and tries once its parent
    // is gone; it then marks that it ran, where it may write.
    let command = format!(
        "setsid sh -c 'sleep 0.3; echo x > {}; echo ran > src/done' > /dev/null 2>&1 &",
        escaped.display()
    );
    let (ok, text) = world.run(&sandbox, &command);
    assert!(ok, "{text}");
    assert!(appears(&done), "the grandchild ran");
    assert!(!escaped.exists());
}

#[test]
fn links_and_proc_do_not_lead_out() {
    let world = World::new();
    let sandbox = world.landlock(Mode::WorkspaceWrite, false);
    let target = world.outside.path().join("victim");
    std::fs::write(&target, "untouched").unwrap();
    let (ok, text) = world.run(
        &sandbox,
        &format!(
            "ln -s {} src/link && echo changed > src/link",
            target.display()
        ),
    );
    assert!(!ok, "{text}");
    assert!(world.workspace.path().join("src/link").is_symlink());
    let (ok, text) = world.run(
        &sandbox,
        &format!("echo changed > /proc/self/root{}", target.display()),
    );
    assert!(!ok, "{text}");
    let (ok, text) = world.run(
        &sandbox,
        &format!(
            "ln {} src/hard && echo changed > src/hard",
            target.display()
        ),
    );
    assert!(!ok, "{text}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched");
    // A link at the root made before the command (by the user) grants nothing on its target.
    std::os::unix::fs::symlink(world.outside.path(), world.workspace.path().join("out")).unwrap();
    let (ok, text) = world.run(&sandbox, "echo changed > out/victim");
    assert!(!ok, "{text}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched");
}

#[test]
fn the_agent_and_the_raw_disks_are_out_of_reach() {
    let world = World::new();
    let sandbox = world.landlock(Mode::WorkspaceWrite, false);
    // The command's parent is this test process: its memory and its signals are refused.
    // (Its `environ` stays readable through this kernel's /proc, which is no more than what the
    // command inherits from the agent anyway.)
    for command in [
        "head -c 1 /proc/$PPID/mem",
        "readlink /proc/$PPID/cwd",
        "kill -0 $PPID",
    ] {
        let (ok, text) = world.run(&sandbox, command);
        assert!(!ok, "`{command}`: {text}");
    }
    // A raw disk, which root may read outside (the home's secrets are on it).
    let disk = std::fs::read_dir("/dev")
        .unwrap()
        .flatten()
        .find(|entry| std::os::unix::fs::FileTypeExt::is_block_device(&entry.file_type().unwrap()))
        .expect("this machine has a block device in /dev")
        .path();
    let read_disk = format!("head -c 1 {} > /dev/null", disk.display());
    let (ok, text) = world.run(&sandbox, &read_disk);
    assert!(!ok, "{text}");
    let unconfined = world.sandbox(Mode::Off, false);
    let (ok, text) = world.run(&unconfined, &read_disk);
    assert!(ok, "{text}");
    let (ok, text) = world.run(&unconfined, "readlink /proc/$PPID/cwd && kill -0 $PPID");
    assert!(ok, "{text}");
}

#[test]
fn ordinary_work_passes() {
    let world = World::new();
    let sandbox = world.landlock(Mode::WorkspaceWrite, false);
    let cases = [
        // A nested repository: `.git` is protected at the workspace's root only.
        "cd src && git init -q && git status --short && git -c user.name=a -c user.email=a@b \
         commit -q --allow-empty -m first",
        "python3 -c \"open('src/p.txt', 'w').write('hi')\" && cat src/p.txt",
        "f=$(mktemp -d) && echo t > \"$f/x\" && cat \"$f/x\" && rm -r \"$f\"",
        "ls / > /dev/null && ls ~ > /dev/null && echo out 2> /dev/null > /dev/null",
        "echo out > /dev/stdout && echo err > /dev/stderr && head -c 8 /dev/urandom | wc -c && ls /dev",
        // `sed -i` writes a new file beside the old one and renames it over.
        "echo readme > src/new.rs && sed -i s/readme/README/ src/new.rs",
    ];
    for command in cases {
        let (ok, text) = world.run(&sandbox, command);
        assert!(ok, "`{command}`: {text}");
    }
    assert_eq!(
        std::fs::read_to_string(world.workspace.path().join("src/new.rs")).unwrap(),
        "README\n"
    );
    assert!(matches!(sandbox.mechanism(), Mechanism::Landlock { .. }));
    assert_eq!(sandbox.policy.mechanism, Preference::Landlock);
}
