//! Asking the owner: connect, send one request, read one answer.

use std::path::Path;
use std::time::Duration;

use tokio::io::BufReader;

use super::wire::{self, Answer, Envelope, PROTOCOL, ReadError, Request};

/// How long connecting and an `Owner` question may take: the owner answers it without touching
/// a server, so one that does not within this is not answering at all.
pub(super) const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Why the owner gave no answer.
#[derive(Debug)]
pub(super) enum Failure {
    /// Nobody listens, or the connection closed before a whole answer: the owner is gone (or
    /// going). A query is safe to run again elsewhere, since the `lsp_*` queries only read.
    Gone(String),
    /// The owner answered with something this process does not read: it is another version.
    Unreadable(String),
    /// The owner took the request and then sent nothing, no heartbeat either, for
    /// [`wire::SILENCE`]: it is stopped or hung, though its socket and lock are still there.
    Silent(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Gone(why) | Failure::Unreadable(why) | Failure::Silent(why) => {
                f.write_str(why)
            }
        }
    }
}

/// Send `request` to the owner listening on `socket` and wait for its answer. Dropping the
/// future closes the connection, which cancels the query on the owner's side.
pub(super) async fn ask(socket: &Path, root: &str, request: Request) -> Result<Answer, Failure> {
    let stream = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(|error| Failure::Gone(format!("cannot connect: {error}")))?;
    // Only the user's own processes are asked: a socket someone else bound is not an owner.
    if !crate::local_socket::peer_is_owner(&stream).unwrap_or(false) {
        return Err(Failure::Unreadable(
            "the socket belongs to another user".to_owned(),
        ));
    }
    let (read, mut write) = stream.into_split();
    let envelope = Envelope {
        protocol: PROTOCOL,
        root: root.to_owned(),
        request,
    };
    wire::write_line(&mut write, &envelope)
        .await
        .map_err(|error| Failure::Gone(format!("cannot send: {error}")))?;
    let mut reader = BufReader::new(read);
    let line = loop {
        let read = tokio::time::timeout(
            wire::SILENCE,
            wire::read_line(&mut reader, wire::MAX_ANSWER),
        )
        .await;
        match read {
            Err(_) => {
                return Err(Failure::Silent(format!(
                    "the owner sent nothing, not even its heartbeat, for {} s",
                    wire::SILENCE.as_secs()
                )));
            }
            // A heartbeat: the owner is still working on it.
            Ok(Ok(line)) if line.is_empty() => continue,
            Ok(read) => break read,
        }
    };
    let line = match line {
        Ok(line) => line,
        Err(ReadError::Closed) => {
            return Err(Failure::Gone("the owner closed without answering".into()));
        }
        Err(ReadError::Io(error)) => return Err(Failure::Gone(format!("cannot read: {error}"))),
        Err(ReadError::TooLong) => {
            return Err(Failure::Unreadable(format!(
                "the answer is over {} MiB",
                wire::MAX_ANSWER >> 20
            )));
        }
    };
    serde_json::from_slice(&line)
        .map_err(|error| Failure::Unreadable(format!("the answer is not one: {error}")))
}

/// [`ask`] bounded by [`PROBE_TIMEOUT`], for the questions that touch no server.
pub(super) async fn probe(socket: &Path, root: &str, request: Request) -> Result<Answer, Failure> {
    tokio::time::timeout(PROBE_TIMEOUT, ask(socket, root, request))
        .await
        .unwrap_or_else(|_| {
            Err(Failure::Gone(format!(
                "no answer within {} s",
                PROBE_TIMEOUT.as_secs()
            )))
        })
}
