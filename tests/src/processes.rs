//! The processes a test's server started, read from `/proc`: tests count and kill real child
//! language servers by what they run, not by asking the code under test.

/// Every live descendant of `pid` as `(pid, command line)`, the command line's arguments
/// joined by spaces. Zombies (dead, not yet reaped) are left out.
pub fn descendants(pid: u32) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    let mut parents = vec![pid];
    while let Some(parent) = parents.pop() {
        for child in children(parent) {
            parents.push(child);
            if is_zombie(child) {
                continue;
            }
            let cmdline = std::fs::read(format!("/proc/{child}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            found.push((child, cmdline.trim().to_owned()));
        }
    }
    found
}

/// The live descendants of `pid` whose command line contains `needle`.
pub fn descendants_running(pid: u32, needle: &str) -> Vec<u32> {
    descendants(pid)
        .into_iter()
        .filter(|(_, cmdline)| cmdline.contains(needle))
        .map(|(pid, _)| pid)
        .collect()
}

/// Live processes anywhere in the process tree whose command line is exactly `argv` and whose
/// working directory is `cwd`: the ones a test's commands started in its own temporary folder,
/// also after a `setsid` or a double fork took them out of the test's descendants.
pub fn live_processes(argv: &[&str], cwd: &std::path::Path) -> Vec<u32> {
    let wanted = argv
        .iter()
        .map(|arg| format!("{arg}\0"))
        .collect::<String>();
    std::fs::read_dir("/proc")
        .expect("read /proc")
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            cmdline == wanted.as_bytes()
                && alive(*pid)
                && std::fs::read_link(format!("/proc/{pid}/cwd"))
                    .ok()
                    .as_deref()
                    == Some(cwd)
        })
        .collect()
}

/// Whether `pid` is a process that has not exited (a zombie has).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat
            .rsplit_once(')')
            .map_or("", |(_, rest)| rest.trim_start());
        !state.starts_with('Z') && !state.starts_with('X')
    })
}

fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|pid| pid.parse().ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            // The state follows the parenthesised command name, which may hold spaces.
            let after = stat.rsplit_once(')')?.1;
            after.split_whitespace().next().map(|state| state == "Z")
        })
        .unwrap_or(true)
}

/// `kill -KILL pid`, and wait (bounded) until it can receive nothing more: its files are
/// closed and every thread of it has finished exiting. (The thread group leader of a
/// multi-threaded process such as node shows as a zombie while its other threads are still
/// exiting and its pipes still open. And a thread whose descriptor table is gone from `/proc`
/// may not yet have released the files in it: the kernel releases them later in the thread's
/// exit, so until the thread is a zombie a write to its stdin can still land in the pipe, as a
/// request it read and died on would.)
pub fn kill_and_wait(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -KILL {pid} failed");
    let deadline = std::time::Instant::now() + crate::editor::WAIT;
    while has_open_files(pid) || !all_threads_exited(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "process {pid} did not die"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Whether every thread of `pid` is a zombie or gone (so each has run the whole of its exit).
fn all_threads_exited(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return true;
    };
    tasks.filter_map(Result::ok).all(|task| {
        std::fs::read_to_string(task.path().join("stat"))
            .ok()
            .and_then(|stat| {
                let after = stat.rsplit_once(')')?.1.to_owned();
                after
                    .split_whitespace()
                    .next()
                    .map(|state| state == "Z" || state == "X")
            })
            .unwrap_or(true)
    })
}

/// Whether any thread of `pid` still has a file open. Each thread is looked at: the leader of
/// a multi-threaded process drops its files when it exits, while the others keep them open
/// until they have exited too.
fn has_open_files(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.filter_map(Result::ok).any(|task| {
        std::fs::read_dir(task.path().join("fd")).is_ok_and(|mut entries| entries.next().is_some())
    })
}

/// One round of a crash test: start `command` (a writer that prints one line per change it
/// made durable), wait for up to `max_lines` of those lines or `max_millis` (both at least 1
/// and 20, chosen from `seed`), then SIGKILL it mid-write. Returns the lines it printed, in
/// order: what it acknowledged before it died. A writer that exits on its own fails the test.
pub fn kill_while_writing(
    command: &mut std::process::Command,
    seed: u64,
    max_lines: u64,
    max_millis: u64,
) -> Vec<String> {
    use std::io::BufRead;
    use std::time::{Duration, Instant};

    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the writer");
    let stdout = child.stdout.take().expect("piped stdout");
    let (sender, receiver) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    // Wait for a random number of acknowledgements (or a random time), then kill.
    let target = 1 + seed % max_lines;
    let deadline = Instant::now() + Duration::from_millis(20 + seed % max_millis);
    let mut acknowledged = Vec::new();
    while (acknowledged.len() as u64) < target && Instant::now() < deadline {
        if let Ok(line) = receiver.recv_timeout(Duration::from_millis(5)) {
            acknowledged.push(line);
        }
    }
    kill_and_wait(child.id());
    let status = child.wait().expect("wait for the writer");
    reader.join().expect("the reader thread");
    acknowledged.extend(receiver.try_iter());
    if status.success() {
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().expect("piped stderr"), &mut stderr)
            .expect("read stderr");
        panic!("{command:?} exited on its own: {stderr}");
    }
    acknowledged
}

/// The memory high-water mark of `pid` (`VmHWM` in `/proc/PID/status`), in KiB; 0 once the
/// process is gone.
pub fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmHWM:"))
                .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}
