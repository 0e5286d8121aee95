//! The editor's messages as they arrive. A plain request about a document whose child is
//! running is forwarded to that child at once, by the thread (or task) that read it, with the
//! editor's own id; the child's answer goes back to the editor from the thread that reads the
//! child ([`lsp_bridge::Child::forward`]). Everything else goes to the server's loop, in order.
//!
//! This is the proxy's hot path (docs/decisions/0002-proxy-forwarding-threads.md): a definition,
//! hover or completion crosses `serve` on two threads that each wake once, like a byte relay,
//! instead of the reactor, a request task and two writer tasks.
//!
//! Order towards a child: a request must not overtake a document change the editor sent before
//! it, and changes go through the loop and the child's lane. So a request is forwarded here
//! only while the loop holds no message of the editor's and nothing waits in the child's lane;
//! otherwise it queues behind them. It is forwarded only while the child's input has room, so
//! the intake never waits for a child (a child that stops reading holds up its own lane only).

use std::borrow::Cow;
use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use lsp_bridge::framing::{ReadError, read_frame, read_frame_blocking};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, BufReader};
use tokio::sync::mpsc;

use super::router::{self, Kind, Lookup, Route};
use super::{Shared, children};

/// What the loop gets from the editor.
pub(super) enum Input {
    /// A message body (JSON text, not yet parsed).
    Message(Vec<u8>),
    /// Reading failed, or the framing broke so that where the next message starts is unknown;
    /// nothing more comes.
    Failed(std::io::Error),
}

/// A reader for a thread that blocks until input comes, also when the descriptor was handed
/// over non-blocking (an editor may share its own end's flags): a read that would block waits
/// in `poll` instead of failing.
pub struct Patient<R>(pub R);

impl<R: Read + std::os::fd::AsFd> Read for Patient<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        loop {
            match self.0.read(buf) {
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                    let mut ready = [PollFd::new(self.0.as_fd(), PollFlags::POLLIN)];
                    match poll(&mut ready, PollTimeout::NONE) {
                        Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                        Err(error) => return Err(error.into()),
                    }
                }
                read => return read,
            }
        }
    }
}

/// Where the editor's messages come from.
pub enum EditorInput {
    /// Read on a thread of its own (stdio), which forwards plain requests itself.
    Blocking(Box<dyn Read + Send>),
    /// Read by a task (a socket).
    Async(Box<dyn AsyncRead + Unpin + Send>),
}

pub(super) struct Intake {
    shared: Arc<Shared>,
    /// Messages handed to the loop that it has not finished handling.
    queued: Arc<AtomicUsize>,
}

/// What became of one read.
enum Taken {
    /// Forwarded to a child.
    Forwarded,
    /// For the loop; `false`: nothing more will be read.
    ToLoop(Input, bool),
    /// The end of input.
    End,
}

/// Messages the loop may hold before the intake waits for it: enough that a burst of typing
/// never waits, few enough that a loop held up by a child that stops reading holds little.
const LOOP_QUEUE: usize = 256;

/// The parts of an editor message the intake looks at.
#[derive(Deserialize)]
struct Peek<'a> {
    /// Only numeric ids are forwarded as they are (any other fails the parse: the loop's path).
    #[serde(default)]
    id: Option<u64>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct CancelParams {
    id: u64,
}

impl Intake {
    /// Read `input` until it ends: on a thread of its own for a blocking reader, else on a
    /// task. The loop gets what is not forwarded through the returned receiver, which closes
    /// at the end of input; `queued` counts what it has not finished handling.
    pub(super) fn start(
        shared: Arc<Shared>,
        input: EditorInput,
    ) -> std::io::Result<(mpsc::Receiver<Input>, Arc<AtomicUsize>)> {
        let (to_loop, from_intake) = mpsc::channel(LOOP_QUEUE);
        let queued = Arc::new(AtomicUsize::new(0));
        let intake = Intake {
            shared,
            queued: queued.clone(),
        };
        // Each send waits while the loop holds `LOOP_QUEUE` messages: reading stops, and the
        // editor's pipe fills.
        match input {
            EditorInput::Blocking(input) => {
                std::thread::Builder::new()
                    .name("editor-input".into())
                    .spawn(move || {
                        let mut reader = std::io::BufReader::with_capacity(64 * 1024, input);
                        loop {
                            let (input, more) = match intake.take(read_frame_blocking(&mut reader))
                            {
                                Taken::Forwarded => continue,
                                Taken::End => break,
                                Taken::ToLoop(input, more) => (input, more),
                            };
                            // The loop is gone (the editor said `exit`): nothing left to read for.
                            if to_loop.blocking_send(input).is_err() || !more {
                                break;
                            }
                        }
                    })?;
            }
            EditorInput::Async(input) => {
                tokio::spawn(async move {
                    let mut reader = BufReader::with_capacity(64 * 1024, input);
                    loop {
                        let (input, more) = match intake.take(read_frame(&mut reader).await) {
                            Taken::Forwarded => continue,
                            Taken::End => break,
                            Taken::ToLoop(input, more) => (input, more),
                        };
                        if to_loop.send(input).await.is_err() || !more {
                            break;
                        }
                    }
                });
            }
        }
        Ok((from_intake, queued))
    }

    /// Take one read.
    fn take(&self, read: Result<Option<Vec<u8>>, ReadError>) -> Taken {
        match read {
            Ok(Some(body)) => {
                if self.queued.load(Ordering::Acquire) == 0 && self.forward(&body) {
                    return Taken::Forwarded;
                }
                self.queued.fetch_add(1, Ordering::AcqRel);
                Taken::ToLoop(Input::Message(body), true)
            }
            Ok(None) => Taken::End,
            // A broken header leaves no way to find where the next message starts: reading on
            // would glue every later message to garbage and leave the server deaf. End the
            // connection instead, saying why, so the editor restarts the server.
            Err(error) => {
                let error = match error {
                    ReadError::Protocol(problem) => std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("the editor's message framing is broken ({problem})"),
                    ),
                    ReadError::Io(error) => error,
                };
                Taken::ToLoop(Input::Failed(error), false)
            }
        }
    }

    /// Forward `body` straight to its child, or cancel a request forwarded so; `false` when it
    /// is the loop's.
    fn forward(&self, body: &[u8]) -> bool {
        let Ok(Peek {
            id,
            method: Some(method),
            params: Some(params),
        }) = serde_json::from_slice::<Peek<'_>>(body)
        else {
            return false;
        };
        match id {
            None if method == "$/cancelRequest" => self.cancel(params),
            Some(id) if id < lsp_bridge::FIRST_OWN_ID as u64 => {
                self.request(id as i64, &method, params, body)
            }
            _ => false,
        }
    }

    /// Forward a request whose route the router knows without waiting, when it goes to one
    /// child as it is.
    fn request(&self, id: i64, method: &str, params: &RawValue, body: &[u8]) -> bool {
        use futures_util::FutureExt;
        let Ok(params) = serde_json::from_str::<Value>(params.get()) else {
            return false;
        };
        let shared = &self.shared;
        // With `Lookup::Known` the router never waits; a route it cannot give now is the loop's.
        let route = router::route(shared, Kind::Request, method, &params, Lookup::Known)
            .now_or_never()
            .flatten();
        let Some(Route::Child(to)) = route else {
            return false;
        };
        // The router gives a child only while it runs, its lane is empty and its input has
        // room, so nothing waits here: not on a thread (stdio), nor in a task (`--listen`).
        let Some(child) = to.running_child().filter(|_| to.is_verbatim()) else {
            return false;
        };
        children::forward(shared, child, id, method, body).is_ok()
    }

    /// `$/cancelRequest` for a forwarded request goes to the child that has it.
    fn cancel(&self, params: &RawValue) -> bool {
        let Ok(CancelParams { id }) = serde_json::from_str(params.get()) else {
            return false;
        };
        i64::try_from(id).is_ok_and(|id| self.shared.cancel_forwarded(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lsp_bridge::framing::read_frame_blocking;
    use std::io::Write;

    #[test]
    fn a_non_blocking_input_is_waited_for_not_failed() {
        let (read_end, write_end) = nix::unistd::pipe().unwrap();
        let flags = nix::fcntl::fcntl(&read_end, nix::fcntl::FcntlArg::F_GETFL).unwrap();
        let flags = nix::fcntl::OFlag::from_bits_truncate(flags) | nix::fcntl::OFlag::O_NONBLOCK;
        nix::fcntl::fcntl(&read_end, nix::fcntl::FcntlArg::F_SETFL(flags)).unwrap();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(100));
            std::fs::File::from(write_end)
                .write_all(b"Content-Length: 2\r\n\r\n{}")
                .unwrap();
        });
        let mut reader = std::io::BufReader::new(Patient(std::fs::File::from(read_end)));
        let body = read_frame_blocking(&mut reader).unwrap();
        assert_eq!(body.as_deref(), Some(&b"{}"[..]));
        writer.join().unwrap();
        // The writer is gone: end of input, not an error.
        assert!(read_frame_blocking(&mut reader).unwrap().is_none());
    }
}
