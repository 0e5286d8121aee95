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
    /// The server's configured name, for the message and to skip it when choosing a server.
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
        if let Some(remedy) = self.remedy() {
            text.push_str(if text.ends_with('.') { " " } else { ". " });
            text.push_str(&remedy);
        }
        text
    }

    /// The stderr lines after the one [`ProbeFailure::brief`] shows.
    pub fn further_stderr(&self) -> Vec<String> {
        self.stderr
            .iter()
            .skip_while(|line| line.trim().is_empty())
            .skip(1)
            .cloned()
            .collect()
    }

    /// How to fix a failure we recognise: rustup's proxy for a component that is not
    /// installed says "error: Unknown binary 'rust-analyzer' in official toolchain '…'".
    fn remedy(&self) -> Option<String> {
        self.stderr.iter().find_map(|line| {
            let rest = line.split_once("Unknown binary '")?.1;
            let (binary, rest) = rest.split_once('\'')?;
            rest.contains("toolchain")
                .then(|| format!("Add it with `rustup component add {binary}`"))
        })
    }
}

/// Whether `line` starts a backtrace (anyhow's, as rustup prints it with `RUST_BACKTRACE`, or
/// a Rust panic's): what follows is of no use to someone fixing their installation.
fn starts_backtrace(line: &str) -> bool {
    let line = line.trim();
    line.eq_ignore_ascii_case("stack backtrace:")
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
        // A backtrace on top of the error helps nobody fix an installation.
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
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
        let text = String::from_utf8_lossy(&text);
        let mut lines: Vec<String> = text
            .lines()
            .take_while(|line| !starts_backtrace(line))
            .map(str::to_owned)
            .collect();
        while lines.last().is_some_and(|line| line.trim().is_empty()) {
            lines.pop();
        }
        lines
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
    tracing::warn!(server = %config.name, "{} (the server is not used)", failure.brief());
    tracing::debug!(server = %config.name, stderr = %failure.stderr.join("\n"), "the probe's stderr");
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
        // The backtrace is cut off.
        assert_eq!(failure.stderr, ["error: Unknown binary"]);
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
    fn rustups_proxy_without_its_component_is_told_how_to_add_it() {
        let (config, args) = sh(
            "echo \"error: Unknown binary 'rust-analyzer' in official toolchain 'stable-x86_64-unknown-linux-gnu'.\" >&2; \
             echo >&2; [ -n \"$RUST_BACKTRACE\" ] && echo 'Stack backtrace:' >&2; exit 1",
        );
        let failure = probe(&config, Path::new("/bin/sh"), &args).unwrap_err();
        assert_eq!(failure.stderr.len(), 1, "{failure:?}");
        assert!(failure.further_stderr().is_empty(), "{failure:?}");
        assert!(
            failure
                .brief()
                .ends_with("'stable-x86_64-unknown-linux-gnu'. Add it with `rustup component add rust-analyzer`"),
            "{}",
            failure.brief()
        );
    }

    #[test]
    fn a_clean_exit_runs() {
        let (config, args) = sh("echo 1.0; exit 0");
        assert_eq!(probe(&config, Path::new("/bin/sh"), &args), Ok(()));
    }
}
