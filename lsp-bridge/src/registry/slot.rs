//! One slot per (server, root): its start lock, the start itself (run in a task of its own so
//! that a caller giving up aborts nothing others wait for), restarts with exponential backoff
//! limited per window, and the health report of the instance in it.
//!
//! Apart from the [`Bridge`](super::Bridge) because the bridge only chooses the slot (which
//! server, which root); what happens to the instance in it over its life is here.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::ServerHealth;
use crate::child::{Child, ChildState};
use crate::config::{RestartPolicy, ServerConfig};
use crate::error::{Error, Result};

/// Longest pause before a restart, however many came before.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// One (server, root).
pub(super) struct Slot {
    pub(super) config: Arc<ServerConfig>,
    pub(super) root: PathBuf,
    /// Held for a whole start (including its backoff pause).
    pub(super) start_lock: tokio::sync::Mutex<()>,
    pub(super) state: Mutex<SlotState>,
}

#[derive(Default)]
pub(super) struct SlotState {
    pub(super) child: Option<Arc<Child>>,
    pub(super) starting: bool,
    /// Finished start attempts: a caller that waited through one takes its outcome.
    pub(super) attempts: u64,
    /// When each restart in the current window happened.
    pub(super) recent_restarts: VecDeque<Instant>,
    pub(super) total_restarts: u32,
    pub(super) last_error: Option<Error>,
    /// The stderr tail of the last instance that died or failed to start.
    pub(super) last_tail: Vec<String>,
}

impl Slot {
    pub(super) fn healthy_child(&self) -> Option<Arc<Child>> {
        let state = self.state.lock().unwrap();
        state
            .child
            .as_ref()
            .filter(|child| child.is_healthy())
            .cloned()
    }

    pub(super) async fn ensure_started(
        self: Arc<Self>,
        policy: RestartPolicy,
    ) -> Result<Arc<Child>> {
        let attempts_seen = self.state.lock().unwrap().attempts;
        let _start = self.start_lock.lock().await;
        let backoff = {
            let mut state = self.state.lock().unwrap();
            if let Some(child) = state.child.as_ref().filter(|child| child.is_healthy()) {
                return Ok(child.clone());
            }
            if state.attempts != attempts_seen
                && let Some(error) = &state.last_error
            {
                // The start we waited for failed: share its outcome rather than start again.
                return Err(error.clone());
            }
            let previous = state.child.take();
            if let Some(previous) = &previous {
                let reason = match previous.state() {
                    ChildState::Failed { reason } => reason,
                    other => format!("{other:?}").to_lowercase(),
                };
                tracing::warn!(server = %self.config.name, root = %self.root.display(), "language server is {reason}: restarting");
                state.last_tail = previous.stderr_tail();
                // What is replaced is gone or broken: no handshake to wait for. Killed here,
                // not in a task a runtime shutting down may drop first.
                previous.kill();
            }
            if previous.is_some() || state.attempts > 0 {
                let now = Instant::now();
                while state
                    .recent_restarts
                    .front()
                    .is_some_and(|at| now.duration_since(*at) > policy.window)
                {
                    state.recent_restarts.pop_front();
                }
                let recent = state.recent_restarts.len() as u32;
                if recent >= policy.max_restarts {
                    let error = Error::ServerFailed {
                        server: self.config.name.clone(),
                        restarts: recent,
                        stderr_tail: state.last_tail.clone(),
                    };
                    tracing::error!(server = %self.config.name, "{error}");
                    state.last_error = Some(error.clone());
                    return Err(error);
                }
                state.recent_restarts.push_back(now);
                state.total_restarts += 1;
                Some(
                    policy
                        .backoff
                        .saturating_mul(1 << recent.min(16))
                        .min(MAX_BACKOFF),
                )
            } else {
                None
            }
        };
        if let Some(backoff) = backoff {
            tracing::info!(server = %self.config.name, ?backoff, "restarting language server after a pause");
            tokio::time::sleep(backoff).await;
        }
        self.state.lock().unwrap().starting = true;
        let (outcome, tail) = Child::start_reporting(
            self.config.clone(),
            self.root.clone(),
            vec![self.root.clone()],
        )
        .await;
        let mut state = self.state.lock().unwrap();
        state.starting = false;
        state.attempts += 1;
        match &outcome {
            Ok(child) => {
                state.child = Some(child.clone());
                state.last_error = None;
            }
            Err(error) => {
                state.last_error = Some(error.clone());
                state.last_tail = tail;
            }
        }
        outcome
    }

    pub(super) fn health(&self) -> ServerHealth {
        let state = self.state.lock().unwrap();
        let child = state.child.as_ref();
        let status = if state.starting {
            "starting".to_owned()
        } else {
            match child.map(|child| child.state()) {
                Some(ChildState::Starting) => "starting".to_owned(),
                Some(ChildState::Ready) => "ready".to_owned(),
                Some(ChildState::Exited) => "exited".to_owned(),
                Some(ChildState::Failed { reason }) => format!("failed: {reason}"),
                None => match &state.last_error {
                    Some(Error::ServerFailed { .. }) => "failed: gave up restarting".to_owned(),
                    Some(_) => "failed: could not start".to_owned(),
                    None => "stopped".to_owned(),
                },
            }
        };
        // The running instance's own lines; with none running, those of the last one that died.
        let stderr_tail =
            child.map_or_else(|| state.last_tail.clone(), |child| child.stderr_tail());
        ServerHealth {
            name: self.config.name.clone(),
            root: self.root.clone(),
            state: status,
            work: child.and_then(|child| child.work()),
            pid: child.and_then(|child| child.pid()),
            restarts: state.total_restarts,
            last_error: state.last_error.as_ref().map(ToString::to_string),
            stderr_tail,
        }
    }
}
