//! `@path` file search benchmarks: index build time and resident memory, warm query latency
//! (p50/p99) and incremental update latency at about 100k entries. Run with
//! `cargo bench -p agent-lsp --bench file_search`; it prints a Markdown table for
//! BENCHMARKS.md. The tree comes from `$FILES_BENCH_TREE` if set, else it is generated once
//! by `bench/files/gen.py` into `target/bench-files-tree`.

#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use agent_lsp::file_index::{ChangeKind, EntryKind, FileChange, FileIndex, FilesConfig, LiveIndex};
use agent_lsp::workspace::Workspace;

/// Resident set size of this process, in bytes (`/proc/self/statm`, Linux).
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|field| field.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// CPU time this process has used so far, all threads (`/proc/self/stat`, in clock ticks of
/// 10 ms, so only meaningful over many queries).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<u64> = rest
        .split_whitespace()
        .map(|field| field.parse().unwrap_or(0))
        .collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let ticks = fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

/// The machine's load average over the last minute, to read wall-clock figures against.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

fn tree() -> PathBuf {
    if let Some(dir) = std::env::var_os("FILES_BENCH_TREE") {
        return PathBuf::from(dir);
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let repo = manifest.parent().unwrap();
    let dir = repo.join("target/bench-files-tree");
    if !dir.join(".gitignore").exists() {
        let _ = std::fs::remove_dir_all(&dir);
        let status = Command::new("python3")
            .arg(repo.join("bench/files/gen.py"))
            .arg(&dir)
            .status()
            .expect("python3 runs bench/files/gen.py");
        assert!(status.success(), "gen.py failed");
    }
    dir
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1000.0)
}

/// A deterministic pseudo-random sequence (no dependency for one benchmark).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as usize
    }
}

/// Queries as people type them: fixed common words, prefixes of real file names, segment
/// initials and a fuzzy skeleton of real paths.
fn queries(index: &FileIndex) -> Vec<String> {
    let paths: Vec<&str> = index.iter().map(|(path, _)| path).collect();
    let mut rng = Lcg(42);
    let mut queries: Vec<String> = [
        "a",
        "s",
        "main",
        "test",
        "util",
        "config",
        "readme",
        "index.ts",
        "src/lib",
        "mod.rs",
        "parser",
        "handler_test",
        "cmp",
        "srvauth",
        "apps web comp",
        "json$",
        "^docs",
    ]
    .iter()
    .map(|q| q.to_string())
    .collect();
    for _ in 0..200 {
        let path = paths[rng.next() % paths.len()];
        let name = path.rsplit('/').next().unwrap();
        let query = match rng.next() % 3 {
            // A prefix of the file name, 3 to 8 characters.
            0 => name.chars().take(3 + rng.next() % 6).collect(),
            // Initials of the segments plus the start of the name.
            1 => {
                let mut q: String = path
                    .split('/')
                    .filter_map(|segment| segment.chars().next())
                    .collect();
                q.extend(name.chars().take(3));
                q
            }
            // Every third character of the path.
            _ => path.chars().step_by(3).take(8).collect(),
        };
        queries.push(query);
    }
    queries
}

fn main() {
    let root = tree();
    let workspace = Workspace::new(&root).unwrap();
    let mut rows: Vec<(String, String)> = Vec::new();

    // Build: three times, keep the median time; memory from the first build.
    let rss_before = rss_bytes();
    let started = Instant::now();
    let index = FileIndex::build(&workspace, FilesConfig::default()).unwrap();
    let first_build = started.elapsed();
    let rss_after = rss_bytes();
    let status = index.status();
    let mut builds = vec![first_build];
    for _ in 0..2 {
        let started = Instant::now();
        let again = FileIndex::build(&workspace, FilesConfig::default()).unwrap();
        builds.push(started.elapsed());
        drop(again);
    }
    builds.sort();
    rows.push((
        "entries indexed (files + directories)".into(),
        format!(
            "{} ({} files, {} directories; truncated: {})",
            status.entries, status.files, status.directories, status.truncated
        ),
    ));
    rows.push((
        "full walk + index build, median of 3".into(),
        ms(percentile(&builds, 0.5)),
    ));
    rows.push((
        "index memory: RSS delta over the first build".into(),
        format!(
            "{:.1} MB (estimate of the structures: {:.1} MB)",
            (rss_after.saturating_sub(rss_before)) as f64 / 1e6,
            index.heap_size_estimate() as f64 / 1e6
        ),
    ));

    // Warm queries: every query 5 times, limit 50 (a completion list).
    let queries = queries(&index);
    let mut latencies = Vec::new();
    let mut n_results = 0;
    let load = load_average();
    let cpu_before = cpu_time();
    for _ in 0..5 {
        for query in &queries {
            let started = Instant::now();
            let found = index.query(query, 50).unwrap();
            latencies.push(started.elapsed());
            n_results += found.len();
        }
    }
    // `FILES_BENCH_DEBUG=1`: the slowest and fastest queries, to see where time goes.
    if std::env::var_os("FILES_BENCH_DEBUG").is_some() {
        let mut per: Vec<(Duration, &String, usize)> = queries
            .iter()
            .map(|q| {
                let started = Instant::now();
                let n = index.query(q, 50).unwrap().len();
                (started.elapsed(), q, n)
            })
            .collect();
        per.sort();
        for (d, q, n) in per.iter().rev().take(15).chain(per.iter().take(3)) {
            println!("{:>8} {q:?} {n}", ms(*d));
        }
        for q in ["qqqzzzxx", "zq", "xj"] {
            let started = Instant::now();
            let n = index.query(q, 50).unwrap().len();
            println!("{:>8} {q:?} {n}", ms(started.elapsed()));
        }
    }
    let cpu_per_query = (cpu_time() - cpu_before) / latencies.len() as u32;
    latencies.sort();
    rows.push((
        format!(
            "warm query, limit 50 ({} queries x 5, {:.0} results on average)",
            queries.len(),
            n_results as f64 / latencies.len() as f64
        ),
        format!(
            "p50 {}, p99 {}, max {} (load average {load}); CPU time per query, all threads: {}",
            ms(percentile(&latencies, 0.5)),
            ms(percentile(&latencies, 0.99)),
            ms(*latencies.last().unwrap()),
            ms(cpu_per_query)
        ),
    ));
    // Typing: file names typed one character at a time, as completion sees them; each
    // keystroke after the first narrows from the previous answer.
    let paths: Vec<String> = index.iter().map(|(path, _)| path.to_owned()).collect();
    let mut rng = Lcg(7);
    let mut keystrokes = Vec::new();
    for _ in 0..60 {
        let path = &paths[rng.next() % paths.len()];
        let name: Vec<char> = path.rsplit('/').next().unwrap().chars().collect();
        for end in 1..=name.len().min(10) {
            let query: String = name[..end].iter().collect();
            let started = Instant::now();
            index.query(&query, 50).unwrap();
            keystrokes.push(started.elapsed());
        }
    }
    keystrokes.sort();
    rows.push((
        format!(
            "typing a file name, per keystroke ({} keystrokes, 60 names)",
            keystrokes.len()
        ),
        format!(
            "p50 {}, p99 {}, max {} (load average {})",
            ms(percentile(&keystrokes, 0.5)),
            ms(percentile(&keystrokes, 0.99)),
            ms(*keystrokes.last().unwrap()),
            load_average()
        ),
    ));

    let one_letter: Vec<String> = ["a", "s", "e"]
        .iter()
        .map(|query| {
            let started = Instant::now();
            index.query(query, 50).unwrap();
            ms(started.elapsed())
        })
        .collect();
    rows.push((
        "warm query of one letter (`a`, `s`, `e`: nearly every path matches)".into(),
        one_letter.join(", "),
    ));

    // Incremental: create and delete files one event at a time, and a directory of 100 files
    // as one event.
    let mut index = index;
    let scratch = root.join("bench-scratch");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    index.apply(&[FileChange::new(&scratch, ChangeKind::Created)]);
    let mut single = Vec::new();
    for i in 0..200 {
        let path = scratch.join(format!("file_{i}.rs"));
        std::fs::write(&path, "").unwrap();
        let started = Instant::now();
        index.apply(&[FileChange::new(&path, ChangeKind::Created)]);
        single.push(started.elapsed());
    }
    for i in 0..200 {
        let path = scratch.join(format!("file_{i}.rs"));
        std::fs::remove_file(&path).unwrap();
        let started = Instant::now();
        index.apply(&[FileChange::new(&path, ChangeKind::Deleted)]);
        single.push(started.elapsed());
    }
    single.sort();
    let tree_dir = scratch.join("tree");
    for i in 0..100 {
        let path = tree_dir.join(format!("d{}/f{i}.rs", i % 10));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "").unwrap();
    }
    let started = Instant::now();
    index.apply(&[FileChange::new(&tree_dir, ChangeKind::Created)]);
    let tree_created = started.elapsed();
    std::fs::remove_dir_all(&scratch).unwrap();
    let started = Instant::now();
    index.apply(&[FileChange::new(&scratch, ChangeKind::Deleted)]);
    let tree_deleted = started.elapsed();
    assert_eq!(index.status().full_walks, 1);
    rows.push((
        "apply one created/deleted file (400 events)".into(),
        format!(
            "p50 {}, p99 {}",
            ms(percentile(&single, 0.5)),
            ms(percentile(&single, 0.99))
        ),
    ));
    rows.push((
        "apply a created directory of 110 entries / its deletion".into(),
        format!("{} / {}", ms(tree_created), ms(tree_deleted)),
    ));

    // The live index: first walk plus a watch per directory, then watcher latency from a
    // file's creation to its appearance in the index.
    let started = Instant::now();
    let live = LiveIndex::start(&workspace, FilesConfig::default(), true).unwrap();
    assert!(live.wait_ready(Duration::from_secs(60)));
    let ready = started.elapsed();
    // The watches are added right after the walk; a file in the deepest directory shows
    // whether they are in place.
    let deepest = live
        .read()
        .iter()
        .filter(|(_, kind)| *kind == EntryKind::Directory)
        .map(|(path, _)| path.to_owned())
        .max_by_key(|path| (path.matches('/').count(), path.clone()))
        .unwrap();
    let mut seen = Vec::new();
    for i in 0..20 {
        let relative = format!("{deepest}/watched_{i}.rs");
        let started = Instant::now();
        std::fs::write(root.join(&relative), "").unwrap();
        assert!(live.wait_until(Duration::from_secs(10), |index| {
            index.kind_of(&relative).is_some()
        }));
        seen.push(started.elapsed());
        std::fs::remove_file(root.join(&relative)).unwrap();
    }
    drop(live);
    seen.sort();
    rows.push((
        "live index: start to first answer (the walk; a watch per directory follows)".into(),
        ms(ready),
    ));
    rows.push((
        "watcher: file created in the deepest directory to visible in the index (20 files; the first waits for the watches)".into(),
        format!(
            "p50 {}, max {}",
            ms(percentile(&seen, 0.5)),
            ms(*seen.last().unwrap())
        ),
    ));

    println!("Tree: {}", root.display());
    println!();
    println!("| measure | figure |");
    println!("|---|---|");
    for (measure, figure) in rows {
        println!("| {measure} | {figure} |");
    }
}
