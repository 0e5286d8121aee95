//! The `shell` tool: run a command with `sh -c` in the workspace root, with a timeout.
//!
//! The command runs in a process group of its own and carries a token every process it starts
//! inherits (`crate::sandbox::process`), so a timeout or a cancelled turn kills everything it
//! started, and so are the processes it left in the background when it exits.
//!
//! What a command may touch is the sandbox's to hold (`crate::sandbox`: the preset's
//! `[sandbox]`, which the runtime hands the call as `ToolContext::sandbox`), and whether it runs
//! at all is the permission policy's. The deny-list below only catches a few commands that are destructive beyond any task (`rm -rf /`, `mkfs`,
//! writing to a disk device, a fork bomb), so that a slip or an injected instruction does not
//! wipe the machine even where the shell is allowed.
//!
//! Background jobs (`crate::jobs`) are refused by the same `refusal` and start and kill their
//! commands with the same pieces, so a job is refused, grouped, marked and killed exactly as a
//! foreground command is.

use std::process::Stdio;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use regex::Regex;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::plugin::outcomes::ToolOutput;
use crate::sandbox::process::capture::{CAPTURE_BYTES, capture, collect};
use crate::sandbox::process::{GroupGuard, ProcessGroup, sh_command};
use crate::sandbox::{Confinement, Leave};

use crate::plugin::tool::ToolContext;

use crate::plugin::typed::TypedTool;

/// Seconds a command may run when the call does not say (`timeout_secs`).
pub const SHELL_DEFAULT_TIMEOUT_SECS: u64 = 120;
/// The most seconds a call may give a command.
pub const SHELL_MAX_TIMEOUT_SECS: u64 = 600;
/// Bytes kept from each of stdout and stderr: the first half and the last half of this.
pub const SHELL_CAPTURE_BYTES: usize = CAPTURE_BYTES;

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
    let mut guard = GroupGuard::new(child.id().and_then(|pid| ProcessGroup::new(pid, token)));
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

#[cfg(test)]
mod tests;
