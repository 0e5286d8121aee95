//! Where presets are found by name, and where new ones are saved.
//!
//! Three places hold presets: the user's (`presets/` in the user's agent-lsp folder, beside the
//! config file: `~/.config/agent-lsp/presets/` unless `$AGENT_LSP_CONFIG` names a file
//! elsewhere), the built-ins (compiled in), and the workspace's (`.agent-lsp/presets/`). A name
//! is looked up in that order, and the first preset of that name is used; the others of the
//! same name are shadowed, and `agent-lsp preset list` shows which shadows which.
//!
//! The order is one of trust. A user preset may replace a built-in one (copying `standard` and
//! changing it is what `agent-lsp preset new` is for). A workspace preset only adds names: it
//! arrives with a clone, and a repository whose `.agent-lsp/presets/standard.toml` allowed
//! `shell` would otherwise change what `agent-lsp run`, or an editor opening the folder, lets
//! the agent do without asking. This is the reason `.agent-lsp/` is a protected path.
//!
//! A preset's name is its file name without `.toml`: 1 to 64 characters of `a-z`, `0-9`, `-`
//! and `_`, starting with a letter or a digit, so a name can never climb out of its folder.

use std::io;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use super::{BUILTIN, Preset};
use crate::workspace::Workspace;

/// The workspace's presets folder, relative to its root.
pub const WORKSPACE_PRESETS_DIR: &str = ".agent-lsp/presets";

/// The longest preset name.
pub const MAX_NAME_LEN: usize = 64;

/// Where a preset comes from, in lookup order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// The user's presets folder, looked up first: a user preset may replace a built-in one.
    User,
    /// Compiled into the binary.
    BuiltIn,
    /// The workspace's `.agent-lsp/presets/`, looked up last: it arrives with a clone, so it only
    /// adds names and never replaces a trusted preset.
    Workspace,
}

impl Source {
    /// The name `agent-lsp preset list` and errors show (`user`, `built-in`, `workspace`).
    pub fn as_str(self) -> &'static str {
        match self {
            Source::User => "user",
            Source::BuiltIn => "built-in",
            Source::Workspace => "workspace",
        }
    }
}

/// Where a new preset is saved.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, clap::ValueEnum, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The user's presets folder: usable in every workspace.
    #[default]
    User,
    /// The workspace's `.agent-lsp/presets/`: usable in this workspace, and shared with whoever
    /// gets the folder.
    Workspace,
}

impl Scope {
    /// Where a preset saved in this scope is later found.
    pub fn source(self) -> Source {
        match self {
            Scope::User => Source::User,
            Scope::Workspace => Source::Workspace,
        }
    }
}

/// The two folders presets are read from besides the built-ins; `None` when there is no such
/// folder (no config directory is known, or no workspace).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PresetDirs {
    /// The user's presets folder, beside the config file.
    pub user: Option<PathBuf>,
    /// The workspace's `.agent-lsp/presets/`.
    pub workspace: Option<PathBuf>,
}

impl PresetDirs {
    /// The user's presets folder and `workspace`'s.
    pub fn for_workspace(workspace: &Path) -> PresetDirs {
        PresetDirs {
            user: crate::config::Config::user_dir().map(|dir| dir.join("presets")),
            workspace: Some(workspace.join(WORKSPACE_PRESETS_DIR)),
        }
    }

    /// Only the built-ins (tests, and sessions that name no workspace).
    pub fn builtin_only() -> PresetDirs {
        PresetDirs::default()
    }

    /// The folder of `scope`, or an error saying why there is none.
    pub fn dir(&self, scope: Scope) -> anyhow::Result<&Path> {
        match scope {
            Scope::User => self.user.as_deref().with_context(|| {
                format!(
                    "no user presets folder: no config directory is known (set {})",
                    crate::config::CONFIG_ENV
                )
            }),
            Scope::Workspace => self
                .workspace
                .as_deref()
                .context("no workspace presets folder: there is no workspace"),
        }
    }

    /// The file a preset named `name` has (or would have) in `scope`.
    pub fn file(&self, scope: Scope, name: &str) -> anyhow::Result<PathBuf> {
        check_name(name)?;
        Ok(self.dir(scope)?.join(format!("{name}.toml")))
    }
}

/// A preset found by name, not yet parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// The name it was looked up by: its file name without `.toml`.
    pub name: String,
    /// Where it was found, which decides what it shadows.
    pub source: Source,
    /// The file, for user and workspace presets.
    pub path: Option<PathBuf>,
    /// The preset's TOML, as read.
    pub text: String,
}

impl Found {
    /// How errors name it: the file's path, or `presets/NAME.toml` for a built-in.
    pub fn origin(&self) -> String {
        match &self.path {
            Some(path) => path.display().to_string(),
            None => format!("presets/{}.toml", self.name),
        }
    }

    /// Parse the text; errors name the file (or the built-in) it came from.
    pub fn parse(&self) -> anyhow::Result<Preset> {
        Preset::parse(&self.name, &self.origin(), &self.text)
    }
}

/// Whether `name` may name a preset; the error says what a name may hold.
pub fn check_name(name: &str) -> anyhow::Result<()> {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_';
    let starts_well = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !starts_well || name.len() > MAX_NAME_LEN || !name.chars().all(allowed) {
        bail!(
            "`{name}` is not a preset name: a name is 1 to {MAX_NAME_LEN} characters of a-z, 0-9, `-` and `_`, starting with a letter or a digit"
        );
    }
    Ok(())
}

/// Whether `name_or_path` is a path to a preset file rather than a name.
pub fn is_path(name_or_path: &str) -> bool {
    name_or_path.contains('/') || name_or_path.ends_with(".toml")
}

/// The text of built-in `name`.
pub fn builtin_text(name: &str) -> Option<&'static str> {
    BUILTIN
        .iter()
        .find(|(builtin, _)| *builtin == name)
        .map(|(_, text)| *text)
}

/// Every preset named `name`, in lookup order: the first is the one used.
pub fn candidates(name: &str, dirs: &PresetDirs) -> anyhow::Result<Vec<Found>> {
    check_name(name)?;
    let mut found = Vec::new();
    for source in [Source::User, Source::BuiltIn, Source::Workspace] {
        let file = match source {
            Source::User => dirs.user.as_deref(),
            Source::Workspace => dirs.workspace.as_deref(),
            Source::BuiltIn => {
                if let Some(text) = builtin_text(name) {
                    found.push(Found {
                        name: name.to_owned(),
                        source,
                        path: None,
                        text: text.to_owned(),
                    });
                }
                continue;
            }
        }
        .map(|dir| dir.join(format!("{name}.toml")));
        let Some(path) = file else { continue };
        if let Some(text) = read_preset_file(&path)? {
            found.push(Found {
                name: name.to_owned(),
                source,
                path: Some(path),
                text,
            });
        }
    }
    Ok(found)
}

/// The preset `name` stands for, or an error listing the names there are.
pub fn find(name: &str, dirs: &PresetDirs) -> anyhow::Result<Found> {
    let mut found = candidates(name, dirs)?;
    if found.is_empty() {
        let mut names: Vec<String> = list(dirs)?
            .into_iter()
            .map(|listed| listed.found.name)
            .collect();
        names.dedup();
        bail!(
            "no preset named `{name}`; the presets are {} (see `agent-lsp preset list`), or give a path to a .toml file",
            names.join(", ")
        );
    }
    let first = found.remove(0);
    if let Some(shadowed) = found
        .iter()
        .find(|other| other.source == Source::Workspace && first.source != Source::Workspace)
    {
        tracing::warn!(
            preset = name,
            used = first.source.as_str(),
            ignored = %shadowed.origin(),
            "a workspace preset never replaces a user or built-in preset of the same name"
        );
    }
    Ok(first)
}

/// A preset file's text, `None` when there is no such file.
fn read_preset_file(path: &Path) -> anyhow::Result<Option<String>> {
    // A workspace's presets come with the repository: only a regular file, and a bounded one.
    const MAX_PRESET: u64 = 1 << 20;
    match crate::workspace::read_regular(path, MAX_PRESET) {
        Ok(None) => Ok(None),
        Ok(Some((_, size))) if size > MAX_PRESET => anyhow::bail!(
            "preset file {} is not read: {size} bytes, more than {} KiB",
            path.display(),
            MAX_PRESET >> 10
        ),
        Ok(Some((bytes, _))) => String::from_utf8(bytes)
            .map(Some)
            .with_context(|| format!("preset file {} is not UTF-8", path.display())),
        Err(error) => {
            Err(error).with_context(|| format!("failed to read preset file {}", path.display()))
        }
    }
}

/// One preset of the listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    /// The preset itself.
    pub found: Found,
    /// Where the preset used for this name comes from, when it is not this one.
    pub shadowed_by: Option<Source>,
    /// The sources of the presets of the same name this one shadows.
    pub shadows: Vec<Source>,
}

impl Listed {
    /// The preset's name.
    pub fn name(&self) -> &str {
        &self.found.name
    }
}

/// Every preset there is, sorted by name and, within a name, in lookup order. Files in the
/// presets folders whose names are not preset names are left out; unreadable ones are errors.
pub fn list(dirs: &PresetDirs) -> anyhow::Result<Vec<Listed>> {
    let mut names: Vec<String> = BUILTIN.iter().map(|(name, _)| (*name).to_owned()).collect();
    for dir in [&dirs.user, &dirs.workspace].into_iter().flatten() {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
            Err(error) => {
                return Err(error)
                    .with_context(|| format!("failed to read presets folder {}", dir.display()));
            }
        };
        for entry in entries {
            let entry = entry.with_context(|| format!("failed to read {}", dir.display()))?;
            let file_name = entry.file_name();
            let Some(name) = file_name
                .to_str()
                .and_then(|file_name| file_name.strip_suffix(".toml"))
            else {
                continue;
            };
            if check_name(name).is_ok() {
                names.push(name.to_owned());
            }
        }
    }
    names.sort();
    names.dedup();
    let mut listed = Vec::new();
    for name in names {
        let found = candidates(&name, dirs)?;
        let used = found.first().map(|first| first.source);
        for (index, preset) in found.iter().enumerate() {
            listed.push(Listed {
                found: preset.clone(),
                shadowed_by: used.filter(|_| index > 0),
                shadows: if index == 0 {
                    found[1..].iter().map(|other| other.source).collect()
                } else {
                    Vec::new()
                },
            });
        }
    }
    Ok(listed)
}

/// Save `text` as preset `name` in `dir` (made when missing), atomically: readers see the old
/// file or the new one. Without `overwrite` an existing file is an error, and is never replaced,
/// also when it appears while the new one is written. The file is written beneath a descriptor
/// of `dir`, so nothing is written elsewhere through a link on the way from that descriptor;
/// with `within`, the folder itself, once opened, must be inside that (canonical) folder, which
/// is how a workspace preset stays in its workspace. Returns the file's path.
pub fn save(
    dir: &Path,
    name: &str,
    text: &str,
    overwrite: bool,
    within: Option<&Path>,
) -> anyhow::Result<PathBuf> {
    check_name(name)?;
    std::fs::create_dir_all(dir)
        .with_context(|| format!("failed to make presets folder {}", dir.display()))?;
    let folder = Workspace::new(dir)?;
    if let Some(within) = within
        && !folder.root().starts_with(within)
    {
        bail!(
            "presets folder {} is not inside {}; nothing was written",
            folder.root().display(),
            within.display()
        );
    }
    let path = folder.root().join(format!("{name}.toml"));
    let written = if overwrite {
        folder.write_atomically(&path, text.as_bytes())
    } else {
        folder.create_atomically(&path, text.as_bytes())
    };
    match written {
        Ok(()) => Ok(path),
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => bail!(
            "preset `{name}` already exists ({}); choose another name, or change that file",
            path.display()
        ),
        Err(error) => {
            Err(error).with_context(|| format!("failed to write preset file {}", path.display()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs(root: &Path) -> PresetDirs {
        PresetDirs {
            user: Some(root.join("user")),
            workspace: Some(root.join("workspace")),
        }
    }

    fn minimal_with(description: &str) -> String {
        builtin_text("minimal").unwrap().replace(
            "description = \"File tools without shell; no thinking; no plugins.\"",
            &format!("description = {description:?}"),
        )
    }

    #[test]
    fn names_are_file_names_that_stay_in_their_folder() {
        for good in ["a", "standard", "rust-review", "my_preset2", "0day"] {
            check_name(good).unwrap();
        }
        for bad in [
            "",
            "..",
            ".hidden",
            "a/b",
            "../x",
            "Standard",
            "a b",
            "-x",
            "_x",
            "x.toml",
            "é",
            &"x".repeat(65),
        ] {
            let error = check_name(bad).unwrap_err().to_string();
            assert!(error.contains("is not a preset name"), "{bad}: {error}");
        }
        assert!(is_path("./x") && is_path("x.toml") && !is_path("x"));
    }

    #[test]
    fn user_shadows_built_in_and_workspace_only_adds_names() {
        let root = tempfile::tempdir().unwrap();
        let dirs = dirs(root.path());
        assert_eq!(find("minimal", &dirs).unwrap().source, Source::BuiltIn);

        // A workspace preset adds a name, and is found by it.
        save(
            dirs.workspace.as_deref().unwrap(),
            "review",
            &minimal_with("ws review"),
            false,
            None,
        )
        .unwrap();
        let review = find("review", &dirs).unwrap();
        assert_eq!(review.source, Source::Workspace);
        assert_eq!(review.parse().unwrap().file.description, "ws review");

        // A workspace preset named like a built-in is not used.
        save(
            dirs.workspace.as_deref().unwrap(),
            "minimal",
            &minimal_with("ws minimal"),
            false,
            None,
        )
        .unwrap();
        assert_eq!(find("minimal", &dirs).unwrap().source, Source::BuiltIn);

        // A user preset replaces the built-in, and a workspace preset of its name.
        let user = dirs.user.as_deref().unwrap();
        save(user, "minimal", &minimal_with("my minimal"), false, None).unwrap();
        save(user, "review", &minimal_with("my review"), false, None).unwrap();
        assert_eq!(find("minimal", &dirs).unwrap().source, Source::User);
        assert_eq!(find("review", &dirs).unwrap().source, Source::User);

        let listed = list(&dirs).unwrap();
        let row = |name: &str, source: Source| {
            listed
                .iter()
                .find(|entry| entry.name() == name && entry.found.source == source)
                .map(|entry| (entry.shadowed_by, entry.shadows.clone()))
                .unwrap()
        };
        assert_eq!(
            row("minimal", Source::User),
            (None, vec![Source::BuiltIn, Source::Workspace])
        );
        assert_eq!(
            row("minimal", Source::BuiltIn),
            (Some(Source::User), vec![])
        );
        assert_eq!(
            row("minimal", Source::Workspace),
            (Some(Source::User), vec![])
        );
        assert_eq!(row("standard", Source::BuiltIn), (None, vec![]));
        let order: Vec<_> = listed
            .iter()
            .map(|entry| (entry.name(), entry.found.source))
            .collect();
        assert_eq!(
            order,
            [
                ("code", Source::BuiltIn),
                ("creative", Source::BuiltIn),
                ("explore", Source::BuiltIn),
                ("minimal", Source::User),
                ("minimal", Source::BuiltIn),
                ("minimal", Source::Workspace),
                ("readonly", Source::BuiltIn),
                ("review", Source::User),
                ("review", Source::Workspace),
                ("standard", Source::BuiltIn),
            ]
        );
    }

    #[test]
    fn an_unknown_name_lists_the_names_there_are() {
        let root = tempfile::tempdir().unwrap();
        let dirs = dirs(root.path());
        save(
            dirs.user.as_deref().unwrap(),
            "mine",
            &minimal_with("m"),
            false,
            None,
        )
        .unwrap();
        // Files that are not presets by name are left out of the listing.
        std::fs::write(root.path().join("user/Notes.toml"), "x").unwrap();
        std::fs::write(root.path().join("user/readme.txt"), "x").unwrap();
        let error = find("nonesuch", &dirs).unwrap_err().to_string();
        assert!(
            error.contains("code, creative, explore, mine, minimal, readonly, standard"),
            "{error}"
        );
        let error = find("../etc/passwd", &dirs).unwrap_err().to_string();
        assert!(error.contains("is not a preset name"), "{error}");
    }

    #[test]
    fn saving_refuses_to_overwrite_unless_asked() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("deep/presets");
        let path = save(&dir, "a", "one", false, None).unwrap();
        assert_eq!(path, dir.canonicalize().unwrap().join("a.toml"));
        let error = save(&dir, "a", "two", false, None).unwrap_err().to_string();
        assert!(error.contains("already exists"), "{error}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one");
        save(&dir, "a", "three", true, None).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "three");
        assert!(save(&dir, "../b", "x", true, None).is_err());
        assert!(!root.path().join("deep/b.toml").exists());
    }
}
