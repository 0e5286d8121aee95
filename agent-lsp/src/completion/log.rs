//! The completion log: one JSON line per inline completion request, in the workspace's state
//! directory beside its sessions (`completions.jsonl`), and the summary `agent-lsp completions
//! stats` prints. Suggestions are not agent work, so they never enter a session; this log is
//! what there is to audit and measure them by.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// The log's file name in the workspace's state directory.
pub const FILE_NAME: &str = "completions.jsonl";
/// Past this size the log is renamed to `completions.jsonl.1` (replacing the one before) and
/// started again: a line per keystroke adds up, and the summary is about recent work.
pub const MAX_BYTES: u64 = 16 << 20;

/// One request, whatever became of it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// When it was answered (RFC 3339).
    pub ts: String,
    /// The document, relative to the workspace when inside it.
    pub document: String,
    /// SHA-256 (first 16 hex digits) of the prompt and suffix sent, or that would have been.
    pub digest: String,
    /// Where the context came from: `buffer`, and `SERVER hover SYMBOL` per signature.
    pub sources: Vec<String>,
    /// Characters of the prompt sent (the text before the cursor, grounding included).
    pub prompt_chars: usize,
    /// Characters of the suffix sent (the text after the cursor).
    pub suffix_chars: usize,
    /// Characters of the prompt the servers added (the signatures near the cursor).
    pub grounding_chars: usize,
    /// From the request's arrival to its answer.
    pub latency_ms: f64,
    /// The model request's part of it (connecting, waiting, streaming).
    pub model_ms: f64,
    /// The debounce's part of it.
    pub debounce_ms: f64,
    /// The language servers' lookups' part of it.
    pub grounding_ms: f64,
    /// Everything but the model's time and the debounce: the server's own overhead.
    pub overhead_ms: f64,
    /// `suggested`, `empty` (the model's text held nothing new), `cancelled` (by the editor,
    /// or superseded by the next request for the document) or `failed`.
    pub result: String,
    /// Answered from the cache, without a request.
    pub cache_hit: bool,
    /// Whether the editor cancelled it or the next keystroke superseded it; its latency says
    /// nothing about the model, so the summary leaves it out.
    pub cancelled: bool,
    /// The suggestion's length in characters.
    pub suggestion_chars: usize,
    /// Why the request failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The log of one workspace.
#[derive(Clone, Debug)]
pub struct CompletionLog {
    path: PathBuf,
}

impl CompletionLog {
    /// The log in `workspace_dir` (a workspace's state directory).
    pub fn in_dir(workspace_dir: &Path) -> CompletionLog {
        CompletionLog {
            path: workspace_dir.join(FILE_NAME),
        }
    }

    /// The log file, for messages that name it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one record: a single write of one line to a file opened for appending, so lines
    /// of two writers never interleave. A log past [`MAX_BYTES`] is rotated first.
    pub fn append(&self, record: &Record) -> anyhow::Result<()> {
        self.append_within(record, MAX_BYTES)
    }

    fn append_within(&self, record: &Record, max_bytes: u64) -> anyhow::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("failed to create {}", dir.display()))?;
        }
        if std::fs::metadata(&self.path).is_ok_and(|metadata| metadata.len() > max_bytes) {
            let mut rotated = self.path.clone().into_os_string();
            rotated.push(".1");
            std::fs::rename(&self.path, &rotated)
                .with_context(|| format!("failed to rotate {}", self.path.display()))?;
        }
        let mut line = serde_json::to_vec(record).expect("a record serializes");
        line.push(b'\n');
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut file| file.write_all(&line))
            .with_context(|| format!("failed to write {}", self.path.display()))
    }

    /// Every record; a line that does not parse (torn by a crash) is skipped.
    pub fn read(&self) -> anyhow::Result<Vec<Record>> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => {
                return Err(error)
                    .with_context(|| format!("failed to read {}", self.path.display()));
            }
        };
        Ok(text
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect())
    }
}

/// What `agent-lsp completions stats` prints.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Stats {
    /// Requests in the log.
    pub count: usize,
    /// Requests answered with a suggestion.
    pub suggested: usize,
    /// Requests that failed (the model endpoint, usually).
    pub failed: usize,
    /// Latency of the requests that were answered (not cancelled), in ms.
    pub latency_p50_ms: f64,
    /// See [`Stats::latency_p50_ms`].
    pub latency_p95_ms: f64,
    /// The server's own overhead of the requests that reached the model, in ms.
    pub overhead_p50_ms: f64,
    /// See [`Stats::overhead_p50_ms`].
    pub overhead_p95_ms: f64,
    /// The share of all requests that were cancelled, from 0 to 1.
    pub cancelled_share: f64,
    /// The share of all requests answered from the cache, from 0 to 1.
    pub cache_hit_share: f64,
}

impl Stats {
    /// The summary of `records`; all zeros for none.
    pub fn of(records: &[Record]) -> Stats {
        let count = records.len();
        if count == 0 {
            return Stats::default();
        }
        let share = |n: usize| n as f64 / count as f64;
        let answered: Vec<f64> = records
            .iter()
            .filter(|record| !record.cancelled)
            .map(|record| record.latency_ms)
            .collect();
        let overhead: Vec<f64> = records
            .iter()
            .filter(|record| !record.cancelled && !record.cache_hit && record.model_ms > 0.0)
            .map(|record| record.overhead_ms)
            .collect();
        Stats {
            count,
            suggested: records.iter().filter(|r| r.result == "suggested").count(),
            failed: records.iter().filter(|r| r.result == "failed").count(),
            latency_p50_ms: percentile(&answered, 0.50),
            latency_p95_ms: percentile(&answered, 0.95),
            overhead_p50_ms: percentile(&overhead, 0.50),
            overhead_p95_ms: percentile(&overhead, 0.95),
            cancelled_share: share(records.iter().filter(|r| r.cancelled).count()),
            cache_hit_share: share(records.iter().filter(|r| r.cache_hit).count()),
        }
    }
}

/// The nearest-rank percentile (0 for no values).
pub fn percentile(values: &[f64], rank: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let index = ((rank * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_summarise() {
        let dir = tempfile::tempdir().unwrap();
        let log = CompletionLog::in_dir(&dir.path().join("ws"));
        let record = |latency: f64, result: &str, cache_hit: bool, cancelled: bool| Record {
            latency_ms: latency,
            model_ms: if cache_hit { 0.0 } else { latency / 2.0 },
            overhead_ms: latency / 2.0,
            result: result.into(),
            cache_hit,
            cancelled,
            ..Record::default()
        };
        log.append(&record(10.0, "suggested", false, false))
            .unwrap();
        log.append(&record(1.0, "suggested", true, false)).unwrap();
        log.append(&record(30.0, "cancelled", false, true)).unwrap();
        log.append(&record(20.0, "failed", false, false)).unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(log.path())
            .unwrap()
            .write_all(b"{\"torn")
            .unwrap();
        let records = log.read().unwrap();
        assert_eq!(records.len(), 4);
        let stats = Stats::of(&records);
        assert_eq!(stats.count, 4);
        assert_eq!((stats.suggested, stats.failed), (2, 1));
        assert_eq!(stats.latency_p50_ms, 10.0);
        assert_eq!(stats.latency_p95_ms, 20.0);
        assert_eq!(stats.overhead_p50_ms, 5.0);
        assert_eq!(stats.cancelled_share, 0.25);
        assert_eq!(stats.cache_hit_share, 0.25);
    }

    #[test]
    fn a_log_past_its_size_is_rotated_and_started_again() {
        let dir = tempfile::tempdir().unwrap();
        let log = CompletionLog::in_dir(dir.path());
        for _ in 0..3 {
            log.append_within(&Record::default(), 100).unwrap();
        }
        let first = std::fs::metadata(log.path()).unwrap().len();
        assert!(first > 100, "{first}");
        log.append_within(&Record::default(), 100).unwrap();
        assert_eq!(log.read().unwrap().len(), 1);
        assert!(dir.path().join("completions.jsonl.1").exists());
    }
}
