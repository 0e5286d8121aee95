//! The watchdog of one background job: what kills the job when agent-lsp dies without running
//! any code of its own (SIGKILL, a crash), the one case the job table's own kills never see.
//!
//! The watchdog is the agent-lsp binary started again (`/proc/self/exe`, which is the running
//! binary even if its file was replaced since) with a hidden first argument, `WATCHDOG_ARG`,
//! that `main` checks before anything else ([`main_hook`]). It runs in a process group of its
//! own and reads a pipe only agent-lsp holds: a byte means the job ended and agent-lsp is fine;
//! the end of the input means agent-lsp is gone (the kernel closed the pipe), and the watchdog
//! kills the job exactly as `shell` kills what a command left behind (`ProcessGroup::kill`):
//! SIGTERM to the job's group, then, after [`KILL_GRACE`], SIGKILL to the group and to every
//! process carrying the job's call token, which reaches the processes that left the group with
//! `setsid` or a double fork. One implementation of "kill by token" serves both.
//!
//! A `sh` reading the pipe was the watchdog before; it could only kill the group. A
//! parent-death signal (`PR_SET_PDEATHSIG`) was not used: it reaches only the job's `sh`, and it
//! fires when the *thread* that spawned the job exits, which in a runtime's thread pool is any
//! time.
//!
//! Only the binary starts watchdogs: a process that links agent-lsp as a library (a test
//! harness) is another program under `/proc/self/exe`, so there a job runs without one.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::process::{Child, ChildStdin, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

use nix::sys::signal::Signal;

use super::KILL_GRACE;
use crate::sandbox::process::{CALL_TOKEN_VAR, ProcessGroup};

/// The first argument that makes the agent-lsp binary a watchdog: `WATCHDOG_ARG PGID TOKEN`.
/// Not a subcommand (nobody types it) and checked before the command line is parsed.
const WATCHDOG_ARG: &str = "__agent-lsp-job-watchdog";

/// Whether this process is the agent-lsp binary, which starts watchdogs as copies of itself.
static IS_BINARY: AtomicBool = AtomicBool::new(false);

/// What `main` calls first. Started as a watchdog, this process watches and the returned code
/// is its exit code; otherwise it is the agent-lsp binary, which may now start watchdogs, and
/// `None` says to go on.
pub fn main_hook() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(OsStr::new(WATCHDOG_ARG)) {
        IS_BINARY.store(true, Ordering::Relaxed);
        return None;
    }
    let pgid = args
        .next()
        .and_then(|pgid| pgid.to_str()?.parse::<u32>().ok());
    let token = args.next().and_then(|token| token.into_string().ok());
    let Some(group) = pgid
        .zip(token)
        .and_then(|(pgid, token)| ProcessGroup::new(pgid, token))
    else {
        eprintln!("agent-lsp: usage: agent-lsp {WATCHDOG_ARG} PGID TOKEN");
        return Some(ExitCode::from(2));
    };
    watch(std::io::stdin().lock(), &group);
    Some(ExitCode::SUCCESS)
}

/// Wait on `input` (see the module docs); returns whether the job was killed.
pub(super) fn watch(mut input: impl Read, group: &ProcessGroup) -> bool {
    let mut byte = [0u8; 1];
    loop {
        match input.read(&mut byte) {
            Ok(1) => return false,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Ok(_) | Err(_) => break,
        }
    }
    group.signal(Signal::SIGTERM);
    std::thread::sleep(KILL_GRACE);
    group.kill();
    true
}

/// A running watchdog, as the job's supervisor holds it.
#[derive(Debug)]
pub(super) struct Watchdog {
    input: ChildStdin,
    process: Child,
}

impl Watchdog {
    /// Start the watchdog of the job whose group is `pgid` and whose processes carry `token`;
    /// `None` (logged) where none can start.
    pub(super) fn start(pgid: u32, token: &str) -> Option<Watchdog> {
        if !IS_BINARY.load(Ordering::Relaxed) {
            tracing::debug!("no watchdog outside the agent-lsp binary");
            return None;
        }
        Watchdog::spawn(pgid, token)
            .inspect_err(|err| {
                tracing::warn!(%err, "no watchdog for the job: it may outlive a killed agent-lsp");
            })
            .ok()
    }

    fn spawn(pgid: u32, token: &str) -> std::io::Result<Watchdog> {
        use std::os::unix::process::CommandExt;
        let mut process = std::process::Command::new("/proc/self/exe")
            .arg0("agent-lsp-job-watchdog")
            .arg(WATCHDOG_ARG)
            .arg(pgid.to_string())
            .arg(token)
            // The token is its argument, never its environment: it does not kill itself.
            .env_remove(CALL_TOKEN_VAR)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own group: killing the job's does not kill it, nor does Ctrl-C.
            .process_group(0)
            .spawn()?;
        let input = process.stdin.take().expect("piped stdin");
        Ok(Watchdog { input, process })
    }

    /// The job ended: tell the watchdog to exit without killing anything, and reap it.
    pub(super) fn release(mut self) {
        let _ = self.input.write_all(b"\n");
        drop(self.input);
        let _ = self.process.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::process::sh_command;
    use std::os::unix::process::ExitStatusExt;
    use std::time::{Duration, Instant};

    /// A job's command that starts processes outside its group, and its group.
    fn job(dir: &std::path::Path, seconds: u32) -> (Child, ProcessGroup) {
        let (mut sh, token) = sh_command(
            dir,
            &format!(
                "setsid sleep {seconds} & setsid sh -c 'sleep {seconds}; true' & sleep {seconds} & wait"
            ),
            None,
        );
        let child = sh.stdout(Stdio::null()).spawn().unwrap();
        let group = ProcessGroup::new(child.id(), token).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        // The job's sh, its sleep, the two that left the group and the sleep of the second.
        while group.marked().len() < 5 {
            assert!(Instant::now() < deadline, "{:?}", group.marked());
            std::thread::sleep(Duration::from_millis(20));
        }
        (child, group)
    }

    #[test]
    fn the_watchdog_kills_the_group_and_what_left_it_when_its_input_closes() {
        let dir = tempfile::tempdir().unwrap();
        let (mut child, group) = job(dir.path(), 3011);
        // agent-lsp dying closes the pipe without a byte.
        let (input, output) = std::io::pipe().unwrap();
        drop(output);
        assert!(watch(input, &group));
        assert_eq!(child.wait().unwrap().signal(), Some(15));
        assert_eq!(group.marked(), Vec::<i32>::new());
    }

    #[test]
    fn a_released_watchdog_kills_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (mut child, group) = job(dir.path(), 3012);
        let (input, mut output) = std::io::pipe().unwrap();
        output.write_all(b"\n").unwrap();
        assert!(!watch(input, &group));
        assert_eq!(child.try_wait().unwrap(), None);
        assert_eq!(group.marked().len(), 5);
        group.kill();
        child.wait().unwrap();
        assert_eq!(group.marked(), Vec::<i32>::new());
    }
}
