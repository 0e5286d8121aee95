//! Background jobs: `shell` with `background: true` starts a command that runs while the agent
//! goes on (a build, a test suite, a dev server), `job_output`, `job_kill` and `job_list` look
//! after it, and the `jobs` plugin announces, once, each job that ended by itself (or was
//! stopped from the editor). Every job is posted on the host's activity board (`board.rs`), so
//! the editor shows it running, with its last output line, and can stop it.
//!
//! Why it is built this way:
//! - **The session log stays the record.** A job's output is spooled to disk
//!   (`<state>/jobs/<pid>-<n>/<id>.log`, a temporary directory without a state directory) and
//!   enters the session only when read: a `job_output` result, capped to its head and tail, is
//!   what the log records and what the model saw. An end enters as one `context/runtime`
//!   message (source `jobs:<id>`, facts keyed by the job and its exit status), so it is
//!   announced exactly once, before the next step.
//! - **No orphans.** A job is started and killed with the `shell` tool's pieces (its own
//!   process group, the call token for processes that leave it): `job_kill` sends SIGTERM to the
//!   group, then SIGKILL after [`KILL_GRACE`]. Every job of a table is killed when the table is
//!   dropped (the session's tools and plugins go: `run` ends, `serve` starts a new session or
//!   closes the connection), and [`kill_all`] kills every job of the process when `main`
//!   returns, whatever still holds a table then (a turn that `serve`'s shutdown cut off).
//!   A watchdog per job (the agent-lsp binary started again, `watchdog.rs`) covers agent-lsp
//!   dying without running any code: it kills the job's group and every process carrying the
//!   job's token, as `shell` kills what a command left.
//! - **The editor stops a job as `job_kill` does.** Its board entry carries a token whose
//!   cancellation runs the same kill (SIGTERM to the group, SIGKILL after the grace); the model
//!   is told of that end by the end notice, since no `job_kill` result told it.
//! - **The same guard as `shell`.** A background job is a `shell` call, so the preset's `shell`
//!   permission and the deny-list apply to it; `job_kill` has its own permission, which the
//!   built-in presets set like `shell`'s. A table holds the jobs of one session: a session
//!   sees, reads and kills only its own.

mod board;
mod job;
pub(crate) mod plugin;
mod spool;
mod tools;
pub mod watchdog;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use crate::activity::Activity;

pub(crate) use job::{End, Job, StoppedBy};
pub(crate) use plugin::{JobsPlugin, JobsSettings, PLUGIN};

/// How long a job is given to end after SIGTERM before it is sent SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(2);

/// Every table of this process, for [`kill_all`].
static TABLES: Mutex<Vec<Weak<JobTable>>> = Mutex::new(Vec::new());

/// Kill every job of every table of this process (SIGTERM, then SIGKILL after the grace).
/// `main` calls it on its way out.
pub fn kill_all() {
    let tables = TABLES
        .lock()
        .expect("job tables")
        .drain(..)
        .filter_map(|table| table.upgrade())
        .collect::<Vec<_>>();
    for table in tables {
        table.kill_all();
    }
}

/// The jobs of one session.
#[derive(Debug)]
pub struct JobTable {
    settings: JobsSettings,
    state_dir: Option<PathBuf>,
    /// Made when the first job starts.
    spool_dir: OnceLock<Result<SpoolDir, String>>,
    jobs: Mutex<Vec<Arc<Job>>>,
    /// Where the jobs are shown to the editor.
    activity: Arc<Activity>,
}

/// Where a table's jobs spool their output; removed with the table.
#[derive(Debug)]
enum SpoolDir {
    State(PathBuf),
    Temporary(tempfile::TempDir),
}

impl SpoolDir {
    fn path(&self) -> &Path {
        match self {
            SpoolDir::State(path) => path,
            SpoolDir::Temporary(dir) => dir.path(),
        }
    }
}

impl JobTable {
    /// A table whose jobs spool under `state_dir` (a temporary directory when `None`) and are
    /// posted on `activity`.
    pub fn new(
        settings: JobsSettings,
        state_dir: Option<PathBuf>,
        activity: Arc<Activity>,
    ) -> Arc<JobTable> {
        let table = Arc::new(JobTable {
            settings,
            state_dir,
            spool_dir: OnceLock::new(),
            jobs: Mutex::new(Vec::new()),
            activity,
        });
        let mut tables = TABLES.lock().expect("job tables");
        tables.retain(|table| table.strong_count() > 0);
        tables.push(Arc::downgrade(&table));
        table
    }

    /// The settings the table was made with (output caps, notice length).
    pub fn settings(&self) -> &JobsSettings {
        &self.settings
    }

    /// Start `command` in `root` as the next job of session `session` (the session the call
    /// runs in: a sub-agent's jobs are shown under its entry on the board), in `sandbox` when
    /// the preset has one.
    pub fn start(
        &self,
        root: &Path,
        command: &str,
        session: Option<&str>,
        sandbox: Option<&crate::sandbox::Sandbox>,
    ) -> anyhow::Result<Arc<Job>> {
        let dir = self
            .spool_dir
            .get_or_init(|| self.make_spool_dir().map_err(|err| format!("{err:#}")))
            .as_ref()
            .map_err(|err| anyhow::anyhow!("cannot make the jobs' spool directory: {err}"))?;
        let mut jobs = self.jobs.lock().expect("jobs");
        let running = jobs.iter().filter(|job| job.end().is_none()).count();
        if running >= self.settings.max_running {
            anyhow::bail!(
                "{running} jobs are running, the most this preset allows (`max_running`); wait for one to end or stop one with job_kill"
            );
        }
        let id = format!("job-{}", jobs.len() + 1);
        let job = Job::start(
            id,
            command,
            root,
            dir.path(),
            self.settings.spool_bytes,
            sandbox,
        )?;
        jobs.push(job.clone());
        drop(jobs);
        board::post(&self.activity, &job, session);
        Ok(job)
    }

    /// The job called `id` (`job-2`, or just `2`).
    pub fn get(&self, id: &str) -> Option<Arc<Job>> {
        let id = id.trim();
        let wanted = if id.starts_with("job-") {
            id.to_owned()
        } else {
            format!("job-{id}")
        };
        self.jobs
            .lock()
            .expect("jobs")
            .iter()
            .find(|job| job.id == wanted)
            .cloned()
    }

    /// Every job, in the order they started.
    pub fn jobs(&self) -> Vec<Arc<Job>> {
        self.jobs.lock().expect("jobs").clone()
    }

    /// Kill one job for `job_kill` and wait for its end; `None` when it had already ended.
    pub fn kill(&self, job: &Job) -> Option<End> {
        kill(job, StoppedBy::JobKill)
    }

    /// Kill every running job: SIGTERM to all, one grace period for all, then SIGKILL.
    pub fn kill_all(&self) {
        let jobs = self.jobs();
        let killing = jobs
            .iter()
            .map(Arc::as_ref)
            .filter(|job| job.begin_kill(None))
            .collect::<Vec<_>>();
        if killing.is_empty() {
            return;
        }
        tracing::info!(jobs = killing.len(), "killing background jobs");
        wait_for_groups(&killing);
        for job in killing {
            job.finish_kill();
        }
    }

    /// `<state>/jobs/<pid>-<n>`, after removing the directories of processes that are gone
    /// (their jobs died with them or were killed by their watchdogs).
    fn make_spool_dir(&self) -> anyhow::Result<SpoolDir> {
        let Some(state_dir) = &self.state_dir else {
            return Ok(SpoolDir::Temporary(
                tempfile::Builder::new()
                    .prefix("agent-lsp-jobs-")
                    .tempdir()?,
            ));
        };
        static TABLE: AtomicU64 = AtomicU64::new(0);
        let root = state_dir.join("jobs");
        std::fs::create_dir_all(&root)?;
        for entry in std::fs::read_dir(&root)?.filter_map(Result::ok) {
            let name = entry.file_name();
            let pid = name
                .to_str()
                .and_then(|name| name.split_once('-'))
                .map(|(pid, _)| pid);
            if let Some(pid) = pid.and_then(|pid| pid.parse::<u32>().ok())
                && !Path::new(&format!("/proc/{pid}")).exists()
            {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        let dir = root.join(format!(
            "{}-{}",
            std::process::id(),
            TABLE.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir)?;
        Ok(SpoolDir::State(dir))
    }
}

/// Kill one job as `by` asked and wait for its end (SIGTERM to its group, SIGKILL after
/// [`KILL_GRACE`]); `None` when it had already ended. `job_kill` and the editor's cancel both
/// come here, so they kill alike.
fn kill(job: &Job, by: StoppedBy) -> Option<End> {
    if !job.begin_kill(Some(by)) {
        return None;
    }
    wait_for_groups(&[job]);
    job.finish_kill()
}

/// Wait until no process is left in the groups of `jobs`, for at most [`KILL_GRACE`].
fn wait_for_groups(jobs: &[&Job]) {
    let deadline = Instant::now() + KILL_GRACE;
    while Instant::now() < deadline && jobs.iter().any(|job| job.group_alive()) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for JobTable {
    fn drop(&mut self) {
        self.kill_all();
        if let Some(Ok(SpoolDir::State(dir))) = self.spool_dir.get() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

#[cfg(test)]
mod tests;
