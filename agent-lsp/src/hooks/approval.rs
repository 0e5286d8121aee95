//! Approving the workspace's hooks files: what the user is shown and what is recorded, the same
//! whoever asks (`agent-lsp hooks approve` on a terminal, the editor's `agent.hooks.approve`
//! and the question `serve` asks when a session would start with unapproved hooks). What is
//! approved is each file's bytes as they were read and shown, in this workspace
//! (`crate::approvals`): a file changed since is asked about again.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Hooks;
use super::config::{Source, Standing};

/// The workspace's hooks files that do not run until approved, with what each runs.
#[derive(Clone, Debug)]
pub struct Question {
    /// The workspace the approval is for.
    pub workspace: PathBuf,
    /// Each unapproved file and its hooks, as `EVENT: command` lines.
    pub files: Vec<(Arc<Source>, Vec<String>)>,
}

impl Hooks {
    /// The question to ask about this workspace's unapproved hooks files; `None` when every
    /// file runs (or there is none).
    pub fn question(&self) -> Option<Question> {
        let files: Vec<_> = self
            .sources()
            .iter()
            .filter(|source| source.standing == Standing::Unapproved)
            .map(|source| {
                let hooks = self
                    .of(source)
                    .map(|hook| format!("{}: {}", hook.event.name(), hook.command))
                    .collect();
                (source.clone(), hooks)
            })
            .collect();
        (!files.is_empty()).then(|| Question {
            workspace: self.root.clone(),
            files,
        })
    }
}

impl Question {
    /// `FILE runs these commands in WORKSPACE:` and one `  EVENT: command` line per hook, for
    /// each file.
    pub fn describe(&self) -> String {
        let mut text = String::new();
        for (source, hooks) in &self.files {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&format!(
                "{} runs these commands in {}:",
                source.name,
                self.workspace.display()
            ));
            for hook in hooks {
                text.push_str(&format!("\n  {hook}"));
            }
        }
        text
    }

    /// What names this question: the digests of the files' bytes shown, so a connection asks
    /// about the same bytes once.
    pub fn digest(&self) -> String {
        self.files
            .iter()
            .filter_map(|(source, _)| source.digest.clone())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Record the user's approval of the bytes each file was read with, in its workspace.
    pub fn approve(&self, state_root: &Path) -> anyhow::Result<()> {
        for (source, _) in &self.files {
            super::config::approve(state_root, &self.workspace, source)?;
        }
        Ok(())
    }
}
