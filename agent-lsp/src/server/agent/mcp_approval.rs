//! Approving the workspace's `.mcp.json` from the editor, with the same question and the same
//! record (the workspace and the digest of the bytes shown) as `agent-lsp mcp approve`
//! (`crate::mcp::approval`).
//!
//! - **When a session is about to start** whose preset runs MCP servers (`[plugins.mcp]`), and
//!   the file's current bytes are not approved, the editor is asked with
//!   `window/showMessageRequest`, naming each server and what it runs, with `Approve` and
//!   `Not now`. An approval before the session's catalog is built lets its servers join that
//!   very session. `Not now`, no answer (the request's timeout) or an editor that cannot ask
//!   all mean "not now", remembered for these bytes on this connection, so a new session does
//!   not ask again; a changed file asks again.
//! - **`agent.mcp.approve`** asks the same question whenever the programmer wants (after a
//!   `Not now`, or with the session already running); its servers then join the next session,
//!   since a running session's catalog never changes.
//!
//! The question is asked outside the session's lock, so nothing waits on it but what needs the
//! new session anyway; concurrent starters wait for the one question.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Value, json};

use super::Host;
use crate::mcp::approval::{Question, Standing, standing};
use crate::preset::{Preset, PresetDirs};
use crate::server::codes::REQUEST_FAILED;
use crate::server::{Reply, ResponseError, Shared, internal};

const APPROVE: &str = "Approve";
const NOT_NOW: &str = "Not now";

/// The digests this connection already asked about (approved or not), behind the lock that
/// makes concurrent askers wait for one question.
#[derive(Default)]
pub(crate) struct Asked(pub(super) tokio::sync::Mutex<HashSet<String>>);

impl Host {
    /// Before a session with `preset` (or the preset new sessions get) starts: ask about an
    /// unapproved `.mcp.json` once per file contents and connection. Failures to read the file
    /// are left to the session's start, which reports them.
    pub(super) async fn offer_mcp_approval(&self, shared: &Arc<Shared>, preset: Option<&Preset>) {
        let Ok(workspace) = self.workspace() else {
            return;
        };
        let loaded;
        let preset = match preset {
            Some(preset) => preset,
            None => match Preset::load(
                &self.preset_name(shared),
                &PresetDirs::for_workspace(workspace),
            ) {
                Ok(preset) => {
                    loaded = preset;
                    &loaded
                }
                Err(_) => return,
            },
        };
        let runs_mcp = preset
            .plugin_settings::<crate::mcp::McpSettings>(crate::mcp::PLUGIN)
            .ok()
            .flatten()
            .is_some_and(|settings| settings.enabled);
        if !runs_mcp {
            return;
        }
        let Ok(state_root) = crate::session::store::state_root() else {
            return;
        };
        let mut asked = self.mcp_asked.0.lock().await;
        let Ok(Standing::Unapproved(question)) = standing(workspace, &state_root) else {
            return;
        };
        if !asked.insert(question.digest.clone()) {
            return;
        }
        if ask(shared, &question, "A new agent session is starting.").await {
            record(shared, &question, &state_root);
        }
    }

    /// `agent.mcp.approve`: ask about the workspace's `.mcp.json` now, and record the answer.
    pub(crate) async fn approve_mcp(&self, shared: &Arc<Shared>) -> Reply {
        let workspace = self.workspace()?;
        let state_root = crate::session::store::state_root().map_err(internal)?;
        let mut asked = self.mcp_asked.0.lock().await;
        let question = match standing(workspace, &state_root).map_err(internal)? {
            Standing::NoFile => {
                return Err(ResponseError::new(
                    REQUEST_FAILED,
                    crate::mcp::approval::no_file().to_string(),
                ));
            }
            Standing::Approved { file, digest } => {
                return Ok(
                    json!({"approved": true, "already": true, "file": file, "digest": digest, "servers": []}),
                );
            }
            Standing::Unapproved(question) => question,
        };
        asked.insert(question.digest.clone());
        let servers: Vec<Value> = question
            .servers
            .iter()
            .map(|(name, runs)| json!({"name": name, "runs": runs}))
            .collect();
        let approved = ask(shared, &question, "").await;
        if approved {
            question.approve(&state_root).map_err(internal)?;
        }
        Ok(json!({
            "approved": approved,
            "already": false,
            "file": question.file,
            "digest": question.digest,
            "servers": servers,
        }))
    }
}

/// Ask the programmer about `question`; `true` only for `Approve`.
async fn ask(shared: &Arc<Shared>, question: &Question, context: &str) -> bool {
    ask_to_run(shared, &question.describe(), context).await
}

/// Ask the programmer whether what `described` (a workspace file and what it runs) may run,
/// with `context` before it; `true` only for `Approve`. The one question of every workspace
/// file that runs commands (`.mcp.json`, the hooks files).
pub(super) async fn ask_to_run(shared: &Arc<Shared>, described: &str, context: &str) -> bool {
    let context = if context.is_empty() {
        String::new()
    } else {
        format!("{context} ")
    };
    let message = format!(
        "agent-lsp: {context}{described}\nLet them run with your rights? Approving records these exact \
         contents; a changed file is asked about again."
    );
    let answer = shared
        .request_editor(
            "window/showMessageRequest",
            json!({"type": 2, "message": message, "actions": [{"title": APPROVE}, {"title": NOT_NOW}]}),
        )
        .await;
    match answer {
        Ok(choice) => choice["title"] == APPROVE,
        Err(error) => {
            tracing::info!(
                "the approval question got no answer ({}); not approved",
                error.message
            );
            false
        }
    }
}

/// Record an approval given at a session's start; no request answers that, so a failure is
/// shown with `window/showMessage`.
fn record(shared: &Arc<Shared>, question: &Question, state_root: &std::path::Path) {
    match question.approve(state_root) {
        Ok(()) => tracing::info!(
            "approved {} (sha256 {})",
            question.file.display(),
            question.digest
        ),
        Err(error) => shared.notify_editor(
            "window/showMessage",
            json!({"type": 1, "message": format!(
                "agent-lsp: failed to record the approval of {}: {error:#}",
                question.file.display()
            )}),
        ),
    }
}
