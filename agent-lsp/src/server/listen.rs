//! `agent-lsp serve --listen`: editors attach to a running server over a socket, TCP on
//! loopback or a Unix socket, instead of starting it over stdio.
//!
//! A socket is not authenticated by construction as stdio is (the editor started that
//! process), and whoever drives the server runs the agent's tools as the user, `shell`
//! included (a peer answers its own permission prompts). So on TCP, which every local process
//! and user can reach, a connection is served only after an `initialize` carrying the server's
//! token ([`admission`], [`token`]); a Unix socket is the user's alone ([`unix`]) and its peer
//! is checked to be the same user.
//!
//! Each connection is served on a thread of its own, with its own loop, agent runtime, child
//! servers and session (what `serve` builds for stdio), so an editor that is attached but idle
//! never holds up another; a connection that has not sent its `initialize` within
//! [`admission::ADMISSION_WINDOW`] is closed.

mod admission;
mod token;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use lsp_bridge::framing::FrameWriter;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};

use self::admission::Admission;
use self::token::Token;
use super::{EditorInput, Ending, serve, server_runtime};
use crate::config::Config;

/// How long the listener waits after `accept` fails (out of descriptors) before trying again.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// Where `--listen` listens.
enum Address {
    /// `HOST:PORT`.
    Tcp(String),
    /// `unix:PATH`.
    Unix(PathBuf),
}

impl Address {
    fn parse(address: &str) -> Address {
        match address.strip_prefix("unix:") {
            Some(path) => Address::Unix(PathBuf::from(path)),
            None => Address::Tcp(address.to_owned()),
        }
    }
}

/// A bound listener.
enum Listener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener),
}

/// A connection accepted and not yet admitted, detached from the listener's runtime so that
/// its own thread can take it.
enum Socket {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

/// Serve every editor that connects to `address` (`HOST:PORT` or `unix:PATH`), each on a
/// thread of its own, until the process is stopped. `token_file` replaces the generated token
/// of a TCP listener.
pub fn run(
    address: &str,
    token_file: Option<PathBuf>,
    workspace: Option<PathBuf>,
) -> anyhow::Result<()> {
    let runtime = server_runtime()?;
    let (listener, admission, made) = {
        let _inside = runtime.enter();
        bind(Address::parse(address), token_file)?
    };
    let served = runtime.block_on(async {
        tokio::select! {
            accepted = accept_forever(listener, Arc::new(admission), workspace) => accepted,
            stopped = stop_signal() => stopped,
        }
    });
    // What this server made for its clients (the token file, the socket) goes with it.
    if let Some(path) = made {
        let _ = std::fs::remove_file(path);
    }
    served
}

/// Listen on `address` and say where on stderr; returns the listener, what its connections
/// must show, and the file made for the clients (the token's, or the socket).
fn bind(
    address: Address,
    token_file: Option<PathBuf>,
) -> anyhow::Result<(Listener, Admission, Option<PathBuf>)> {
    match address {
        Address::Tcp(address) => {
            let listener = std::net::TcpListener::bind(&address)
                .with_context(|| format!("cannot listen on {address}"))?;
            let local = listener.local_addr()?;
            if !local.ip().is_loopback() {
                tracing::warn!(%local, "listening on a non-loopback address: anyone who can reach it and has the token drives the agent");
            }
            let (token, made) = match token_file {
                Some(path) => (Token::read(&path)?, None),
                None => {
                    let token = Token::generate()?;
                    let path = token::default_path(local)?;
                    token.save(&path)?;
                    (token, Some(path))
                }
            };
            // The token stays in its file; the file's path goes to stderr, and then the
            // address (a wrapper reads the port of `127.0.0.1:0` there), so reading stderr up
            // to the address gives both.
            if let Some(path) = &made {
                eprintln!(
                    "agent-lsp: token in {} (editors send it as initializationOptions.token)",
                    path.display()
                );
            }
            eprintln!("agent-lsp: listening on {local}");
            listener.set_nonblocking(true)?;
            let listener = Listener::Tcp(tokio::net::TcpListener::from_std(listener)?);
            Ok((listener, Admission::Token(token), made))
        }
        Address::Unix(path) => {
            if token_file.is_some() {
                bail!(
                    "--token-file is for a TCP --listen: a Unix socket is reachable by its owner only and needs no token"
                );
            }
            let listener = crate::local_socket::bind_owner_only(&path)?;
            eprintln!("agent-lsp: listening on unix:{}", path.display());
            listener.set_nonblocking(true)?;
            let listener = Listener::Unix(tokio::net::UnixListener::from_std(listener)?);
            Ok((listener, Admission::Peer, Some(path)))
        }
    }
}

/// Accept connections and hand each to a thread of its own.
async fn accept_forever(
    listener: Listener,
    admission: Arc<Admission>,
    workspace: Option<PathBuf>,
) -> anyhow::Result<()> {
    loop {
        let accepted = match &listener {
            Listener::Tcp(listener) => listener.accept().await.and_then(|(stream, peer)| {
                Ok((Some(Socket::Tcp(stream.into_std()?)), peer.to_string()))
            }),
            Listener::Unix(listener) => listener.accept().await.and_then(|(stream, _)| {
                let socket = match crate::local_socket::peer_is_owner(&stream)? {
                    true => Some(Socket::Unix(stream.into_std()?)),
                    false => None,
                };
                Ok((socket, "a Unix socket peer".to_owned()))
            }),
        };
        match accepted {
            Ok((Some(socket), peer)) => {
                tracing::info!(%peer, "connection accepted");
                spawn_connection(socket, peer, admission.clone(), workspace.clone());
            }
            Ok((None, _)) => tracing::warn!("refused a Unix socket peer running as another user"),
            // Out of descriptors or a connection reset before it was accepted: the listener
            // itself is fine, and the editors already connected keep being served.
            Err(error) => {
                tracing::warn!("cannot accept a connection: {error}");
                tokio::time::sleep(ACCEPT_RETRY).await;
            }
        }
    }
}

/// Serve `socket` on a thread of its own, with its own runtime: its server's loop runs on one
/// thread, as for stdio, and everything the connection started (tasks, the socket) ends with
/// that runtime.
fn spawn_connection(
    socket: Socket,
    peer: String,
    admission: Arc<Admission>,
    workspace: Option<PathBuf>,
) {
    let thread = std::thread::Builder::new()
        .name("editor-connection".into())
        .spawn(move || {
            let served = server_runtime().and_then(|runtime| {
                let served = runtime.block_on(async {
                    match socket {
                        Socket::Tcp(stream) => {
                            let stream = tokio::net::TcpStream::from_std(stream)?;
                            connection(stream, &peer, &admission, workspace).await
                        }
                        Socket::Unix(stream) => {
                            let stream = tokio::net::UnixStream::from_std(stream)?;
                            connection(stream, &peer, &admission, workspace).await
                        }
                    }
                });
                // Drops what is left of the connection (the task reading the socket, so the
                // socket closes) without waiting for blocking work nobody needs any more.
                runtime.shutdown_background();
                served
            });
            if let Err(error) = served {
                tracing::warn!(%peer, "connection ended: {error:#}");
            }
        });
    if let Err(error) = thread {
        tracing::warn!("cannot serve a connection: {error}");
    }
}

/// Admit one connection, then serve it until the editor leaves.
async fn connection<S>(
    mut stream: S,
    peer: &str,
    admission: &Admission,
    workspace: Option<PathBuf>,
) -> anyhow::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let read_ahead = match admission.admit(&mut stream).await {
        Ok(read_ahead) => read_ahead,
        Err(refusal) => {
            tracing::warn!(%peer, "connection refused: {refusal}");
            return Ok(());
        }
    };
    let (reader, writer) = tokio::io::split(stream);
    let input = EditorInput::Async(Box::new(std::io::Cursor::new(read_ahead).chain(reader)));
    let output = FrameWriter::queued("editor", writer);
    if serve(input, output, Config::load()?, workspace).await?
        == (Ending::Exit {
            after_shutdown: false,
        })
    {
        tracing::warn!(%peer, "the editor said `exit` without `shutdown`");
    }
    Ok(())
}

/// Ctrl-C or SIGTERM: stop listening (and remove the token file or socket on the way out).
pub(crate) async fn stop_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate()).context("cannot watch for SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot watch for SIGINT")?;
    tokio::select! {
        _ = terminate.recv() => {}
        _ = interrupt.recv() => {}
    }
    Ok(())
}
