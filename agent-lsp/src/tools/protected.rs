//! Paths the writing tools may not change on their own say.
//!
//! Some files run code when the programmer does something ordinary later: git runs
//! `core.fsmonitor` from `.git/config` at the next `git status`, and an executable hook in
//! `.git/hooks/` at the next commit; direnv runs `.envrc`; Neovim runs `.nvim.lua` and `.exrc`
//! (with 'exrc'). Others change what the agent itself, or the editor, will do: `.agent-lsp/`
//! (presets, the chat, hooks), `.claude/` (Claude Code's settings, whose hooks this agent and
//! Claude Code run), `.mcp.json` (tool servers to start), editor settings folders
//! (`.vscode/` tasks and settings run commands). A prompt-injected page or file that gets the
//! model to write one of these would run code without the `shell` approval. So a write or edit
//! there takes the preset's `protected_paths` permission (`ask` unless the preset says
//! otherwise) when that is stricter than the tool's own.

use std::path::Path;

use crate::sandbox::PROTECTED_NAMES;

/// Why `relative` (a path relative to the workspace root, as `resolve` makes it physical) is
/// protected, if it is.
pub(crate) fn protected_reason(relative: &Path) -> Option<(&'static str, &'static str)> {
    relative.components().find_map(|component| {
        let name = component.as_os_str().to_str()?;
        PROTECTED_NAMES
            .iter()
            .find(|(protected, _)| *protected == name)
            .copied()
    })
}

/// Whether `path` (physical) lies in the hooks folder git is configured to run from
/// (`core.hooksPath`, as husky and lefthook set it: `.husky/`), which runs commands at the next
/// commit as `.git/hooks/` does. Asked of git itself, so the repository's, the user's and the
/// system's configuration all count; without git, nothing runs hooks.
pub(crate) fn in_configured_hooks(root: &Path, path: &Path) -> bool {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|output| output.status.success())
            .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
            .filter(|text| !text.is_empty())
    };
    let Some(hooks) = git(&["config", "--get", "core.hooksPath"]) else {
        return false;
    };
    // A relative hooks path is relative to the working tree's top.
    let hooks = match Path::new(&hooks) {
        absolute if absolute.is_absolute() => absolute.to_path_buf(),
        relative => match git(&["rev-parse", "--show-toplevel"]) {
            Some(top) => Path::new(&top).join(relative),
            None => return false,
        },
    };
    // The hooks folder may not exist yet: judge it by its nearest existing ancestor.
    let hooks = hooks
        .canonicalize()
        .or_else(|_| {
            let name = hooks.file_name().unwrap_or_default().to_owned();
            hooks
                .parent()
                .unwrap_or(&hooks)
                .canonicalize()
                .map(|parent| parent.join(name))
        })
        .unwrap_or(hooks);
    path.starts_with(&hooks)
}

/// Why a path in the configured hooks folder is protected.
pub(crate) const HOOKS_REASON: &str = "git runs the hooks in it (core.hooksPath)";

/// The sentence the writing tools' descriptions carry, so the model knows before it tries.
pub(crate) const DESCRIPTION_NOTE: &str = "Files under .git/, the hooks folder git is configured to use (core.hooksPath, e.g. .husky/), .agent-lsp/, .claude/, editor settings folders (.vscode/, .idea/, .zed/, .helix/), .mcp.json, .envrc, .exrc and .nvim.lua are protected: writing them needs the user's approval or is refused.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_names_count_wherever_they_stand() {
        for path in [
            ".git/config",
            ".git/hooks/pre-commit",
            ".git",
            "vendor/lib/.git/config",
            ".vscode/tasks.json",
            ".mcp.json",
            ".claude/settings.json",
            ".agent-lsp/presets/mine.toml",
            "sub/.envrc",
        ] {
            assert!(protected_reason(Path::new(path)).is_some(), "{path}");
        }
        for path in [
            "src/git/config",
            ".gitignore",
            ".github/x.yml",
            "docs/.vscode.md",
            "a.git",
        ] {
            assert!(protected_reason(Path::new(path)).is_none(), "{path}");
        }
    }
}
