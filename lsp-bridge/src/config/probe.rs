//! Whether a server that is on PATH can run at all, asked once before it is used.
//!
//! A command can exist and still not be a language server: rustup puts a `rust-analyzer` shim
//! in `~/.cargo/bin` that, without the component installed, prints an error (and with
//! `RUST_BACKTRACE` a 20-line backtrace) and exits 1. Treating such a server as available
//! made every tool for its files fail, with its whole stderr shown to the model. So a server
//! with `probe_args` is run once with them (`--version`); one that exits with an error is not
//! available, and the tools fall back to tree-sitter, saying why in one line.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::ServerConfig;

/// How long a probe may run. A server still running by then is taken as able to run (it did
/// not fail on start): only a quick error exit marks a server as broken.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a running probe is looked at.
const PROBE_POLL: Duration = Duration::from_millis(5);
/// At most this many characters of a stderr line go into the one-line summary.
const BRIEF_CHARS: usize = 160;

/// A server that was found but cannot run: what was run, how it ended, what it printed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeFailure {
    pub server: String,
    /// The command line of the probe, for the user to run by hand.
    pub command_line: String,
    /// `exit status 1`, or why it could not be run at all.
    pub status: String,
    /// Everything the probe wrote to stderr, line by line (for the log and `agent-lsp
    /// servers`; the model gets [`ProbeFailure::brief`]).
    pub stderr: Vec<String>,
}

impl ProbeFailure {
    /// One line for the model: what failed and the first line of its error output.
    pub fn brief(&self) -> String {
        let first = self
            .stderr
            .iter()
            .map(|line| line.trim())
            .find(|line| !line.is_empty());
        let mut text = format!(
            "`{}` is installed but cannot run (`{}` ended with {})",
            self.server, self.command_line, self.status
        );
        if let Some(first) = first {
            text.push_str(": ");
            text.extend(first.chars().take(BRIEF_CHARS));
        }
        text
    }
}

/// Run `program` with the server's `probe_args` (the caller checked there are some).
pub(crate) fn probe(
    config: &ServerConfig,
    program: &Path,
    args: &[String],
) -> Result<(), ProbeFailure> {
    let command_line = std::iter::once(config.command.as_str())
        .chain(args.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    let failure = |status: String, stderr: Vec<String>| ProbeFailure {
        server: config.name.clone(),
        command_line: command_line.clone(),
        status,
        stderr,
    };
    let mut child = Command::new(program)
        .args(args)
        .envs(&config.env)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| failure(format!("an error starting it: {error}"), Vec::new()))?;
    // Read stderr on a thread: a chatty probe must not block on a full pipe while we wait.
    let mut stderr = child.stderr.take().expect("piped stderr");
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = stderr.read_to_end(&mut text);
        String::from_utf8_lossy(&text)
            .lines()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    });
    let deadline = Instant::now() + PROBE_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(PROBE_POLL),
            Ok(None) | Err(_) => break None,
        }
    };
    let Some(status) = status else {
        tracing::info!(server = %config.name, command = %command_line, "the probe is still running after {PROBE_TIMEOUT:?}: taken as able to run");
        let _ = child.kill();
        let _ = child.wait();
        return Ok(());
    };
    let lines = reader.join().unwrap_or_default();
    if status.success() {
        return Ok(());
    }
    let failure = failure(status.to_string(), lines);
    tracing::warn!(
        server = %config.name,
        command = %command_line,
        status = %failure.status,
        stderr = %failure.stderr.join("\n"),
        "language server found but cannot run: not used"
    );
    Err(failure)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> (ServerConfig, Vec<String>) {
        let config = ServerConfig::new("shim", "/bin/sh");
        (config, vec!["-c".into(), script.into()])
    }

    #[test]
    fn an_error_exit_is_a_failure_with_its_stderr_and_a_one_line_brief() {
        let (config, args) =
            sh("echo 'error: Unknown binary' >&2; echo 'Stack backtrace:' >&2; exit 1");
        let failure = probe(&config, Path::new("/bin/sh"), &args).unwrap_err();
        assert_eq!(
            failure.stderr,
            ["error: Unknown binary", "Stack backtrace:"]
        );
        assert_eq!(failure.status, "exit status: 1");
        let brief = failure.brief();
        assert!(!brief.contains('\n'), "{brief}");
        assert!(
            brief.contains("`shim` is installed but cannot run")
                && brief.ends_with(": error: Unknown binary"),
            "{brief}"
        );
    }

    #[test]
    fn a_clean_exit_runs() {
        let (config, args) = sh("echo 1.0; exit 0");
        assert_eq!(probe(&config, Path::new("/bin/sh"), &args), Ok(()));
    }
}
