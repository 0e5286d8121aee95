//! The session file: append-only JSONL, one event per line, locked by its single writer.
//!
//! Crash safety rests on three facts:
//! - a line is written with one `write_all` of `json + "\n"`, and JSON lines never contain a raw
//!   newline, so a crash can only leave a *prefix* of the last line without its newline;
//! - on open for writing, such a torn tail is detected and cut (it was never acknowledged:
//!   `append` returns only after the whole line is written, and after `fsync` in
//!   [`Durability::Sync`]);
//! - any other line that does not parse (not UTF-8, not an event, a seq that is not one more
//!   than the line before's, as a deleted line leaves), and an empty file, is corruption,
//!   reported with its line number, never skipped silently;
//! - a write that fails (a full disk) is cut back to the last whole line before anything else is
//!   written, so a process that goes on after the error (`serve`) never glues its next line
//!   onto a partial one.
//!
//! Exclusivity: the writer holds an exclusive advisory lock on the file (`flock`) for its whole
//! life, so two processes never append to one session. Readers (`session show`, `replay`) take no
//! lock and ignore a torn tail without repairing it.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};

use super::event::Event;

/// When an appended event counts as acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Every append is written and `fsync`ed before it returns: survives power loss.
    Sync,
    /// Appends are buffered and written (and `fsync`ed) by [`LogWriter::flush`]; an event is
    /// acknowledged once the flush that carried it returned.
    Batched,
}

/// What reading a log found at its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// Bytes after the last newline: a line whose write a crash interrupted.
    pub bytes: u64,
}

/// Events of a log file, and the torn tail if there was one.
pub struct ReadLog {
    /// Every whole event, in file order.
    pub events: Vec<Event>,
    /// A last line a crash cut short, which the next writer cuts off before appending.
    pub torn_tail: Option<TornTail>,
    /// Length of the well-formed part of the file.
    pub valid_len: u64,
}

/// Read a session file without locking or changing it.
pub fn read_log(path: &Path) -> anyhow::Result<ReadLog> {
    let mut file = File::open(path)
        .with_context(|| format!("failed to open session log {}", path.display()))?;
    read_from(&mut file, path)
}

fn read_from(file: &mut File, path: &Path) -> anyhow::Result<ReadLog> {
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .with_context(|| format!("failed to read session log {}", path.display()))?;
    let valid_len = bytes
        .iter()
        .rposition(|&byte| byte == b'\n')
        .map_or(0, |index| index + 1);
    let torn_tail = (valid_len < bytes.len()).then(|| TornTail {
        bytes: (bytes.len() - valid_len) as u64,
    });
    let events = parse_lines(&bytes[..valid_len], path)?;
    Ok(ReadLog {
        events,
        torn_tail,
        valid_len: valid_len as u64,
    })
}

/// Parse the whole lines of a log. Every line is checked on its own, so any corruption is
/// reported with the number of the line it is on: bytes that are not UTF-8, a line that is not
/// an event, and a seq that is not exactly one more than the line before (the log is written
/// with seqs 1, 2, 3, …, so a deleted line or an edited seq shows as a gap).
fn parse_lines(whole_lines: &[u8], path: &Path) -> anyhow::Result<Vec<Event>> {
    if whole_lines.is_empty() {
        bail!(
            "session log {} is empty: it has no line, not even its session/header (a crash \
             while it was being created?); delete it or start a new session",
            path.display()
        );
    }
    let mut events: Vec<Event> = Vec::with_capacity(whole_lines.len() / 256);
    for (index, line) in whole_lines
        .strip_suffix(b"\n")
        .unwrap_or(whole_lines)
        .split(|&byte| byte == b'\n')
        .enumerate()
    {
        let corrupt = |what: String| {
            anyhow!(
                "session log {} is corrupt at line {}: {what}",
                path.display(),
                index + 1
            )
        };
        let text = std::str::from_utf8(line).map_err(|error| {
            corrupt(format!(
                "it is not UTF-8 (an invalid byte at column {})",
                error.valid_up_to() + 1
            ))
        })?;
        if text.trim().is_empty() {
            return Err(corrupt("the line is empty".into()));
        }
        let event = Event::from_json_line(text).map_err(|error| corrupt(format!("{error:#}")))?;
        let expected = events.last().map_or(1, |last| last.seq + 1);
        if event.seq != expected {
            let what = if event.seq > expected {
                format!(
                    "seq {} where seq {expected} belongs: a line is missing or its seq was changed",
                    event.seq
                )
            } else {
                format!("seq {} does not follow seq {}", event.seq, expected - 1)
            };
            return Err(corrupt(what));
        }
        events.push(event);
    }
    Ok(events)
}

/// The single writer of one session file.
pub struct LogWriter {
    file: File,
    path: PathBuf,
    durability: Durability,
    pending: Vec<u8>,
    /// Length of the file's whole lines: where a failed write is cut back to.
    len: u64,
    /// Why the file could not be cut back after a failed write; nothing is written after it.
    broken: Option<String>,
}

impl LogWriter {
    /// Create a new, empty session file; fails if it exists.
    pub fn create(path: &Path, durability: Durability) -> anyhow::Result<LogWriter> {
        use std::os::unix::fs::OpenOptionsExt;
        // The user's alone: prompts, tool results and file contents are in it.
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .with_context(|| format!("failed to create session log {}", path.display()))?;
        lock(&file, path)?;
        sync_parent_dir(path);
        Ok(LogWriter {
            file,
            path: path.to_owned(),
            durability,
            pending: Vec::new(),
            len: 0,
            broken: None,
        })
    }

    /// Open an existing session file for appending, cutting a torn tail left by a crash.
    pub fn open(path: &Path, durability: Durability) -> anyhow::Result<(LogWriter, ReadLog)> {
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(path)
            .with_context(|| format!("failed to open session log {}", path.display()))?;
        lock(&file, path)?;
        file.seek(SeekFrom::Start(0))?;
        let log = read_from(&mut file, path)?;
        if let Some(torn) = log.torn_tail {
            tracing::warn!(
                path = %path.display(),
                bytes = torn.bytes,
                "cutting a torn last line left by an interrupted write"
            );
            file.set_len(log.valid_len)
                .with_context(|| format!("failed to cut the torn tail of {}", path.display()))?;
            file.sync_all()?;
        }
        Ok((
            LogWriter {
                file,
                path: path.to_owned(),
                durability,
                pending: Vec::new(),
                len: log.valid_len,
                broken: None,
            },
            log,
        ))
    }

    /// The log file, for messages that name it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Write one event; with [`Durability::Sync`] it is on disk when this returns.
    pub fn append(&mut self, event: &Event) -> anyhow::Result<()> {
        let mut line = event.to_json_line().context("failed to serialize event")?;
        line.push('\n');
        match self.durability {
            Durability::Sync => self.write_lines(line.as_bytes()).with_context(|| {
                format!("failed to append to session log {}", self.path.display())
            }),
            Durability::Batched => {
                self.pending.extend_from_slice(line.as_bytes());
                Ok(())
            }
        }
    }

    /// Write and `fsync` everything buffered by [`Durability::Batched`] appends. When it
    /// fails, what was buffered stays buffered for the next flush.
    pub fn flush(&mut self) -> anyhow::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut self.pending);
        let written = self.write_lines(&pending);
        if written.is_err() {
            self.pending = pending;
        }
        written.with_context(|| format!("failed to flush session log {}", self.path.display()))
    }

    /// Write whole lines and `fsync` them; on failure, cut the file back to the lines it had,
    /// so that it still ends with a whole line.
    fn write_lines(&mut self, lines: &[u8]) -> anyhow::Result<()> {
        if let Some(broken) = &self.broken {
            bail!("{broken}");
        }
        let written = self
            .file
            .write_all(lines)
            .and_then(|()| self.file.sync_data());
        match written {
            Ok(()) => {
                self.len += lines.len() as u64;
                Ok(())
            }
            Err(error) => {
                if let Err(cut) = self.file.set_len(self.len) {
                    self.broken = Some(format!(
                        "a write failed ({error}) and the partial line could not be cut ({cut}); \
                         nothing more is written to this session until it is opened again"
                    ));
                }
                Err(error.into())
            }
        }
    }
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        if let Err(error) = self.flush() {
            tracing::error!("{error:#}");
        }
    }
}

/// How long opening a session waits for its lock before calling it in use.
///
/// A process killed the moment it forks a command leaves that child holding the log's
/// descriptor (and so its lock) until the child reaches `exec`, which closes it: Linux has no
/// way to keep a descriptor out of a fork. A continuation started right after the kill must not
/// be told the session is in use by a process that is gone, so a held lock is tried again for
/// this long; a session truly in use by a live process is still refused, just this much later.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

fn lock(file: &File, path: &Path) -> anyhow::Result<()> {
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(TryLockError::WouldBlock) => bail!(
                "session log {} is in use by another agent-lsp process; \
                 wait for it to finish or start a new session",
                path.display()
            ),
            Err(TryLockError::Error(error)) => {
                return Err(error)
                    .with_context(|| format!("failed to lock session log {}", path.display()));
            }
        }
    }
}

/// Make a newly created file's directory entry durable; best effort, as not every filesystem
/// lets a directory be opened for syncing.
fn sync_parent_dir(path: &Path) {
    if let Some(parent) = path.parent()
        && let Ok(dir) = File::open(parent)
    {
        let _ = dir.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::event::{EventBody, SessionHeader, UserMessage};
    use crate::session::{NewEvent, Session};

    /// A writer killed the moment it forks a command leaves the child holding the log's open
    /// file (and so its lock) until the child's `exec` closes it. A child given the writer's
    /// file, as its stdin here, holds it the same way: the log opens again once it is gone,
    /// not "in use".
    #[test]
    fn a_log_opens_again_once_a_child_holding_its_writers_file_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        log_bytes(dir.path());
        let path = dir.path().join("whole.jsonl");
        let (writer, _) = LogWriter::open(&path, Durability::Sync).unwrap();
        let held = writer.file.try_clone().unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("0.4")
            .stdin(held)
            .spawn()
            .unwrap();
        drop(writer);
        let started = std::time::Instant::now();
        LogWriter::open(&path, Durability::Sync).unwrap();
        assert!(
            started.elapsed() >= std::time::Duration::from_millis(200),
            "the child held the lock: opening waited for it"
        );
        assert!(child.wait().unwrap().success());
    }

    /// A session of a header and three prompts, as bytes.
    fn log_bytes(dir: &Path) -> Vec<u8> {
        let path = dir.join("whole.jsonl");
        let header = SessionHeader::for_test("s1", "standard");
        let mut session = Session::create(&path, header, Durability::Sync).unwrap();
        for text in ["one", "two", "three"] {
            let body = EventBody::UserMessage(UserMessage {
                text: text.into(),
                origin: "prompt".into(),
            });
            session.append(NewEvent::new(1, 0, body)).unwrap();
        }
        drop(session);
        std::fs::read(&path).unwrap()
    }

    /// The error reading `bytes` gives, both as a reader and as the writer opening it.
    fn check(bytes: &[u8], expected: &[&str]) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, bytes).unwrap();
        let read = format!("{:#}", read_log(&path).err().expect("corruption found"));
        let open = LogWriter::open(&path, Durability::Sync)
            .err()
            .expect("open refused");
        assert_eq!(read, format!("{open:#}"));
        for part in expected {
            assert!(read.contains(part), "`{part}` missing from: {read}");
        }
        assert_eq!(
            std::fs::read(&path).unwrap(),
            bytes,
            "a refused log is left as it was"
        );
    }

    fn lines(bytes: &[u8]) -> Vec<Vec<u8>> {
        bytes
            .split_inclusive(|&byte| byte == b'\n')
            .map(<[u8]>::to_vec)
            .collect()
    }

    #[test]
    fn a_deleted_middle_line_is_a_seq_gap_named_by_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut lines = lines(&log_bytes(dir.path()));
        lines.remove(2);
        check(
            &lines.concat(),
            &[
                "corrupt at line 3",
                "seq 4 where seq 3 belongs",
                "a line is missing",
            ],
        );
    }

    #[test]
    fn a_huge_seq_on_the_last_line_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut lines = lines(&log_bytes(dir.path()));
        let last = String::from_utf8(lines.pop().unwrap()).unwrap();
        lines.push(
            last.replacen("\"seq\":4", "\"seq\":18446744073709551615", 1)
                .into_bytes(),
        );
        check(
            &lines.concat(),
            &[
                "corrupt at line 4",
                "seq 18446744073709551615 where seq 4 belongs",
            ],
        );
    }

    #[test]
    fn invalid_utf8_names_the_line_and_the_column() {
        let dir = tempfile::tempdir().unwrap();
        let mut lines = lines(&log_bytes(dir.path()));
        let at = lines[2].windows(3).position(|w| w == b"two").unwrap();
        lines[2][at] = 0xff;
        check(
            &lines.concat(),
            &[
                "corrupt at line 3",
                "not UTF-8",
                &format!("column {}", at + 1),
            ],
        );
    }

    #[test]
    fn an_empty_file_or_a_lone_torn_line_is_refused_as_empty() {
        check(b"", &["is empty", "no line, not even its session/header"]);
        check(b"{\"seq\":1,\"ki", &["is empty"]);
    }

    #[test]
    fn an_empty_line_and_a_bad_payload_name_their_line() {
        let dir = tempfile::tempdir().unwrap();
        let whole = lines(&log_bytes(dir.path()));
        let mut with_blank = whole.clone();
        with_blank.insert(2, b"\n".to_vec());
        check(
            &with_blank.concat(),
            &["corrupt at line 3", "the line is empty"],
        );

        let mut bad_payload = whole;
        let line = String::from_utf8(bad_payload[1].clone()).unwrap();
        bad_payload[1] = line.replacen("\"text\"", "\"txet\"", 1).into_bytes();
        check(
            &bad_payload.concat(),
            &[
                "corrupt at line 2",
                "payload of event 2 (`user/message`)",
                "text",
            ],
        );
    }
}
