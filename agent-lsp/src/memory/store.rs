//! One memory file: append-only JSONL, one [`Record`] per line, replayed on open.
//!
//! It keeps the session log's crash rules (see `session/log.rs`): a record is written with one
//! `write_all` of `json + "\n"` and `fsync`ed before the change is reported, so a crash can only
//! leave a torn last line, which the next writer cuts; a failed write is cut back to the last
//! whole line at once. Several processes write the same file (the editor's server, a terminal
//! `agent-lsp memory forget`, a `run`), so a writer holds an exclusive `flock` only for one
//! change: it reads the file, checks the change against what is there (ids, caps), appends, and
//! lets go. Readers take no lock and ignore a torn tail without repairing it.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};

use super::{Memory, Record, Scope};

/// The memories of one scope, as replayed from its file.
#[derive(Clone, Debug, Default)]
pub struct Replayed {
    /// The memories now in force, in the order they were first remembered.
    pub memories: Vec<Memory>,
    /// The highest id number ever given in this file (forgotten ones included), so no id is
    /// given twice.
    pub last_number: u64,
}

/// The file of one scope.
#[derive(Clone, Debug)]
pub struct MemoryFile {
    path: PathBuf,
    scope: Scope,
}

impl MemoryFile {
    pub fn new(path: PathBuf, scope: Scope) -> MemoryFile {
        MemoryFile { path, scope }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn scope(&self) -> Scope {
        self.scope
    }

    /// The memories in the file, without locking or changing it (a missing file has none).
    pub fn read(&self) -> anyhow::Result<Replayed> {
        let mut bytes = Vec::new();
        match File::open(&self.path) {
            Ok(mut file) => file
                .read_to_end(&mut bytes)
                .with_context(|| format!("failed to read {}", self.path.display()))?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Replayed::default());
            }
            Err(error) => {
                return Err(error)
                    .with_context(|| format!("failed to open {}", self.path.display()));
            }
        };
        let (replayed, _) = self.replay(&bytes)?;
        Ok(replayed)
    }

    /// Change the file under its lock: `change` sees the memories as they are and returns the
    /// record to append (or an error, and nothing is written). A torn tail a crash left is cut
    /// first.
    pub fn change<T>(
        &self,
        change: impl FnOnce(&Replayed) -> anyhow::Result<(Record, T)>,
    ) -> anyhow::Result<T> {
        if let Some(parent) = self.path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("failed to create {}", parent.display()))?;
        }
        // Memories are private notes: the file is readable by its owner only.
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&self.path)
            .with_context(|| format!("failed to open {}", self.path.display()))?;
        file.lock()
            .with_context(|| format!("failed to lock {}", self.path.display()))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .with_context(|| format!("failed to read {}", self.path.display()))?;
        let (replayed, valid_len) = self.replay(&bytes)?;
        if valid_len < bytes.len() as u64 {
            tracing::warn!(
                path = %self.path.display(),
                bytes = bytes.len() as u64 - valid_len,
                "cutting a torn last line left by an interrupted write"
            );
            file.set_len(valid_len)
                .and_then(|()| file.sync_all())
                .with_context(|| {
                    format!("failed to cut the torn tail of {}", self.path.display())
                })?;
        }
        let (record, answer) = change(&replayed)?;
        let mut line = serde_json::to_string(&record).context("failed to serialize a memory")?;
        line.push('\n');
        let written = file
            .write_all(line.as_bytes())
            .and_then(|()| file.sync_data());
        if let Err(error) = written {
            // Leave whole lines only, so the next record is not glued onto a partial one.
            let _ = file.set_len(valid_len);
            return Err(error).with_context(|| format!("failed to write {}", self.path.display()));
        }
        if valid_len == 0 {
            // The file's first record: make its directory entry durable too (best effort, as not
            // every filesystem lets a directory be opened for syncing).
            if let Some(parent) = self.path.parent()
                && let Ok(dir) = File::open(parent)
            {
                let _ = dir.sync_all();
            }
        }
        Ok(answer)
    }

    /// Replay whole lines into memories; returns them and the length of the part of `bytes` that
    /// is kept. The last line is torn when it has no newline or does not parse (a crash mid-write
    /// leaves a prefix of a line); anything wrong before it is corruption, named by its line.
    fn replay(&self, bytes: &[u8]) -> anyhow::Result<(Replayed, u64)> {
        let mut replayed = Replayed::default();
        let mut offset = 0usize;
        let mut line_number = 0usize;
        while offset < bytes.len() {
            line_number += 1;
            let Some(end) = bytes[offset..]
                .iter()
                .position(|&byte| byte == b'\n')
                .map(|at| offset + at + 1)
            else {
                // No newline: a write a crash interrupted, never acknowledged.
                break;
            };
            let corrupt = |error: anyhow::Error| {
                anyhow!(
                    "memory file {} is corrupt at line {line_number}: {error:#}; fix or delete that line",
                    self.path.display()
                )
            };
            match parse_line(&bytes[offset..end]) {
                // A last line that does not parse is cut as torn too: no record depends on it,
                // and a file that cannot be opened would stop every session's memory.
                Err(_) if end == bytes.len() => break,
                Err(error) => return Err(corrupt(error)),
                Ok(record) => apply(&mut replayed, record, self.scope).map_err(corrupt)?,
            }
            offset = end;
        }
        Ok((replayed, offset as u64))
    }
}

fn parse_line(line: &[u8]) -> anyhow::Result<Record> {
    let text = std::str::from_utf8(line).context("it is not UTF-8")?;
    serde_json::from_str(text.trim_end_matches('\n')).context("it is not a memory record")
}

/// Apply one record to what the lines before it built.
fn apply(replayed: &mut Replayed, record: Record, scope: Scope) -> anyhow::Result<()> {
    let known = |replayed: &Replayed, id: &str| {
        replayed
            .memories
            .iter()
            .position(|memory| memory.id == id)
            .ok_or_else(|| anyhow!("`{id}` is not a memory in force here"))
    };
    match record {
        Record::Remember {
            id,
            scope: record_scope,
            text,
            provenance,
        } => {
            let number = super::id_number(&id, scope)
                .ok_or_else(|| anyhow!("`{id}` is not an id of the {} scope", scope.as_str()))?;
            if record_scope != scope {
                return Err(anyhow!(
                    "`{id}` is a {} memory in the {} file",
                    record_scope.as_str(),
                    scope.as_str()
                ));
            }
            if number <= replayed.last_number {
                return Err(anyhow!("`{id}` was given before"));
            }
            replayed.last_number = number;
            replayed.memories.push(Memory {
                id,
                scope,
                text,
                provenance,
                edited: None,
            });
        }
        Record::Edit {
            id,
            text,
            provenance,
        } => {
            let index = known(replayed, &id)?;
            let memory = &mut replayed.memories[index];
            memory.text = text;
            memory.edited = Some(provenance);
        }
        Record::Forget { id, .. } => {
            let index = known(replayed, &id)?;
            replayed.memories.remove(index);
        }
    }
    Ok(())
}
