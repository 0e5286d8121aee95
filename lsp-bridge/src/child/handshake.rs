//! Starting a server: spawning it, the `initialize` handshake with the client capabilities and
//! workspace folders it is offered, `initialized`, and the task that hands what it sends on its
//! own to the [`Child`].
//!
//! Apart from `child.rs` (the child's state and its shutdown) because it runs once per instance
//! and is the only place a `Child` is made: nothing is handed out before the handshake is done.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use lsp_types::{ServerCapabilities, Url};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::incoming::Readiness;
use super::{Child, DiagnosticsStore, Initialized, client_capabilities, with_editor_capabilities};
use crate::config::ServerConfig;
use crate::error::{Error, Result};
use crate::position::PositionEncoding;
use crate::transport::{Incoming, Transport};

/// Capacity of the notification broadcast; a subscriber that falls further behind loses the
/// oldest ones (and is told so by `broadcast`).
const NOTIFICATION_BUFFER: usize = 1024;

impl Child {
    /// Spawn the server in `root`, run the `initialize` handshake (bounded by the config's
    /// `startup_timeout`) and send `initialized`. On failure the process is killed.
    /// `workspace_folders` empty means just `root`.
    pub async fn start(
        config: Arc<ServerConfig>,
        root: PathBuf,
        workspace_folders: Vec<PathBuf>,
    ) -> Result<Arc<Child>> {
        Child::start_reporting(config, root, workspace_folders)
            .await
            .0
    }

    /// [`Child::start`], plus the server's last stderr lines when it failed (the registry
    /// reports them once it gives up).
    pub(crate) async fn start_reporting(
        config: Arc<ServerConfig>,
        root: PathBuf,
        workspace_folders: Vec<PathBuf>,
    ) -> (Result<Arc<Child>>, Vec<String>) {
        let (transport, incoming) = match Transport::spawn(&config, &root) {
            Ok(spawned) => spawned,
            Err(error) => return (Err(error), Vec::new()),
        };
        let workspace_folders = if workspace_folders.is_empty() {
            vec![root.clone()]
        } else {
            workspace_folders
        };
        static INSTANCES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let child = Arc::new(Child {
            instance: INSTANCES.fetch_add(1, Ordering::Relaxed),
            transport,
            root,
            workspace_folders,
            initialized: OnceLock::new(),
            shutting_down: AtomicBool::new(false),
            readiness: watch::channel(Readiness::default()).0,
            diagnostics: DiagnosticsStore::new(),
            notifications: broadcast::channel(NOTIFICATION_BUFFER).0,
            registrations: Mutex::new(Vec::new()),
            workspace_indexed: AtomicBool::new(false),
            config,
        });
        // The loop holds a weak reference: dropping the last `Arc<Child>` kills the process,
        // which ends its output and so the loop.
        tokio::spawn(incoming_loop(Arc::downgrade(&child), incoming));
        let span =
            tracing::info_span!("start", server = %child.config.name, root = %child.root.display());
        match child.initialize().instrument(span).await {
            Ok(()) => (Ok(child), Vec::new()),
            Err(error) => {
                tracing::warn!(server = %child.config.name, "language server failed to start: {error}");
                child.kill();
                // Let the last stderr lines (often the reason) arrive.
                child.transport.wait_closed(Duration::from_secs(1)).await;
                let tail = child.stderr_tail();
                let error = match error {
                    // A server that is gone before it could read `initialize` has exited.
                    Error::NotDelivered { server } => Error::ServerExited {
                        server,
                        stderr_tail: tail.clone(),
                    },
                    other => other,
                };
                (Err(error), tail)
            }
        }
    }

    async fn initialize(&self) -> Result<()> {
        let params = self.initialize_params();
        let timeout = self.config.startup_timeout;
        let result = self
            .request_with("initialize", params, timeout, &CancellationToken::new())
            .await?;
        let raw_capabilities = result
            .get("capabilities")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let capabilities = serde_json::from_value::<ServerCapabilities>(raw_capabilities.clone())
            .unwrap_or_else(|error| {
                // A server may use a capability shape lsp-types does not know; the raw result
                // stays available through `initialize_result`.
                tracing::warn!(server = %self.config.name, "capabilities not fully understood: {error}");
                ServerCapabilities::default()
            });
        let encoding = match raw_capabilities
            .get("positionEncoding")
            .and_then(Value::as_str)
        {
            Some(kind) => PositionEncoding::from_lsp(Some(&kind.to_owned().into())),
            // clangd before 15 answers its own `offsetEncoding` extension instead.
            None => PositionEncoding::from_lsp(
                result
                    .get("offsetEncoding")
                    .and_then(Value::as_str)
                    .map(|kind| kind.to_owned().into())
                    .as_ref(),
            ),
        };
        tracing::info!(server = %self.config.name, pid = ?self.pid(), ?encoding, "language server initialized");
        let _ = self.initialized.set(Initialized {
            result,
            capabilities,
            encoding,
        });
        self.transport.notify("initialized", json!({}))?;
        self.readiness
            .send_modify(|readiness| readiness.initialized_at = Some(Instant::now()));
        Ok(())
    }

    fn initialize_params(&self) -> Value {
        let root_uri = directory_uri(&self.root);
        let mut params = json!({
            "processId": std::process::id(),
            "clientInfo": {"name": "agent-lsp", "version": env!("CARGO_PKG_VERSION")},
            "locale": "en",
            "rootPath": self.root.to_string_lossy(),
            "rootUri": root_uri,
            "workspaceFolders": self.workspace_folders_json(),
            "capabilities": with_editor_capabilities(
                client_capabilities(&self.config.position_encodings),
                self.config.editor_text_document.as_ref(),
            ),
            "trace": "off",
        });
        if let Some(options) = &self.config.initialization_options {
            params["initializationOptions"] = options.clone();
        }
        params
    }

    pub(super) fn workspace_folders_json(&self) -> Value {
        Value::Array(
            self.workspace_folders
                .iter()
                .map(|folder| {
                    let name = folder.file_name().map_or_else(
                        || folder.to_string_lossy().into_owned(),
                        |name| name.to_string_lossy().into_owned(),
                    );
                    json!({"uri": directory_uri(folder), "name": name})
                })
                .collect(),
        )
    }
}

async fn incoming_loop(child: Weak<Child>, mut incoming: mpsc::Receiver<Incoming>) {
    while let Some(message) = incoming.recv().await {
        let Some(child) = child.upgrade() else { return };
        match message {
            Incoming::Notification { method, params } => child.on_notification(method, params),
            Incoming::Request { id, method, params } => child.on_request(id, method, params),
        }
    }
}

fn directory_uri(path: &Path) -> Value {
    Url::from_directory_path(path)
        .map(|uri| Value::String(uri.to_string()))
        .unwrap_or(Value::Null)
}
