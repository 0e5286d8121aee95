//! Owning a workspace's bridge: the lock that makes one process the owner, the socket it
//! answers on, and what it answers.
//!
//! The lock is an `flock` on `bridge.lock`, held for as long as the process owns the bridge. The
//! kernel releases it when the process dies however it dies, so the lock, not the socket file,
//! says whether an owner lives: a socket whose lock is free was left by a dead owner and is
//! removed by whoever takes the lock next.

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::FlockOperation;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

use super::wire::{self, Answer, Envelope, OwnerInfo, PROTOCOL, Request};
use super::{LocalBridge, Place};
use crate::plugin::tool::ToolContext;
use crate::workspace::Workspace;

/// Take the workspace's bridge lock without waiting: `None` while another process holds it.
pub(super) fn try_lock(place: &Place) -> std::io::Result<Option<File>> {
    lock(place, FlockOperation::NonBlockingLockExclusive)
}

/// Take the lock, waiting until its holder lets it go (`serve`, which always has its own
/// children, publishes them as soon as nobody else does).
pub(super) fn wait_for_lock(place: &Place) -> std::io::Result<File> {
    lock(place, FlockOperation::LockExclusive).map(|file| file.expect("a blocking lock"))
}

fn lock(place: &Place, operation: FlockOperation) -> std::io::Result<Option<File>> {
    if let Some(parent) = place.lock.parent() {
        std::fs::create_dir_all(parent)?;
    }
    // Never through a link (a dangling one would create its target elsewhere), and never
    // waiting on a FIFO planted in its place: only a regular file is a lock.
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc_flags())
        .open(&place.lock)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other(format!(
            "{} is not a regular file",
            place.lock.display()
        )));
    }
    match rustix::fs::flock(&file, operation) {
        Ok(()) => Ok(Some(file)),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
        Err(error) => Err(error.into()),
    }
}

/// `O_NOFOLLOW | O_NONBLOCK` for opening the lock (non-blocking only matters for a FIFO, which
/// is then refused; `flock` ignores it).
fn libc_flags() -> i32 {
    (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32
}

/// A bridge this process publishes: while it lives, the lock is held and the socket answers.
/// Dropping it removes the socket (if it is still ours) and then lets the lock go, so a client
/// that finds the lock free never finds a live socket.
pub(super) struct Published {
    socket: PathBuf,
    /// The socket file's inode, so a socket someone else bound meanwhile is never removed.
    inode: u64,
    stop: CancellationToken,
    _lock: File,
}

impl Published {
    /// Bind the socket (replacing a dead owner's) and answer on it on `runtime`.
    pub(super) fn start(
        lock: File,
        place: &Place,
        root: &Path,
        info: OwnerInfo,
        local: Arc<dyn LocalBridge>,
        runtime: &tokio::runtime::Handle,
    ) -> anyhow::Result<Published> {
        let listener = crate::local_socket::bind_owner_only(&place.socket)?;
        listener.set_nonblocking(true)?;
        let inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&place.socket)?);
        let workspace = Arc::new(Workspace::new(root)?);
        let stop = CancellationToken::new();
        let owner = Arc::new(Owner {
            root: root.display().to_string(),
            info,
            local,
            workspace,
        });
        let listener = {
            let _entered = runtime.enter();
            tokio::net::UnixListener::from_std(listener)?
        };
        runtime.spawn(accept(listener, owner, stop.clone()));
        Ok(Published {
            socket: place.socket.clone(),
            inode,
            stop,
            _lock: lock,
        })
    }
}

impl Drop for Published {
    fn drop(&mut self) {
        self.stop.cancel();
        let ours = std::fs::symlink_metadata(&self.socket)
            .is_ok_and(|metadata| std::os::unix::fs::MetadataExt::ino(&metadata) == self.inode);
        if ours {
            let _ = std::fs::remove_file(&self.socket);
        }
    }
}

/// What the owner answers with.
struct Owner {
    root: String,
    info: OwnerInfo,
    local: Arc<dyn LocalBridge>,
    workspace: Arc<Workspace>,
}

async fn accept(listener: tokio::net::UnixListener, owner: Arc<Owner>, stop: CancellationToken) {
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    tracing::warn!("shared bridge: cannot accept a connection: {error}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = stop.cancelled() => return,
        };
        // The socket is 0600 in the user's state directory; the peer check holds even if
        // someone widened the file's mode.
        if !crate::local_socket::peer_is_owner(&stream).unwrap_or(false) {
            tracing::warn!("shared bridge: refused a connection from another user");
            continue;
        }
        let owner = owner.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = answer(stream, &owner) => {}
                () = stop.cancelled() => {}
            }
        });
    }
}

/// Read one request, answer it, and cancel it if the client goes away first.
async fn answer(stream: tokio::net::UnixStream, owner: &Owner) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let answer = match wire::read_line(&mut reader, wire::MAX_REQUEST).await {
        Ok(line) => match serde_json::from_slice::<Envelope>(&line) {
            Ok(envelope) => {
                // The client waits for this one answer: anything more it sends, or its
                // closing, means it no longer does.
                let gone = CancellationToken::new();
                let watch = {
                    let gone = gone.clone();
                    tokio::spawn(async move {
                        let mut byte = [0u8; 1];
                        let _ = reader.read(&mut byte).await;
                        gone.cancel();
                    })
                };
                let run = owner.run(envelope, gone.clone());
                tokio::pin!(run);
                let mut heartbeat = tokio::time::interval(wire::HEARTBEAT);
                heartbeat.tick().await;
                let answer = loop {
                    tokio::select! {
                        answer = &mut run => break answer,
                        () = gone.cancelled() => return,
                        // Alive, still working: the client waits on.
                        _ = heartbeat.tick() => {
                            if write.write_all(b"\n").await.is_err() {
                                return;
                            }
                        }
                    }
                };
                watch.abort();
                answer
            }
            Err(error) => Answer::Refused {
                reason: format!("not a request of protocol {PROTOCOL}: {error}"),
            },
        },
        Err(_) => return,
    };
    if let Err(error) = wire::write_line(&mut write, &answer).await {
        tracing::debug!("shared bridge: the client left before its answer: {error}");
    }
}

impl Owner {
    async fn run(&self, envelope: Envelope, cancel: CancellationToken) -> Answer {
        if envelope.protocol != PROTOCOL {
            return Answer::Refused {
                reason: format!(
                    "the owner (agent-lsp {}) speaks protocol {PROTOCOL}, not {}",
                    self.info.version, envelope.protocol
                ),
            };
        }
        if envelope.root != self.root {
            return Answer::Refused {
                reason: format!("the owner serves {}, not {}", self.root, envelope.root),
            };
        }
        match envelope.request {
            Request::Owner => Answer::Owner(OwnerInfo {
                servers: self.local.health(),
                ..self.info.clone()
            }),
            Request::Tool { name, arguments } => {
                let context = ToolContext::outside_session(
                    self.workspace.clone(),
                    cancel,
                    format!("shared-{name}"),
                );
                match self.local.run_tool(&name, context, arguments) {
                    Some(output) => Answer::Tool {
                        output: output.await,
                    },
                    None => Answer::Refused {
                        reason: format!("the owner has no tool `{name}`"),
                    },
                }
            }
            Request::AfterWrite { path } => match self.workspace.resolve(&path) {
                Ok(path) => Answer::AfterWrite {
                    diagnostics: self.local.after_write(&self.workspace, &path).await,
                },
                Err(error) => Answer::Refused {
                    reason: format!("{path}: {error}"),
                },
            },
        }
    }
}
