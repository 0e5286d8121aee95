//! A misbehaving model endpoint against the real `agent-lsp run`: every fault ends the request
//! within the provider's deadline with an error that says what happened, and a polite rate
//! limit is waited out. The loopback endpoint speaks the real SSE wire format.

use std::process::{Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, Reply};

/// The whole-request deadline the runs here are given (`total_timeout_secs`).
const DEADLINE: Duration = Duration::from_secs(5);

struct Fixture {
    workspace: tempfile::TempDir,
    state: tempfile::TempDir,
    config: std::path::PathBuf,
}

impl Fixture {
    fn new(provider: &str) -> Fixture {
        let workspace = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let config = state.path().join("config.toml");
        std::fs::write(&config, format!("[provider]\n{provider}")).unwrap();
        Fixture {
            workspace,
            state,
            config,
        }
    }

    fn command(&self, endpoint: &ModelEndpoint) -> Command {
        let base_url = endpoint.base_url();
        let args = ["run", "--preset", "minimal", "--base-url", &base_url, "hi"];
        agent_tests::agent_lsp_command(
            self.state.path(),
            &self.config,
            self.workspace.path(),
            &args,
        )
    }
}

/// What a finished run cost, sampled from `/proc` while it ran.
struct Watched {
    status: ExitStatus,
    stderr: String,
    stdout: String,
    wall: Duration,
    peak_rss_kib: u64,
    cpu_ticks: u64,
}

/// Run `command` to its end, sampling its memory high-water mark and CPU time.
fn watch(mut command: Command) -> Watched {
    let started = Instant::now();
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn agent-lsp");
    let proc = format!("/proc/{}", child.id());
    let (mut peak_rss_kib, mut cpu_ticks) = (0, 0);
    let status = loop {
        if let Ok(status) = std::fs::read_to_string(format!("{proc}/status")) {
            let hwm = status
                .lines()
                .find_map(|line| line.strip_prefix("VmHWM:"))
                .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok());
            peak_rss_kib = peak_rss_kib.max(hwm.unwrap_or(0));
        }
        if let Ok(stat) = std::fs::read_to_string(format!("{proc}/stat")) {
            // utime and stime: fields 14 and 15, counted after the `(comm)` that may hold spaces.
            let fields = stat.rsplit(')').next().unwrap_or_default();
            let fields = fields.split_whitespace().collect::<Vec<_>>();
            let ticks = |index: usize| fields.get(index).and_then(|v| v.parse::<u64>().ok());
            if let (Some(user), Some(system)) = (ticks(11), ticks(12)) {
                cpu_ticks = cpu_ticks.max(user + system);
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > 6 * DEADLINE {
            let _ = child.kill();
            panic!("the run went on far past its deadline");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let Output { stdout, stderr, .. } = child.wait_with_output().unwrap();
    Watched {
        status,
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        wall: started.elapsed(),
        peak_rss_kib,
        cpu_ticks,
    }
}

#[test]
fn a_50_mb_sse_line_is_refused_with_bounded_memory_within_the_deadline() {
    let fixture = Fixture::new(&format!(
        "total_timeout_secs = {}\nidle_timeout_secs = 5\nmax_retries = 2\n",
        DEADLINE.as_secs()
    ));
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push(Reply::huge_line(50 << 20));
    let run = watch(fixture.command(&endpoint));
    assert_eq!(run.status.code(), Some(1), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("a line of the event stream is longer than 8 MiB"),
        "{}",
        run.stderr
    );
    assert!(run.wall < 3 * DEADLINE, "ended after {:?}", run.wall);
    // The line is cut at 8 MiB: nothing near the 50 MB the endpoint offered is ever held.
    assert!(
        run.peak_rss_kib < 160 * 1024,
        "peak RSS {} KiB",
        run.peak_rss_kib
    );
    // A malformed stream is not retried: the same endpoint would send the same line again.
    assert_eq!(endpoint.chat_requests().len(), 1);
    eprintln!(
        "50 MB line: ended after {:?}, peak RSS {} KiB, {} CPU ticks",
        run.wall, run.peak_rss_kib, run.cpu_ticks
    );
}

#[test]
fn endless_keep_alive_comments_end_at_the_deadline() {
    let fixture = Fixture::new(&format!(
        "total_timeout_secs = {}\nidle_timeout_secs = 2\nrequest_timeout_secs = 2\nmax_retries = 2\n",
        DEADLINE.as_secs()
    ));
    let endpoint =
        ModelEndpoint::start(EndpointConfig::default().keep_alive(Duration::from_millis(100)))
            .unwrap();
    endpoint.push(Reply::hang());
    let run = watch(fixture.command(&endpoint));
    assert_eq!(run.status.code(), Some(1), "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "did not finish its answer within {}s",
            DEADLINE.as_secs()
        )) && run.stderr.contains("total_timeout_secs"),
        "{}",
        run.stderr
    );
    assert!(run.wall < 3 * DEADLINE, "ended after {:?}", run.wall);
    eprintln!(
        "endless keep-alives: ended after {:?}, {} CPU ticks",
        run.wall, run.cpu_ticks
    );
}

#[test]
fn a_rate_limit_with_retry_after_is_waited_out_even_with_a_short_backoff_cap() {
    let fixture = Fixture::new("max_retries = 2\nbackoff_base_ms = 20\nbackoff_cap_ms = 100\n");
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all([
        Reply::rate_limited(Some(1)),
        Reply::text("Hello after the rate limit."),
    ]);
    let run = watch(fixture.command(&endpoint));
    assert!(run.status.success(), "{}", run.stderr);
    assert!(run.stdout.contains("Hello after the rate limit."));
    let statuses = endpoint
        .chat_requests()
        .iter()
        .map(|request| request.status)
        .collect::<Vec<_>>();
    assert_eq!(statuses, [429, 200]);
    // The server asked for a second; the retry did not come sooner.
    assert!(run.wall >= Duration::from_secs(1), "{:?}", run.wall);
    endpoint.assert_no_violations();

    // A wait longer than a minute is not waited out: the error says how long the server asked.
    endpoint.push(Reply::rate_limited(Some(3600)));
    let run = watch(fixture.command(&endpoint));
    assert_eq!(run.status.code(), Some(1), "{}", run.stderr);
    assert!(
        run.stderr.contains("HTTP 429") && run.stderr.contains("wait 3600s"),
        "{}",
        run.stderr
    );
    assert_eq!(endpoint.chat_requests().len(), 3);
}
