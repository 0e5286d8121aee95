//! `Content-Length` framing, shared by the child side (the bridge) and the editor side (the
//! proxy in `agent-lsp serve`): reading frames, async or on a blocking thread, and writing them
//! in order from any thread through a [`FrameWriter`].

use std::collections::VecDeque;
use std::io::{BufRead, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

pub use crate::transport::RawResult;

/// A header line longer than this is not LSP framing.
const MAX_HEADER_LINE: u64 = 8 * 1024;
/// A body larger than this is not a message we want to buffer.
const MAX_BODY: usize = 256 * 1024 * 1024;
/// Why a frame could not be read.
#[derive(Debug)]
pub enum ReadError {
    Io(std::io::Error),
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

/// Frames for one peer (a child's stdin, the editor's stdout), sent from any thread or task and
/// written in the order they were sent.
///
/// On a pipe or a Unix socket (libuv-based editors such as VS Code and Neovim give their
/// servers socket pairs for stdio), whoever sends a frame while nothing is queued writes it at
/// once, on its own thread, without a hand-off (the proxy's hot path: a child's answer goes to
/// the editor from the thread that read it). The descriptor is non-blocking, so a peer that
/// stops reading never blocks a sender: what does not fit is queued, and a task writes the
/// queue out as the peer drains it, while later frames queue behind it. Any other writer (a
/// TCP stream, a test's buffer) gets every frame through that task.
pub struct FrameWriter {
    peer: String,
    state: Mutex<WriterState>,
    /// Wakes the task that writes the queue.
    queued: Notify,
    /// The peer's pipe or socket (non-blocking) when frames may be written directly.
    pipe: Option<Arc<OwnedFd>>,
    /// Signalled when the queue shrinks, for senders waiting for room
    /// ([`FrameWriter::send_waiting`]).
    room: std::sync::Condvar,
    /// The same, for tasks waiting for room ([`FrameWriter::room`]).
    room_for_tasks: Notify,
}

/// Above this many queued bytes, [`FrameWriter::send_waiting`] waits for the peer.
pub const MAX_QUEUED_BYTES: usize = 8 * 1024 * 1024;

#[derive(Default)]
struct WriterState {
    queue: VecDeque<Vec<u8>>,
    /// Bytes in `queue`.
    queued_bytes: usize,
    /// The peer is gone (a write failed): frames are dropped.
    broken: bool,
    /// No more frames will come: the task ends once the queue is written.
    closing: bool,
}

impl FrameWriter {
    /// Write to a pipe or a Unix socket (made non-blocking here), directly when possible. Must
    /// run inside the tokio runtime that will write what the peer cannot take at once; the
    /// returned task ends after [`FrameWriter::close`], once the queue is written.
    pub fn direct(
        peer: &str,
        pipe: OwnedFd,
    ) -> std::io::Result<(Arc<FrameWriter>, JoinHandle<()>)> {
        let kind = std::fs::File::from(pipe.try_clone()?)
            .metadata()?
            .file_type();
        if !(kind.is_fifo() || kind.is_socket()) {
            return Err(std::io::Error::other("neither a pipe nor a socket"));
        }
        let socket = kind.is_socket();
        set_nonblocking(&pipe, true)?;
        let pipe = Arc::new(pipe);
        let writer = Arc::new(FrameWriter {
            peer: peer.to_owned(),
            state: Mutex::default(),
            queued: Notify::new(),
            pipe: Some(pipe.clone()),
            room: std::sync::Condvar::new(),
            room_for_tasks: Notify::new(),
        });
        let task = tokio::spawn(drain_pipe(writer.clone(), pipe, socket));
        Ok((writer, task))
    }

    /// Write to any async writer, every frame through the writing task.
    pub fn queued(
        peer: &str,
        output: impl AsyncWrite + Unpin + Send + 'static,
    ) -> (Arc<FrameWriter>, JoinHandle<()>) {
        let writer = Arc::new(FrameWriter {
            peer: peer.to_owned(),
            state: Mutex::default(),
            queued: Notify::new(),
            pipe: None,
            room: std::sync::Condvar::new(),
            room_for_tasks: Notify::new(),
        });
        let task = tokio::spawn(drain_async(writer.clone(), output));
        (writer, task)
    }

    /// Frame `body` and send it; `false` when the peer is gone (or the writer closed).
    pub fn send(&self, body: &[u8]) -> bool {
        let mut frame = frame(body);
        let mut state = self.state.lock().expect("frame writer");
        if state.broken || state.closing {
            return false;
        }
        if let (true, Some(pipe)) = (state.queue.is_empty(), &self.pipe) {
            match write_some(pipe.as_ref(), &frame) {
                Ok(written) if written == frame.len() => return true,
                Ok(written) => {
                    frame.drain(..written);
                }
                Err(error) => {
                    drop(state);
                    self.broke(&error);
                    return false;
                }
            }
        }
        state.queued_bytes += frame.len();
        state.queue.push_back(frame);
        drop(state);
        self.queued.notify_one();
        true
    }

    /// [`FrameWriter::send`], waiting first while more than [`MAX_QUEUED_BYTES`] wait for the
    /// peer, when called from a thread outside any tokio runtime (one that may block: the
    /// thread that reads a child for the editor). That is the backpressure of a slow peer: the
    /// thread stops reading its server, whose pipe fills and slows it, instead of the queue
    /// growing without bound. Inside a runtime it never waits.
    pub fn send_waiting(&self, body: &[u8]) -> bool {
        if tokio::runtime::Handle::try_current().is_err() {
            let mut state = self.state.lock().expect("frame writer");
            while state.queued_bytes > MAX_QUEUED_BYTES && !state.broken && !state.closing {
                state = self.room.wait(state).expect("frame writer");
            }
        }
        self.send(body)
    }

    /// Wait, in a task, until at most [`MAX_QUEUED_BYTES`] wait for the peer (or it is gone):
    /// the backpressure of [`FrameWriter::send_waiting`] for a sender on a runtime, which must
    /// not block its thread (the queue may be written by a task of the same runtime).
    pub async fn room(&self) {
        loop {
            let made = self.room_for_tasks.notified();
            tokio::pin!(made);
            made.as_mut().enable();
            {
                let state = self.state.lock().expect("frame writer");
                if state.queued_bytes <= MAX_QUEUED_BYTES || state.broken || state.closing {
                    return;
                }
            }
            made.await;
        }
    }

    /// Whether at most [`MAX_QUEUED_BYTES`] wait for the peer: a send now does not wait.
    pub fn has_room(&self) -> bool {
        self.state.lock().expect("frame writer").queued_bytes <= MAX_QUEUED_BYTES
    }

    fn made_room(&self) {
        self.room.notify_all();
        self.room_for_tasks.notify_waiters();
    }

    /// Bytes waiting for the peer.
    pub fn queued_bytes(&self) -> usize {
        self.state.lock().expect("frame writer").queued_bytes
    }

    /// Whether a write found the peer gone (its end of the pipe closed): what was sent since
    /// was not delivered.
    pub fn is_broken(&self) -> bool {
        self.state.lock().expect("frame writer").broken
    }

    /// No more frames: the writing task ends once the queue is written (await its handle to
    /// know the peer has everything).
    pub fn close(&self) {
        self.state.lock().expect("frame writer").closing = true;
        self.queued.notify_one();
        self.made_room();
    }

    /// Wait until there is something to write; `false` when the task should end.
    async fn wait_for_frames(&self) -> bool {
        loop {
            {
                let state = self.state.lock().expect("frame writer");
                if state.broken {
                    return false;
                }
                if !state.queue.is_empty() {
                    return true;
                }
                if state.closing {
                    return false;
                }
            }
            // A notification sent between the check and here is kept as a permit.
            self.queued.notified().await;
        }
    }

    /// The peer is gone: drop what is queued, refuse what comes, and end the writing task.
    fn broke(&self, error: &std::io::Error) {
        tracing::debug!(peer = %self.peer, "writing failed: {error}");
        {
            let mut state = self.state.lock().expect("frame writer");
            state.broken = true;
            state.queue.clear();
            state.queued_bytes = 0;
        }
        self.queued.notify_one();
        self.made_room();
    }
}

/// Write as much of `bytes` as the non-blocking pipe takes now: `Ok(n)` with `n` short when
/// it is full. A plain `write(2)`: from any thread, whatever readiness the reactor last saw.
fn write_some(pipe: &impl AsFd, bytes: &[u8]) -> std::io::Result<usize> {
    let mut written = 0;
    while written < bytes.len() {
        match nix::unistd::write(pipe.as_fd(), &bytes[written..]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(count) => written += count,
            Err(nix::errno::Errno::EINTR) => {}
            Err(nix::errno::Errno::EAGAIN) => break,
            Err(error) => return Err(error.into()),
        }
    }
    Ok(written)
}

/// A pipe or socket registered with the reactor, while there is a backlog.
enum Registered {
    Pipe(pipe::Sender),
    Socket(tokio::net::UnixStream),
}

impl Registered {
    fn new(fd: &OwnedFd, socket: bool) -> std::io::Result<Registered> {
        let fd = fd.try_clone()?;
        if socket {
            let socket = std::os::unix::net::UnixStream::from(fd);
            Ok(Registered::Socket(tokio::net::UnixStream::from_std(
                socket,
            )?))
        } else {
            Ok(Registered::Pipe(pipe::Sender::from_owned_fd(fd)?))
        }
    }

    async fn writable(&self) -> std::io::Result<()> {
        match self {
            Registered::Pipe(pipe) => pipe.writable().await,
            Registered::Socket(socket) => socket.writable().await,
        }
    }

    fn try_write(&self, bytes: &[u8]) -> std::io::Result<usize> {
        match self {
            Registered::Pipe(pipe) => pipe.try_write(bytes),
            Registered::Socket(socket) => socket.try_write(bytes),
        }
    }
}

/// Write the queue out as the peer drains it.
///
/// The descriptor is registered with the reactor only while there is a backlog: a registered
/// pipe wakes the reactor every time the peer reads from it, which would be two needless
/// wake-ups per forwarded request.
async fn drain_pipe(writer: Arc<FrameWriter>, fd: Arc<OwnedFd>, socket: bool) {
    while writer.wait_for_frames().await {
        let pipe = match Registered::new(&fd, socket) {
            Ok(pipe) => pipe,
            Err(error) => return writer.broke(&error),
        };
        loop {
            if let Err(error) = pipe.writable().await {
                return writer.broke(&error);
            }
            let mut guard = writer.state.lock().expect("frame writer");
            let state = &mut *guard;
            while let Some(front) = state.queue.front_mut() {
                // Through the reactor's readiness, so that a full pipe clears it and the next
                // `writable` waits for room.
                match pipe.try_write(front) {
                    Ok(written) if written == front.len() => {
                        state.queued_bytes -= written;
                        state.queue.pop_front();
                    }
                    Ok(written) => {
                        state.queued_bytes -= written;
                        front.drain(..written);
                    }
                    Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(error) => {
                        drop(guard);
                        return writer.broke(&error);
                    }
                }
            }
            let empty = state.queue.is_empty();
            drop(guard);
            writer.made_room();
            if empty {
                break;
            }
        }
    }
}

/// Write every frame to an async writer, in order.
async fn drain_async(writer: Arc<FrameWriter>, mut output: impl AsyncWrite + Unpin) {
    while writer.wait_for_frames().await {
        let frames = std::mem::take(&mut writer.state.lock().expect("frame writer").queue);
        for frame in frames {
            let written = async {
                output.write_all(&frame).await?;
                output.flush().await
            }
            .await;
            if let Err(error) = written {
                return writer.broke(&error);
            }
            // Counted until written, so that the bound holds for what is being written too.
            {
                let mut state = writer.state.lock().expect("frame writer");
                state.queued_bytes = state.queued_bytes.saturating_sub(frame.len());
            }
            writer.made_room();
        }
    }
}

/// Make `fd` blocking again, for a reader thread (tokio makes child pipes non-blocking).
pub(crate) fn set_blocking(fd: &impl AsFd) -> std::io::Result<()> {
    set_nonblocking(fd, false)
}

fn set_nonblocking(fd: &impl AsFd, nonblocking: bool) -> std::io::Result<()> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL)?);
    let flags = if nonblocking {
        flags | OFlag::O_NONBLOCK
    } else {
        flags - OFlag::O_NONBLOCK
    };
    fcntl(fd, FcntlArg::F_SETFL(flags))?;
    Ok(())
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
