//! `initialize`: our capabilities, and those of any child already running; children start
//! later, when the editor opens a document one serves (or the agent needs one), and bring
//! their features by dynamic registration (`registration`), or, for an editor that reads
//! capabilities at `initialize` only, are announced up front (`up_front`).
//!
//! Starting every server the workspace has files for at `initialize` walked up to 20,000
//! files first (11 s on the Linux kernel's tree) and started servers for languages nobody
//! opened (two pyrights for a kernel where only C files were edited).

use std::path::PathBuf;
use std::sync::Arc;

use lsp_bridge::lsp_types::{self as lsp, Url};
use lsp_bridge::{Bridge, jsonrpc};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::agent::EditorOptions;
use super::{
    Reply, ResponseError, Shared, attach, code_actions, codes, commands, editor_bridge_config,
};

mod known_servers;
mod last_seen;
mod registration;
pub(super) mod up_front;

use registration::{commands_key, register_late};

/// Completion trigger characters announced before any child runs: those of the built-in
/// servers (pyright, typescript-language-server, clangd, rust-analyzer, gopls). A child
/// starts after `initialize`, and a client takes trigger characters from `initialize` only
/// (a dynamic registration would add a second completion provider, so every item would show
/// twice); a character a child does not trigger on gets its ordinary answer.
const COMPLETION_TRIGGERS: [&str; 10] = [".", ":", ">", "<", "\"", "'", "/", "*", "[", "@"];

/// The parts of `initialize` the server reads, typed: a value of the wrong shape
/// (`processId: "x"`, `rootUri: 5`) is refused with `InvalidParams`, never read as absent.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct InitializeParams {
    /// Checked for its type only.
    #[serde(default, rename = "processId")]
    _process_id: Option<u32>,
    #[serde(default)]
    root_uri: Option<Url>,
    /// Checked for its type only (deprecated for `rootUri`).
    #[serde(default, rename = "rootPath")]
    _root_path: Option<String>,
    #[serde(default)]
    workspace_folders: Option<Vec<lsp::WorkspaceFolder>>,
    #[serde(default)]
    capabilities: Map<String, Value>,
    #[serde(default)]
    initialization_options: Option<Value>,
}

pub(super) async fn initialize(shared: &Arc<Shared>, params: Value) -> Reply {
    if shared.bridge.get().is_some() {
        return Err(ResponseError::new(
            codes::INVALID_REQUEST,
            "`initialize` was already received",
        ));
    }
    let params: InitializeParams = jsonrpc::decode_params("initialize", params)?;
    let folders = workspace_folders(&params)
        .or_else(|| shared.default_workspace.clone().map(|dir| vec![dir]));
    let Some(folders) = folders.filter(|folders| !folders.is_empty()) else {
        return Err(ResponseError::new(
            codes::INVALID_PARAMS,
            "no workspace: send rootUri or workspaceFolders (or start with --workspace)",
        ));
    };
    if !shared.config.editor.allow_broad_workspace
        && let Some(broad) = folders.iter().find_map(|folder| broad_folder(folder))
    {
        return Err(ResponseError::new(
            codes::INVALID_PARAMS,
            format!(
                "refusing {broad} as the workspace: the agent's tools would reach every file under it. \
                 Open a project folder, or set `allow_broad_workspace = true` under [editor] in {}",
                crate::config::Config::path_for_messages()
            ),
        ));
    }
    let _ = shared
        .client_capabilities
        .set(Value::Object(params.capabilities.clone()));
    let bridge_config =
        editor_bridge_config(&shared.config, &Value::Object(params.capabilities.clone()))
            .map_err(|error| ResponseError::new(codes::INVALID_PARAMS, format!("{error:#}")))?;
    let bridge = Bridge::new(bridge_config, folders.clone());
    let hook_shared = Arc::downgrade(shared);
    bridge.set_on_start(Arc::new(move |child| {
        if let Some(shared) = hook_shared.upgrade() {
            attach::attach_child(&shared, child);
            register_late(&shared, child);
            record_capabilities(&shared, child);
        }
    }));
    let _ = shared.bridge.set(bridge.clone());
    shared.host.set_workspace(folders[0].clone());
    publish_bridge(shared, &bridge);
    // Null is "no options"; anything that is not what we read is ignored whole, and said.
    if let Some(options) = params
        .initialization_options
        .filter(|options| !options.is_null())
    {
        match jsonrpc::decode_params::<EditorOptions>("initializationOptions", options) {
            Ok(options) => shared.host.set_options(options),
            Err(error) => {
                shared.show_error(&format!("initializationOptions ignored: {}", error.message))
            }
        }
    }
    start_file_index(shared, &folders[0]);
    super::agent::activity::watch(shared);
    let inline_completion = start_inline_completion(shared, &bridge, &folders[0]);

    let mut capabilities = Map::new();
    for child in bridge.running() {
        merge(
            &mut capabilities,
            &child.initialize_result()["capabilities"],
        );
    }
    // Features of children that have not started, for an editor that cannot get them by
    // registration.
    let client = Value::Object(params.capabilities.clone());
    let state_root = shared.host.store().ok();
    let state_root = state_root
        .as_ref()
        .and_then(|store| crate::session::store::state_root_of(store.workspace_dir()));
    let expected = up_front::expected(&bridge.config().available(), state_root);
    merge(
        &mut capabilities,
        &Value::Object(up_front::for_editor(&client, expected)),
    );
    // Our own: full document sync (we keep the buffers), UTF-16 positions, our commands, our
    // code actions, `@` completion in prompt documents.
    let mut kinds: Vec<Value> = match capabilities.get("codeActionProvider") {
        Some(Value::Object(options)) => options
            .get("codeActionKinds")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    kinds.extend(code_actions::KINDS.iter().map(|kind| json!(kind)));
    let mut code_actions = match capabilities.remove("codeActionProvider") {
        Some(Value::Object(options)) => options,
        _ => Map::new(),
    };
    code_actions.insert("codeActionKinds".into(), Value::Array(kinds));
    capabilities.insert("codeActionProvider".into(), Value::Object(code_actions));
    let completion = capabilities
        .entry("completionProvider")
        .or_insert_with(|| json!({}));
    if let Some(completion) = completion.as_object_mut() {
        let triggers = completion
            .entry("triggerCharacters")
            .or_insert_with(|| json!([]));
        if let Some(triggers) = triggers.as_array_mut() {
            for trigger in COMPLETION_TRIGGERS {
                if !triggers.contains(&json!(trigger)) {
                    triggers.push(json!(trigger));
                }
            }
        }
        // Items of a child that starts later may need resolving (documentation, edits): the
        // editor only sends `completionItem/resolve` when `initialize` said so.
        completion
            .entry("resolveProvider")
            .or_insert(Value::Bool(true));
    }
    if inline_completion {
        capabilities.insert(
            "inlineCompletionProvider".into(),
            super::inline::capability(),
        );
    }
    capabilities.insert("positionEncoding".into(), json!("utf-16"));
    capabilities.insert(
        "textDocumentSync".into(),
        json!({"openClose": true, "change": 1, "save": {"includeText": false}}),
    );
    let mut commands = capabilities
        .get("executeCommandProvider")
        .and_then(|provider| provider["commands"].as_array())
        .cloned()
        .unwrap_or_default();
    commands.extend(commands::COMMANDS.iter().map(|name| json!(name)));
    capabilities.insert(
        "executeCommandProvider".into(),
        json!({"commands": commands}),
    );
    let mut announced: std::collections::HashSet<String> = capabilities.keys().cloned().collect();
    announced.extend(bridge.running().iter().map(|child| commands_key(child)));
    *shared.announced.lock().expect("announced") = announced;
    Ok(json!({
        "capabilities": capabilities,
        "serverInfo": {"name": "agent-lsp", "version": env!("CARGO_PKG_VERSION")},
    }))
}

fn workspace_folders(params: &InitializeParams) -> Option<Vec<PathBuf>> {
    if let Some(folders) = &params.workspace_folders {
        let folders = folders
            .iter()
            .filter_map(|folder| folder.uri.to_file_path().ok())
            .collect::<Vec<_>>();
        if !folders.is_empty() {
            return Some(folders);
        }
    }
    let root = params.root_uri.as_ref()?.to_file_path().ok()?;
    Some(vec![root])
}

/// `folder` shown as the file system root or the home directory, if it is one of them (also
/// through a link or a `..`).
fn broad_folder(folder: &std::path::Path) -> Option<String> {
    let folder = folder.canonicalize().unwrap_or_else(|_| folder.to_owned());
    if folder.parent().is_none() {
        return Some(folder.display().to_string());
    }
    let home = dirs::home_dir()?;
    let home = home.canonicalize().unwrap_or(home);
    (folder == home).then(|| format!("the home directory ({})", home.display()))
}

/// Inline completion's engine, when `[completion]` names a model: grounded in this
/// connection's children, logged in the workspace's state directory. Whether it is on.
fn start_inline_completion(shared: &Arc<Shared>, bridge: &Bridge, root: &std::path::Path) -> bool {
    let config = match shared
        .config
        .completion
        .resolve(|name| std::env::var(name).ok())
    {
        Ok(Some(config)) => config,
        Ok(None) => return false,
        Err(error) => {
            shared.show_error(&format!("inline completion is off: {error:#}"));
            return false;
        }
    };
    let queries =
        lsp_bridge::queries::Queries::new(Arc::new(bridge.clone()), shared.documents().clone());
    let log = match crate::session::store::Store::for_workspace(root) {
        Ok(store) => Some(crate::completion::log::CompletionLog::in_dir(
            store.workspace_dir(),
        )),
        Err(error) => {
            tracing::warn!("inline completions are not logged: {error:#}");
            None
        }
    };
    match crate::completion::Engine::new(config, Some(queries), log) {
        Ok(engine) => shared.inline.set(Arc::new(engine)).is_ok(),
        Err(error) => {
            shared.show_error(&format!("inline completion is off: {error:#}"));
            false
        }
    }
}

/// Index the workspace's paths in the background for `@path` completion, kept current by a
/// file watcher and the editor's `didChangeWatchedFiles`.
fn start_file_index(shared: &Arc<Shared>, root: &std::path::Path) {
    let config = crate::file_index::FilesConfig::from_options(&shared.config.files);
    let index = crate::workspace::Workspace::new(root)
        .and_then(|workspace| crate::file_index::LiveIndex::start(&workspace, config, true));
    match index {
        Ok(index) => {
            let _ = shared.files.set(index);
        }
        Err(error) => shared.show_error(&format!("@path completion is off: {error:#}")),
    }
}

/// Keep a starting child's capabilities under the state root, for the next `initialize` of an
/// editor that reads capabilities there only. A workspace without a state directory keeps none.
fn record_capabilities(shared: &Shared, child: &lsp_bridge::Child) {
    let Ok(store) = shared.host.store() else {
        return;
    };
    let Some(state_root) = crate::session::store::state_root_of(store.workspace_dir()) else {
        return;
    };
    if let Err(error) = last_seen::record(state_root, child.name(), &child.initialize_result()) {
        tracing::debug!(
            server = child.name(),
            "capabilities not recorded: {error:#}"
        );
    }
}

/// Merge one child's capabilities into the union: a provider any child has is announced;
/// objects merge key by key; trigger-character lists are unioned.
pub(super) fn merge(into: &mut Map<String, Value>, from: &Value) {
    let Some(from) = from.as_object() else { return };
    for (key, value) in from {
        match (into.get_mut(key), value) {
            (None, _) => {
                into.insert(key.clone(), value.clone());
            }
            (Some(Value::Bool(false)), _) => {
                into.insert(key.clone(), value.clone());
            }
            (Some(Value::Object(existing)), Value::Object(_)) => merge(existing, value),
            (Some(Value::Array(existing)), Value::Array(more)) => {
                for item in more {
                    if !existing.contains(item) {
                        existing.push(item.clone());
                    }
                }
            }
            _ => {}
        }
    }
}

/// Offer the editor's bridge, with its warm children and the editor's unsaved buffers, to the
/// workspace's other processes (see [`crate::shared_bridge`]). A workspace without a state
/// directory simply keeps it to itself.
fn publish_bridge(shared: &Arc<Shared>, bridge: &Bridge) {
    let store = match shared.host.store() {
        Ok(store) => store,
        Err(error) => {
            tracing::info!("the bridge is not shared: {}", error.message);
            return;
        }
    };
    let published = crate::shared_bridge::SharedBridge::new(&store, "serve");
    let queries =
        lsp_bridge::queries::Queries::new(Arc::new(bridge.clone()), shared.documents.clone());
    published.publish_when_free(
        Arc::new(crate::tools::lsp::LspTools::new(queries)),
        shared.agent_runtime.clone(),
    );
    let _ = shared.shared_bridge.set(published);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_merge_as_a_union() {
        let mut caps = Map::new();
        merge(
            &mut caps,
            &json!({"hoverProvider": true, "completionProvider": {"triggerCharacters": ["."]}, "renameProvider": false}),
        );
        merge(
            &mut caps,
            &json!({"definitionProvider": true, "completionProvider": {"triggerCharacters": [".", ">"], "resolveProvider": true}, "renameProvider": {"prepareProvider": true}}),
        );
        assert_eq!(
            Value::Object(caps),
            json!({"hoverProvider": true, "definitionProvider": true, "renameProvider": {"prepareProvider": true},
                   "completionProvider": {"triggerCharacters": [".", ">"], "resolveProvider": true}})
        );
    }
}
