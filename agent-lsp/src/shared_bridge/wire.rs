//! What the shared bridge's socket carries: one request and one answer per connection, each a
//! line of JSON.
//!
//! A connection per request keeps the protocol free of ids and multiplexing, and makes
//! cancellation a closed connection: the owner sees the end of its input and cancels the query.
//! Connecting to a Unix socket costs microseconds, far below the queries it carries.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

use crate::plugin::outcomes::ToolOutput;

/// Bumped when a request or an answer changes shape; an owner refuses another protocol, and the
/// client then keeps its own bridge. 2: the owner's heartbeat.
pub const PROTOCOL: u32 = 2;

/// While the owner works on a request, it writes an empty line this often: a client that hears
/// nothing for [`SILENCE`] knows the owner stopped (`kill -STOP`, a debugger, a hung runtime)
/// rather than that its query is slow, and answers from its own servers.
pub const HEARTBEAT: std::time::Duration = std::time::Duration::from_millis(500);

/// How long a client waits for a heartbeat or the answer before it takes the owner as stopped.
pub const SILENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// A request is at most this long (a tool's arguments).
pub const MAX_REQUEST: usize = 1 << 20;
/// An answer is at most this long (a tool's text and its meta, which carries the whole answer).
pub const MAX_ANSWER: usize = 64 << 20;

/// A request with what the owner checks before it runs it.
#[derive(Debug, Serialize, Deserialize)]
pub struct Envelope {
    pub protocol: u32,
    /// The workspace root the client resolved, which must be the owner's.
    pub root: String,
    pub request: Request,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "snake_case")]
pub enum Request {
    /// Who owns the bridge, and its servers' health.
    Owner,
    /// Run an `lsp_*` tool with the arguments a model gave.
    Tool { name: String, arguments: Value },
    /// The client wrote `path`: the servers are told, and the fresh diagnostics come back.
    AfterWrite { path: String },
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum Answer {
    Owner(OwnerInfo),
    Tool {
        output: ToolOutput,
    },
    AfterWrite {
        diagnostics: Option<String>,
    },
    /// The owner would not run the request (another protocol, another root, an unknown tool).
    Refused {
        reason: String,
    },
}

/// The process that owns a workspace's bridge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerInfo {
    pub pid: u32,
    /// The command it runs: `serve`, `run`, `tool` or `mcp serve`.
    pub role: String,
    pub version: String,
    /// Milliseconds since the Unix epoch when it started to own the bridge.
    pub since_ms: u64,
    /// Its servers' health, as `agent-lsp servers --start` shows it (only in `Owner` answers).
    #[serde(default)]
    pub servers: Value,
}

/// Why a line could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// The other end closed before a whole line came.
    Closed,
    TooLong,
    Io(std::io::Error),
}

/// Read one line of at most `max` bytes, without its newline.
pub async fn read_line<R: AsyncBufReadExt + Unpin>(
    reader: &mut R,
    max: usize,
) -> Result<Vec<u8>, ReadError> {
    let mut line = Vec::new();
    loop {
        let buffer = reader.fill_buf().await.map_err(ReadError::Io)?;
        if buffer.is_empty() {
            return Err(ReadError::Closed);
        }
        let (taken, done) = match buffer.iter().position(|&byte| byte == b'\n') {
            Some(end) => (end + 1, true),
            None => (buffer.len(), false),
        };
        line.extend_from_slice(&buffer[..taken]);
        reader.consume(taken);
        if line.len() > max + 1 {
            return Err(ReadError::TooLong);
        }
        if done {
            line.pop();
            return Ok(line);
        }
    }
}

/// Write `value` as one line.
pub async fn write_line<W: AsyncWrite + Unpin>(
    writer: &mut W,
    value: &impl Serialize,
) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(value)?;
    line.push(b'\n');
    writer.write_all(&line).await?;
    writer.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_bounded_and_a_cut_line_is_closed() {
        let mut input: &[u8] = b"{\"a\":1}\nsecond";
        assert_eq!(read_line(&mut input, 100).await.unwrap(), b"{\"a\":1}");
        assert!(matches!(
            read_line(&mut input, 100).await,
            Err(ReadError::Closed)
        ));
        let long = vec![b'x'; 300];
        assert!(matches!(
            read_line(&mut long.as_slice(), 100).await,
            Err(ReadError::TooLong)
        ));
    }

    #[test]
    fn requests_and_answers_have_a_stable_shape() {
        let envelope = Envelope {
            protocol: PROTOCOL,
            root: "/w".into(),
            request: Request::Tool {
                name: "lsp_hover".into(),
                arguments: serde_json::json!({"path": "a.py"}),
            },
        };
        assert_eq!(
            serde_json::to_string(&envelope).unwrap(),
            r#"{"protocol":2,"root":"/w","request":{"method":"tool","name":"lsp_hover","arguments":{"path":"a.py"}}}"#
        );
        let answer: Answer = serde_json::from_str(r#"{"answer":"refused","reason":"no"}"#).unwrap();
        assert!(matches!(answer, Answer::Refused { reason } if reason == "no"));
    }
}
