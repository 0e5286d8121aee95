//! Paths the writing tools may not change on their own say.
//!
//! Some files run code when the programmer does something ordinary later: git runs
//! `core.fsmonitor` from `.git/config` at the next `git status`, and an executable hook in
//! `.git/hooks/` at the next commit; direnv runs `.envrc`; Neovim runs `.nvim.lua` and `.exrc`
//! (with 'exrc'). Others change what the agent itself, or the editor, will do: `.agent-lsp/`
//! (presets, the chat), `.mcp.json` (tool servers to start), editor settings folders
//! (`.vscode/` tasks and settings run commands). A prompt-injected page or file that gets the
//! model to write one of these would run code without the `shell` approval. So a write or edit
//! there takes the preset's `protected_paths` permission (`ask` unless the preset says
//! otherwise) when that is stricter than the tool's own.

use std::path::Path;

/// Names that make a path protected wherever they stand in it (a nested repository's `.git`
/// runs hooks too).
const PROTECTED_NAMES: &[(&str, &str)] = &[
    (".git", "git's configuration and hooks run commands"),
    (".agent-lsp", "the agent's own presets and settings"),
    (".mcp.json", "the tool servers an agent starts"),
    (".vscode", "editor settings and tasks can run commands"),
    (".idea", "editor settings can run commands"),
    (".zed", "editor settings can run commands"),
    (".helix", "editor settings can run commands"),
    (".nvim.lua", "Neovim runs it (with 'exrc')"),
    (".exrc", "the editor runs it (with 'exrc')"),
    (".envrc", "direnv runs it"),
];

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

/// The sentence the writing tools' descriptions carry, so the model knows before it tries.
pub(crate) const DESCRIPTION_NOTE: &str = "Files under .git/, .agent-lsp/, editor settings folders (.vscode/, .idea/, .zed/, .helix/), .mcp.json, .envrc, .exrc and .nvim.lua are protected: writing them needs the user's approval or is refused.";

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
