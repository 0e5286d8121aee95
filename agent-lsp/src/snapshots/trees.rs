//! Reading checkpoints back: the files of one, the paths that differ between two (equal
//! subtrees skipped, so a one-file change costs the trees on its path), and blobs.

use std::collections::BTreeMap;

use anyhow::Context;
use gix::ObjectId;
use gix::bstr::ByteSlice;
use gix::objs::tree::EntryKind;

use super::{Entry, FileKind, Files};

/// The `files` and `buffers` trees of checkpoint `id`.
fn trees_of(repo: &gix::Repository, id: &str) -> anyhow::Result<(ObjectId, Option<ObjectId>)> {
    let id =
        ObjectId::from_hex(id.as_bytes()).with_context(|| format!("`{id}` is no checkpoint id"))?;
    let commit = repo
        .find_commit(id)
        .map_err(|error| anyhow::anyhow!("checkpoint {id} is not in the store: {error}"))?;
    let root = commit
        .tree_id()
        .map_err(|error| anyhow::anyhow!("checkpoint {id} is damaged: {error}"))?;
    let root = find_tree_entries(repo, root.detach())?;
    let files = root
        .iter()
        .find(|(name, ..)| name == "files")
        .map(|(_, id, _)| *id)
        .with_context(|| format!("checkpoint {id} has no files"))?;
    let buffers = root
        .iter()
        .find(|(name, ..)| name == "buffers")
        .map(|(_, id, _)| *id);
    Ok((files, buffers))
}

fn find_tree_entries(
    repo: &gix::Repository,
    id: ObjectId,
) -> anyhow::Result<Vec<(String, ObjectId, EntryKind)>> {
    let tree = repo
        .find_tree(id)
        .map_err(|error| anyhow::anyhow!("tree {id} is not in the store: {error}"))?;
    let decoded = tree
        .decode()
        .map_err(|error| anyhow::anyhow!("tree {id} is damaged: {error}"))?;
    Ok(decoded
        .entries
        .iter()
        .map(|entry| {
            (
                entry.filename.to_str_lossy().into_owned(),
                entry.oid.to_owned(),
                entry.mode.kind(),
            )
        })
        .collect())
}

/// Every file under tree `id`, with `prefix` before its path.
fn flatten(
    repo: &gix::Repository,
    id: ObjectId,
    prefix: &str,
    out: &mut BTreeMap<String, Entry>,
) -> anyhow::Result<()> {
    for (name, oid, kind) in find_tree_entries(repo, id)? {
        let path = format!("{prefix}{name}");
        match FileKind::of_entry(kind) {
            Some(kind) => {
                out.insert(
                    path,
                    Entry {
                        id: oid.to_string(),
                        kind,
                    },
                );
            }
            None if kind == EntryKind::Tree => flatten(repo, oid, &format!("{path}/"), out)?,
            None => {}
        }
    }
    Ok(())
}

pub(super) fn files_of(repo: &gix::Repository, id: &str) -> anyhow::Result<Files> {
    let (files, buffers) = trees_of(repo, id)?;
    let mut out = Files::default();
    flatten(repo, files, "", &mut out.disk)?;
    if let Some(buffers) = buffers {
        flatten(repo, buffers, "", &mut out.buffers)?;
    }
    Ok(out)
}

/// The paths that differ between trees `a` and `b` (either may be absent), skipping equal
/// subtrees: a one-file change costs the trees on its path.
fn diff(
    repo: &gix::Repository,
    a: Option<ObjectId>,
    b: Option<ObjectId>,
    prefix: &str,
    out: &mut Vec<String>,
) -> anyhow::Result<()> {
    if a == b {
        return Ok(());
    }
    let list = |id: Option<ObjectId>| -> anyhow::Result<BTreeMap<String, (ObjectId, EntryKind)>> {
        Ok(match id {
            Some(id) => find_tree_entries(repo, id)?
                .into_iter()
                .map(|(name, oid, kind)| (name, (oid, kind)))
                .collect(),
            None => BTreeMap::new(),
        })
    };
    let (left, right) = (list(a)?, list(b)?);
    let names: std::collections::BTreeSet<&String> = left.keys().chain(right.keys()).collect();
    for name in names {
        let (l, r) = (left.get(name), right.get(name));
        if l == r {
            continue;
        }
        let path = format!("{prefix}{name}");
        let tree = |side: Option<&(ObjectId, EntryKind)>| {
            side.filter(|(_, kind)| *kind == EntryKind::Tree)
                .map(|(id, _)| *id)
        };
        let (lt, rt) = (tree(l), tree(r));
        if lt.is_some() || rt.is_some() {
            diff(repo, lt, rt, &format!("{path}/"), out)?;
        }
        let blob = |side: Option<&(ObjectId, EntryKind)>| {
            side.filter(|(_, kind)| *kind != EntryKind::Tree).copied()
        };
        if blob(l) != blob(r) {
            out.push(path);
        }
    }
    Ok(())
}

pub(super) fn changes(repo: &gix::Repository, from: &str, to: &str) -> anyhow::Result<Vec<String>> {
    let ((from_files, from_buffers), (to_files, to_buffers)) =
        (trees_of(repo, from)?, trees_of(repo, to)?);
    let mut candidates = Vec::new();
    diff(repo, Some(from_files), Some(to_files), "", &mut candidates)?;
    diff(repo, from_buffers, to_buffers, "", &mut candidates)?;
    candidates.sort();
    candidates.dedup();
    if from_buffers.is_none() && to_buffers.is_none() {
        return Ok(candidates);
    }
    // A path whose buffer hid a change on disk (or the other way) is a change only when
    // what the user saw differs.
    let (before, after) = (files_of(repo, from)?, files_of(repo, to)?);
    candidates.retain(|path| before.effective(path) != after.effective(path));
    Ok(candidates)
}

pub(super) fn blob(repo: &gix::Repository, id: &str) -> anyhow::Result<Vec<u8>> {
    let oid = ObjectId::from_hex(id.as_bytes()).with_context(|| format!("`{id}` is no blob id"))?;
    let blob = repo
        .find_blob(oid)
        .map_err(|error| anyhow::anyhow!("blob {id} is not in the checkpoint store: {error}"))?;
    Ok(blob.data.clone())
}
