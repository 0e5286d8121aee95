//! The file index: the workspace paths behind `@path` completion and mentions, walked once in
//! parallel, then kept current incrementally.
//!
//! `@path` completion must answer while the programmer types, in a 100k-file monorepo, so the
//! paths are walked once (in parallel, with the `ignore` crate, the walker of ripgrep and fd)
//! and kept in memory; after that the index follows the file system through
//! [`FileIndex::apply`], which the watcher ([`LiveIndex`]) and the editor's
//! `workspace/didChangeWatchedFiles` both feed. A change never triggers a rescan of the
//! workspace: it costs one `lstat` of the changed path, plus a walk of the changed directory
//! when a directory appears or an ignore file inside it changes.
//!
//! What is indexed, and why:
//!
//! - Files *and directories* (`@src/` is a useful reference too). Directories are stored with a
//!   trailing `/`, which makes the kind part of the key and keeps a directory next to its
//!   contents in the sorted set (deleting a directory is one range removal).
//! - `.gitignore`, `.ignore`, `.git/info/exclude` and git's global excludes are honoured, also
//!   outside a git checkout (a fresh project still has its ignore files), exactly as the file
//!   tools do (`tools/search.rs`). Hidden files are included (`.github/` matters), `.git/` is
//!   not. The `[files] exclude` globs of the configuration prune further: a glob without `/`
//!   matches a name at any depth (`*.min.js`, `node_modules`), one with `/` matches the path
//!   from the root (`vendor/**`).
//! - Symlinks are checked through [`Workspace::resolve`](crate::workspace::Workspace::resolve), the one boundary check of the
//!   workspace: a link whose target stays inside is indexed with its target's kind, a link
//!   pointing out, dangling or looping is not indexed at all. Links are not descended into:
//!   a directory they point to is inside the workspace and already indexed under its real
//!   path, so descending would only list it twice (and a link to an ancestor would loop).
//! - Every indexed path is one a mention can name: paths [`Workspace::resolve`](crate::workspace::Workspace::resolve) would refuse
//!   by their spelling (a `\` in a name, say) are skipped and counted.
//!
//! Caps: at most [`FilesConfig::max_entries`] paths are kept; past that the walk stops and the
//! status says "index truncated" (which paths are kept is then whatever the parallel walk met
//! first). Queries return at most [`FilesConfig::max_candidates`] candidates.
//!
//! The rooms, from the ground up (each imports only those above it in this list):
//!
//! - `entry`: an entry's kind, its key, and how a mention spells its path.
//! - `config`: the `[files]` table.
//! - `rank`: the fuzzy ranking of paths for a query (nucleo, plus boosts).
//! - `flat`: the keys in one buffer, which every query scans.
//! - `walk`: what is admitted, and the parallel walk.
//! - `store`: [`FileIndex`] itself, filled by a full walk.
//! - `query` and `changes`: how the index answers a query, and how it follows changes.
//! - `watch`: [`LiveIndex`], the index kept current by a watcher in the background.
//! - `mentions`: `@path` mentions in prompts, parsed, resolved and completed.
//!
//! Whether a path may be touched at all is not decided here: that is
//! [`crate::workspace::Workspace::resolve`], which the walk and mentions call.

mod changes;
mod config;
mod entry;
mod flat;
pub(crate) mod mentions;
mod query;
pub(crate) mod rank;
mod store;
mod walk;
pub(crate) use walk::workspace_walker;
mod watch;

pub use changes::{ChangeKind, FileChange};
pub use config::{FilesConfig, FilesOptions};
pub use entry::{EntryKind, insert_text};
pub use rank::Candidate;
pub use store::FileIndex;
pub use watch::LiveIndex;

#[cfg(test)]
pub(crate) mod tests;
