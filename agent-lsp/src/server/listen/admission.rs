//! Who gets served on a listening socket: a connection's first message must be `initialize`,
//! within [`ADMISSION_WINDOW`], and on TCP it must carry the server's token as
//! `initializationOptions.token`. Anything else is answered with an error and the connection
//! closed.
//!
//! This runs before the connection's server exists: until a connection is admitted, nothing
//! of `serve` runs for it (no config, no agent runtime, no child servers, no document sync, no
//! commands), so what an unauthenticated peer can reach is this module and nothing else.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

use lsp_bridge::framing::ReadError;
use lsp_bridge::jsonrpc::{self, Message, ResponseError};

use super::token::Token;
use crate::server::codes;

/// How long a connection may take to send its `initialize`: an editor sends it at once, and a
/// peer that sends nothing is not left holding a connection.
pub(crate) const ADMISSION_WINDOW: Duration = Duration::from_secs(10);
/// The largest first message read from a peer not yet admitted (an editor's `initialize` is
/// tens of kilobytes).
const MAX_INITIALIZE_BYTES: u64 = 4 * 1024 * 1024;
/// After a refusal, how long what the peer still sends is read and dropped, so that closing
/// with unread input (which resets the connection) does not destroy the refusal on its way.
const LINGER: Duration = Duration::from_secs(2);

/// What a connection must show to be served.
#[derive(Debug)]
pub(crate) enum Admission {
    /// The server's token in `initializationOptions.token` (TCP, open to every local user).
    Token(Token),
    /// Nothing more: the listener checked the peer itself (a Unix socket's owner).
    Peer,
}

/// Why a connection was not admitted, for the server's log.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Nothing came within the window.
    Idle,
    /// The peer closed before a whole first message.
    Closed,
    /// The first message's framing is broken (or it is too large to be an `initialize`).
    Unreadable(String),
    /// The first message was refused for this reason (answered with it, when it was a
    /// request).
    Refused(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Idle => write!(
                formatter,
                "no `initialize` within {} s",
                ADMISSION_WINDOW.as_secs()
            ),
            Refusal::Closed => formatter.write_str("closed before its `initialize`"),
            Refusal::Unreadable(problem) => {
                write!(formatter, "unreadable first message: {problem}")
            }
            Refusal::Refused(message) => formatter.write_str(message),
        }
    }
}

impl Admission {
    /// Read the connection's first message and decide. Admitted, the result is what the
    /// server must read first: the `initialize` message, framed again without the token, and
    /// whatever the peer sent after it. Refused, the refusal has been answered (when there was
    /// a message to answer) and the connection is to be dropped.
    pub(crate) async fn admit<S>(&self, stream: &mut S) -> Result<Vec<u8>, Refusal>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let mut reader = BufReader::new(&mut *stream);
        let mut limited = (&mut reader).take(MAX_INITIALIZE_BYTES);
        let first = tokio::time::timeout(
            ADMISSION_WINDOW,
            lsp_bridge::framing::read_frame(&mut limited),
        )
        .await;
        let body = match first {
            Err(_elapsed) => return Err(Refusal::Idle),
            Ok(Ok(Some(body))) => body,
            Ok(Ok(None)) if limited.limit() == 0 => {
                return Err(Refusal::Unreadable(format!(
                    "a first message over {MAX_INITIALIZE_BYTES} bytes"
                )));
            }
            Ok(Ok(None) | Err(ReadError::Io(_))) => return Err(Refusal::Closed),
            Ok(Err(ReadError::Protocol(problem))) => return Err(Refusal::Unreadable(problem)),
        };
        let read_ahead = reader.buffer().to_vec();
        drop(reader);
        match self.check(&body) {
            Ok(initialize) => {
                let body = serde_json::to_vec(&initialize).expect("a Value serializes");
                let mut admitted = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
                admitted.extend_from_slice(&body);
                admitted.extend_from_slice(&read_ahead);
                Ok(admitted)
            }
            Err((answers, reason)) => {
                refuse(stream, answers).await;
                Err(Refusal::Refused(reason))
            }
        }
    }

    /// The `initialize` request in `body`, its token taken out (it is this module's alone), or
    /// the response that refuses the message (none for a message that cannot be answered) and
    /// why, for the log.
    fn check(&self, body: &[u8]) -> Result<Value, (Vec<Value>, String)> {
        let refused = |id: &Value, code: i64, message: String| {
            let answer = jsonrpc::error_response(id, &ResponseError::new(code, message.clone()));
            Err((vec![answer], message))
        };
        let (id, mut params) = match jsonrpc::decode(body) {
            Ok(Message::Request { id, method, params }) if method == "initialize" => (id, params),
            Ok(Message::Request { id, method, .. }) => {
                return refused(
                    &id,
                    codes::SERVER_NOT_INITIALIZED,
                    format!("`{method}` before `initialize`: this connection is closed"),
                );
            }
            Ok(Message::Notification { method, .. }) => {
                return Err((Vec::new(), format!("`{method}` before `initialize`")));
            }
            Ok(Message::Response { .. }) => {
                return Err((Vec::new(), "a response before `initialize`".to_owned()));
            }
            Err(refusal) => return Err((refusal.answers, refusal.problem)),
        };
        let offered = params
            .get_mut("initializationOptions")
            .and_then(Value::as_object_mut)
            .and_then(|options| options.remove("token"));
        if let Admission::Token(token) = self {
            let missing = |what: &str| {
                refused(
                    &id,
                    codes::INVALID_PARAMS,
                    format!(
                        "initializationOptions.token {what}: agent-lsp serve --listen serves only editors that send the token from the file named on its stderr (or its --token-file) as initializationOptions.token"
                    ),
                )
            };
            match offered {
                None => return missing("is missing"),
                Some(Value::String(offered)) if token.matches(&offered) => {}
                Some(Value::String(_)) => return missing("is wrong"),
                Some(_) => return missing("is not a string"),
            }
        }
        Ok(json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": params}))
    }
}

/// Send `answer` (if the refused message can be answered), end our side, and read what the
/// peer still sends for a moment before the connection is dropped.
async fn refuse<S>(stream: &mut S, answers: Vec<Value>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut frame = Vec::new();
    for answer in answers {
        let body = serde_json::to_vec(&answer).expect("a Value serializes");
        frame.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
        frame.extend_from_slice(&body);
    }
    let _ = tokio::time::timeout(LINGER, async {
        stream.write_all(&frame).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 8192];
        let mut left = MAX_INITIALIZE_BYTES;
        while left > 0 {
            match stream.read(&mut sink).await? {
                0 => break,
                read => left = left.saturating_sub(read as u64),
            }
        }
        std::io::Result::Ok(())
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(message: &Value) -> Vec<u8> {
        let body = serde_json::to_vec(message).unwrap();
        let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        frame.extend_from_slice(&body);
        frame
    }

    fn initialize(options: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"rootUri": "file:///w", "initializationOptions": options}})
    }

    /// Run `admit` on a connection whose peer sends `sent` and then ends its side; returns the
    /// outcome and what the peer received.
    async fn check(admission: &Admission, sent: &[u8]) -> (Result<Vec<u8>, Refusal>, String) {
        let (mut ours, mut theirs) = tokio::io::duplex(1 << 20);
        theirs.write_all(sent).await.unwrap();
        theirs.shutdown().await.unwrap();
        let outcome = admission.admit(&mut ours).await;
        drop(ours);
        let mut received = String::new();
        theirs.read_to_string(&mut received).await.unwrap();
        (outcome, received)
    }

    fn token() -> (Admission, String, tempfile::TempDir) {
        use std::os::unix::fs::PermissionsExt;
        let secret = "0123456789abcdef0123456789abcdef";
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, secret).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let admission = Admission::Token(Token::read(&path).unwrap());
        (admission, secret.into(), dir)
    }

    #[tokio::test]
    async fn the_right_token_admits_and_is_taken_out() {
        let (admission, secret, _dir) = token();
        let mut sent = frame(&initialize(json!({"token": secret, "model": "m"})));
        sent.extend_from_slice(b"Content-Length: 2\r\n\r\n{}");
        let (outcome, received) = check(&admission, &sent).await;
        let admitted = String::from_utf8(outcome.unwrap()).unwrap();
        assert!(received.is_empty(), "{received}");
        assert!(!admitted.contains(&secret), "{admitted}");
        assert!(admitted.contains(r#""model":"m""#), "{admitted}");
        // What followed the initialize is kept for the server, after it.
        assert!(
            admitted.ends_with("Content-Length: 2\r\n\r\n{}"),
            "{admitted}"
        );
    }

    #[tokio::test]
    async fn a_missing_or_wrong_token_is_answered_with_an_error_that_does_not_show_it() {
        let (admission, secret, _dir) = token();
        for (options, says) in [
            (Value::Null, "is missing"),
            (json!({}), "is missing"),
            (
                json!({"token": "0123456789abcdef0123456789abcdeX"}),
                "is wrong",
            ),
            (json!({"token": 7}), "is not a string"),
        ] {
            let (outcome, received) = check(&admission, &frame(&initialize(options))).await;
            let Err(Refusal::Refused(message)) = outcome else {
                panic!("admitted: {received}");
            };
            assert!(message.contains(says), "{message}");
            assert!(
                received.contains(r#""id":1"#) && received.contains(says),
                "{received}"
            );
            assert!(
                received.contains(&codes::INVALID_PARAMS.to_string()),
                "{received}"
            );
            assert!(!received.contains(&secret[..8]), "{received}");
        }
    }

    #[tokio::test]
    async fn anything_but_initialize_first_is_refused_even_without_a_token() {
        let command = json!({"jsonrpc": "2.0", "id": 4, "method": "workspace/executeCommand",
                             "params": {"command": "agent.tool"}});
        let (outcome, received) = check(&Admission::Peer, &frame(&command)).await;
        assert!(matches!(outcome, Err(Refusal::Refused(_))), "{outcome:?}");
        assert!(
            received.contains("`workspace/executeCommand` before `initialize`"),
            "{received}"
        );
        let (outcome, _) = check(&Admission::Peer, b"Content-Length: 5\r\n\r\n{oops").await;
        assert!(matches!(outcome, Err(Refusal::Refused(_))), "{outcome:?}");
        // A notification is not answered, and the connection closes all the same.
        let exit = json!({"jsonrpc": "2.0", "method": "exit"});
        let (outcome, received) = check(&Admission::Peer, &frame(&exit)).await;
        assert!(matches!(outcome, Err(Refusal::Refused(_))), "{outcome:?}");
        assert!(received.is_empty(), "{received}");
        let (outcome, _) = check(&Admission::Peer, b"Content-Len").await;
        assert_eq!(outcome.unwrap_err(), Refusal::Closed);
        // A peer's own socket needs no token.
        let (outcome, _) = check(&Admission::Peer, &frame(&initialize(Value::Null))).await;
        assert!(outcome.is_ok());
    }
}
