//! Approving the workspace's hooks files (`.agent-lsp/hooks.toml`, a Claude Code settings file
//! inside the workspace) from the editor, with the same question and the same record as
//! `agent-lsp hooks approve` (`crate::hooks::approval`), as `.mcp.json` is approved
//! (`mcp_approval.rs`):
//!
//! - **When a session is about to start** and a hooks file's current bytes are not approved,
//!   the editor is asked with `window/showMessageRequest`, naming each hook's event and
//!   command, with `Approve` and `Not now`. An approval before the session's tools are made
//!   lets the hooks run in that very session. `Not now` (or no answer) is remembered for these
//!   bytes on this connection.
//! - **`agent.hooks.approve`** asks the same question whenever the programmer wants; the hooks
//!   then run from the next session on.

use std::sync::Arc;

use serde_json::json;

use super::Host;
use super::mcp_approval::ask_to_run;
use crate::hooks::Hooks;
use crate::hooks::approval::Question;
use crate::server::codes::REQUEST_FAILED;
use crate::server::{Reply, ResponseError, Shared, internal};

impl Host {
    /// The question about this workspace's unapproved hooks files, if there is one.
    fn hooks_question(&self, shared: &Arc<Shared>) -> Option<(Question, std::path::PathBuf)> {
        let workspace = self.workspace().ok()?;
        let state_root = crate::session::store::state_root().ok()?;
        let hooks = Hooks::load(&shared.config.hooks, workspace, Some(&state_root), None);
        Some((hooks.question()?, state_root))
    }

    /// Before a session starts: ask about unapproved hooks files once per contents and
    /// connection.
    pub(super) async fn offer_hooks_approval(&self, shared: &Arc<Shared>) {
        let mut asked = self.hooks_asked.0.lock().await;
        let Some((question, state_root)) = self.hooks_question(shared) else {
            return;
        };
        if !asked.insert(question.digest()) {
            return;
        }
        let approved = ask_to_run(
            shared,
            &question.describe(),
            "A new agent session is starting.",
        )
        .await;
        if approved && let Err(error) = question.approve(&state_root) {
            shared.show_error(&format!(
                "failed to record the approval of the workspace's hooks: {error:#}"
            ));
        }
    }

    /// `agent.hooks.approve`: ask about the workspace's hooks files now, and record the answer.
    pub(crate) async fn approve_hooks(&self, shared: &Arc<Shared>) -> Reply {
        let mut asked = self.hooks_asked.0.lock().await;
        let Some((question, state_root)) = self.hooks_question(shared) else {
            return Err(ResponseError::new(
                REQUEST_FAILED,
                "the workspace has no hooks file waiting for approval (`agent-lsp hooks list` shows them)",
            ));
        };
        asked.insert(question.digest());
        let approved = ask_to_run(shared, &question.describe(), "").await;
        if approved {
            question.approve(&state_root).map_err(internal)?;
        }
        let files: Vec<_> = question
            .files
            .iter()
            .map(|(source, hooks)| json!({"file": source.name, "digest": source.digest, "hooks": hooks}))
            .collect();
        Ok(json!({"approved": approved, "files": files}))
    }
}
