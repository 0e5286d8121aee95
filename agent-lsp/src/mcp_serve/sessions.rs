//! The MCP sessions of `mcp serve --http`, reclaimed: rmcp's [`LocalSessionManager`] behind a
//! cap on live sessions and an idle timeout.
//!
//! rmcp keeps a session until the client sends `DELETE`, and its own idle timeout only stops
//! the session's worker, leaving its entry in the map. A client that never deletes (most
//! scripts, every client that crashed) leaves its session behind: 3,000 `initialize`s held
//! 582 MB. So a new session first makes room: past [`MAX_SESSIONS`] the least recently used
//! are closed, those with no open response stream first; and a sweep closes every session idle
//! for [`IDLE_TIMEOUT`] with no open stream. A client whose session was closed gets 404 for
//! it, on which the MCP specification has it initialize a new one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId};
use tokio::time::Instant;

/// Most live sessions: an editor or an agent opens one, a few clients a handful; a session
/// costs about 200 KB.
pub const MAX_SESSIONS: usize = 64;
/// How long a session with no open stream may go unused before it is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(600);

/// rmcp's sessions, bounded.
pub struct BoundedSessions {
    inner: LocalSessionManager,
    uses: Mutex<HashMap<SessionId, Use>>,
    max_sessions: usize,
    idle_timeout: Duration,
}

/// When a session was last used, and how many of its response streams are open.
struct Use {
    last: Instant,
    open: Arc<AtomicUsize>,
}

/// Counts one open stream while it lives.
struct OpenStream(Arc<AtomicUsize>);

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl BoundedSessions {
    pub fn new(max_sessions: usize, idle_timeout: Duration) -> BoundedSessions {
        let mut inner = LocalSessionManager::default();
        // rmcp's worker stops on the same timeout, so a session is never half alive.
        inner.session_config.keep_alive = Some(idle_timeout);
        BoundedSessions {
            inner,
            uses: Mutex::new(HashMap::new()),
            max_sessions: max_sessions.max(1),
            idle_timeout,
        }
    }

    /// The number of live sessions.
    #[cfg(test)]
    fn live(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Use>> {
        self.uses
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Mark `id` used now.
    fn touch(&self, id: &SessionId) {
        if let Some(entry) = self.lock().get_mut(id) {
            entry.last = Instant::now();
        }
    }

    /// Count a stream of `id` open while `stream` lives.
    fn counted<S>(&self, id: &SessionId, stream: S) -> impl Stream<Item = S::Item> + use<S>
    where
        S: Stream,
    {
        let open = self.lock().get_mut(id).map(|entry| {
            entry.last = Instant::now();
            entry.open.fetch_add(1, Ordering::AcqRel);
            OpenStream(entry.open.clone())
        });
        stream.map(move |item| {
            let _open = &open;
            item
        })
    }

    /// Close sessions until one more fits: the least recently used first, those with an open
    /// stream only when no other is left.
    async fn make_room(&self) {
        let victims = {
            let uses = self.lock();
            let excess = (uses.len() + 1).saturating_sub(self.max_sessions);
            let mut by_age = uses
                .iter()
                .map(|(id, entry)| (entry.open.load(Ordering::Acquire) > 0, entry.last, id))
                .collect::<Vec<_>>();
            by_age.sort();
            by_age
                .into_iter()
                .take(excess)
                .map(|(_, _, id)| id.clone())
                .collect::<Vec<_>>()
        };
        for id in victims {
            tracing::info!(session = %id, max = self.max_sessions, "closing the least recently used MCP session to make room");
            self.close(&id).await;
        }
    }

    /// Close every session unused for the idle timeout that has no open stream.
    pub async fn reclaim_idle(&self) {
        let idle = {
            let uses = self.lock();
            uses.iter()
                .filter(|(_, entry)| {
                    entry.open.load(Ordering::Acquire) == 0
                        && entry.last.elapsed() >= self.idle_timeout
                })
                .map(|(id, _)| id.clone())
                .collect::<Vec<_>>()
        };
        for id in idle {
            tracing::info!(session = %id, "closing an idle MCP session");
            self.close(&id).await;
        }
    }

    async fn close(&self, id: &SessionId) {
        self.lock().remove(id);
        if let Err(error) = self.inner.close_session(id).await {
            tracing::debug!(session = %id, %error, "closing an MCP session failed");
        }
    }

    /// How often [`BoundedSessions::reclaim_idle`] should run.
    pub fn sweep_interval(&self) -> Duration {
        (self.idle_timeout / 4).max(Duration::from_secs(1))
    }
}

impl SessionManager for BoundedSessions {
    type Error = LocalSessionManagerError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        self.make_room().await;
        let (id, transport) = self.inner.create_session().await?;
        self.lock().insert(
            id.clone(),
            Use {
                last: Instant::now(),
                open: Arc::new(AtomicUsize::new(0)),
            },
        );
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.touch(id);
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        // A session closed here is gone, whatever rmcp's map still says.
        if !self.lock().contains_key(id) {
            return Ok(false);
        }
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.lock().remove(id);
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.inner.create_stream(id, message).await?;
        Ok(self.counted(id, stream))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.touch(id);
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.inner.create_standalone_stream(id).await?;
        Ok(self.counted(id, stream))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.inner.resume(id, last_event_id).await?;
        Ok(self.counted(id, stream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn past_the_cap_the_least_recently_used_session_is_closed() {
        let sessions = BoundedSessions::new(3, IDLE_TIMEOUT);
        let mut ids = Vec::new();
        for _ in 0..3 {
            ids.push(sessions.create_session().await.unwrap().0);
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        // The first is used again, so the second is the oldest.
        sessions.touch(&ids[0]);
        let (fourth, _) = sessions.create_session().await.unwrap();
        assert_eq!(sessions.live(), 3);
        assert!(!sessions.has_session(&ids[1]).await.unwrap());
        for id in [&ids[0], &ids[2], &fourth] {
            assert!(sessions.lock().contains_key(id));
        }
    }

    #[tokio::test]
    async fn idle_sessions_without_open_streams_are_reclaimed() {
        let sessions = BoundedSessions::new(8, Duration::from_millis(20));
        let (idle, _) = sessions.create_session().await.unwrap();
        let (streaming, _) = sessions.create_session().await.unwrap();
        let stream = sessions.counted(&streaming, futures_util::stream::empty::<()>());
        tokio::time::sleep(Duration::from_millis(40)).await;
        sessions.reclaim_idle().await;
        assert!(!sessions.lock().contains_key(&idle));
        assert!(sessions.lock().contains_key(&streaming));
        drop(stream);
        sessions.reclaim_idle().await;
        assert_eq!(sessions.live(), 0);
    }
}
