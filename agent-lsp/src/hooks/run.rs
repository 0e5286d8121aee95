//! Running one hook command: `sh -c` in the workspace root, held by the session's sandbox as a
//! `shell` command is, in a process group of its own with the call token (so a hook's children
//! die with it), the event as JSON on stdin, stdout and stderr kept to their head and tail, and
//! killed at its timeout or when the turn is cancelled. A hook that hangs costs its timeout and
//! no more: the turn goes on with it reported as failed.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

use crate::sandbox::Sandbox;
use crate::sandbox::process::capture::{capture, collect};
use crate::sandbox::process::{GroupGuard, ProcessGroup, sh_command};

/// How a hook command ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exit {
    /// Its exit code, when it exited by itself.
    pub code: Option<i32>,
    /// Why it has none: killed at its timeout, cancelled, killed by a signal, never started.
    pub failure: Option<String>,
    /// What it printed on stdout (head and tail past 64 KiB).
    pub stdout: String,
    /// What it printed on stderr (head and tail past 64 KiB).
    pub stderr: String,
    /// How long it ran.
    pub duration: Duration,
}

/// Run `command` in `root` with `input` on its stdin and `env` beside the agent's environment.
pub async fn run(
    command: &str,
    root: &Path,
    sandbox: Option<&Sandbox>,
    env: &[(&str, String)],
    input: Vec<u8>,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Exit {
    let started = Instant::now();
    let (mut sh, token) = sh_command(root, command, sandbox);
    for (name, value) in env {
        sh.env(name, value);
    }
    let mut child = match tokio::process::Command::from(sh)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(child) => child,
        Err(error) => {
            return Exit {
                failure: Some(format!("could not be started: {error}")),
                duration: started.elapsed(),
                ..Exit::default()
            };
        }
    };
    let mut guard = GroupGuard::new(child.id().and_then(|pid| ProcessGroup::new(pid, token)));
    // A hook that never reads its stdin must not hold the write up: it is written beside the
    // wait, and a closed pipe is no error.
    let mut stdin = child.stdin.take().expect("piped stdin");
    let writer = tokio::spawn(async move {
        let _ = stdin.write_all(&input).await;
        let _ = stdin.shutdown().await;
    });
    let stdout = tokio::spawn(capture(child.stdout.take().expect("piped stdout")));
    let stderr = tokio::spawn(capture(child.stderr.take().expect("piped stderr")));
    let (status, failure) = tokio::select! {
        status = child.wait() => (status.ok(), None),
        () = tokio::time::sleep(timeout) => (None, Some(format!("timed out after {} s and was killed", timeout.as_secs()))),
        () = cancel.cancelled() => (None, Some("cancelled with the turn".to_owned())),
    };
    guard.kill();
    writer.abort();
    if status.is_none() {
        let _ = child.wait().await;
    }
    let (stdout, _) = collect(stdout).await;
    let (stderr, _) = collect(stderr).await;
    let code = status.and_then(|status| status.code());
    let failure = failure.or_else(|| {
        use std::os::unix::process::ExitStatusExt;
        match status {
            Some(status) if status.code().is_none() => Some(format!(
                "killed by signal {}",
                status.signal().unwrap_or_default()
            )),
            None => Some("its exit status is unknown".to_owned()),
            Some(_) => None,
        }
    });
    Exit {
        code,
        failure,
        stdout: stdout.render(),
        stderr: stderr.render(),
        duration: started.elapsed(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn hook(command: &str, input: Vec<u8>, timeout: Duration) -> Exit {
        let root = tempfile::tempdir().unwrap();
        run(
            command,
            root.path(),
            None,
            &[("AGENT_LSP_HOOK_EVENT", "Stop".to_owned())],
            input,
            timeout,
            &CancellationToken::new(),
        )
        .await
    }

    #[tokio::test]
    async fn a_hook_gets_its_event_and_environment_and_its_output_is_bounded() {
        let exit = hook(
            "cat; echo \" $AGENT_LSP_HOOK_EVENT\"; head -c 5000000 /dev/zero | tr '\\0' x >&2; exit 3",
            b"{\"a\":1}".to_vec(),
            Duration::from_secs(30),
        )
        .await;
        assert_eq!(exit.code, Some(3));
        assert_eq!(exit.stdout, "{\"a\":1} Stop\n");
        assert!(exit.stderr.len() < 70 * 1024, "{}", exit.stderr.len());
        assert!(exit.stderr.contains("bytes of output cut here"));
    }

    #[tokio::test]
    async fn a_hook_that_reads_nothing_or_hangs_costs_at_most_its_timeout() {
        // 4 MiB on stdin, which it never reads: the write does not hold it up.
        let exit = hook("exit 0", vec![b'x'; 4 << 20], Duration::from_secs(30)).await;
        assert_eq!((exit.code, exit.failure), (Some(0), None));
        let exit = hook(
            "setsid sleep 300 & sleep 300",
            Vec::new(),
            Duration::from_secs(1),
        )
        .await;
        assert_eq!(exit.code, None);
        assert_eq!(
            exit.failure.as_deref(),
            Some("timed out after 1 s and was killed")
        );
        assert!(exit.duration < Duration::from_secs(20));
        // A hook that crashes is a failure that says how.
        let exit = hook("kill -9 $$", Vec::new(), Duration::from_secs(30)).await;
        assert_eq!(exit.code, None);
        assert_eq!(exit.failure.as_deref(), Some("killed by signal 9"));
    }
}
