//! [`FrameWriter`]: frames for one peer, sent from any thread or task and written in order,
//! directly on a non-blocking pipe or socket when nothing is queued, else by a task that drains
//! the queue as the peer reads.
//!
//! Apart from the readers in `framing.rs` because writing is where the concurrency is: the
//! queue, its bound, waiting for room (threads and tasks), and a peer that stops reading or is
//! gone.

use std::collections::VecDeque;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::frame;

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
