//! The bridge's one error type.
//!
//! Every failure a caller can see is a variant with its context as data (which server, which
//! method, how long we waited, the server's last stderr lines), so that the tool layer can show
//! the model a message that says what happened and what to do, and the registry can decide
//! whether to restart. `Display` texts are written for that reader.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// The codes are JSON-RPC's, defined in one place.
pub use crate::jsonrpc::code::{
    CONTENT_MODIFIED, INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, REQUEST_CANCELLED,
};

/// Everything that can go wrong between a caller and a child language server, each variant
/// carrying what the message, the registry's restart decision and a tool's fallback need.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server's process could not be started (not installed, not executable, bad `cwd`):
    /// nothing ran, so a restart would fail the same way until the configuration changes.
    #[error(
        "could not start language server `{server}` (`{command}`): {source}; check that it is installed and on PATH, or fix `command` in its [server.{server}] configuration"
    )]
    Spawn {
        /// The configured name (`[server.<name>]`), which the message tells the user to fix.
        server: String,
        /// The command as configured, before the `PATH` lookup, so the user sees what they wrote.
        command: String,
        /// The operating system's reason, kept as the error's source for `{:#}` chains.
        #[source]
        source: std::io::Error,
    },
    #[error(
        "language server `{server}` did not answer `{method}` within {after:?}; it was asked to cancel, and a server that keeps not answering is restarted: try again, or raise its timeout"
    )]
    /// The server was asked and did not answer in time; it was sent `$/cancelRequest`, and
    /// one that then stays silent counts as hung and is restarted.
    Timeout {
        /// The server that did not answer.
        server: String,
        /// The LSP method it was asked, so a slow method can be told from a stuck server.
        method: String,
        /// How long the caller waited, the timeout the user may raise.
        after: Duration,
    },
    #[error(
        "language server `{server}` exited; it is restarted on the next request{}",
        tail_suffix(stderr_tail)
    )]
    /// The server's process ended (crashed, or was stopped) before or while answering; the
    /// next request restarts it.
    ServerExited {
        /// The server that exited.
        server: String,
        /// Its last stderr lines, usually the reason it died (a backtrace, a missing module).
        stderr_tail: Vec<String>,
    },
    #[error(
        "language server `{server}` keeps failing: gave up after {restarts} restarts; fix the cause its output shows (or its configuration) and try again later{}",
        tail_suffix(stderr_tail)
    )]
    /// The server died once too often within the restart window: the registry stopped
    /// restarting it, so every request fails at once until the window has passed.
    ServerFailed {
        /// The server that was given up on.
        server: String,
        /// How many restarts it used up, the `RestartPolicy` limit.
        restarts: u32,
        /// Its last stderr lines before the last death, the clue to the cause.
        stderr_tail: Vec<String>,
    },
    #[error(
        "language server `{server}` broke the protocol ({message}); it was stopped and is restarted on the next request"
    )]
    /// The server wrote something that is not LSP (broken framing, a body that is not JSON):
    /// the stream cannot be trusted past it, so the process was killed.
    Protocol {
        /// The server that broke the protocol.
        server: String,
        /// What was wrong, with a preview of the offending bytes.
        message: String,
    },
    /// The request never reached the server: it was gone (its output ended, or its input pipe
    /// was closed) when the request was to be written. Unlike a request the server received
    /// and then died on, such a request can be sent again to a restarted server as it is: a
    /// delivery retry, not a repetition of something the server may have done.
    #[error(
        "language server `{server}` was gone before the request reached it; it is restarted on the next request"
    )]
    NotDelivered {
        /// The server that was gone.
        server: String,
    },
    #[error("language server `{server}` answered with error {code}: {message}")]
    /// The server answered the request with a JSON-RPC error: it is alive and chose not to
    /// answer (unknown method, bad position, content modified), so nothing is restarted.
    Response {
        /// The server that answered.
        server: String,
        /// The JSON-RPC error code as the server sent it (see [`crate::jsonrpc::code`]).
        code: i64,
        /// The server's own message, shown as it is.
        message: String,
    },
    #[error("language server `{server}` is still starting; try again in a moment")]
    /// The server has not finished `initialize` (or the bridge is shutting down), so the
    /// request was not sent; asking again later may succeed.
    NotReady {
        /// The server that is not ready.
        server: String,
    },
    #[error("no language server for {}: {reason}", path.display())]
    /// No configured server handles this file (no server for its language, no root found, or
    /// the server is disabled): a tool falls back to tree-sitter or says so.
    NoServer {
        /// The file the caller asked about.
        path: PathBuf,
        /// Why no server applies, written for the user.
        reason: String,
    },
    /// The caller cancelled the request (the agent's turn was cancelled, the editor sent
    /// `$/cancelRequest`) before an answer came.
    #[error("the request was cancelled")]
    Cancelled,
}

/// The crate's result, with [`Error`] unless said otherwise.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// At most this many characters of a server's stderr line go into [`Error::brief`].
const BRIEF_LINE_CHARS: usize = 160;

impl Error {
    /// The error in one line (two with the server's last stderr line), for the model: the
    /// full text, with every stderr line, goes to the log and `agent-lsp servers`, while a
    /// tool result that carried a 20-line backtrace crowded the model's context for nothing.
    pub fn brief(&self) -> String {
        let text = self.to_string();
        let first = text.lines().next().unwrap_or_default();
        // The tail suffix starts with "; its last stderr lines:" on the first line.
        let head = first
            .split("; its last stderr lines:")
            .next()
            .unwrap_or(first);
        let tail = match self {
            Error::ServerExited { stderr_tail, .. } | Error::ServerFailed { stderr_tail, .. } => {
                stderr_tail
                    .iter()
                    .rev()
                    .map(|line| line.trim())
                    .find(|line| !line.is_empty())
            }
            _ => None,
        };
        match tail {
            Some(line) => format!(
                "{head}\n  last stderr line: {}",
                line.chars().take(BRIEF_LINE_CHARS).collect::<String>()
            ),
            None => head.to_owned(),
        }
    }

    /// Whether the server itself failed (could not start, died, broke the protocol, hung, is
    /// not ready), as opposed to answering: then a tool can fall back to tree-sitter.
    pub fn is_server_failure(&self) -> bool {
        matches!(
            self,
            Error::Spawn { .. }
                | Error::Timeout { .. }
                | Error::ServerExited { .. }
                | Error::ServerFailed { .. }
                | Error::Protocol { .. }
                | Error::NotReady { .. }
                | Error::NotDelivered { .. }
        )
    }

    /// Whether the server instance is gone (it died, or was stopped for breaking the
    /// protocol, before or while answering): a restarted instance may answer.
    pub fn is_server_gone(&self) -> bool {
        matches!(
            self,
            Error::ServerExited { .. } | Error::Protocol { .. } | Error::NotDelivered { .. }
        )
    }

    /// The name of the server this error is about, if any.
    pub fn server(&self) -> Option<&str> {
        match self {
            Error::Spawn { server, .. }
            | Error::Timeout { server, .. }
            | Error::ServerExited { server, .. }
            | Error::ServerFailed { server, .. }
            | Error::Protocol { server, .. }
            | Error::Response { server, .. }
            | Error::NotDelivered { server }
            | Error::NotReady { server } => Some(server),
            Error::NoServer { .. } | Error::Cancelled => None,
        }
    }
}

/// `io::Error` is not `Clone`, so neither is the derived enum; the registry hands one start
/// failure to every caller that waited for that start, so it needs copies. The copy of an I/O
/// error keeps its kind and message, which is all anyone reads.
impl Clone for Error {
    fn clone(&self) -> Self {
        match self {
            Error::Spawn {
                server,
                command,
                source,
            } => Error::Spawn {
                server: server.clone(),
                command: command.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            Error::Timeout {
                server,
                method,
                after,
            } => Error::Timeout {
                server: server.clone(),
                method: method.clone(),
                after: *after,
            },
            Error::ServerExited {
                server,
                stderr_tail,
            } => Error::ServerExited {
                server: server.clone(),
                stderr_tail: stderr_tail.clone(),
            },
            Error::ServerFailed {
                server,
                restarts,
                stderr_tail,
            } => Error::ServerFailed {
                server: server.clone(),
                restarts: *restarts,
                stderr_tail: stderr_tail.clone(),
            },
            Error::Protocol { server, message } => Error::Protocol {
                server: server.clone(),
                message: message.clone(),
            },
            Error::Response {
                server,
                code,
                message,
            } => Error::Response {
                server: server.clone(),
                code: *code,
                message: message.clone(),
            },
            Error::NotReady { server } => Error::NotReady {
                server: server.clone(),
            },
            Error::NotDelivered { server } => Error::NotDelivered {
                server: server.clone(),
            },
            Error::NoServer { path, reason } => Error::NoServer {
                path: path.clone(),
                reason: reason.clone(),
            },
            Error::Cancelled => Error::Cancelled,
        }
    }
}

/// The server's last stderr lines, on their own lines after the message, or a note that it
/// printed nothing (which is itself a clue).
fn tail_suffix(tail: &[String]) -> TailSuffix<'_> {
    TailSuffix(tail)
}

struct TailSuffix<'a>(&'a [String]);

impl fmt::Display for TailSuffix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return write!(f, " (it wrote nothing to stderr)");
        }
        write!(f, "; its last stderr lines:")?;
        for line in self.0 {
            write!(f, "\n  {line}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_messages_carry_the_stderr_tail() {
        let error = Error::ServerFailed {
            server: "pyright".into(),
            restarts: 5,
            stderr_tail: vec!["Traceback".into(), "boom".into()],
        };
        let text = error.to_string();
        assert!(
            text.contains("`pyright`") && text.contains("5 restarts"),
            "{text}"
        );
        assert!(
            text.ends_with("its last stderr lines:\n  Traceback\n  boom"),
            "{text}"
        );
        let quiet = Error::ServerExited {
            server: "clangd".into(),
            stderr_tail: vec![],
        };
        assert!(quiet.to_string().ends_with("(it wrote nothing to stderr)"));
    }

    #[test]
    fn the_brief_form_is_one_line_plus_the_last_stderr_line() {
        let error = Error::ServerExited {
            server: "rust-analyzer".into(),
            stderr_tail: (0..20).map(|n| format!("  {n}: frame")).collect(),
        };
        assert_eq!(
            error.brief(),
            "language server `rust-analyzer` exited; it is restarted on the next request\n  last stderr line: 19: frame"
        );
        let quiet = Error::ServerExited {
            server: "clangd".into(),
            stderr_tail: vec![],
        };
        assert_eq!(quiet.brief(), quiet.to_string(), "one line already");
    }

    #[test]
    fn clones_keep_io_error_kind_and_text() {
        let error = Error::Spawn {
            server: "x".into(),
            command: "x-ls".into(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "gone"),
        };
        let Error::Spawn { source, .. } = error.clone() else {
            panic!()
        };
        assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        assert_eq!(source.to_string(), "gone");
    }
}
