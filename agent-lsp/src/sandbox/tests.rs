//! The policies through real bubblewrap and real Landlock: each rule refuses what it names, and
//! `off` shows what each would have prevented.

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
        std::fs::create_dir_all(world.workspace.path().join("src")).unwrap();
        std::fs::write(world.workspace.path().join("README.md"), "readme\n").unwrap();
        std::fs::create_dir_all(world.home.path().join(".ssh")).unwrap();
        std::fs::write(world.home.path().join(".ssh/id_rsa"), "SECRET KEY").unwrap();
        std::fs::write(world.home.path().join(".profile"), "PROFILE").unwrap();
        world
    }

    fn sandbox(&self, mode: Mode, network: bool) -> Sandbox {
        self.with(Preference::Auto, mode, network)
    }

    /// The sandbox of `mode` held by Landlock, which this machine's kernel has.
    fn landlock(&self, mode: Mode, network: bool) -> Sandbox {
        let sandbox = self.with(Preference::Landlock, mode, network);
        assert!(
            matches!(sandbox.mechanism(), Mechanism::Landlock { abi } if *abi >= 6),
            "the kernel has Landlock ABI 6 or later: {:?}",
            sandbox.mechanism()
        );
        sandbox
    }

    fn with(&self, mechanism: Preference, mode: Mode, network: bool) -> Sandbox {
        let policy = Policy {
            mode,
            network,
            mechanism,
            ..Policy::default()
        };
        Sandbox::detect(policy, self.workspace.path()).with_home(self.home.path())
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
            mechanism: Preference::Auto,
            ..Policy::default()
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
    assert_eq!(received(&listener), "hi");
}

/// What the next connection to `listener` sent, waiting for it.
fn received(listener: &TcpListener) -> String {
    listener.set_nonblocking(false).unwrap();
    let (mut stream, _) = listener.accept().unwrap();
    let mut got = String::new();
    stream.read_to_string(&mut got).unwrap();
    got
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

#[test]
fn the_mechanism_is_chosen_from_the_policy_and_a_named_one_is_never_replaced() {
    let missing = bubblewrap_at(Some(PathBuf::from("/nonexistent/bwrap")));
    let no_bwrap = bubblewrap_at(None);
    let no_landlock = "the kernel has no Landlock".to_owned();
    let bwrap = PathBuf::from("/usr/bin/bwrap");
    let found = || Ok(&bwrap);
    let unprobed = || -> Result<&PathBuf, &String> { panic!("bubblewrap is not probed") };
    // Auto prefers bubblewrap, then Landlock, then says why neither.
    assert_eq!(
        choose(Preference::Auto, found, || panic!("Landlock is not probed")),
        Mechanism::Bubblewrap(bwrap.clone())
    );
    assert_eq!(
        choose(Preference::Auto, || missing.as_ref(), || Ok(7)),
        Mechanism::Landlock { abi: 7 }
    );
    let Mechanism::Unconfined(why) =
        choose(Preference::Auto, || no_bwrap.as_ref(), || Err(&no_landlock))
    else {
        panic!("neither mechanism is available")
    };
    assert!(why.contains("`bwrap`") && why.contains("Landlock"), "{why}");
    // A named mechanism is the only one probed; missing, it leaves the command unconfined and
    // says so.
    let Mechanism::Unconfined(why) = choose(
        Preference::Bubblewrap,
        || missing.as_ref(),
        || panic!("Landlock is not probed"),
    ) else {
        panic!("bubblewrap was named")
    };
    assert!(
        why.contains("asks for bubblewrap") && why.contains("/nonexistent/bwrap"),
        "{why}"
    );
    let Mechanism::Unconfined(why) = choose(Preference::Landlock, unprobed, || Err(&no_landlock))
    else {
        panic!("Landlock was named")
    };
    assert!(why.contains("asks for Landlock"), "{why}");
    assert_eq!(
        choose(Preference::Landlock, unprobed, || Ok(6)),
        Mechanism::Landlock { abi: 6 }
    );
}

#[test]
fn the_policy_reads_the_mechanism_and_refuses_an_unknown_one() {
    let policy: Policy = toml::from_str("mode = \"read-only\"").unwrap();
    assert_eq!(policy.mechanism, Preference::Auto);
    let policy: Policy = toml::from_str("mode = \"read-only\"\nmechanism = \"landlock\"").unwrap();
    assert_eq!(policy.mechanism, Preference::Landlock);
    let error = toml::from_str::<Policy>("mode = \"read-only\"\nmechanism = \"firejail\"")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("unknown variant `firejail`")
            && error.contains("`auto`, `bubblewrap`, `landlock`"),
        "{error}"
    );
}

/// The one exception to `unsafe_code = "deny"` stays one: the child hook of the Landlock
/// mechanism.
#[test]
fn only_the_landlock_hook_allows_unsafe_code() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut allowing = Vec::new();
    for source in ["agent-lsp/src", "lsp-bridge/src", "tests"] {
        for entry in ignore::Walk::new(crates.join(source)).flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|ext| ext == "rs")
                && std::fs::read_to_string(path)
                    .unwrap()
                    .contains(concat!("allow(", "unsafe_code)"))
            {
                allowing.push(path.file_name().unwrap().to_string_lossy().into_owned());
            }
        }
    }
    assert_eq!(allowing, ["landlock.rs"]);
}

mod under_landlock;

/// A server installed under `/tmp` (a checkout there) is seen again through the private
/// `/tmp`, read-only, as given and where its link leads; a bare name or a program elsewhere
/// binds nothing.
#[test]
fn a_program_under_tmp_is_shown_through_the_private_tmp() {
    let installed = tempfile::tempdir_in("/tmp").unwrap();
    let elsewhere = tempfile::tempdir_in("/var/tmp").unwrap();
    let real = elsewhere.path().join("server");
    std::fs::write(&real, "").unwrap();
    let link = installed.path().join("bin/server");
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&real, &link).unwrap();
    assert_eq!(under_tmp(&link), [installed.path().to_owned()]);
    assert!(under_tmp(&real).is_empty());
    assert!(under_tmp(Path::new("sh")).is_empty());
}
