//! The running servers of a workspace: which server serves a file, where its root is, one
//! instance per (server, root), started lazily and restarted when it crashes or hangs.
//!
//! Each (server, root) has a slot with its own start lock, so a server that is slow to start
//! (or backing off before a restart) only holds up callers that need that very server. Starts
//! run in their own task: a caller that gives up does not abort a start others wait for, and
//! everyone who waited on one start gets its outcome instead of starting again. Restarts back off
//! exponentially and are limited per time window ([`RestartPolicy`]); past the limit the server
//! is reported as failed with its last stderr lines until the window has passed. A slot and
//! what happens to the instance in it are `slot.rs`; choosing the slot for a file is here.
//!
//! [`RestartPolicy`]: crate::RestartPolicy

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::child::{Child, ChildState};
use crate::config::{BridgeConfig, ProbeFailure, ServerConfig};
use crate::error::{Error, Result};

mod catalog;
mod slot;

use slot::{Slot, SlotState};
/// What a user (`agent-lsp servers`) or the model (when a tool cannot be answered) is told
/// about one server instance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ServerHealth {
    /// The server's configured name.
    pub name: String,
    /// The project root of this instance: one server runs once per root.
    pub root: PathBuf,
    /// `starting`, `ready`, `exited`, `failed: <reason>`, or `stopped` (not running, will start
    /// on the next request).
    pub state: String,
    /// What the server says it is doing (its newest unended work-done progress: `Indexing:
    /// 12/40 (30%)`), so a caller kept waiting can be told why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub work: Option<String>,
    /// The process id while it runs, for a user who wants to look at or kill a stuck server.
    pub pid: Option<u32>,
    /// Restarts since the bridge began.
    pub restarts: u32,
    /// Why the last instance died or failed to start, the first thing to read when it keeps
    /// failing.
    pub last_error: Option<String>,
    /// The last stderr lines of the running instance, or else of the last one that died.
    pub stderr_tail: Vec<String>,
}

/// The workspace's child servers. Cheap to clone; clones share the servers.
#[derive(Clone)]
pub struct Bridge {
    inner: Arc<Inner>,
}

struct Inner {
    config: BridgeConfig,
    /// Every configured server with its compiled matcher, found program and probe.
    catalog: catalog::Catalog,
    workspace_folders: Vec<PathBuf>,
    slots: Mutex<BTreeMap<(String, PathBuf), Arc<Slot>>>,
    /// Called once for every child that starts (restarts included), e.g. so the editor proxy
    /// can forward its notifications and answer its requests.
    on_start: Mutex<Option<StartHook>>,
    /// Children the hook has seen, by instance (an address would be reused by a later child,
    /// which the hook would then never see).
    hooked: Mutex<std::collections::HashSet<u64>>,
}

/// See [`Bridge::set_on_start`].
pub type StartHook = Arc<dyn Fn(&Arc<Child>) + Send + Sync>;

impl Bridge {
    /// A bridge for the workspace's folders, with no server started yet: each starts when a
    /// file it serves is first asked about.
    pub fn new(config: BridgeConfig, workspace_folders: Vec<PathBuf>) -> Bridge {
        let catalog = catalog::Catalog::new(&config);
        let workspace_folders = workspace_folders
            .iter()
            .map(|folder| normalize(folder))
            .collect();
        Bridge {
            inner: Arc::new(Inner {
                config,
                catalog,
                workspace_folders,
                slots: Mutex::new(BTreeMap::new()),
                on_start: Mutex::new(None),
                hooked: Mutex::new(std::collections::HashSet::new()),
            }),
        }
    }

    /// The server configurations it chooses from, as resolved at construction.
    pub fn config(&self) -> &BridgeConfig {
        &self.inner.config
    }

    /// Call `hook` once for each child as it starts (and for the running ones now).
    pub fn set_on_start(&self, hook: StartHook) {
        *self.inner.on_start.lock().unwrap() = Some(hook);
        for child in self.running() {
            self.hook(&child);
        }
    }

    fn hook(&self, child: &Arc<Child>) {
        let hook = self.inner.on_start.lock().unwrap().clone();
        if let Some(hook) = hook
            && self.inner.hooked.lock().unwrap().insert(child.instance())
        {
            hook(child);
        }
    }

    /// The workspace folders, normalized: a root is searched for only inside them.
    pub fn workspace_folders(&self) -> &[PathBuf] {
        &self.inner.workspace_folders
    }

    /// One file for each (server, root) the workspace folders have files for, from an
    /// ignore-aware walk of at most `max_files` files: opening these starts every server the
    /// workspace has files for (`agent-lsp servers --start`, and the agent's workspace-wide
    /// queries, which need them all). The editor-facing server does not use it: a child starts
    /// when a document it serves is opened.
    pub fn sample_files(&self, max_files: usize) -> Vec<PathBuf> {
        let mut seen = std::collections::BTreeSet::new();
        // The root of (server, directory): files of one directory share it, and finding it
        // costs a `stat` per marker per ancestor.
        let mut roots = std::collections::HashMap::new();
        let mut samples = Vec::new();
        for folder in &self.inner.workspace_folders {
            for entry in ignore::WalkBuilder::new(folder)
                .build()
                .filter_map(std::result::Result::ok)
                .take(max_files)
            {
                if !entry.file_type().is_some_and(|kind| kind.is_file()) {
                    continue;
                }
                let Some(server) = self.config_for(entry.path()) else {
                    continue;
                };
                let directory = entry.path().parent().map(Path::to_path_buf);
                let root = roots
                    .entry((server.name.clone(), directory))
                    .or_insert_with(|| self.root_for(&server, entry.path()))
                    .clone();
                if seen.insert((server.name.clone(), root)) {
                    samples.push(entry.into_path());
                }
            }
        }
        samples
    }

    /// The first server whose file patterns or languages match `path` and that is installed
    /// and can run. The first question about a server runs its probe (see
    /// [`ServerConfig::probe_args`]), which blocks for at most a few seconds, once.
    pub fn config_for(&self, path: &Path) -> Option<Arc<ServerConfig>> {
        self.inner.catalog.serving(path)
    }

    /// [`Bridge::config_for`] without blocking the runtime: a probe still to run runs on the
    /// blocking pool.
    pub async fn config_for_async(&self, path: &Path) -> Option<Arc<ServerConfig>> {
        if !self.inner.catalog.needs_probe(path) {
            return self.config_for(path);
        }
        let bridge = self.clone();
        let path = path.to_owned();
        tokio::task::spawn_blocking(move || bridge.config_for(&path))
            .await
            .unwrap_or(None)
    }

    /// Why server `name` is not used although it is installed: its probe failed (running the
    /// probe if it has not run).
    pub fn probe_failure(&self, name: &str) -> Option<ProbeFailure> {
        self.inner.catalog.probe_failure(name)
    }

    /// The nearest ancestor of `path` that holds one of the server's root markers, not looking
    /// above the workspace folder that contains `path`; else that folder (or, outside every
    /// folder, the file's own directory).
    pub fn root_for(&self, config: &ServerConfig, path: &Path) -> PathBuf {
        let path = normalize(path);
        let folder = self
            .inner
            .workspace_folders
            .iter()
            .filter(|folder| path.starts_with(folder))
            .max_by_key(|folder| folder.components().count());
        let start = if path.is_dir() {
            path.as_path()
        } else {
            path.parent().unwrap_or(&path)
        };
        for dir in start.ancestors() {
            if config
                .root_markers
                .iter()
                .any(|marker| dir.join(marker).exists())
            {
                return dir.to_path_buf();
            }
            if Some(dir) == folder.map(PathBuf::as_path) {
                break;
            }
        }
        folder.cloned().unwrap_or_else(|| start.to_path_buf())
    }

    /// The server instance for `path`, started (or restarted) if need be. See the module doc
    /// for sharing, backoff and the restart limit.
    pub async fn child_for(&self, path: &Path) -> Result<Arc<Child>> {
        let Some(config) = self.config_for_async(path).await else {
            return Err(Error::NoServer {
                path: path.to_path_buf(),
                reason: self.no_server_reason(path),
            });
        };
        let root = self.root_for(&config, path);
        let slot = {
            let mut slots = self.inner.slots.lock().unwrap();
            slots
                .entry((config.name.clone(), root.clone()))
                .or_insert_with(|| {
                    Arc::new(Slot {
                        config,
                        root,
                        start_lock: tokio::sync::Mutex::new(()),
                        state: Mutex::new(SlotState::default()),
                    })
                })
                .clone()
        };
        if let Some(child) = slot.healthy_child() {
            return Ok(child);
        }
        let policy = self.inner.config.restart;
        let server = slot.config.name.clone();
        let child = tokio::spawn(slot.ensure_started(policy))
            .await
            .unwrap_or_else(|error| {
                Err(Error::Protocol {
                    server,
                    message: format!("starting the server panicked: {error}"),
                })
            })?;
        self.hook(&child);
        Ok(child)
    }

    /// Whether the server for `path` runs, has answered `initialize` and reports no work in
    /// progress: a caller on a tight budget (inline completion) waits only on such a server, as
    /// one that starts or indexes holds its answers for seconds. Never starts anything.
    pub fn warm_for(&self, path: &Path) -> bool {
        let Some(config) = self.config_for(path) else {
            return false;
        };
        let root = self.root_for(&config, path);
        let slot = self
            .inner
            .slots
            .lock()
            .unwrap()
            .get(&(config.name.clone(), root))
            .cloned();
        slot.and_then(|slot| slot.healthy_child())
            .is_some_and(|child| child.state() == ChildState::Ready && child.work().is_none())
    }

    /// Why no server serves `path`, in one line (none configured, none installed, or the
    /// installed one cannot run).
    pub fn no_server_reason(&self, path: &Path) -> String {
        self.inner.catalog.no_server_reason(path)
    }

    /// The instances that are running and usable.
    pub fn running(&self) -> Vec<Arc<Child>> {
        self.slots()
            .iter()
            .filter_map(|slot| slot.healthy_child())
            .collect()
    }

    /// One report per server instance the bridge knows (running, starting, or stopped after
    /// dying), for `agent-lsp servers` and for telling the model why a tool cannot answer.
    pub fn health(&self) -> Vec<ServerHealth> {
        self.slots().iter().map(|slot| slot.health()).collect()
    }

    /// Shut every instance down (in parallel, bounded) and forget them.
    pub async fn shutdown_all(&self) {
        let slots: Vec<_> = std::mem::take(&mut *self.inner.slots.lock().unwrap())
            .into_values()
            .collect();
        let children: Vec<_> = slots
            .iter()
            .filter_map(|slot| slot.state.lock().unwrap().child.take())
            .collect();
        futures_util::future::join_all(children.iter().map(|child| child.shutdown())).await;
    }

    fn slots(&self) -> Vec<Arc<Slot>> {
        self.inner.slots.lock().unwrap().values().cloned().collect()
    }
}

/// An absolute path without `.` and `..` (lexically: symlinks are kept as the user named them,
/// so that the same file never ends up under two roots).
fn normalize(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|cwd| cwd.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    let mut normalized = PathBuf::new();
    for component in absolute.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                normalized.pop();
            }
            other => normalized.push(other),
        }
    }
    normalized
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clangd_like() -> ServerConfig {
        ServerConfig {
            file_patterns: vec!["*.c".into()],
            root_markers: vec!["compile_flags.txt".into()],
            ..ServerConfig::new("c-ls", "/bin/sh")
        }
    }

    #[test]
    fn roots_come_from_markers_bounded_by_the_workspace_folder() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("ws");
        std::fs::create_dir_all(workspace.join("a/src")).unwrap();
        std::fs::create_dir_all(workspace.join("b/src")).unwrap();
        std::fs::write(workspace.join("a/compile_flags.txt"), "").unwrap();
        // A marker above the workspace folder must not be picked.
        std::fs::write(dir.path().join("compile_flags.txt"), "").unwrap();
        let bridge = Bridge::new(
            BridgeConfig {
                servers: vec![clangd_like()],
                ..Default::default()
            },
            vec![workspace.clone()],
        );
        let config = bridge.config_for(&workspace.join("a/src/x.c")).unwrap();
        assert_eq!(
            bridge.root_for(&config, &workspace.join("a/src/x.c")),
            workspace.join("a")
        );
        assert_eq!(
            bridge.root_for(&config, &workspace.join("b/src/../src/y.c")),
            workspace
        );
        assert!(bridge.config_for(&workspace.join("a/x.py")).is_none());
    }

    #[test]
    fn missing_servers_are_explained() {
        let config = BridgeConfig {
            servers: vec![ServerConfig {
                file_patterns: vec!["*.zz".into()],
                ..ServerConfig::new("zz-ls", "no-such-zz-ls")
            }],
            ..Default::default()
        };
        let bridge = Bridge::new(config, vec![]);
        let reason = bridge.no_server_reason(Path::new("/w/a.zz"));
        assert!(
            reason.contains("`zz-ls`") && reason.contains("not found on PATH"),
            "{reason}"
        );
        let reason = bridge.no_server_reason(Path::new("/w/a.qq"));
        assert!(
            reason.contains(".qq") && reason.contains("[server.NAME]"),
            "{reason}"
        );
    }

    #[test]
    fn paths_are_normalized_lexically() {
        assert_eq!(
            normalize(Path::new("/a/b/../c/./d")),
            PathBuf::from("/a/c/d")
        );
    }
}
