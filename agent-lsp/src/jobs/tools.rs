//! The job tools: `shell` with `background` (the `shell` tool, plus starting a job), and
//! `job_output`, `job_kill`, `job_list`. The plugin brings its `shell` in place of the plain
//! one, so a preset with jobs has one `shell` whose foreground calls are the plain tool's.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use super::spool::excerpt;
use super::{Job, JobTable, KILL_GRACE};
use crate::plugin::outcomes::ToolOutput;
use crate::plugin::tool::ToolContext;
use crate::plugin::typed::TypedTool;
use crate::sandbox::{Confinement, Leave};
use crate::tools::blocking;
use crate::tools::shell::{self, SHELL_MAX_TIMEOUT_SECS, Shell, refusal};

/// The longest `job_output` waits for output.
pub const MAX_WAIT_SECS: u64 = 60;

/// `shell {command, timeout_secs?, background?}`.
pub struct JobShell {
    table: Arc<JobTable>,
}

impl JobShell {
    pub fn new(table: Arc<JobTable>) -> JobShell {
        JobShell { table }
    }
}

/// The arguments of the jobs' `shell`: the plain tool's and `background`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellArgs {
    /// The command line, as given to `sh -c`.
    command: String,
    /// Seconds before the command is killed. Default 120.
    #[serde(default)]
    #[schemars(range(min = 1, max = SHELL_MAX_TIMEOUT_SECS))]
    timeout_secs: Option<u64>,
    /// Start the command as a background job and return its id at once (no `timeout_secs`).
    /// Default false.
    #[serde(default)]
    background: bool,
    /// Only when this session's commands run in a sandbox and this one needs more: "network"
    /// (the network on) or "all" (no sandbox: writing outside the workspace or to .git/ and
    /// the other protected paths). The user is asked to allow it.
    #[serde(default)]
    leave_sandbox: Option<Leave>,
}

impl TypedTool for JobShell {
    type Args = ShellArgs;

    fn name(&self) -> &str {
        "shell"
    }

    fn description(&self) -> String {
        Shell.description()
            + " With `background: true` the command starts as a background job and the call returns its id at once: \
             read its output with `job_output`, stop it with `job_kill`, see all jobs with `job_list`; when a job ends \
             by itself you are told its exit code and last lines. Jobs run until they end or are killed, and are \
             killed when this agent's process ends; processes a job leaves in the background are killed when it exits."
    }

    fn read_only(&self) -> bool {
        false
    }

    fn timeout(&self, args: &ShellArgs) -> Option<Duration> {
        Some(shell::call_timeout(args.timeout_secs))
    }

    fn confinement(&self, args: &ShellArgs) -> Confinement {
        shell::confinement(args.leave_sandbox)
    }

    fn run(&self, ctx: ToolContext, args: ShellArgs) -> BoxFuture<'static, ToolOutput> {
        if !args.background {
            let foreground = shell::ShellArgs {
                command: args.command,
                timeout_secs: args.timeout_secs,
                leave_sandbox: args.leave_sandbox,
            };
            return Shell.run(ctx, foreground);
        }
        let table = self.table.clone();
        Box::pin(async move {
            if args.timeout_secs.is_some() {
                return ToolOutput::error(
                    "`timeout_secs` is for commands in the foreground; a background job runs until it ends or job_kill stops it",
                );
            }
            if let Some(refused) = refusal(&args.command) {
                return refused;
            }
            let root = ctx.workspace.root().to_owned();
            let command = args.command;
            let session = ctx.session_id.clone();
            let sandbox = ctx.sandbox.clone();
            blocking(move || match table.start(&root, &command, session.as_deref(), sandbox.as_deref()) {
                Ok(job) => ToolOutput::ok(format!(
                    "started background job {id} (pid {pid}): `{command}`\n\
                     Read its output with job_output {{\"id\": \"{id}\"}} (with wait_secs to wait for more), stop it with job_kill {{\"id\": \"{id}\"}}.",
                    id = job.id,
                    pid = job.pid,
                    command = job.shown_command(),
                ))
                .with_meta("job", job.id.clone())
                .with_meta("pid", job.pid),
                Err(err) => ToolOutput::error(format!("the job was not started: {err:#}")),
            })
            .await
        })
    }
}

/// The job an `id` argument names, or the error output listing the jobs there are.
fn find(table: &JobTable, id: &str) -> Result<Arc<Job>, ToolOutput> {
    table.get(id).ok_or_else(|| {
        let ids = table
            .jobs()
            .iter()
            .map(|job| job.id.clone())
            .collect::<Vec<_>>();
        ToolOutput::error(if ids.is_empty() {
            format!("there is no job `{id}`: no background job was started in this session")
        } else {
            format!("there is no job `{id}`; the jobs are {}", ids.join(", "))
        })
        .with_meta("unknown_job", true)
    })
}

/// `job-1: running for 3.2 s` or `job-1: exit code 3 after 2.0 s`.
fn state_line(job: &Job) -> String {
    match job.end() {
        None => format!(
            "{}: running for {:.1} s (`{}`)",
            job.id,
            job.elapsed().as_secs_f64(),
            job.shown_command()
        ),
        Some(end) => format!(
            "{}: ended, {}{} after {:.1} s (`{}`)",
            job.id,
            end.status(),
            end.stopped_clause(),
            end.after.as_secs_f64(),
            job.shown_command()
        ),
    }
}

/// `job_output {id, since?, wait_secs?}`.
pub struct JobOutput {
    table: Arc<JobTable>,
}

impl JobOutput {
    pub fn new(table: Arc<JobTable>) -> JobOutput {
        JobOutput { table }
    }
}

/// The arguments of `job_output`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OutputArgs {
    /// The job's id, as `shell` returned it (`job-1`).
    #[schemars(with = "String")]
    id: IdArg,
    /// Byte offset to read from; default: where the last read of this job stopped.
    #[serde(default)]
    since: Option<u64>,
    /// Seconds to wait for new output or the job's end when there is none yet. Default 0.
    #[serde(default)]
    #[schemars(range(max = MAX_WAIT_SECS))]
    wait_secs: Option<u64>,
}

/// A job id as the model may send it: `"job-1"`, `"1"` or `1`.
#[derive(Deserialize)]
#[serde(untagged)]
enum IdArg {
    Text(String),
    Number(u64),
}

impl IdArg {
    fn text(&self) -> String {
        match self {
            IdArg::Text(text) => text.clone(),
            IdArg::Number(number) => number.to_string(),
        }
    }
}

impl TypedTool for JobOutput {
    type Args = OutputArgs;

    fn name(&self) -> &str {
        "job_output"
    }

    fn description(&self) -> String {
        format!(
            "The output of a background job (stdout and stderr as printed), from byte offset `since`, by default \
                 from where your last job_output of it stopped, and whether it still runs or how it ended. Long \
                 output keeps its start and end (at most {} bytes). `wait_secs` (at most {MAX_WAIT_SECS}) first \
                 waits until there is new output or the job has ended.",
            self.table.settings().output_bytes
        )
    }

    fn read_only(&self) -> bool {
        true
    }

    fn timeout(&self, args: &OutputArgs) -> Option<Duration> {
        let wait = args.wait_secs.unwrap_or(0);
        Some(Duration::from_secs(wait.min(MAX_WAIT_SECS) + 30))
    }

    fn run(&self, ctx: ToolContext, args: OutputArgs) -> BoxFuture<'static, ToolOutput> {
        let table = self.table.clone();
        Box::pin(async move {
            let job = match find(&table, &args.id.text()) {
                Ok(job) => job,
                Err(output) => return output,
            };
            let wait = Duration::from_secs(args.wait_secs.unwrap_or(0).min(MAX_WAIT_SECS));
            let since = args.since.unwrap_or_else(|| job.read_to());
            if !wait.is_zero() {
                let mut changed = job.subscribe();
                let deadline = tokio::time::Instant::now() + wait;
                while job.end().is_none() && job.spool.total() <= since {
                    tokio::select! {
                        result = changed.changed() => if result.is_err() { break },
                        () = tokio::time::sleep_until(deadline) => break,
                        () = ctx.cancel.cancelled() => break,
                    }
                }
            }
            let cap = table.settings().output_bytes;
            blocking(move || {
                // The state first: output printed before an end is then always in the read.
                let state = state_line(&job);
                let end = job.end();
                let excerpt = match excerpt(&job.spool, since, cap) {
                    Ok(excerpt) => excerpt,
                    Err(err) => {
                        return ToolOutput::error(format!(
                            "the job's output could not be read: {err}"
                        ));
                    }
                };
                job.mark_read(excerpt.to);
                let mut text = format!("{state}\n");
                if let Some((from, to)) = excerpt.dropped {
                    text.push_str(&format!(
                        "[bytes {from}–{to} are no longer kept (a job keeps its last {} bytes)]\n",
                        table.settings().spool_bytes
                    ));
                }
                if excerpt.from == excerpt.to {
                    text.push_str(&format!("(no new output; {} bytes in all)\n", excerpt.to));
                } else {
                    text.push_str(&format!(
                        "--- output, bytes {}–{} of {} ---\n{}",
                        excerpt.from, excerpt.to, excerpt.to, excerpt.text
                    ));
                    if !text.ends_with('\n') {
                        text.push('\n');
                    }
                }
                ToolOutput::ok(text)
                    .with_meta("job", job.id.clone())
                    .with_meta("running", end.is_none())
                    .with_meta("exit_code", end.as_ref().and_then(|end| end.code))
                    .with_meta("from", excerpt.from)
                    .with_meta("to", excerpt.to)
                    .with_meta("truncated", excerpt.cut.is_some())
            })
            .await
        })
    }
}

/// `job_kill {id}`.
pub struct JobKill {
    table: Arc<JobTable>,
}

impl JobKill {
    pub fn new(table: Arc<JobTable>) -> JobKill {
        JobKill { table }
    }
}

/// The arguments of `job_kill`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KillArgs {
    /// The job's id, as `shell` returned it (`job-1`).
    #[schemars(with = "String")]
    id: IdArg,
}

impl TypedTool for JobKill {
    type Args = KillArgs;

    fn name(&self) -> &str {
        "job_kill"
    }

    fn description(&self) -> String {
        format!(
            "Stop a background job and every process it started: SIGTERM, then SIGKILL after {} s. Returns how \
                 it ended.",
            KILL_GRACE.as_secs()
        )
    }

    fn read_only(&self) -> bool {
        false
    }

    /// Stopping a job this session started does no more than its command could: what holds
    /// the command holds this call too.
    fn confinement(&self, _args: &KillArgs) -> Confinement {
        Confinement::Held
    }

    fn run(&self, _ctx: ToolContext, args: KillArgs) -> BoxFuture<'static, ToolOutput> {
        let table = self.table.clone();
        Box::pin(async move {
            let job = match find(&table, &args.id.text()) {
                Ok(job) => job,
                Err(output) => return output,
            };
            blocking(move || {
                let killed = table.kill(&job);
                let unread = job.spool.total().saturating_sub(job.read_to());
                let mut text = match &killed {
                    Some(end) => format!(
                        "{} killed with everything it started ({} after {:.1} s).",
                        job.id,
                        end.status(),
                        end.after.as_secs_f64()
                    ),
                    None => format!("{} had already ended; nothing to kill.\n{}", job.id, state_line(&job)),
                };
                if unread > 0 {
                    text.push_str(&format!(
                        "\n{unread} bytes of its output were not read: job_output {{\"id\": \"{}\"}} reads them.",
                        job.id
                    ));
                }
                ToolOutput::ok(text)
                    .with_meta("job", job.id.clone())
                    .with_meta("killed", killed.is_some())
            })
            .await
        })
    }
}

/// `job_list {}`.
pub struct JobList {
    table: Arc<JobTable>,
}

impl JobList {
    pub fn new(table: Arc<JobTable>) -> JobList {
        JobList { table }
    }
}

/// The arguments of `job_list`: none.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {}

impl TypedTool for JobList {
    type Args = ListArgs;

    fn name(&self) -> &str {
        "job_list"
    }

    fn description(&self) -> String {
        "The background jobs of this session: id, running or how it ended, the command, and how much of \
                          its output you have not read."
                .into()
    }

    fn read_only(&self) -> bool {
        true
    }

    fn run(&self, _ctx: ToolContext, _args: ListArgs) -> BoxFuture<'static, ToolOutput> {
        let table = self.table.clone();
        Box::pin(async move {
            let jobs = table.jobs();
            if jobs.is_empty() {
                return ToolOutput::ok("no background jobs in this session");
            }
            let mut text = String::new();
            for job in &jobs {
                let total = job.spool.total();
                let unread = total.saturating_sub(job.read_to());
                text.push_str(&format!(
                    "{}; {total} bytes of output, {unread} not read\n",
                    state_line(job)
                ));
            }
            let running = jobs.iter().filter(|job| job.end().is_none()).count();
            ToolOutput::ok(text)
                .with_meta("jobs", jobs.len())
                .with_meta("running", running)
        })
    }
}
