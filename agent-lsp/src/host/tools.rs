//! What every agent of a host gets its tools over, and the one way a preset's tool runtime is
//! made from it: the catalog ([`super::catalog`]) with the preset's permissions, the host's
//! asker, the editor's buffers under `serve`, and fresh diagnostics after every write.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::activity::Activity;
use crate::config::Config;
use crate::plugin::registry::Assembly;
use crate::plugin::tool::Tool;
use crate::preset::Preset;
use crate::session::store::Store;
use crate::shared_bridge::SharedBridge;
use crate::tools::buffers::Buffers;
use crate::tools::lsp::LspTools;
use crate::tools::{Asker, HeadlessAsker, PermissionPolicy, ToolRuntime};
use crate::web::WebRuntime;
use crate::workspace::Workspace;
use lsp_bridge::Bridge;
use lsp_bridge::documents::DocumentMirror;

/// What every agent of a host gets its tools over: the workspace, the one bridge to its
/// language servers and the document mirror they share with the editor, the user's `[web]`
/// settings, who answers `ask`, and the editor's buffers under `serve`. A sub-agent gets the
/// same, so it queries the same warm servers and asks the same person.
#[derive(Clone)]
pub struct ToolHost {
    /// The workspace root the file tools are confined to.
    pub workspace: PathBuf,
    /// The language servers behind the `lsp_*` tools.
    pub bridge: Bridge,
    /// The open documents the servers were told of: the editor's under `serve`.
    pub documents: Arc<DocumentMirror>,
    /// The web tools' runtime, with the user's `[web]` settings.
    pub web: WebRuntime,
    /// Who answers a call whose permission is `ask`.
    pub asker: Arc<dyn Asker>,
    /// The editor's open buffers under `serve`, which the file tools read and edit instead of
    /// the disk.
    pub buffers: Option<Arc<dyn Buffers>>,
    /// The workspace's shared bridge, for hosts that may attach to another process's warm
    /// servers (`run`, `tool`, `mcp serve`); `serve` publishes its own and never attaches.
    pub shared: Option<Arc<SharedBridge>>,
    /// Tools the front end adds to every catalog whatever the preset enables (`mcp serve`'s
    /// `files`, `session_list` and `session_show`).
    pub front_end: Vec<Arc<dyn Tool>>,
    /// The user's `[checkpoints]`: whether and how a front end's agent captures the files.
    pub checkpoints: crate::snapshots::Options,
    /// The user's `[hooks]`: with the workspace's approved hooks files, they run around every
    /// call and turn of the host's agents and the user's own calls; `mcp serve` clears them,
    /// since its calls are another agent's, which has hooks of its own.
    pub hooks: crate::hooks::config::HooksOptions,
    /// Whether [`ToolHost::shutdown`] stops the bridge's servers: not under `serve`, whose
    /// editor keeps using them.
    owns_bridge: bool,
}

impl ToolHost {
    /// The tools of a process of its own (`run`, `tool`, `mcp serve`): a bridge to the servers
    /// of `config` for the store's workspace, shared with the user's other processes as
    /// `role` (attached to theirs when one is warm, else published), asking `asker`.
    pub(crate) fn owned(
        store: &Store,
        config: &Config,
        asker: Arc<dyn Asker>,
        role: &'static str,
    ) -> anyhow::Result<ToolHost> {
        let workspace = Workspace::new(store.workspace())?.root().to_owned();
        Ok(ToolHost {
            bridge: Bridge::new(config.bridge_config()?, vec![workspace.clone()]),
            workspace,
            documents: Arc::new(DocumentMirror::new()),
            web: WebRuntime::new(&config.web, Config::path().as_deref())?,
            asker,
            buffers: None,
            shared: Some(SharedBridge::new(store, role)),
            front_end: Vec::new(),
            checkpoints: config.checkpoints.clone(),
            hooks: config.hooks.clone(),
            owns_bridge: true,
        })
    }

    /// The tools of the editor's server: over its bridge and document mirror, which the
    /// editor's own requests use too, with its buffers and its asker. The servers stay the
    /// editor's: [`ToolHost::shutdown`] leaves them running.
    pub fn editor(
        workspace: PathBuf,
        bridge: Bridge,
        documents: Arc<DocumentMirror>,
        web: WebRuntime,
        asker: Arc<dyn Asker>,
        buffers: Arc<dyn Buffers>,
    ) -> ToolHost {
        ToolHost {
            workspace,
            bridge,
            documents,
            web,
            asker,
            buffers: Some(buffers),
            shared: None,
            front_end: Vec::new(),
            checkpoints: Default::default(),
            hooks: Default::default(),
            owns_bridge: false,
        }
    }

    /// Tools over a bridge of their own to `servers`, without the user's configuration or a
    /// shared bridge, and a headless asker without `--yes`: for checking a preset and for
    /// tests of the tools themselves.
    pub fn standalone(
        workspace: &Path,
        servers: lsp_bridge::BridgeConfig,
    ) -> anyhow::Result<ToolHost> {
        let workspace = Workspace::new(workspace)?.root().to_owned();
        Ok(ToolHost {
            bridge: Bridge::new(servers, vec![workspace.clone()]),
            workspace,
            documents: Arc::new(DocumentMirror::new()),
            web: WebRuntime::new(&Default::default(), Config::path().as_deref())?,
            asker: Arc::new(HeadlessAsker::default()),
            buffers: None,
            shared: None,
            front_end: Vec::new(),
            checkpoints: Default::default(),
            hooks: Default::default(),
            owns_bridge: true,
        })
    }

    /// The tool runtime of `preset`, with the tools its plugins brought (`plugins`); the
    /// language servers a slow `lsp_*` call waits for are shown on `activity`.
    pub fn runtime(
        &self,
        preset: &Preset,
        plugins: &Assembly,
        activity: &Arc<Activity>,
    ) -> anyhow::Result<ToolRuntime> {
        let lsp = self.lsp_tools().with_activity(activity.clone());
        let registry = super::catalog::build(
            preset,
            super::catalog::Sources {
                lsp: &lsp,
                web: &self.web,
                plugins,
                front_end: &self.front_end,
            },
        )?;
        let runtime = ToolRuntime::new(Workspace::new(&self.workspace)?, registry)
            .with_policy(PermissionPolicy::from_table(&preset.file.permissions))
            .with_write_observer(Arc::new(lsp))
            .with_asker(self.asker.clone());
        // Every runtime carries its sandbox, `off` included, so each command's record says
        // what held it.
        let sandbox = crate::sandbox::Sandbox::detect(preset.file.sandbox.clone(), &self.workspace);
        if let Some(unheld) = sandbox.unheld(&preset.name) {
            warn_once(unheld);
        }
        let sandbox = Arc::new(sandbox);
        let runtime = runtime.with_sandbox(sandbox.clone());
        let runtime = match self.hooks(sandbox) {
            Some(hooks) => runtime.with_hooks(hooks),
            None => runtime,
        };
        Ok(match &self.buffers {
            Some(buffers) => runtime.with_buffers(buffers.clone()),
            None => runtime,
        })
    }

    /// The hooks of the host's agents, run in `sandbox` (the one their `shell` runs in), when
    /// any is configured: read afresh for each runtime, so a file approved or changed since
    /// counts from the next session on.
    fn hooks(&self, sandbox: Arc<crate::sandbox::Sandbox>) -> Option<Arc<crate::hooks::Hooks>> {
        load_hooks(&self.hooks, &self.workspace, sandbox)
    }

    /// The `lsp_*` tools over the host's bridge and documents, through the shared bridge when
    /// there is one.
    fn lsp_tools(&self) -> LspTools {
        let queries = lsp_bridge::queries::Queries::new(
            Arc::new(self.bridge.clone()),
            self.documents.clone(),
        );
        let tools = LspTools::new(queries);
        match &self.shared {
            Some(shared) => tools.with_shared(shared.clone()),
            None => tools,
        }
    }

    /// Let go of the servers at the end of a process: clients attached to this host's shared
    /// bridge find it gone and take over, and the servers this host started are shut down
    /// (not the editor's).
    pub async fn shutdown(&self) {
        if let Some(shared) = &self.shared {
            shared.close().await;
        }
        if self.owns_bridge {
            self.bridge.shutdown_all().await;
        }
    }
}

/// The hooks `options` and the workspace's approved files configure for `workspace`, run in
/// `sandbox`; `None` when there are none.
pub fn load_hooks(
    options: &crate::hooks::config::HooksOptions,
    workspace: &Path,
    sandbox: Arc<crate::sandbox::Sandbox>,
) -> Option<Arc<crate::hooks::Hooks>> {
    let state_root = crate::session::store::state_root().ok();
    let hooks = crate::hooks::Hooks::load(options, workspace, state_root.as_deref(), Some(sandbox));
    // What does not run is the user's to know, once per process: every session and sub-agent
    // reads the hooks again.
    if let Some(question) = hooks.question() {
        for (source, _) in &question.files {
            warn_once(format!(
                "{}: the workspace's hooks are not approved and do not run; `agent-lsp hooks approve` shows and approves them",
                source.name
            ));
        }
    }
    for source in hooks.sources() {
        for skipped in &source.skipped {
            warn_once(format!("{}: {skipped}", source.name));
        }
    }
    (!hooks.all().is_empty()).then(|| Arc::new(hooks))
}

/// Log `warning` the first time this process meets it: every session and sub-agent of the
/// preset would say it again.
fn warn_once(warning: String) {
    static SAID: std::sync::Mutex<std::collections::BTreeSet<String>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut said = SAID.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if said.insert(warning.clone()) {
        tracing::warn!("{warning}");
    }
}
