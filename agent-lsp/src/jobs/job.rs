//! One background job: a `sh -c` command started the way the `shell` tool starts one (its own
//! process group, the call token in its environment), its output spooled to disk, and the
//! threads and the watchdog that see it end.
//!
//! A job is watched by plain threads rather than runtime tasks: a job outlives the tool call
//! that started it, and it must be seen to end (and be killed) whatever runtime is running, or
//! none, as when the job table is dropped at the end of the process. A reader thread copies the
//! job's output (stdout and stderr on one pipe, so their order is kept) into the spool; a
//! supervisor thread waits for `sh`, kills what it left in the background (as the `shell`
//! tool does), waits for the rest of the output and records the end.
//!
//! The watchdog covers the one case no code of ours runs in: agent-lsp killed by SIGKILL or a
//! crash (`watchdog.rs`).

use std::io::Read;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use tokio::sync::watch;

use super::spool::Spool;
use super::watchdog::Watchdog;
use crate::sandbox::process::{ProcessGroup, sh_command};

/// How long a job's output is waited for once its `sh` exited and its group was killed; only a
/// process that left the group unmarked can keep the pipe open longer.
const PIPE_GRACE: Duration = Duration::from_secs(2);

/// Who asked for a job to be killed (a table that is dropped kills its jobs unasked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoppedBy {
    /// The model, with `job_kill`: its result is how the model learns of the end.
    JobKill,
    /// The programmer, from the editor (the job's cancellable entry on the activity board):
    /// the model learns of it from the end notice, as of an end by itself.
    Editor,
}

/// How a job ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct End {
    /// The exit code of its `sh`, or `None` when a signal ended it.
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// How long it ran.
    pub after: Duration,
    /// Who had it killed, when someone did.
    pub stopped_by: Option<StoppedBy>,
}

impl End {
    /// `exit code 3`, `killed by signal 15`: what the model is told.
    pub fn status(&self) -> String {
        match (self.code, self.signal) {
            (Some(code), _) => format!("exit code {code}"),
            (None, Some(signal)) => format!("killed by signal {signal}"),
            (None, None) => "exit status unknown".to_owned(),
        }
    }

    /// `exit 3`, `signal 9`, `killed`: the short form of [`End::status`] the editor shows as an
    /// entry's outcome, where a kill someone asked for is just `killed`.
    pub fn outcome(&self) -> String {
        match (self.stopped_by, self.code, self.signal) {
            (Some(_), _, _) => "killed".to_owned(),
            (None, Some(code), _) => format!("exit {code}"),
            (None, None, Some(signal)) => format!("signal {signal}"),
            (None, None, None) => "ended".to_owned(),
        }
    }

    /// `, stopped by job_kill,` or `, stopped from the editor,` (or nothing), for the lines
    /// that describe an end to the model.
    pub fn stopped_clause(&self) -> &'static str {
        match self.stopped_by {
            Some(StoppedBy::JobKill) => ", stopped by job_kill,",
            Some(StoppedBy::Editor) => ", stopped from the editor,",
            None => "",
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    end: Option<End>,
    /// Whether a kill is under way: the supervisor then leaves the group to the killer, which
    /// gives it a grace period after SIGTERM.
    terminating: bool,
    /// Who asked for the kill, if someone did.
    stopped_by: Option<StoppedBy>,
    /// How far this session has read the output with `job_output`.
    read_to: u64,
    /// Whether the end was announced in the runtime context.
    announced: bool,
}

/// A background job.
#[derive(Debug)]
pub struct Job {
    pub id: String,
    pub command: String,
    /// The pid of its `sh`, which is also its process group id.
    pub pid: u32,
    /// When it started, as an RFC 3339 time (it tells apart jobs of the same id in one session
    /// log, started by different processes).
    pub started_at: String,
    started: Instant,
    group: ProcessGroup,
    pub(super) spool: Spool,
    inner: Mutex<Inner>,
    ended: Condvar,
    /// Bumped on every piece of output and on the end, for `job_output`'s `wait_secs`.
    changed: watch::Sender<u64>,
}

impl Job {
    /// Start `command` in `root` as job `id`, spooling its output into `dir`.
    pub(super) fn start(
        id: String,
        command: &str,
        root: &Path,
        dir: &Path,
        spool_bytes: u64,
        sandbox: Option<&crate::sandbox::Sandbox>,
    ) -> anyhow::Result<Arc<Job>> {
        let spool = Spool::create(dir, &id, spool_bytes)?;
        let (mut output, writer) = std::io::pipe()?;
        let (mut sh, token) = sh_command(root, command, sandbox);
        sh.stdin(Stdio::null())
            .stdout(writer.try_clone()?)
            .stderr(writer);
        let mut child = sh.spawn()?;
        // Our copies of the pipe's writing end go with the command, so the reader sees the end
        // of the output once the job's processes are gone.
        drop(sh);
        let watchdog = Watchdog::start(child.id(), &token);
        let group = ProcessGroup::new(child.id(), token)
            .ok_or_else(|| anyhow::anyhow!("the job's pid {} is out of range", child.id()))?;
        let job = Arc::new(Job {
            id,
            command: command.to_owned(),
            pid: child.id(),
            started_at: chrono::Local::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, false),
            started: Instant::now(),
            group,
            spool,
            inner: Mutex::default(),
            ended: Condvar::new(),
            changed: watch::Sender::new(0),
        });
        tracing::info!(job = %job.id, pid = job.pid, command, "background job started");

        let (done, output_done) = std::sync::mpsc::channel::<()>();
        let reader = job.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("{}-output", job.id))
            .spawn(move || {
                let mut buffer = vec![0u8; 16 * 1024];
                loop {
                    match output.read(&mut buffer) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if let Err(err) = reader.spool.append(&buffer[..n]) {
                                tracing::warn!(job = %reader.id, %err, "the job's output could not be spooled");
                            }
                            reader.changed.send_modify(|version| *version += 1);
                        }
                    }
                }
                let _ = done.send(());
            })
            .and_then(|_| {
                let supervised = job.clone();
                std::thread::Builder::new()
                    .name(format!("{}-wait", job.id))
                    .spawn(move || supervised.supervise(&mut child, &output_done, watchdog))
            });
        if let Err(err) = spawned {
            job.group.kill();
            anyhow::bail!("cannot watch the job: {err}");
        }
        Ok(job)
    }

    /// Wait for `sh`, clean up after it, and record the end (the supervisor thread).
    fn supervise(
        &self,
        child: &mut Child,
        output_done: &std::sync::mpsc::Receiver<()>,
        watchdog: Option<Watchdog>,
    ) {
        let status = child.wait();
        let terminating = self.inner.lock().expect("job").terminating;
        if !terminating {
            // What the command left in the background goes with it, as with `shell`.
            self.group.kill();
        }
        let grace = if terminating {
            PIPE_GRACE + super::KILL_GRACE
        } else {
            PIPE_GRACE
        };
        if output_done.recv_timeout(grace).is_err() {
            tracing::warn!(job = %self.id, "a process outside the job's group keeps its output open");
        }
        let (code, signal) = match &status {
            Ok(status) => {
                use std::os::unix::process::ExitStatusExt;
                (status.code(), status.signal())
            }
            Err(_) => (None, None),
        };
        {
            let mut inner = self.inner.lock().expect("job");
            inner.end = Some(End {
                code,
                signal,
                after: self.started.elapsed(),
                stopped_by: inner.stopped_by,
            });
        }
        self.ended.notify_all();
        self.changed.send_modify(|version| *version += 1);
        tracing::info!(job = %self.id, ?status, "background job ended");
        if let Some(watchdog) = watchdog {
            watchdog.release();
        }
    }

    /// How the job ended, or `None` while it runs.
    pub fn end(&self) -> Option<End> {
        self.inner.lock().expect("job").end.clone()
    }

    /// The command as shown in results and notices: its first line, cut at 200 characters.
    pub fn shown_command(&self) -> String {
        self.command_cut_at(200)
    }

    /// The command's first line, cut at `max` characters (` …` says it was cut).
    pub(super) fn command_cut_at(&self, max: usize) -> String {
        let first = self.command.lines().next().unwrap_or_default();
        if first.len() == self.command.len() && first.chars().count() <= max {
            return first.to_owned();
        }
        let mut shown = first.chars().take(max).collect::<String>();
        shown.push_str(" …");
        shown
    }

    /// How long it has run (until its end, once it ended).
    pub fn elapsed(&self) -> Duration {
        self.end()
            .map_or_else(|| self.started.elapsed(), |end| end.after)
    }

    /// A receiver told of every piece of output and of the end.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// How far `job_output` has read; [`Job::mark_read`] moves it on.
    pub fn read_to(&self) -> u64 {
        self.inner.lock().expect("job").read_to
    }

    pub fn mark_read(&self, to: u64) {
        let mut inner = self.inner.lock().expect("job");
        inner.read_to = inner.read_to.max(to);
    }

    /// The end, once, if it is to be announced: the job was not killed by `job_kill` (whose
    /// answer told the model) and was not announced before.
    pub(super) fn take_announcement(&self) -> Option<End> {
        let mut inner = self.inner.lock().expect("job");
        let end = inner.end.clone()?;
        if inner.announced || inner.stopped_by == Some(StoppedBy::JobKill) {
            return None;
        }
        inner.announced = true;
        Some(end)
    }

    /// Begin a kill (asked for by `by`, or by nobody when the table goes): SIGTERM to the
    /// group. Returns `false` when the job had already ended.
    pub(super) fn begin_kill(&self, by: Option<StoppedBy>) -> bool {
        {
            let mut inner = self.inner.lock().expect("job");
            if inner.end.is_some() {
                return false;
            }
            inner.terminating = true;
            inner.stopped_by = inner.stopped_by.or(by);
        }
        self.group.signal(Signal::SIGTERM);
        true
    }

    /// Whether a process is left in the job's group.
    pub(super) fn group_alive(&self) -> bool {
        self.group.is_alive()
    }

    /// End a kill: SIGKILL whatever is left (in the group, or marked with the job's token), then
    /// wait for the supervisor to record the end.
    pub(super) fn finish_kill(&self) -> Option<End> {
        self.group.kill();
        let inner = self.inner.lock().expect("job");
        let (inner, _) = self
            .ended
            .wait_timeout_while(inner, PIPE_GRACE + super::KILL_GRACE, |inner| {
                inner.end.is_none()
            })
            .expect("job");
        inner.end.clone()
    }
}
