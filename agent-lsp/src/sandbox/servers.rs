//! Language servers in a sandbox: the launcher the bridge asks for each server the config file
//! names under `[server_sandbox.NAME]`, so the server's process starts inside the policy's
//! sandbox, with the mechanism a shell command would get.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use lsp_bridge::Launcher;

use super::{Policy, Sandbox};

/// The launcher of servers held to `policy`. One sandbox per folder a server runs in, kept as
/// long as the launcher: under Landlock it owns the private temporary folder the server was
/// given, which must outlive the process.
pub fn launcher(policy: Policy) -> Launcher {
    let sandboxes: Mutex<HashMap<PathBuf, Arc<Sandbox>>> = Mutex::default();
    Launcher::new(move |program: &Path, args: &[String], root: &Path| {
        let sandbox = sandboxes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .entry(root.to_owned())
            .or_insert_with(|| Arc::new(Sandbox::detect(policy.clone(), root)))
            .clone();
        if let super::Mechanism::Unconfined(why) = sandbox.mechanism() {
            tracing::warn!(
                "the language server {} runs with every right of the user, though [server_sandbox] asks for a sandbox: {why}",
                program.display()
            );
        }
        sandbox.command(root, &program.to_string_lossy(), args)
    })
}
