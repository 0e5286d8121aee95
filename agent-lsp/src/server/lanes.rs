//! One lane per child server: every editor message for a child that the intake does not forward
//! itself waits in that child's lane, in the order the editor sent it, and the lane's task
//! delivers it: it starts (or restarts) the child, waits for room in the child's input, writes,
//! and delivers once more to a restarted child what never reached a dead one.
//!
//! The loop only routes: it hands a message to its lane and reads the editor's next one, so a
//! child that takes a minute to initialize (rust-analyzer on a large crate) or that stops
//! reading holds up only the messages for that child. The intake forwards a request past the
//! lanes only while the child's lane is empty ([`Lane::idle`]), so nothing overtakes a message
//! that waits in a lane.
//!
//! A lane is one registry slot (server, root), whichever instance of the server runs in it. It
//! keeps what it delivered of the editor's documents, so that a child started or restarted in
//! it is given the editor's documents as the lane last delivered them, not as the mirror has
//! them now (the mirror may already hold changes that still wait in the lane).

mod request;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use lsp_bridge::lsp_types::{CodeActionParams, Url};
use lsp_bridge::{Child, Error, SentRequest};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::documents::{self, Delivery};
use super::{ResponseError, Shared, children, codes};

/// Messages one lane holds before the loop waits for it (a notification) or answers at once
/// (a request, with `RequestFailed`): a child that stops reading holds at most this many of the
/// editor's messages here, and the rest wait in the editor's pipe.
pub(super) const LANE_QUEUE: usize = 256;

/// One child server's lane (see the module doc).
pub(super) struct Lane {
    server: String,
    jobs: mpsc::Sender<Job>,
    /// Messages handed to the lane and not yet delivered: the intake forwards past the lane
    /// only while this is zero.
    busy: AtomicUsize,
    /// The instance the lane last delivered to.
    child: Mutex<Option<Arc<Child>>>,
}

/// What a lane delivers.
pub(super) enum Job {
    /// An editor request for this lane's child.
    Request(Box<RequestJob>),
    /// The editor's document sync, so the child sees what the editor sees.
    Sync { path: PathBuf, delivery: Delivery },
    /// An editor notification about a document of this lane's.
    Notify {
        path: PathBuf,
        method: String,
        params: Value,
    },
    /// An editor notification for every running child: to this lane's, if it runs (`child`,
    /// or the one the lane delivers to), never starting one.
    Broadcast {
        child: Option<Arc<Child>>,
        method: String,
        params: Value,
    },
    /// A forwarded request the child exited without answering (`Child::on_undelivered`): to
    /// the restarted child, once.
    Again {
        id: i64,
        method: String,
        body: Vec<u8>,
        path: PathBuf,
    },
    /// This lane's part of a request that every running child answers: the written request
    /// goes back through `sent` (`None` when the lane has no running child).
    FanOut {
        child: Option<Arc<Child>>,
        method: String,
        params: Value,
        sent: oneshot::Sender<FannedOut>,
    },
}

/// A lane's part of a request every running child answers: its child and the request
/// written to it, or `None` when the lane has no running child.
pub(super) type FannedOut = Option<(Arc<Child>, SentRequest)>;

/// Which child a request is for.
pub(super) enum Target {
    /// The child serving this document, started (or restarted) if need be.
    Document(PathBuf),
    /// This instance, which made an item or announced a command; if it is gone by the time the
    /// lane delivers, the request gets `fallback` (the item as it is), else an error.
    Instance {
        child: Arc<Child>,
        fallback: Option<Value>,
    },
}

/// An editor request waiting in a lane.
pub(super) struct RequestJob {
    pub(super) id: Value,
    pub(super) method: String,
    pub(super) params: Value,
    pub(super) to: super::router::ToChild,
    /// For `textDocument/codeAction`: the agent's actions follow the child's.
    pub(super) code_actions: Option<Box<CodeActionParams>>,
    pub(super) cancel: CancellationToken,
}

/// What the lane's task keeps between messages.
#[derive(Default)]
struct Delivered {
    /// The instance the documents below were delivered to.
    instance: Option<u64>,
    /// The editor's open documents as this lane delivered them: (language id, version, text).
    documents: HashMap<Url, (String, i32, String)>,
}

impl Lane {
    /// A lane for `server` and its task, on the current runtime (the loop's).
    pub(super) fn start(shared: &Arc<Shared>, server: &str) -> Arc<Lane> {
        let (jobs, queue) = mpsc::channel(LANE_QUEUE);
        let lane = Arc::new(Lane {
            server: server.to_owned(),
            jobs,
            busy: AtomicUsize::new(0),
            child: Mutex::new(None),
        });
        tokio::spawn(run(lane.clone(), Arc::downgrade(shared), queue));
        lane
    }

    /// Whether nothing waits in the lane: a request may go straight to its child.
    pub(super) fn idle(&self) -> bool {
        self.busy.load(Ordering::Acquire) == 0
    }

    /// The instance the lane delivers to, while it runs.
    pub(super) fn running_child(&self) -> Option<Arc<Child>> {
        self.child
            .lock()
            .expect("lane child")
            .clone()
            .filter(|child| child.is_healthy())
    }

    /// Hand `job` to the lane, waiting while it is full (never lost: a notification).
    pub(super) async fn push(&self, job: Job) {
        self.busy.fetch_add(1, Ordering::AcqRel);
        if self.jobs.send(job).await.is_err() {
            self.busy.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Hand `job` to the lane now; `Err` gives it back when the lane is full (a request, which
    /// is then answered at once).
    pub(super) fn try_push(&self, job: Job) -> Result<(), Box<Job>> {
        self.busy.fetch_add(1, Ordering::AcqRel);
        self.jobs.try_send(job).map_err(|error| {
            self.busy.fetch_sub(1, Ordering::AcqRel);
            match error {
                mpsc::error::TrySendError::Full(job) | mpsc::error::TrySendError::Closed(job) => {
                    Box::new(job)
                }
            }
        })
    }

    /// The error a request gets when the lane is full.
    pub(super) fn full(&self) -> ResponseError {
        ResponseError::new(
            codes::REQUEST_FAILED,
            format!(
                "{} is not keeping up: {LANE_QUEUE} messages wait for it (it is starting, or busy and not reading); ask again",
                self.server
            ),
        )
    }

    /// The child for `path`, started or restarted if need be, and given the editor's documents
    /// when it is an instance this lane has not delivered to.
    async fn child_for(
        &self,
        shared: &Arc<Shared>,
        delivered: &mut Delivered,
        path: &Path,
    ) -> Result<Arc<Child>, Error> {
        if shared.is_shutting_down() {
            return Err(Error::NotReady {
                server: self.server.clone(),
            });
        }
        let bridge = shared.bridge.get().ok_or_else(|| Error::NotReady {
            server: self.server.clone(),
        })?;
        // Boxed: starting a child is a large future.
        let child = Box::pin(bridge.child_for(path)).await?;
        self.adopt(shared, delivered, &child).await;
        Ok(child)
    }

    /// Deliver to `child` from now on: a new instance (started here, restarted, or started by
    /// the agent) first gets the editor's documents as this lane delivered them.
    async fn adopt(&self, shared: &Arc<Shared>, delivered: &mut Delivered, child: &Arc<Child>) {
        if delivered.instance == Some(child.instance()) {
            return;
        }
        delivered.instance = Some(child.instance());
        *self.child.lock().expect("lane child") = Some(child.clone());
        for (uri, (language_id, version, text)) in &delivered.documents {
            tracing::info!(server = child.name(), %uri, version, "opening the editor's document in a new instance of its server");
            let open = Delivery::Open {
                uri: uri.clone(),
                language_id: language_id.clone(),
                version: *version,
                text: text.clone(),
            };
            if let Err(error) = documents::deliver(shared, child, &open).await {
                tracing::warn!(server = child.name(), %uri, "cannot reopen the document: {error}");
            }
        }
    }

    async fn run_job(&self, shared: &Arc<Shared>, delivered: &mut Delivered, job: Job) {
        match job {
            Job::Request(job) => self.request(shared, delivered, *job).await,
            Job::Sync { path, delivery } => self.sync(shared, delivered, &path, delivery).await,
            Job::Again {
                id,
                method,
                body,
                path,
            } => {
                let written = match self.child_for(shared, delivered, &path).await {
                    Ok(child) => {
                        child.writable().await;
                        child.forward_again(
                            id,
                            &method,
                            &body,
                            &shared.out,
                            super::CHILD_REQUEST_TIMEOUT,
                        )
                    }
                    Err(error) => Err(error),
                };
                if let Err(error) = written {
                    shared.respond(Value::from(id), Err(children::error_reply(error)));
                }
            }
            Job::Notify {
                path,
                method,
                params,
            } => {
                let mut retried = false;
                loop {
                    let notified = match self.child_for(shared, delivered, &path).await {
                        Ok(child) => {
                            child.writable().await;
                            child.notify(&method, params.clone()).await
                        }
                        Err(error) => Err(error),
                    };
                    match notified {
                        // It never reached a child that was gone: once more, to the restarted one.
                        Err(error) if error.is_server_gone() && !retried => retried = true,
                        Err(error) => {
                            tracing::warn!(server = %self.server, %method, "cannot forward: {error}");
                            break;
                        }
                        Ok(()) => break,
                    }
                }
            }
            Job::Broadcast {
                child,
                method,
                params,
            } => {
                let Some(child) = self.running(shared, delivered, child).await else {
                    return;
                };
                child.writable().await;
                if let Err(error) = child.notify(&method, params).await {
                    tracing::warn!(server = child.name(), %method, "cannot forward: {error}");
                }
            }
            Job::FanOut {
                child,
                method,
                params,
                sent,
            } => {
                let written = match self.running(shared, delivered, child).await {
                    Some(child) => {
                        child.writable().await;
                        match child.send(&method, &params) {
                            Ok(request) => Some((child, request)),
                            Err(error) => {
                                tracing::warn!(server = child.name(), %method, "not sent: {error}");
                                None
                            }
                        }
                    }
                    None => None,
                };
                let _ = sent.send(written);
            }
        }
    }

    /// The running child a broadcast goes to: `child`, else the one the lane delivers to.
    async fn running(
        &self,
        shared: &Arc<Shared>,
        delivered: &mut Delivered,
        child: Option<Arc<Child>>,
    ) -> Option<Arc<Child>> {
        let child = child
            .filter(|child| child.is_healthy())
            .or_else(|| self.running_child())?;
        self.adopt(shared, delivered, &child).await;
        Some(child)
    }

    /// Document sync: what the lane delivered is recorded first, so that a child started later
    /// (this one failed to start, or dies before it reads this) is given it.
    async fn sync(
        &self,
        shared: &Arc<Shared>,
        delivered: &mut Delivered,
        path: &Path,
        delivery: Delivery,
    ) {
        let child = self.child_for(shared, delivered, path).await;
        match &delivery {
            Delivery::Open {
                uri,
                language_id,
                version,
                text,
            } => {
                delivered
                    .documents
                    .insert(uri.clone(), (language_id.clone(), *version, text.clone()));
            }
            Delivery::Change { uri, version, text } => {
                if let Some(document) = delivered.documents.get_mut(uri) {
                    (document.1, document.2) = (*version, text.clone());
                }
            }
            Delivery::Close(params) => {
                delivered.documents.remove(&params.text_document.uri);
            }
            Delivery::Save(_) => {}
        }
        let child = match child {
            Ok(child) => child,
            Err(error) => return start_failed(shared, path, &error),
        };
        child.writable().await;
        match documents::deliver(shared, &child, &delivery).await {
            // Never reached a child that was gone: the restarted one is given the documents as
            // delivered (this change included) when it is adopted; a save is sent again.
            Err(error) if error.is_server_gone() => {
                match self.child_for(shared, delivered, path).await {
                    Ok(child) if matches!(delivery, Delivery::Save(_)) => {
                        if let Err(error) = documents::deliver(shared, &child, &delivery).await {
                            tracing::warn!(server = child.name(), "cannot forward: {error}");
                        }
                    }
                    Ok(_) => {}
                    Err(error) => start_failed(shared, path, &error),
                }
            }
            Err(error) => {
                tracing::warn!(server = child.name(), path = %path.display(), "cannot forward document sync: {error}")
            }
            Ok(()) => {}
        }
    }
}

/// A child failed to start for a document the editor opened: said once per server (every
/// document of its would fail the same way).
fn start_failed(shared: &Shared, path: &Path, error: &Error) {
    if matches!(error, Error::NoServer { .. } | Error::NotReady { .. }) {
        return;
    }
    tracing::warn!(path = %path.display(), "language server unavailable: {error}");
    let server = error.server().unwrap_or_default().to_owned();
    if shared
        .start_failures_shown
        .lock()
        .expect("start failures shown")
        .insert(server)
    {
        shared.show_error(&format!(
            "a language server for {} failed to start: {}",
            path.display(),
            error.brief()
        ));
    }
}

/// The lane's task: deliver each job in turn, until the connection's state is gone.
async fn run(lane: Arc<Lane>, shared: Weak<Shared>, mut jobs: mpsc::Receiver<Job>) {
    let mut delivered = Delivered::default();
    while let Some(job) = jobs.recv().await {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        lane.run_job(&shared, &mut delivered, job).await;
        lane.busy.fetch_sub(1, Ordering::AcqRel);
    }
}
