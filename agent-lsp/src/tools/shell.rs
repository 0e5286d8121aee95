//! The `shell` tool: run a command with `sh -c` in the workspace root, with a timeout.
//!
//! The command runs in a process group of its own, so that a timeout or a cancelled turn kills
//! everything it started (a plain kill of `sh` would leave `sleep`, compilers or servers
//! running and holding the output pipes open). For the same reason, processes the command left
//! in the background are killed when it exits.
//!
//! A process group is not enough: `setsid`, a double fork or a daemon leaves the group, and
//! its orphan is adopted by init, where nothing links it to the command any more. So every
//! command also carries an environment variable with a token of its own, which every
//! descendant inherits whatever group, session or parent it ends up in; when the command ends,
//! every process whose environment holds the token is killed, again until none is left (one
//! may fork while the others are being killed). Only a process that replaced its whole
//! environment (`env -i`) escapes this. A subreaper would also need a live ancestor that reaps
//! what it adopts, and cgroups need a delegated hierarchy, which a user's editor seldom has.
//!
//! What a command may touch is the sandbox's to hold (`crate::sandbox`: the preset's
//! `[sandbox]`, which the runtime hands the call as `ToolContext::sandbox`), and whether it runs
//! at all is the permission policy's. The deny-list below only catches a few commands that are destructive beyond any task (`rm -rf /`, `mkfs`,
//! writing to a disk device, a fork bomb), so that a slip or an injected instruction does not
//! wipe the machine even where the shell is allowed.
//!
//! Background jobs (`crate::jobs`) start and kill their commands with the same pieces
//! (`refusal`, `sh_command`, `ProcessGroup`), so a job is refused, grouped, marked and
//! killed exactly as a foreground command is.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use regex::Regex;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::plugin::outcomes::ToolOutput;
use crate::sandbox::{Confinement, Leave};
use capture::{capture, collect};

use crate::plugin::tool::ToolContext;

use crate::plugin::typed::TypedTool;

/// Seconds a command may run when the call does not say (`timeout_secs`).
pub const SHELL_DEFAULT_TIMEOUT_SECS: u64 = 120;
/// The most seconds a call may give a command.
pub const SHELL_MAX_TIMEOUT_SECS: u64 = 600;
/// Bytes kept from each of stdout and stderr: the first half and the last half of this.
pub const SHELL_CAPTURE_BYTES: usize = 64 * 1024;
/// How long to wait for the output pipes to close once the command has exited and its group
/// was killed; only a process that left the group (`setsid`) can keep them open longer.
const PIPE_GRACE: Duration = Duration::from_secs(2);

/// Commands refused whatever the policy says: (pattern, what it would do).
static DENIED: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    // The start of a simple command: the line start or an operator, then an optional `sudo`.
    let word = r"(?:^|[;&|()`]|\$\()\s*(?:sudo\s+|exec\s+)?";
    let rm_flags = r"(?:-[a-zA-Z]*\s+|--[a-z-]+\s+)*";
    let end = r"(?:$|[\s;&|)`])";
    [
        (
            format!(r"{word}rm\s+{rm_flags}(?:/|/\*|~|~/|~/\*|\$HOME|\$HOME/|\$HOME/\*|\.\.|\.\./)(?:\s*){end}"),
            "recursively delete the file system root, the home directory or the workspace's parent",
        ),
        (
            format!(r"{word}rm\s.*--no-preserve-root"),
            "delete the file system root",
        ),
        (format!(r"{word}mkfs(?:\.[a-z0-9]+)?\s"), "format a file system"),
        (
            format!(r"{word}dd\s[^;&|]*of=/dev/(?:sd|hd|nvme|vd|xvd|mmcblk|disk)"),
            "overwrite a disk device",
        ),
        (r">\s*/dev/(?:sd|hd|nvme|vd|xvd|mmcblk|disk)[a-z0-9]*".to_owned(), "overwrite a disk device"),
        (r":\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:".to_owned(), "start a fork bomb"),
        (
            format!(r"{word}(?:shutdown|reboot|halt|poweroff)(?:\s|$)"),
            "shut the machine down",
        ),
        (
            format!(r"{word}(?:chmod|chown)\s+(?:-[a-zA-Z]*R[a-zA-Z]*\s+)\S+\s+/(?:\s*){end}"),
            "change the owner or mode of every file on the machine",
        ),
    ]
    .into_iter()
    .map(|(pattern, what)| (Regex::new(&pattern).expect("deny-list pattern"), what))
    .collect()
});

/// What a command would do if it is on the deny-list.
pub fn denied(command: &str) -> Option<&'static str> {
    DENIED
        .iter()
        .find(|(pattern, _)| pattern.is_match(command))
        .map(|(_, what)| *what)
}

/// `shell {command, timeout_secs?}`.
pub struct Shell;

/// The arguments of `shell` (`jobs` builds its foreground calls from these too).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellArgs {
    /// The command line, as given to `sh -c`.
    pub(crate) command: String,
    /// Seconds before the command is killed. Default 120.
    #[serde(default)]
    #[schemars(range(min = 1, max = SHELL_MAX_TIMEOUT_SECS))]
    pub(crate) timeout_secs: Option<u64>,
    /// Only when this session's commands run in a sandbox and this one needs more: "network"
    /// (the network on) or "all" (no sandbox: writing outside the workspace or to .git/ and
    /// the other protected paths). The user is asked to allow it.
    #[serde(default)]
    pub(crate) leave_sandbox: Option<Leave>,
}

// The doc comment of `ShellArgs::timeout_secs` is what the model reads; it states this number.
const _: () = assert!(SHELL_DEFAULT_TIMEOUT_SECS == 120);

impl TypedTool for Shell {
    type Args = ShellArgs;

    fn name(&self) -> &str {
        "shell"
    }

    fn description(&self) -> String {
        format!(
            "Run a command with `sh -c` in the workspace root (no input; stdout and stderr captured). Returns the \
                 exit code and the output (long output keeps its start and end). The command is killed, with \
                 everything it started, after `timeout_secs` (default {SHELL_DEFAULT_TIMEOUT_SECS}, at most \
                 {SHELL_MAX_TIMEOUT_SECS}); processes left in the background are killed when it exits. Prefer \
                 `read`, `grep`, `glob` and `edit` for files."
        )
    }

    fn read_only(&self) -> bool {
        false
    }

    /// The command's own timeout plus a grace period, so the shell's timeout (which reports the
    /// output so far) fires before the runtime's.
    fn timeout(&self, args: &ShellArgs) -> Option<Duration> {
        Some(call_timeout(args.timeout_secs))
    }

    fn confinement(&self, args: &ShellArgs) -> Confinement {
        confinement(args.leave_sandbox)
    }

    fn run(&self, ctx: ToolContext, args: ShellArgs) -> BoxFuture<'static, ToolOutput> {
        Box::pin(async move { run_command(&ctx, &args).await })
    }
}

/// A command held by the sandbox, or one that asks to leave it: the plain `shell`'s and the
/// jobs' `shell`'s.
pub(crate) fn confinement(leave: Option<Leave>) -> Confinement {
    leave.map_or(Confinement::Held, Confinement::Leaves)
}

/// How long a `shell` call with `timeout_secs` may take in all: the command's own timeout plus
/// a grace period, so the shell's timeout (which reports the output so far) fires before the
/// runtime's. The jobs' `shell` gives its foreground calls the same.
pub(crate) fn call_timeout(timeout_secs: Option<u64>) -> Duration {
    let secs = timeout_secs
        .unwrap_or(SHELL_DEFAULT_TIMEOUT_SECS)
        .clamp(1, SHELL_MAX_TIMEOUT_SECS);
    Duration::from_secs(secs + 10)
}

/// The variable whose value marks every process of one command (see the module docs).
pub(crate) const CALL_TOKEN_VAR: &str = "AGENT_LSP_SHELL_CALL";

/// Why `command` is not run, as the tool's error output: it is empty, or on the deny-list.
/// Background jobs (`crate::jobs`) are refused by the same check.
pub(crate) fn refusal(command: &str) -> Option<ToolOutput> {
    if command.trim().is_empty() {
        return Some(ToolOutput::error("`command` is empty"));
    }
    let what = denied(command)?;
    tracing::warn!(command, what, "shell command refused by the deny-list");
    Some(
        ToolOutput::error(format!(
            "refused: this command looks like it would {what}; such commands are never run by the agent"
        ))
        .with_meta("denied", true),
    )
}

/// `sh -c command` in `root`, in a process group of its own and marked with a fresh token, and
/// that token: how the foreground shell and background jobs start a command. The caller sets
/// its standard streams, spawns it and makes the `ProcessGroup` from the child's pid.
pub(crate) fn sh_command(
    root: &Path,
    command: &str,
    sandbox: Option<&crate::sandbox::Sandbox>,
) -> (std::process::Command, String) {
    let token = call_token();
    let mut sh = match sandbox {
        Some(sandbox) => sandbox.sh(root, command),
        None => crate::sandbox::unconfined_sh(root, command),
    };
    sh.env(CALL_TOKEN_VAR, &token).process_group(0);
    (sh, token)
}

/// A command's process group (its id is the pid of its `sh`, which `process_group(0)` made
/// the leader) and the token every process the command starts carries.
#[derive(Debug)]
pub(crate) struct ProcessGroup {
    pgid: Pid,
    token: String,
}

impl ProcessGroup {
    /// The group led by the process `pid`, marked with `token` (both from `sh_command`).
    pub(crate) fn new(pid: u32, token: String) -> Option<ProcessGroup> {
        let pgid = Pid::from_raw(i32::try_from(pid).ok()?);
        Some(ProcessGroup { pgid, token })
    }

    /// Send `signal` to every process in the group; `false` when there is none.
    pub(crate) fn signal(&self, signal: Signal) -> bool {
        killpg(self.pgid, signal).is_ok()
    }

    /// Whether a live process is left in the group. Zombies do not count: a killed process
    /// whose parent died is adopted by init, which may take its time to reap it (some
    /// containers' init never does), and a zombie holds nothing.
    pub(crate) fn is_alive(&self) -> bool {
        if killpg(self.pgid, None).is_err() {
            return false;
        }
        let Ok(processes) = std::fs::read_dir("/proc") else {
            return true;
        };
        let pgid = self.pgid.as_raw().to_string();
        processes.filter_map(Result::ok).any(|process| {
            let stat = std::fs::read_to_string(process.path().join("stat")).unwrap_or_default();
            // After the parenthesised name (which may hold spaces): state, ppid, pgrp, ….
            let mut fields = stat
                .rsplit_once(')')
                .map_or("", |(_, rest)| rest)
                .split_whitespace();
            let state = fields.next();
            state.is_some_and(|state| state != "Z" && state != "X")
                && fields.nth(1) == Some(pgid.as_str())
        })
    }

    /// SIGKILL the group, then every process carrying the token (those that left the group
    /// with `setsid` or a double fork). Background jobs' watchdogs (`crate::jobs::watchdog`)
    /// kill with this too.
    pub(crate) fn kill(&self) {
        // ESRCH (the group is already gone) is the usual, harmless outcome.
        let _ = killpg(self.pgid, Signal::SIGKILL);
        let killed = kill_marked(&self.marker());
        if killed > 0 {
            tracing::info!(killed, "killed processes that had left the command's group");
        }
    }

    /// The live processes other than this one that carry the token, in the group or not.
    #[cfg(test)]
    pub(crate) fn marked(&self) -> Vec<i32> {
        marked(&self.marker())
    }

    /// The environment entry every process of the command carries.
    fn marker(&self) -> String {
        format!("{CALL_TOKEN_VAR}={}", self.token)
    }
}

/// Kills the command's process group, and every process carrying its token, when dropped,
/// unless already done: this is what stops the processes when the runtime drops the call on a
/// timeout or a cancelled turn.
struct GroupGuard {
    group: Option<ProcessGroup>,
}

impl GroupGuard {
    fn kill(&mut self) {
        if let Some(group) = self.group.take() {
            group.kill();
        }
    }
}

/// A token no other command of any agent-lsp process has.
fn call_token() -> String {
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}-{call}", std::process::id())
}

/// SIGKILL every process whose environment holds the entry `marker` (`NAME=value`), scanning
/// `/proc` again until a scan finds none; returns how many were killed.
fn kill_marked(marker: &str) -> usize {
    let mut killed = 0;
    for _ in 0..20 {
        let marked = marked(marker);
        if marked.is_empty() {
            break;
        }
        for pid in marked {
            if nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok() {
                killed += 1;
            }
        }
    }
    killed
}

/// Every process other than this one whose environment holds the entry `marker`. A process
/// that has exited has no environment left to read, so a zombie never counts.
fn marked(marker: &str) -> Vec<i32> {
    let mut entry = marker.as_bytes().to_vec();
    entry.push(0);
    let own = std::process::id();
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    processes
        .filter_map(Result::ok)
        .filter_map(|process| process.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid as u32 != own)
        .filter(|pid| {
            let mut environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            environ.insert(0, 0);
            environ
                .windows(entry.len() + 1)
                .any(|window| window[0] == 0 && window[1..] == entry[..])
        })
        .collect()
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn run_command(ctx: &ToolContext, args: &ShellArgs) -> ToolOutput {
    let command = args.command.as_str();
    if let Some(refused) = refusal(command) {
        return refused;
    }
    let timeout_secs = args
        .timeout_secs
        .unwrap_or(SHELL_DEFAULT_TIMEOUT_SECS)
        .clamp(1, SHELL_MAX_TIMEOUT_SECS);
    let started = Instant::now();
    let absent = ctx
        .sandbox
        .as_ref()
        .map(|sandbox| sandbox.absent_protected(ctx.workspace.root()))
        .unwrap_or_default();
    let (sh, token) = sh_command(ctx.workspace.root(), command, ctx.sandbox.as_deref());
    let mut child = match tokio::process::Command::from(sh)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(child) => child,
        Err(err) => return ToolOutput::error(format!("`sh` could not be started: {err}")),
    };
    let mut guard = GroupGuard {
        group: child.id().and_then(|pid| ProcessGroup::new(pid, token)),
    };
    tracing::info!(command, pid = ?child.id(), timeout_secs, "shell command started");
    let stdout = tokio::spawn(capture(child.stdout.take().expect("piped stdout")));
    let stderr = tokio::spawn(capture(child.stderr.take().expect("piped stderr")));

    enum End {
        Exited,
        TimedOut,
        Cancelled,
    }
    let (end, status) = tokio::select! {
        status = child.wait() => (End::Exited, Some(status)),
        () = tokio::time::sleep(Duration::from_secs(timeout_secs)) => (End::TimedOut, None),
        () = ctx.cancel.cancelled() => (End::Cancelled, None),
    };
    guard.kill();
    if status.is_none() {
        // Reap `sh`, killed with its group above.
        let _ = child.wait().await;
    }
    let (stdout, stdout_complete) = collect(stdout).await;
    let (stderr, stderr_complete) = collect(stderr).await;
    let incomplete = !(stdout_complete && stderr_complete);
    let elapsed = started.elapsed();

    let mut text = String::new();
    let mut output = match (&end, status) {
        (End::Cancelled, _) => {
            text.push_str("cancelled: the turn was cancelled; the command and everything it started were killed\n");
            ToolOutput::error(String::new()).with_meta("cancelled", true)
        }
        (End::TimedOut, _) => {
            text.push_str(&format!(
                "error: timed out after {timeout_secs} s; the command and everything it started were killed. \
                 Output so far:\n"
            ));
            ToolOutput::error(String::new()).with_meta("timed_out", true)
        }
        (End::Exited, Some(Ok(status))) => {
            use std::os::unix::process::ExitStatusExt;
            let (line, code) = match (status.code(), status.signal()) {
                (Some(code), _) => (format!("exit code: {code}"), Some(code)),
                (None, Some(signal)) => (format!("killed by signal {signal}"), None),
                (None, None) => ("exit status unknown".to_owned(), None),
            };
            text.push_str(&line);
            text.push('\n');
            ToolOutput {
                text: String::new(),
                meta: json!({}),
                is_error: code != Some(0),
            }
            .with_meta("exit_code", code)
        }
        (End::Exited, status) => {
            let err = status
                .and_then(Result::err)
                .map_or("unknown".to_owned(), |err| err.to_string());
            return ToolOutput::error(format!("waiting for the command failed: {err}"));
        }
    };
    let both_empty = stdout.total == 0 && stderr.total == 0;
    if both_empty {
        text.push_str("(no output)\n");
    }
    for (name, captured) in [("stdout", &stdout), ("stderr", &stderr)] {
        if captured.total > 0 {
            text.push_str(&format!("--- {name} ---\n"));
            text.push_str(&captured.render());
            if !text.ends_with('\n') {
                text.push('\n');
            }
        }
    }
    if incomplete {
        text.push_str(
            "[output may be incomplete: a process that left the command's process group kept it open]\n",
        );
    }
    output.text = text;
    tracing::info!(
        command,
        elapsed_ms = elapsed.as_millis() as u64,
        "shell command ended"
    );
    let output = output
        .with_meta("source", "shell")
        .with_meta("stdout_bytes", stdout.total)
        .with_meta("stderr_bytes", stderr.total);
    // The record says what the command was allowed to touch; a failure the sandbox may have
    // caused says which rule and the way past it.
    let Some(sandbox) = &ctx.sandbox else {
        return output;
    };
    let mut output = output.with_meta("sandbox", sandbox.describe());
    if output.is_error
        && let Some(stopped) = sandbox.stopped(&output.text)
    {
        output.text.push_str(&stopped);
        output.text.push('\n');
    }
    if let Some(created) = absent.created(ctx.workspace.root()) {
        output.text.push_str(&created);
        output.text.push('\n');
        output = output.with_meta("created_protected", true);
    }
    output
}

mod capture;
#[cfg(test)]
mod tests;
