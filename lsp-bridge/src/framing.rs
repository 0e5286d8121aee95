//! `Content-Length` framing, shared by the child side (the bridge) and the editor side (the
//! proxy in `agent-lsp serve`): reading frames, async or on a blocking thread, and writing them
//! in order from any thread through a [`FrameWriter`].

mod writer;

use std::io::{BufRead, Read};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};

pub use crate::transport::RawResult;
pub(crate) use writer::set_blocking;
pub use writer::{FrameWriter, MAX_QUEUED_BYTES};

/// A header line longer than this is not LSP framing.
const MAX_HEADER_LINE: u64 = 8 * 1024;
/// A body larger than this is not a message we want to buffer.
const MAX_BODY: usize = 256 * 1024 * 1024;
/// Why a frame could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// Reading failed (the pipe broke): the peer is gone, like end of output.
    Io(std::io::Error),
    /// The bytes are not LSP framing (a bad header, a body too large): the stream cannot be
    /// resynchronized, so the peer is treated as broken.
    Protocol(String),
}

impl From<std::io::Error> for ReadError {
    fn from(error: std::io::Error) -> Self {
        ReadError::Io(error)
    }
}

/// Read one framed message; `None` at end of output (also mid-message: the peer died).
///
/// After a [`ReadError::Protocol`] for an invalid JSON body the stream is still in step (the
/// body was consumed), so a tolerant reader (the editor side) can answer with an error and
/// read on; after a bad header it resynchronises at the next valid header.
pub async fn read_message(
    reader: &mut (impl tokio::io::AsyncBufRead + Unpin),
) -> Result<Option<Value>, ReadError> {
    let Some(body) = read_frame(reader).await? else {
        return Ok(None);
    };
    parse_message(&body).map(Some).map_err(ReadError::Protocol)
}

/// A frame's body as JSON, or what is wrong with it.
pub fn parse_message(body: &[u8]) -> Result<Value, String> {
    serde_json::from_slice(body)
        .map_err(|error| format!("invalid JSON body ({error}): {}", preview(body)))
}

/// Read one frame's body, unparsed; `None` at end of output.
pub async fn read_frame(
    reader: &mut (impl tokio::io::AsyncBufRead + Unpin),
) -> Result<Option<Vec<u8>>, ReadError> {
    let mut headers = Headers::default();
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut *reader)
            .take(MAX_HEADER_LINE)
            .read_until(b'\n', &mut line)
            .await?;
        match headers.line(&line, read)? {
            HeaderLine::More => {}
            HeaderLine::End => return Ok(None),
            HeaderLine::Body(length) => {
                let mut body = vec![0; length];
                return match reader.read_exact(&mut body).await {
                    Ok(_) => Ok(Some(body)),
                    Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
                    Err(error) => Err(error.into()),
                };
            }
        }
    }
}

/// [`read_frame`] for a blocking reader, on a thread of its own: a thread blocked in `read`
/// wakes straight into the frame, without the reactor's readiness round trip, which is most of
/// a proxy's cost on sub-millisecond answers.
pub fn read_frame_blocking(reader: &mut impl BufRead) -> Result<Option<Vec<u8>>, ReadError> {
    let mut headers = Headers::default();
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut *reader)
            .take(MAX_HEADER_LINE)
            .read_until(b'\n', &mut line)?;
        match headers.line(&line, read)? {
            HeaderLine::More => {}
            HeaderLine::End => return Ok(None),
            HeaderLine::Body(length) => {
                let mut body = vec![0; length];
                return match reader.read_exact(&mut body) {
                    Ok(()) => Ok(Some(body)),
                    Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
                    Err(error) => Err(error.into()),
                };
            }
        }
    }
}

/// The header block of one frame, one line at a time.
#[derive(Default)]
struct Headers {
    content_length: Option<usize>,
    /// Whether a header line came yet: a blank line before any is a stray line break between
    /// two messages, skipped; after some, it ends the header.
    started: bool,
}

enum HeaderLine {
    /// Another header line follows.
    More,
    /// End of output (also inside the headers: the peer died).
    End,
    /// The blank line: a body of this many bytes follows.
    Body(usize),
}

impl Headers {
    /// Take one line as read (`read` bytes, at most [`MAX_HEADER_LINE`]).
    fn line(&mut self, line: &[u8], read: usize) -> Result<HeaderLine, ReadError> {
        if read == 0 {
            return Ok(HeaderLine::End);
        }
        if !line.ends_with(b"\n") {
            if read as u64 == MAX_HEADER_LINE {
                return Err(ReadError::Protocol(format!(
                    "header line longer than {MAX_HEADER_LINE} bytes"
                )));
            }
            return Ok(HeaderLine::End);
        }
        let text = std::str::from_utf8(line)
            .map_err(|_| ReadError::Protocol(format!("header is not UTF-8: {}", preview(line))))?
            .trim_end_matches(['\r', '\n']);
        if text.is_empty() && !self.started {
            return Ok(HeaderLine::More);
        }
        self.started = true;
        if text.is_empty() {
            let Some(length) = self.content_length else {
                return Err(ReadError::Protocol("message without Content-Length".into()));
            };
            if length > MAX_BODY {
                return Err(ReadError::Protocol(format!(
                    "Content-Length {length} is too large"
                )));
            }
            return Ok(HeaderLine::Body(length));
        }
        // A header name is a token (RFC 7230): a body without the blank line before it, or a
        // body longer than its Content-Length, shows up here as a "name" with `{` or `"` in it.
        let is_token = |name: &str| {
            !name.is_empty()
                && name
                    .bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte))
        };
        let Some((name, value)) = text
            .split_once(':')
            .filter(|(name, _)| is_token(name.trim()))
        else {
            return Err(ReadError::Protocol(format!(
                "expected a header, got {}",
                preview(line)
            )));
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            let length = value.trim().parse::<usize>().map_err(|_| {
                ReadError::Protocol(format!("invalid Content-Length {:?}", value.trim()))
            })?;
            if self.content_length.is_some_and(|earlier| earlier != length) {
                return Err(ReadError::Protocol(format!(
                    "conflicting Content-Length headers ({} and {length})",
                    self.content_length.unwrap_or_default()
                )));
            }
            self.content_length = Some(length);
        }
        // `Content-Type` (and any other header) carries nothing we need: the body is UTF-8 JSON.
        Ok(HeaderLine::More)
    }
}

/// Write one message.
pub async fn write_message(
    writer: &mut (impl AsyncWrite + Unpin),
    message: &Value,
) -> std::io::Result<()> {
    write_frame(writer, &serde_json::to_vec(message)?).await
}

/// Write one message body (JSON text) with its header.
pub async fn write_frame(
    writer: &mut (impl AsyncWrite + Unpin),
    body: &[u8],
) -> std::io::Result<()> {
    writer.write_all(&frame(body)).await?;
    writer.flush().await
}

/// Header and body in one buffer: one write per message, so the reader on the other end wakes
/// once, not for the header alone.
fn frame(body: &[u8]) -> Vec<u8> {
    let header = format!("Content-Length: {}\r\n\r\n", body.len());
    let mut frame = Vec::with_capacity(header.len() + body.len());
    frame.extend_from_slice(header.as_bytes());
    frame.extend_from_slice(body);
    frame
}

/// The start of some bytes, for error messages about garbage.
pub(crate) fn preview(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(80)]);
    format!("{:?}", text.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::io::BufReader;

    async fn read_all(input: &[u8]) -> Vec<Result<Option<Value>, String>> {
        let mut reader = BufReader::new(input);
        let mut out = Vec::new();
        loop {
            match read_message(&mut reader).await {
                Ok(Some(value)) => out.push(Ok(Some(value))),
                Ok(None) => {
                    out.push(Ok(None));
                    return out;
                }
                Err(ReadError::Protocol(message)) => {
                    out.push(Err(message));
                    return out;
                }
                Err(ReadError::Io(error)) => panic!("{error}"),
            }
        }
    }

    #[tokio::test]
    async fn stray_line_breaks_between_messages_are_skipped() {
        let input = b"\r\n\nContent-Length: 2\r\n\r\n{}\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(
            read_all(input).await,
            [Ok(Some(json!({}))), Ok(Some(json!({}))), Ok(None)]
        );
    }

    #[tokio::test]
    async fn frames_with_content_type_and_odd_header_case_are_read() {
        let body = r#"{"jsonrpc":"2.0","id":1,"result":"grüße"}"#;
        let input = format!(
            "Content-Length: {}\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{body}content-length: 2\r\n\r\n{{}}",
            body.len()
        );
        let messages = read_all(input.as_bytes()).await;
        assert_eq!(
            messages[0].as_ref().unwrap().as_ref().unwrap()["result"],
            "grüße"
        );
        assert_eq!(messages[1], Ok(Some(json!({}))));
        assert_eq!(messages[2], Ok(None));
    }

    #[tokio::test]
    async fn garbage_is_a_protocol_error_and_truncation_is_end_of_output() {
        let cases: [(&[u8], &str); 9] = [
            (b"hello world\r\n\r\n", "expected a header"),
            (b"Content-Length: ten\r\n\r\n", "invalid Content-Length"),
            (b"Content-Length: -1\r\n\r\n", "invalid Content-Length"),
            (
                b"Content-Length: 18446744073709551617\r\n\r\n",
                "invalid Content-Length",
            ),
            (b"Content-Length: 5\r\n\r\n{oops", "invalid JSON"),
            (b"Content-Type: x\r\n\r\n{}", "without Content-Length"),
            (b"Content-Length: 99999999999\r\n\r\n", "too large"),
            (
                b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
                "conflicting",
            ),
            (
                b"Content-Length: 2\r\n{}Content-Length: 2\r\n\r\n{}",
                "expected a header",
            ),
        ];
        for (input, expected) in cases {
            let messages = read_all(input).await;
            let error = messages.last().unwrap().as_ref().unwrap_err();
            assert!(error.contains(expected), "{error} for {input:?}");
        }
        assert_eq!(read_all(b"Content-Length: 10\r\n\r\n{}").await, [Ok(None)]);
        assert_eq!(read_all(b"Content-Len").await, [Ok(None)]);
        let long = vec![b'x'; 10_000];
        assert!(
            read_all(&long).await[0]
                .as_ref()
                .unwrap_err()
                .contains("longer than")
        );
    }

    #[test]
    fn the_blocking_reader_reads_what_the_async_one_does() {
        let body = r#"{"jsonrpc":"2.0","id":1,"result":"grüße"}"#;
        let input = format!(
            "Content-Length: {}\r\nContent-Type: x\r\n\r\n{body}Content-Length: 2\r\n\r\n{{}}Content-Length: 9\r\n\r\n{{}}",
            body.len()
        );
        let mut reader = std::io::BufReader::new(input.as_bytes());
        assert_eq!(
            read_frame_blocking(&mut reader).unwrap().unwrap(),
            body.as_bytes()
        );
        assert_eq!(read_frame_blocking(&mut reader).unwrap().unwrap(), b"{}");
        // Cut short: end of output.
        assert!(read_frame_blocking(&mut reader).unwrap().is_none());
        let mut garbage = std::io::BufReader::new(&b"hello\r\n\r\n"[..]);
        assert!(matches!(
            read_frame_blocking(&mut garbage),
            Err(ReadError::Protocol(message)) if message.contains("expected a header")
        ));
    }

    /// Frames sent from several threads at once arrive whole, each thread's in its order, also
    /// when the reader is slow and the pipe fills (then they queue instead of blocking).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn frames_from_many_threads_arrive_whole_and_in_order_through_a_full_pipe() {
        let (read_end, write_end) = nix::unistd::pipe().unwrap();
        let (writer, task) = FrameWriter::direct("test", write_end).unwrap();
        const THREADS: usize = 4;
        const FRAMES: usize = 300;
        let senders = (0..THREADS)
            .map(|thread| {
                let writer = writer.clone();
                std::thread::spawn(move || {
                    for n in 0..FRAMES {
                        // 1 kB bodies: 1.2 MB in all, far more than a pipe holds.
                        let body = json!({"thread": thread, "n": n, "pad": "x".repeat(1000)});
                        assert!(writer.send(&serde_json::to_vec(&body).unwrap()));
                    }
                })
            })
            .collect::<Vec<_>>();
        // Nobody reads yet: every sender finishes anyway, the rest is queued.
        for sender in senders {
            sender.join().unwrap();
        }
        writer.close();
        let reader = std::thread::spawn(move || {
            let mut reader = std::io::BufReader::new(std::fs::File::from(read_end));
            let mut next = [0; THREADS];
            while let Some(body) = read_frame_blocking(&mut reader).unwrap() {
                let message: Value = serde_json::from_slice(&body).unwrap();
                let thread = message["thread"].as_u64().unwrap() as usize;
                assert_eq!(message["n"], next[thread]);
                next[thread] += 1;
            }
            next
        });
        task.await.unwrap();
        drop(writer);
        assert_eq!(reader.join().unwrap(), [FRAMES; THREADS]);
    }

    #[tokio::test]
    async fn a_peer_that_is_gone_makes_send_return_false() {
        let (read_end, write_end) = nix::unistd::pipe().unwrap();
        let (writer, _task) = FrameWriter::direct("test", write_end).unwrap();
        drop(read_end);
        assert!(!writer.send(b"{}"));
        assert!(!writer.send(b"{}"));
    }
}
