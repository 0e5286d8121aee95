//! Finding skills: the folders to look in, each skill folder's `SKILL.md`, and the rules that
//! decide which skill a name stands for (see the module doc of `skills`).
//!
//! A skill's own folder is opened as a [`Workspace`] of its own, so its `SKILL.md` is read with
//! the same confinement as a workspace file (a link out of the folder is refused, also one
//! swapped in between the check and the open), and the same holds for `read` later.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::{
    Found, MAX_LISTED_FILES, MAX_SKILL_FILE_BYTES, Origin, Skill, SkillsSettings, Skipped,
    front_matter, shown,
};
use crate::workspace::Workspace;

/// The workspace's folder of skills, relative to its root.
pub const WORKSPACE_SKILLS: &str = ".agent-lsp/skills";

/// The folders skills are looked for in, in precedence order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Roots {
    pub user: Option<PathBuf>,
    pub extra: Vec<PathBuf>,
    pub workspace: PathBuf,
    /// Skills that load at most (`max_skills`).
    pub max_skills: usize,
}

impl Roots {
    /// The folders of `settings` for `workspace`, with the user's beside the config file
    /// (`user_dir`, `crate::config::Config::user_dir`).
    pub fn new(settings: &SkillsSettings, workspace: &Path, user_dir: Option<&Path>) -> Roots {
        Roots {
            user: user_dir.map(|dir| dir.join("skills")),
            extra: settings.extra_paths(),
            workspace: workspace.to_owned(),
            max_skills: settings.max_skills,
        }
    }
}

/// A skill as read, before the names are settled.
struct Candidate {
    /// Which of the folders it came from (0 is the first in precedence).
    rank: usize,
    skill: Skill,
}

/// Look through every folder of `roots` (see the module doc for the rules).
pub fn discover(roots: &Roots) -> Found {
    let mut skipped = Vec::new();
    let mut candidates = Vec::new();
    let mut folders: Vec<(Origin, PathBuf)> = Vec::new();
    if let Some(user) = &roots.user {
        folders.push((Origin::User, user.clone()));
    }
    folders.extend(roots.extra.iter().map(|dir| (Origin::Extra, dir.clone())));
    match workspace_root(&roots.workspace) {
        Ok(Some(dir)) => folders.push((Origin::Workspace, dir)),
        Ok(None) => {}
        Err(reason) => skipped.push(Skipped {
            path: roots.workspace.join(WORKSPACE_SKILLS),
            origin: Origin::Workspace,
            reason,
        }),
    }
    for (rank, (origin, dir)) in folders.into_iter().enumerate() {
        scan(rank, origin, &dir, &mut candidates, &mut skipped);
    }
    settle(candidates, skipped, roots.max_skills)
}

/// The workspace's skills folder as a physical path inside it, `None` when there is none, or
/// why it is refused (a link out of the workspace).
fn workspace_root(workspace: &Path) -> Result<Option<PathBuf>, String> {
    let Ok(confined) = Workspace::new(workspace) else {
        return Ok(None);
    };
    match confined.resolve(WORKSPACE_SKILLS) {
        Ok(path) if path.is_dir() => Ok(Some(path)),
        Ok(_) => Ok(None),
        Err(error) => Err(format!(
            "{}: the workspace's skills folder is not used: {error}",
            shown(&workspace.join(WORKSPACE_SKILLS))
        )),
    }
}

/// The skill folders of one skills folder, in name order.
fn scan(
    rank: usize,
    origin: Origin,
    dir: &Path,
    candidates: &mut Vec<Candidate>,
    skipped: &mut Vec<Skipped>,
) {
    let skip = |skipped: &mut Vec<Skipped>, path: &Path, reason: String| {
        skipped.push(Skipped {
            path: path.to_owned(),
            origin,
            reason,
        });
    };
    // The folder itself may be a link (a dotfiles checkout); its skills must lie inside it.
    let root = match std::fs::canonicalize(dir) {
        Ok(root) if root.is_dir() => root,
        Ok(_) => return skip(skipped, dir, format!("{}: not a folder", shown(dir))),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return,
        Err(error) => {
            return skip(
                skipped,
                dir,
                format!("{}: cannot be read: {error}", shown(dir)),
            );
        }
    };
    let mut entries = match std::fs::read_dir(&root) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|entry| entry.file_name())
            .filter(|name| !name.to_string_lossy().starts_with('.'))
            .collect::<Vec<_>>(),
        Err(error) => {
            return skip(
                skipped,
                dir,
                format!("{}: cannot be read: {error}", shown(dir)),
            );
        }
    };
    entries.sort();
    // A link to another skill folder of the same folder is that skill again, not a second one.
    let mut seen = std::collections::BTreeSet::new();
    for name in entries {
        let path = root.join(&name);
        let is_link = std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_symlink());
        let folder = match std::fs::canonicalize(&path) {
            Ok(folder) => folder,
            Err(_) if is_link => {
                skip(
                    skipped,
                    &path,
                    format!("{}: a link whose target does not exist", shown(&path)),
                );
                continue;
            }
            Err(error) => {
                skip(
                    skipped,
                    &path,
                    format!("{}: cannot be read: {error}", shown(&path)),
                );
                continue;
            }
        };
        if !folder.is_dir() {
            // A README or a stray file beside the skills.
            continue;
        }
        if !folder.starts_with(&root) || folder == root {
            skip(
                skipped,
                &path,
                format!(
                    "{}: the skill folder is a link to {}, outside {}; a skill's folder must lie inside its skills folder",
                    shown(&path),
                    shown(&folder),
                    shown(&root)
                ),
            );
            continue;
        }
        if !seen.insert(folder.clone()) {
            continue;
        }
        match read_skill(origin, &folder) {
            Ok(skill) => candidates.push(Candidate { rank, skill }),
            Err(reason) => skip(skipped, &folder.join("SKILL.md"), reason),
        }
    }
}

/// The skill in `folder`, or why it does not load (naming the file).
fn read_skill(origin: Origin, folder: &Path) -> Result<Skill, String> {
    let (file, text) = read_skill_file(folder)?;
    let front = front_matter::parse(&text).map_err(|error| format!("{}: {error}", shown(&file)))?;
    Ok(Skill {
        name: front.name,
        description: front.description,
        origin,
        folder: folder.to_owned(),
        file,
    })
}

/// `folder/SKILL.md` and its text, read confined to `folder`.
fn read_skill_file(folder: &Path) -> Result<(PathBuf, String), String> {
    let file = folder.join("SKILL.md");
    let confined =
        Workspace::new(folder).map_err(|error| format!("{}: {error:#}", shown(folder)))?;
    let path = confined
        .resolve("SKILL.md")
        .map_err(|error| format!("{}: {error}", shown(&file)))?;
    let opened = match confined.open_read(&path) {
        Ok(opened) => opened,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("{}: the folder has no SKILL.md", shown(folder)));
        }
        Err(error) => return Err(format!("{}: cannot be read: {error}", shown(&file))),
    };
    let metadata = opened
        .metadata()
        .map_err(|error| format!("{}: cannot be read: {error}", shown(&file)))?;
    if !metadata.is_file() {
        return Err(format!("{}: not a regular file", shown(&file)));
    }
    if metadata.len() > MAX_SKILL_FILE_BYTES {
        return Err(format!(
            "{}: {} bytes; a SKILL.md of more than {MAX_SKILL_FILE_BYTES} is not read",
            shown(&file),
            metadata.len()
        ));
    }
    let mut text = String::new();
    opened
        .take(MAX_SKILL_FILE_BYTES)
        .read_to_string(&mut text)
        .map_err(|error| format!("{}: cannot be read as UTF-8 text: {error}", shown(&file)))?;
    Ok((file, text))
}

/// Settle the names: two of one folder with the same name are both skipped; otherwise the
/// first folder that has a name owns it. Then at most `max_skills`, in precedence order.
fn settle(candidates: Vec<Candidate>, mut skipped: Vec<Skipped>, max_skills: usize) -> Found {
    let mut by_name: BTreeMap<&str, Vec<&Candidate>> = BTreeMap::new();
    for candidate in &candidates {
        by_name
            .entry(&candidate.skill.name)
            .or_default()
            .push(candidate);
    }
    let mut skills = Vec::new();
    for (name, group) in by_name {
        // Candidates come in precedence order, so the first holds the owning folder's rank.
        let owner = group[0].rank;
        let owners = group.iter().filter(|c| c.rank == owner).collect::<Vec<_>>();
        let files = |list: &[&&Candidate]| {
            list.iter()
                .map(|c| shown(&c.skill.file))
                .collect::<Vec<_>>()
                .join(" and ")
        };
        if owners.len() > 1 {
            for candidate in &owners {
                let others = owners
                    .iter()
                    .filter(|other| other.skill.file != candidate.skill.file)
                    .copied()
                    .collect::<Vec<_>>();
                skipped.push(skip_of(
                    &candidate.skill,
                    format!(
                        "{}: the name `{name}` is also the name of {} in the same skills folder; neither is loaded",
                        shown(&candidate.skill.file),
                        files(&others)
                    ),
                ));
            }
        } else {
            skills.push((owner, owners[0].skill.clone()));
        }
        let winner = owners[0];
        for candidate in group.iter().filter(|c| c.rank != owner) {
            skipped.push(skip_of(
                &candidate.skill,
                format!(
                    "{}: shadowed: the name `{name}` belongs to {} ({} skills come first)",
                    shown(&candidate.skill.file),
                    shown(&winner.skill.file),
                    winner.skill.origin.as_str()
                ),
            ));
        }
    }
    skills.sort_by(|(a_rank, a), (b_rank, b)| (a_rank, &a.name).cmp(&(b_rank, &b.name)));
    for (_, skill) in skills.iter().skip(max_skills) {
        skipped.push(skip_of(
            skill,
            format!(
                "{}: over the preset's max_skills ({max_skills})",
                shown(&skill.file)
            ),
        ));
    }
    let mut skills = skills
        .into_iter()
        .take(max_skills)
        .map(|(_, skill)| skill)
        .collect::<Vec<_>>();
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    Found { skills, skipped }
}

fn skip_of(skill: &Skill, reason: String) -> Skipped {
    Skipped {
        path: skill.file.clone(),
        origin: skill.origin,
        reason,
    }
}

/// The instructions of `skill` as its `SKILL.md` says them now, at most `max_bytes` of them
/// (cut at a character boundary, with a note), or why they cannot be read.
pub fn body_of(skill: &Skill, max_bytes: usize) -> Result<String, String> {
    let (file, text) = read_skill_file(&skill.folder)?;
    let front = front_matter::parse(&text).map_err(|error| format!("{}: {error}", shown(&file)))?;
    let body = front.body;
    if body.len() <= max_bytes {
        return Ok(body);
    }
    let mut end = max_bytes;
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    Ok(format!(
        "{}\n[… cut: the instructions have {} bytes and only the first {max_bytes} are shown; `read` {} for the rest]",
        &body[..end],
        body.len(),
        shown(&file)
    ))
}

/// The files of a skill's folder (not `SKILL.md`, not hidden ones), as absolute paths in name
/// order, at most [`MAX_LISTED_FILES`]; and whether there were more. A link is listed only
/// when it leads to a file inside the folder, since `read` refuses the others.
pub fn files_of(folder: &Path) -> (Vec<PathBuf>, bool) {
    let mut files = Vec::new();
    let mut more = false;
    let mut pending = vec![(folder.to_owned(), 0)];
    while let Some((dir, depth)) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries = entries
            .filter_map(Result::ok)
            .filter(|entry| !entry.file_name().to_string_lossy().starts_with('.'))
            .collect::<Vec<_>>();
        // Reversed, so that popping visits the folders in name order.
        entries.sort_by_key(|entry| std::cmp::Reverse(entry.file_name()));
        for entry in entries {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if depth < 8 {
                    pending.push((path, depth + 1));
                }
                continue;
            }
            let inside = !kind.is_symlink()
                || std::fs::canonicalize(&path)
                    .is_ok_and(|target| target.starts_with(folder) && target.is_file());
            if !inside || (depth == 0 && entry.file_name() == "SKILL.md") {
                continue;
            }
            if files.len() == MAX_LISTED_FILES {
                more = true;
                break;
            }
            files.push(path);
        }
    }
    files.sort();
    (files, more)
}
