//! Commands in a sandbox: what a `shell` command (or a background job) may touch, and the
//! operating system's mechanism that holds it to that.
//!
//! A [`Policy`] says what a command may do: read the file system and write only a private
//! temporary folder (`read-only`), or also write the workspace (`workspace-write`), except its
//! protected paths (`.git/`, `.agent-lsp/`, `.mcp.json`, editor settings), which stay
//! read-only inside the sandbox too; the home directory's secrets folders are not readable at
//! all; the network is off unless the policy turns it on. `off` is today's behaviour.
//!
//! The first mechanism is bubblewrap (`bwrap`, found on `PATH`): the command runs in new user,
//! PID and (without network) network namespaces, over a read-only view of `/` with the writable
//! and hidden paths mounted over it. Where bubblewrap is missing or refused (a container that
//! forbids user namespaces), the second is Landlock with a seccomp filter, applied in the child
//! before `exec` (`sandbox/landlock.rs`): it needs no namespaces, but it can only grant rights, never
//! mount, so it holds a little less (the module says what). The policy may name one
//! (`mechanism`); by default the first that works here is used. Where none can be had,
//! [`Sandbox::detect`] says why and the command runs as with `off`, which the caller must say
//! to the user.
//!
//! A preset opts in with `[sandbox]` (`standard` does); without it commands run as they always
//! did. A command the sandbox holds may run without asking (`[permissions] sandboxed`); one
//! that needs more asks to leave it for that call ([`Leave`]). Known gap: under bubblewrap the
//! protected paths are mounted read-only where they exist at the workspace's root, so one the
//! command creates (a new `.envrc`) is not held, only named in its result (`watch.rs`; Landlock
//! refuses it: no entry can be created at the root there); under both, a protected name in a
//! subfolder (a nested repository's `.git`) is writable.

mod landlock;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

mod bounds;
mod leave;
pub mod process;
mod servers;
mod watch;

pub use leave::{Confinement, Leave};
pub use servers::launcher;
pub use watch::Absent;

/// What a sandboxed command may write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Nothing but a private temporary folder.
    ReadOnly,
    /// The workspace and a private temporary folder, except the workspace's protected paths.
    WorkspaceWrite,
    /// No sandbox: the command runs with every right of the user.
    Off,
}

impl Mode {
    /// The mode as presets write it (its serde name), for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read-only",
            Mode::WorkspaceWrite => "workspace-write",
            Mode::Off => "off",
        }
    }
}

/// What a command may do, as a preset's `[sandbox]` states it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// What it may write.
    pub mode: Mode,
    /// Whether it may open network connections (loopback included).
    #[serde(default)]
    pub network: bool,
    /// Which mechanism holds the command to it.
    #[serde(default)]
    pub mechanism: Preference,
    /// More of the home directory to hide, besides [`SECRETS`]: paths relative to it
    /// (`.kube`, `~/.docker/config.json`) or absolute.
    #[serde(default)]
    pub hidden: Vec<String>,
    /// Whether the MCP servers the preset starts run in the sandbox too. They are the user's
    /// own tools, so by default they run with the user's rights, as the language servers do.
    #[serde(default)]
    pub mcp_servers: bool,
}

impl Default for Policy {
    /// No sandbox: what a preset without `[sandbox]` gets.
    fn default() -> Policy {
        Policy {
            mode: Mode::Off,
            network: true,
            mechanism: Preference::Auto,
            hidden: Vec::new(),
            mcp_servers: false,
        }
    }
}

/// The mechanism a policy asks for. A named one that is not available here leaves the command
/// unconfined with the reason, never held by the other: the user chose it for what it holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preference {
    /// Bubblewrap where it works, else Landlock.
    #[default]
    Auto,
    /// Bubblewrap only.
    Bubblewrap,
    /// Landlock (with the seccomp filter) only.
    Landlock,
}

/// Names that make a workspace path protected (a nested repository's `.git` runs hooks too):
/// what would run commands later, outside any sandbox (git's hooks and config, direnv, the
/// editors' settings and tasks, the agent's own presets and MCP servers). The writing tools ask
/// before writing under one (`tools/protected.rs`); a sandboxed command may read them but not
/// write them.
pub const PROTECTED_NAMES: &[(&str, &str)] = &[
    (".git", "git's configuration and hooks run commands"),
    (".agent-lsp", "the agent's own presets and settings"),
    (".mcp.json", "the tool servers an agent starts"),
    (
        ".claude",
        "Claude Code's settings hold hooks that run commands",
    ),
    (".vscode", "editor settings and tasks can run commands"),
    (".idea", "editor settings can run commands"),
    (".zed", "editor settings can run commands"),
    (".helix", "editor settings can run commands"),
    (".nvim.lua", "Neovim runs it (with 'exrc')"),
    (".exrc", "the editor runs it (with 'exrc')"),
    (".envrc", "direnv runs it"),
];

/// Folders of the home directory a command may not read at all: keys and credentials, and the
/// agent's own configuration (its API keys).
pub const SECRETS: &[&str] = &[".ssh", ".gnupg", ".aws", ".config/agent-lsp"];

/// How a command is held to its policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mechanism {
    /// Bubblewrap, at this path.
    Bubblewrap(PathBuf),
    /// Landlock and a seccomp filter, applied in the child before `exec`.
    Landlock {
        /// The Landlock ABI version the kernel offers: below the one the rules are written for
        /// (6), they are only partly enforced.
        abi: i32,
    },
    /// Nothing holds it: the policy is `off`, or no mechanism is available (the reason).
    Unconfined(String),
}

/// A policy and the mechanism found for it, for one workspace.
#[derive(Clone, Debug)]
pub struct Sandbox {
    policy: Policy,
    mechanism: Mechanism,
    workspace: PathBuf,
    home: Option<PathBuf>,
    /// Under Landlock, the private temporary folder (`TMPDIR`) of this sandbox's commands:
    /// Landlock cannot mount a private `/tmp` as bubblewrap does. Removed when the last clone
    /// of the sandbox goes.
    temp: Option<Arc<tempfile::TempDir>>,
}

impl Sandbox {
    /// The sandbox of `policy` for `workspace`: the mechanism the policy asks for when it works
    /// here (by default bubblewrap, else Landlock), else unconfined with the reason.
    pub fn detect(policy: Policy, workspace: &Path) -> Sandbox {
        let mut mechanism = if policy.mode == Mode::Off {
            Mechanism::Unconfined("the policy is `off`".to_owned())
        } else {
            choose(policy.mechanism, bubblewrap, landlock::available)
        };
        let mut temp = None;
        if let Mechanism::Landlock { .. } = mechanism {
            match tempfile::Builder::new()
                .prefix("agent-lsp-sandbox-")
                .tempdir()
            {
                Ok(dir) => temp = Some(Arc::new(dir)),
                Err(error) => {
                    mechanism = Mechanism::Unconfined(format!(
                        "Landlock needs a private temporary folder, which cannot be made: {error}"
                    ));
                }
            }
        }
        Sandbox {
            policy,
            mechanism,
            workspace: workspace.to_owned(),
            home: std::env::var_os("HOME").map(PathBuf::from),
            temp,
        }
    }

    /// With `home` as the home directory whose secrets are hidden (the `HOME` of the process
    /// otherwise).
    pub fn with_home(mut self, home: &Path) -> Sandbox {
        self.home = Some(home.to_owned());
        self
    }

    /// The paths a command may not read: the home's [`SECRETS`] and the policy's `hidden`.
    pub(crate) fn secrets(&self) -> Vec<PathBuf> {
        let home = self.home.as_deref();
        let builtin = SECRETS.iter().filter_map(|secret| Some(home?.join(secret)));
        let hidden = self.policy.hidden.iter().filter_map(|path| {
            let path = path.strip_prefix("~/").unwrap_or(path);
            if Path::new(path).is_absolute() {
                Some(PathBuf::from(path))
            } else {
                Some(home?.join(path))
            }
        });
        builtin.chain(hidden).collect()
    }

    /// The mechanism that holds commands to the policy.
    pub fn mechanism(&self) -> &Mechanism {
        &self.mechanism
    }

    /// Whether commands held here cannot write the workspace at all: they need no file
    /// checkpoints around them.
    pub fn keeps_workspace_read_only(&self) -> bool {
        self.holds() && self.policy.mode == Mode::ReadOnly
    }

    /// What the record of a command says of its sandbox: the policy and the mechanism.
    pub fn describe(&self) -> serde_json::Value {
        serde_json::json!({
            "mode": self.policy.mode,
            "network": self.policy.network,
            "mechanism": self.mechanism_name(),
        })
    }

    /// `sh -c command` in `root`, inside the sandbox when there is one.
    pub fn sh(&self, root: &Path, command: &str) -> Command {
        self.command(root, "sh", &["-c", command])
    }

    /// `program args…` in `root`, inside the sandbox when there is one: a shell command, or an
    /// MCP server a preset runs in it (`mcp_servers`). The caller may set the environment; it
    /// adds [`Sandbox::private_env`] back if it clears it.
    pub fn command<A: AsRef<OsStr>>(&self, root: &Path, program: &str, args: &[A]) -> Command {
        let bwrap = match &self.mechanism {
            Mechanism::Bubblewrap(bwrap) => bwrap,
            Mechanism::Landlock { .. } => return self.landlock_command(root, program, args),
            Mechanism::Unconfined(_) => return unconfined(root, program, args),
        };
        let mut wrapped = Command::new(bwrap);
        wrapped
            .args(self.bwrap_args(root, Path::new(program)))
            .arg(program)
            .args(args);
        wrapped.current_dir(root);
        wrapped
    }

    /// bubblewrap's arguments up to the command: the read-only root, the writable and hidden
    /// paths over it, the namespaces. `program` is what runs: a server installed under `/tmp`
    /// (which the private `/tmp` would hide) is seen there, read-only.
    fn bwrap_args(&self, root: &Path, program: &Path) -> Vec<String> {
        let mut args: Vec<String> = ["--die-with-parent", "--unshare-user", "--unshare-pid"]
            .map(str::to_owned)
            .to_vec();
        if !self.policy.network {
            args.push("--unshare-net".to_owned());
        }
        args.extend(["--ro-bind", "/", "/"].map(str::to_owned));
        // The private temp folder first: a workspace under /tmp is mounted again over it.
        args.extend(["--tmpfs".to_owned(), "/tmp".to_owned()]);
        let mut mount = |how: &str, from: &Path, to: &Path| {
            args.push(how.to_owned());
            args.push(from.display().to_string());
            args.push(to.display().to_string());
        };
        for installed in under_tmp(program) {
            mount("--ro-bind", &installed, &installed);
        }
        match self.policy.mode {
            Mode::WorkspaceWrite => {
                mount("--bind", &self.workspace, &self.workspace);
                for (protected, _) in PROTECTED_NAMES {
                    let path = self.workspace.join(protected);
                    if path.exists() {
                        mount("--ro-bind", &path, &path);
                    }
                }
            }
            _ => mount("--ro-bind", &self.workspace, &self.workspace),
        }
        for path in self.secrets() {
            if path.is_dir() {
                args.extend(["--tmpfs".to_owned(), path.display().to_string()]);
            } else if path.exists() {
                args.extend([
                    "--ro-bind".to_owned(),
                    "/dev/null".to_owned(),
                    path.display().to_string(),
                ]);
            }
        }
        args.extend(["--dev", "/dev", "--proc", "/proc", "--chdir"].map(str::to_owned));
        args.push(root.display().to_string());
        args.push("--".to_owned());
        args
    }
}

/// The folders right under `/tmp` that `program` (an absolute path) is in, as given and with
/// its links followed: what a private `/tmp` must show again for it to run. Empty for a
/// program elsewhere, or a bare name found on `PATH`.
fn under_tmp(program: &Path) -> Vec<PathBuf> {
    let mut folders: Vec<PathBuf> = Vec::new();
    if !program.is_absolute() {
        return folders;
    }
    for path in [Some(program.to_owned()), program.canonicalize().ok()]
        .into_iter()
        .flatten()
    {
        let Some(first) = path
            .strip_prefix("/tmp")
            .ok()
            .and_then(|inside| inside.components().next())
        else {
            continue;
        };
        let folder = Path::new("/tmp").join(first);
        if folder.is_dir() && !folders.contains(&folder) {
            folders.push(folder);
        }
    }
    folders
}

/// `sh -c command` in `root`, with every right of the user: what runs without a sandbox.
pub fn unconfined_sh(root: &Path, command: &str) -> Command {
    unconfined(root, "sh", &["-c", command])
}

/// `program args…` in `root`, with every right of the user.
pub fn unconfined<A: AsRef<OsStr>>(root: &Path, program: &str, args: &[A]) -> Command {
    let mut command = Command::new(program);
    command.args(args).current_dir(root);
    command
}

/// The mechanism for `preference`, from what this machine offers: bubblewrap (its path, or why
/// not) and Landlock (the kernel's ABI, or why not), each probed only when it is needed.
fn choose<'a>(
    preference: Preference,
    bubblewrap: impl FnOnce() -> Result<&'a PathBuf, &'a String>,
    landlock: impl FnOnce() -> Result<i32, &'a String>,
) -> Mechanism {
    let no_bwrap = match preference {
        Preference::Landlock => None,
        Preference::Auto | Preference::Bubblewrap => match bubblewrap() {
            Ok(bwrap) => return Mechanism::Bubblewrap(bwrap.clone()),
            Err(why) if preference == Preference::Bubblewrap => {
                return Mechanism::Unconfined(format!(
                    "the policy asks for bubblewrap, which is not available: {why}"
                ));
            }
            Err(why) => Some(why),
        },
    };
    match (landlock(), no_bwrap) {
        (Ok(abi), _) => Mechanism::Landlock { abi },
        (Err(no_landlock), Some(no_bwrap)) => {
            Mechanism::Unconfined(format!("{no_bwrap}; {no_landlock}"))
        }
        (Err(why), None) => Mechanism::Unconfined(format!(
            "the policy asks for Landlock, which is not available: {why}"
        )),
    }
}

/// Bubblewrap on `PATH` when it works here, found once per process: every session and sub-agent
/// of a preset with `[sandbox]` asks, and the answer does not change while agent-lsp runs.
fn bubblewrap() -> Result<&'static PathBuf, &'static String> {
    static AVAILABLE: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    AVAILABLE
        .get_or_init(|| bubblewrap_at(lsp_bridge::config::find_program("bwrap")))
        .as_ref()
}

/// Bubblewrap at `candidate` (where `PATH` has it) when it works here, else why not.
fn bubblewrap_at(candidate: Option<PathBuf>) -> Result<PathBuf, String> {
    match candidate {
        Some(bwrap) if works(&bwrap) => Ok(bwrap),
        Some(bwrap) => Err(format!(
            "{} cannot make a sandbox here (user namespaces are refused)",
            bwrap.display()
        )),
        None => Err("bubblewrap (`bwrap`) is not on PATH".to_owned()),
    }
}

/// Whether bubblewrap can make a sandbox here (a container may refuse user namespaces).
fn works(bwrap: &Path) -> bool {
    Command::new(bwrap)
        .args([
            "--unshare-user",
            "--unshare-pid",
            "--unshare-net",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "true",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

#[cfg(test)]
mod tests;
