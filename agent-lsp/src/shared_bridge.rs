//! One warm bridge per workspace, shared by every process of the user that needs it.
//!
//! `serve`, `run`, `tool` and `mcp serve` each have a bridge of their own, whose children start
//! on the first query that needs them (pyright in about 1.6 s, rust-analyzer in minutes on a big
//! crate). The first of them that needs it publishes it on a Unix socket in the workspace's state
//! directory, and the later ones send their `lsp_*` queries there instead of starting children:
//! a terminal `agent-lsp tool` beside an editor's `serve` is answered by the editor's warm
//! servers, over the editor's unsaved buffers.
//!
//! Who owns the bridge is decided by an `flock` on `bridge.lock` beside the socket (see
//! `owner.rs`): the kernel lets it go when its holder dies however it dies, so a socket whose lock
//! is free is stale and is replaced by the next owner. A client whose owner is gone (nobody
//! listens, or the connection closes before the answer) decides again: it takes the lock and
//! answers from its own bridge, or attaches to whoever took it first, and the query that found
//! the owner gone runs again there (the `lsp_*` queries only read, so running one twice is safe).
//! The user sees at most a cold server where a warm one was.
//!
//! `serve` never attaches: it proxies the editor to children of its own, so it publishes them
//! as soon as nobody else does ([`SharedBridge::publish_when_free`]).
//!
//! What is decided here is where a query runs; the queries themselves are the `lsp_*` tools'
//! ([`LocalBridge`] is how the owner runs them, so this module imports no tool).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures_util::future::BoxFuture;
use serde_json::Value;

use crate::plugin::outcomes::ToolOutput;
use crate::plugin::tool::ToolContext;
use crate::session::store::Store;
use crate::workspace::Workspace;

mod client;
mod owner;
pub(crate) mod wire;

pub(crate) use wire::OwnerInfo;
use wire::{Answer, Request};

/// A socket path is at most this long (`sun_path` holds 108 bytes with its terminating zero).
const MAX_SOCKET_PATH: usize = 107;

/// How long a client waits for an owner that holds the lock but does not answer yet (it is
/// between taking the lock and binding the socket) before it answers from its own bridge.
const OWNER_WAIT: Duration = Duration::from_secs(2);

/// How long a process that could not reach a live owner answers alone before it looks again.
const ALONE_RETRY: Duration = Duration::from_secs(30);

/// What the owner runs its clients' requests on: its own `lsp_*` tools.
pub trait LocalBridge: Send + Sync {
    /// Run the `lsp_*` tool `name`; `None` when there is no such tool.
    fn run_tool(
        &self,
        name: &str,
        context: ToolContext,
        arguments: Value,
    ) -> Option<BoxFuture<'static, ToolOutput>>;

    /// Tell the servers that `path` was written, and render its fresh diagnostics.
    fn after_write(&self, workspace: &Workspace, path: &Path)
    -> BoxFuture<'static, Option<String>>;

    /// The servers' health, as JSON.
    fn health(&self) -> Value;
}

/// Where a workspace's bridge is published.
#[derive(Clone, Debug)]
pub struct Place {
    /// `bridge.lock`: whoever holds its `flock` owns the bridge; the kernel releases it when the
    /// holder dies.
    pub lock: PathBuf,
    /// The owner's Unix socket, where other processes send their requests.
    pub socket: PathBuf,
}

impl Place {
    /// The lock and socket in the workspace's state directory, or why the socket cannot be
    /// there (a state directory too deep for a socket path).
    pub fn of(store: &Store) -> Result<Place, String> {
        let dir = store.workspace_dir();
        let socket = dir.join("bridge.sock");
        if socket.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(format!(
                "the socket path {} is over {MAX_SOCKET_PATH} bytes",
                socket.display()
            ));
        }
        Ok(Place {
            lock: dir.join("bridge.lock"),
            socket,
        })
    }
}

enum State {
    /// The first query decides.
    Undecided,
    /// This process publishes its bridge (for as long as this is held).
    Owner { _published: owner::Published },
    /// Another process owns the bridge: queries go there.
    Attached(OwnerInfo),
    /// This process's own bridge, unpublished, until `retry` (if ever); why is logged.
    Alone { retry: Option<Instant> },
    /// The process is ending: nothing is published any more.
    Closed,
}

/// A process's part in its workspace's shared bridge.
pub struct SharedBridge {
    place: Result<Place, String>,
    root: PathBuf,
    role: &'static str,
    state: tokio::sync::Mutex<State>,
}

impl SharedBridge {
    /// The part of a process running `role` (`serve`, `run`, `tool`, `mcp serve`) in the bridge
    /// of `store`'s workspace. Nothing is locked or bound until a query needs the bridge.
    pub fn new(store: &Store, role: &'static str) -> Arc<SharedBridge> {
        Arc::new(SharedBridge {
            place: Place::of(store),
            root: store.workspace().to_owned(),
            role,
            state: tokio::sync::Mutex::new(State::Undecided),
        })
    }

    /// Run `request` at the owner when another process owns the bridge: its answer and who
    /// gave it, or `None` when this process answers from its own bridge (it owns it, or no
    /// owner can be reached). An owner found gone is replaced on the way.
    pub async fn forward(
        &self,
        local: &Arc<dyn LocalBridge>,
        request: impl Fn() -> Request,
    ) -> Option<(Answer, OwnerInfo)> {
        let root = self.root.display().to_string();
        // An owner found gone is followed by one that took over, or by this process; a third
        // owner gone in a row is not waited for.
        for _ in 0..3 {
            let owner = self.route(local).await?;
            let place = self.place.as_ref().ok()?;
            match client::ask(&place.socket, &root, request()).await {
                Ok(Answer::Refused { reason }) => {
                    self.alone(&owner, format!("the owner refused: {reason}"), None)
                        .await;
                    return None;
                }
                Ok(answer) => return Some((answer, owner)),
                Err(client::Failure::Gone(why)) => {
                    tracing::info!(
                        "shared bridge: the owner (pid {}) is gone ({why}); deciding again",
                        owner.pid
                    );
                    self.forget(&owner).await;
                }
                Err(client::Failure::Unreadable(why)) => {
                    self.alone(&owner, why, None).await;
                    return None;
                }
                // Stopped or hung, though it holds the lock: answered here, and looked at
                // again later (deciding now would wait for it once more).
                Err(client::Failure::Silent(why)) => {
                    self.alone(&owner, why, Some(Instant::now() + ALONE_RETRY))
                        .await;
                    return None;
                }
            }
        }
        None
    }

    /// Where queries go now: `Some(owner)` when another process owns the bridge, `None` when
    /// this one answers. Decides when nothing is decided (or an `Alone` is due to look again).
    async fn route(&self, local: &Arc<dyn LocalBridge>) -> Option<OwnerInfo> {
        let mut state = self.state.lock().await;
        if let State::Alone {
            retry: Some(retry), ..
        } = &*state
            && Instant::now() >= *retry
        {
            *state = State::Undecided;
        }
        if matches!(*state, State::Undecided) {
            *state = self.decide(local).await;
        }
        match &*state {
            State::Attached(owner) => Some(owner.clone()),
            _ => None,
        }
    }

    /// Own the bridge if nobody does, else attach to whoever does.
    async fn decide(&self, local: &Arc<dyn LocalBridge>) -> State {
        let place = match &self.place {
            Ok(place) => place,
            Err(why) => return alone(why.clone(), None),
        };
        let root = self.root.display().to_string();
        let deadline = Instant::now() + OWNER_WAIT;
        loop {
            match owner::try_lock(place) {
                Err(error) => {
                    return alone(
                        format!("cannot lock {}: {error}", place.lock.display()),
                        None,
                    );
                }
                Ok(Some(lock)) => return self.publish(lock, place, local.clone()),
                Ok(None) => {}
            }
            match client::probe(&place.socket, &root, Request::Owner).await {
                Ok(Answer::Owner(info)) => {
                    tracing::info!(
                        "shared bridge: attached to `agent-lsp {}` (pid {})",
                        info.role,
                        info.pid
                    );
                    return State::Attached(info);
                }
                Ok(Answer::Refused { reason }) => {
                    return alone(format!("the owner refused: {reason}"), None);
                }
                Ok(_) => return alone("the owner answered out of turn".into(), None),
                Err(client::Failure::Unreadable(why)) => return alone(why, None),
                Err(client::Failure::Silent(why)) => {
                    return alone(
                        format!("the bridge's owner holds its lock but does not answer ({why})"),
                        Some(Instant::now() + ALONE_RETRY),
                    );
                }
                // The owner is between its lock and its socket, or has just died.
                Err(client::Failure::Gone(_)) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
                Err(client::Failure::Gone(why)) => {
                    return alone(
                        format!("the bridge's owner holds its lock but does not answer ({why})"),
                        Some(Instant::now() + ALONE_RETRY),
                    );
                }
            }
        }
    }

    fn publish(&self, lock: std::fs::File, place: &Place, local: Arc<dyn LocalBridge>) -> State {
        let info = OwnerInfo {
            pid: std::process::id(),
            role: self.role.to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            since_ms: SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |since| since.as_millis() as u64),
            servers: Value::Null,
        };
        let runtime = tokio::runtime::Handle::current();
        match owner::Published::start(lock, place, &self.root, info, local, &runtime) {
            Ok(published) => {
                tracing::info!("shared bridge: published on {}", place.socket.display());
                State::Owner {
                    _published: published,
                }
            }
            Err(error) => alone(format!("cannot publish the bridge: {error:#}"), None),
        }
    }

    /// `serve`'s way in: it has its children whatever happens, and publishes them on `runtime`
    /// as soon as the lock is free (at once, or when the current owner ends).
    pub fn publish_when_free(
        self: &Arc<Self>,
        local: Arc<dyn LocalBridge>,
        runtime: tokio::runtime::Handle,
    ) {
        let Ok(place) = self.place.clone() else {
            return;
        };
        let shared = self.clone();
        let spawned = std::thread::Builder::new()
            .name("bridge-lock".into())
            .spawn(move || {
                let lock = match owner::wait_for_lock(&place) {
                    Ok(lock) => lock,
                    Err(error) => {
                        tracing::warn!(
                            "shared bridge: cannot lock {}: {error}",
                            place.lock.display()
                        );
                        return;
                    }
                };
                let mut state = shared.state.blocking_lock();
                if matches!(*state, State::Closed) {
                    return;
                }
                let _entered = runtime.enter();
                *state = shared.publish(lock, &place, local);
            });
        if let Err(error) = spawned {
            tracing::warn!("shared bridge: cannot wait for the lock: {error}");
        }
    }

    /// Stop publishing (the socket is removed, then the lock let go); later queries run here.
    pub async fn close(&self) {
        *self.state.lock().await = State::Closed;
    }

    /// The owner `owner` was found gone: decide again on the next query.
    async fn forget(&self, owner: &OwnerInfo) {
        let mut state = self.state.lock().await;
        if matches!(&*state, State::Attached(current) if current == owner) {
            *state = State::Undecided;
        }
    }

    /// The owner `owner` cannot serve this process: answer alone.
    async fn alone(&self, owner: &OwnerInfo, why: String, retry: Option<Instant>) {
        tracing::warn!(
            "shared bridge: not using the bridge of pid {}: {why}; starting servers of this process",
            owner.pid
        );
        let mut state = self.state.lock().await;
        if matches!(&*state, State::Attached(current) if current == owner) {
            *state = alone(why, retry);
        }
    }
}

fn alone(why: String, retry: Option<Instant>) -> State {
    tracing::info!("shared bridge: this process answers alone: {why}");
    State::Alone { retry }
}

/// Who owns a workspace's bridge, as `agent-lsp servers` reports it.
#[derive(Debug)]
pub enum Ownership {
    /// A live process owns it and answered: its pid, role, version and servers.
    Owned(OwnerInfo),
    /// Nobody: the next process that needs the bridge publishes its own.
    Nobody,
    /// A socket is left by an owner that is gone; the next owner replaces it.
    Stale(PathBuf),
    /// The lock is held, but its holder does not answer.
    Silent(String),
    /// This workspace cannot share its bridge.
    Unshared(String),
}

/// Ask the socket of `store`'s workspace who owns its bridge, without taking anything.
pub async fn ownership(store: &Store) -> Ownership {
    let place = match Place::of(store) {
        Ok(place) => place,
        Err(why) => return Ownership::Unshared(why),
    };
    let root = store.workspace().display().to_string();
    match client::probe(&place.socket, &root, Request::Owner).await {
        Ok(Answer::Owner(info)) => Ownership::Owned(info),
        Ok(Answer::Refused { reason }) => Ownership::Silent(reason),
        Ok(_) => Ownership::Silent("it answered out of turn".into()),
        Err(failure) => match owner::try_lock(&place) {
            // Held only for this look; it goes when the file is dropped.
            Ok(Some(_lock)) if place.socket.exists() => Ownership::Stale(place.socket),
            Ok(Some(_lock)) => Ownership::Nobody,
            Ok(None) => Ownership::Silent(failure.to_string()),
            Err(error) => Ownership::Unshared(format!("cannot lock: {error}")),
        },
    }
}
