//! How a command is started so that it can be stopped as a whole, and how its output is kept.
//!
//! A command runs in a process group of its own, so that a timeout or a cancelled turn kills
//! everything it started (a plain kill of `sh` would leave `sleep`, compilers or servers running
//! and holding the output pipes open). A process group is not enough: `setsid`, a double fork or
//! a daemon leaves the group, and its orphan is adopted by init, where nothing links it to the
//! command any more. So every command also carries an environment variable with a token of its
//! own, which every descendant inherits whatever group, session or parent it ends up in; when
//! the command ends, every process whose environment holds the token is killed, again until
//! none is left. Only a process that replaced its whole environment (`env -i`) escapes this.
//!
//! The `shell` tool, background jobs and the user's hooks (`crate::hooks`) all start their
//! commands with these pieces, so each is grouped, marked and killed the same way.

use std::os::unix::process::CommandExt;
use std::path::Path;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use super::Sandbox;

pub mod capture;

/// The variable whose value marks every process of one command (see the module docs).
pub const CALL_TOKEN_VAR: &str = "AGENT_LSP_SHELL_CALL";

/// `sh -c command` in `root`, in a process group of its own and marked with a fresh token, and
/// that token: how the foreground shell and background jobs start a command. The caller sets
/// its standard streams, spawns it and makes the `ProcessGroup` from the child's pid.
pub fn sh_command(
    root: &Path,
    command: &str,
    sandbox: Option<&Sandbox>,
) -> (std::process::Command, String) {
    let token = call_token();
    let mut sh = match sandbox {
        Some(sandbox) => sandbox.sh(root, command),
        None => super::unconfined_sh(root, command),
    };
    sh.env(CALL_TOKEN_VAR, &token).process_group(0);
    (sh, token)
}

/// A command's process group (its id is the pid of its `sh`, which `process_group(0)` made
/// the leader) and the token every process the command starts carries.
#[derive(Debug)]
pub struct ProcessGroup {
    pgid: Pid,
    token: String,
}

impl ProcessGroup {
    /// The group led by the process `pid`, marked with `token` (both from `sh_command`).
    pub fn new(pid: u32, token: String) -> Option<ProcessGroup> {
        let pgid = Pid::from_raw(i32::try_from(pid).ok()?);
        Some(ProcessGroup { pgid, token })
    }

    /// Send `signal` to every process in the group; `false` when there is none.
    pub fn signal(&self, signal: Signal) -> bool {
        killpg(self.pgid, signal).is_ok()
    }

    /// Whether a live process is left in the group. Zombies do not count: a killed process
    /// whose parent died is adopted by init, which may take its time to reap it (some
    /// containers' init never does), and a zombie holds nothing.
    pub fn is_alive(&self) -> bool {
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
    pub fn kill(&self) {
        // ESRCH (the group is already gone) is the usual, harmless outcome.
        let _ = killpg(self.pgid, Signal::SIGKILL);
        let killed = kill_marked(&self.marker());
        if killed > 0 {
            tracing::info!(killed, "killed processes that had left the command's group");
        }
    }

    /// The live processes other than this one that carry the token, in the group or not.
    #[cfg(test)]
    pub fn marked(&self) -> Vec<i32> {
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
pub struct GroupGuard {
    group: Option<ProcessGroup>,
}

impl GroupGuard {
    /// A guard of `group` (none: nothing to kill, a process whose pid could not be had).
    pub fn new(group: Option<ProcessGroup>) -> GroupGuard {
        GroupGuard { group }
    }

    /// Kill the group now, if not done yet.
    pub fn kill(&mut self) {
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
