//! A job's output on disk. A job may run for hours and print without end (a dev server, a
//! watcher), so its output goes to a file rather than into memory, and the file is bounded:
//! it is two segments of half the budget each, and when the newer one is full the older is
//! dropped. Offsets are counted over everything the job ever printed, so `since` keeps its
//! meaning after a rotation; what was dropped is reported as such, never silently skipped.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The spooled output of one job.
#[derive(Debug)]
pub(super) struct Spool {
    current_path: PathBuf,
    previous_path: PathBuf,
    /// Bytes one segment holds before the next write starts a new one.
    segment_bytes: u64,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    current: File,
    /// The offset of the first byte of the current segment.
    current_start: u64,
    /// The offset of the first byte of the previous segment, when there is one.
    previous_start: Option<u64>,
    /// Bytes written in all.
    total: u64,
}

impl Spool {
    /// A spool for job `id` in `dir` (`<id>.log`, and `<id>.1.log` for the older segment)
    /// keeping about `max_bytes` of the most recent output.
    pub(super) fn create(dir: &Path, id: &str, max_bytes: u64) -> std::io::Result<Spool> {
        let current_path = dir.join(format!("{id}.log"));
        let previous_path = dir.join(format!("{id}.1.log"));
        let current = File::create(&current_path)?;
        Ok(Spool {
            current_path,
            previous_path,
            segment_bytes: (max_bytes / 2).max(1),
            state: Mutex::new(State {
                current,
                current_start: 0,
                previous_start: None,
                total: 0,
            }),
        })
    }

    pub(super) fn append(&self, bytes: &[u8]) -> std::io::Result<()> {
        let mut state = self.state.lock().expect("spool");
        let in_current = state.total - state.current_start;
        if in_current > 0 && in_current + bytes.len() as u64 > self.segment_bytes {
            std::fs::rename(&self.current_path, &self.previous_path)?;
            state.current = File::create(&self.current_path)?;
            state.previous_start = Some(state.current_start);
            state.current_start = state.total;
        }
        state.current.write_all(bytes)?;
        state.total += bytes.len() as u64;
        Ok(())
    }

    /// Bytes the job printed in all.
    pub(super) fn total(&self) -> u64 {
        self.state.lock().expect("spool").total
    }

    /// The offset of the oldest byte still on disk.
    pub(super) fn start(&self) -> u64 {
        let state = self.state.lock().expect("spool");
        state.previous_start.unwrap_or(state.current_start)
    }

    /// The bytes from `from` to `to` that are still on disk (a range that starts before
    /// [`Spool::start`] is read from there).
    pub(super) fn read(&self, from: u64, to: u64) -> std::io::Result<Vec<u8>> {
        let state = self.state.lock().expect("spool");
        let to = to.min(state.total);
        let mut segments = vec![(state.current_start, state.total, &self.current_path)];
        if let Some(previous_start) = state.previous_start {
            segments.insert(
                0,
                (previous_start, state.current_start, &self.previous_path),
            );
        }
        let mut bytes = Vec::new();
        for (start, end, path) in segments {
            let (first, last) = (from.max(start), to.min(end));
            if first >= last {
                continue;
            }
            let mut part = vec![0; (last - first) as usize];
            File::open(path)?.read_exact_at(&mut part, first - start)?;
            bytes.extend_from_slice(&part);
        }
        Ok(bytes)
    }

    /// The last `lines` lines of the output, from at most its last `max_bytes`.
    pub(super) fn last_lines(&self, lines: usize, max_bytes: u64) -> String {
        let total = self.total();
        let from = total.saturating_sub(max_bytes).max(self.start());
        let bytes = self.read(from, total).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        let text = text.strip_suffix('\n').unwrap_or(&text);
        let mut kept: Vec<&str> = text.rsplit('\n').take(lines).collect();
        // A first line cut by the byte window is not a whole line: drop it unless it is all.
        if from > self.start() && kept.len() > 1 && kept.len() == text.split('\n').count() {
            kept.pop();
        }
        kept.reverse();
        kept.join("\n")
    }
}

/// What one read of a job's output returns: the range read, what rotation dropped, and the
/// text, cut to its head and tail when it is longer than the cap.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Excerpt {
    pub from: u64,
    pub to: u64,
    /// The part of the asked range that was no longer on disk.
    pub dropped: Option<(u64, u64)>,
    /// The part cut from the middle to keep within the cap.
    pub cut: Option<(u64, u64)>,
    pub text: String,
}

/// The output of `spool` from `since` to its end, at most about `cap` bytes of it: the first
/// and the last half of the cap, each cut at a line break when one is near.
pub(super) fn excerpt(spool: &Spool, since: u64, cap: u64) -> std::io::Result<Excerpt> {
    let (start, to) = (spool.start(), spool.total());
    let since = since.min(to);
    let from = since.max(start);
    let dropped = (since < from).then_some((since, from));
    if to - from <= cap {
        let bytes = spool.read(from, to)?;
        return Ok(Excerpt {
            from,
            to,
            dropped,
            cut: None,
            text: String::from_utf8_lossy(&bytes).into_owned(),
        });
    }
    let half = cap / 2;
    let mut head = spool.read(from, from + half)?;
    let mut tail = spool.read(to - half, to)?;
    let window = (half / 4) as usize;
    if let Some(newline) = head.iter().rposition(|&byte| byte == b'\n')
        && head.len() - newline - 1 <= window
    {
        head.truncate(newline + 1);
    }
    if let Some(newline) = tail.iter().position(|&byte| byte == b'\n')
        && newline < window
    {
        tail.drain(..=newline);
    }
    let cut = (from + head.len() as u64, to - tail.len() as u64);
    let mut text = String::from_utf8_lossy(&head).into_owned();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&format!(
        "[… bytes {}–{} ({} bytes) cut here; pass since: {} to read on from there …]\n",
        cut.0,
        cut.1,
        cut.1 - cut.0,
        cut.0
    ));
    text.push_str(&String::from_utf8_lossy(&tail));
    Ok(Excerpt {
        from,
        to,
        dropped,
        cut: Some(cut),
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spool(max_bytes: u64) -> (tempfile::TempDir, Spool) {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::create(dir.path(), "job-1", max_bytes).unwrap();
        (dir, spool)
    }

    #[test]
    fn reads_ranges_across_a_rotation_and_reports_what_was_dropped() {
        let (dir, spool) = spool(20);
        for line in ["aaaa\n", "bbbb\n", "cccc\n"] {
            spool.append(line.as_bytes()).unwrap();
        }
        assert_eq!((spool.start(), spool.total()), (0, 15));
        // The fourth line does not fit in the 10-byte segment: the first two are dropped.
        spool.append(b"dddd\n").unwrap();
        spool.append(b"eeee\n").unwrap();
        assert_eq!((spool.start(), spool.total()), (10, 25));
        assert!(dir.path().join("job-1.1.log").exists());
        assert_eq!(spool.read(12, 22).unwrap(), b"cc\ndddd\nee");
        let excerpt = excerpt(&spool, 3, 100).unwrap();
        assert_eq!(
            excerpt,
            Excerpt {
                from: 10,
                to: 25,
                dropped: Some((3, 10)),
                cut: None,
                text: "cccc\ndddd\neeee\n".into()
            }
        );
        // Reading from the end gives nothing new.
        assert_eq!(excerpt_text(&spool, 25, 100), "");
        assert_eq!(excerpt_text(&spool, 99, 100), "");
    }

    fn excerpt_text(spool: &Spool, since: u64, cap: u64) -> String {
        excerpt(spool, since, cap).unwrap().text
    }

    #[test]
    fn long_output_keeps_head_and_tail_cut_at_lines() {
        let (_dir, spool) = spool(1 << 20);
        let text: String = (1..=1000).map(|n| format!("line {n}\n")).collect();
        spool.append(text.as_bytes()).unwrap();
        let excerpt = excerpt(&spool, 0, 200).unwrap();
        let (cut_from, cut_to) = excerpt.cut.unwrap();
        assert!(
            excerpt.text.starts_with("line 1\nline 2\n"),
            "{}",
            excerpt.text
        );
        assert!(
            excerpt.text.ends_with("line 999\nline 1000\n"),
            "{}",
            excerpt.text
        );
        assert!(excerpt.text.contains(&format!(
            "[… bytes {cut_from}–{cut_to} ({} bytes) cut here; pass since: {cut_from} to read on from there …]\n",
            cut_to - cut_from
        )));
        assert!(excerpt.text.len() < 350, "{}", excerpt.text.len());
        // Every kept line is whole, and reading on from the cut continues where it stopped.
        let head_last = excerpt
            .text
            .lines()
            .nth(
                excerpt
                    .text
                    .lines()
                    .position(|l| l.starts_with("[…"))
                    .unwrap()
                    - 1,
            )
            .unwrap();
        let on = excerpt_text(&spool, cut_from, 1 << 20);
        let next: u32 = head_last.trim_start_matches("line ").parse().unwrap();
        assert!(on.starts_with(&format!("line {}\n", next + 1)), "{on}");
    }

    #[test]
    fn last_lines_are_whole_lines_from_the_end() {
        let (_dir, spool) = spool(1 << 20);
        spool.append(b"one\ntwo\nthree\nfour").unwrap();
        assert_eq!(spool.last_lines(2, 4096), "three\nfour");
        assert_eq!(spool.last_lines(10, 4096), "one\ntwo\nthree\nfour");
        spool.append(b"\n").unwrap();
        assert_eq!(spool.last_lines(1, 4096), "four");
        // A window that starts inside a line leaves that partial line out.
        assert_eq!(spool.last_lines(10, 12), "three\nfour");
        assert_eq!(spool.last_lines(10, 3), "ur");
    }
}
