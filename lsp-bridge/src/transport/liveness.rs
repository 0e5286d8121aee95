//! Whether a server is hung. A server that leaves a cancelled request unanswered past the grace
//! is only suspected: pyright doing its first analysis of a large package ignores cancellations
//! for tens of seconds while it keeps sending progress and using a core, and restarting it then
//! costs the user a second cold start. It is hung only when, after that, it shows no sign of
//! life at all (no message, no stderr line, no CPU time) for the configured `hung_timeout`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub(super) struct Liveness {
    server: String,
    pid: Option<u32>,
    born: Instant,
    /// The last sign of life (a message, a stderr line, CPU time seen), in ms since `born`.
    last_sign: AtomicU64,
    /// How long a suspected server must show no sign of life to be hung.
    hung_after: Duration,
    suspicion: Mutex<Option<Suspicion>>,
    /// The verdict, once given: it stands (the server is replaced on its next use).
    hung: Mutex<Option<String>>,
}

struct Suspicion {
    reason: String,
    since: Instant,
    /// The process's CPU time when last looked at, in clock ticks.
    cpu: Option<u64>,
}

impl Liveness {
    pub(super) fn new(server: &str, pid: Option<u32>, hung_after: Duration) -> Liveness {
        Liveness {
            server: server.to_owned(),
            pid,
            born: Instant::now(),
            last_sign: AtomicU64::new(0),
            hung_after,
            suspicion: Mutex::new(None),
            hung: Mutex::new(None),
        }
    }

    /// The server wrote something (a message, a stderr line).
    pub(super) fn sign_of_life(&self) {
        let now = self.born.elapsed().as_millis() as u64;
        self.last_sign.fetch_max(now, Ordering::Relaxed);
    }

    /// The server answered a request: it is working through them, whatever it left unanswered.
    pub(super) fn answered(&self) {
        self.sign_of_life();
        let mut suspicion = self.suspicion.lock().unwrap();
        if suspicion.take().is_some() {
            tracing::info!(server = %self.server, "language server answers again: no longer suspected of hanging");
        }
    }

    /// The server left a cancelled request unanswered past the grace (`reason` says which):
    /// watched from now on.
    pub(super) fn suspect(&self, reason: String) {
        let mut suspicion = self.suspicion.lock().unwrap();
        if suspicion.is_none() && self.hung.lock().unwrap().is_none() {
            tracing::info!(server = %self.server, "language server {reason}: busy or hung; it is restarted if it shows no sign of life for {:?}", self.hung_after);
            *suspicion = Some(Suspicion {
                reason,
                since: Instant::now(),
                cpu: cpu_ticks(self.pid),
            });
        }
    }

    /// Why the server is hung, if it is: suspected, and silent (no message, no stderr, no CPU
    /// time) for `hung_after` since. Cheap unless it has been silent that long.
    pub(super) fn hung(&self) -> Option<String> {
        if let Some(verdict) = self.hung.lock().unwrap().clone() {
            return Some(verdict);
        }
        let mut guard = self.suspicion.lock().unwrap();
        let suspicion = guard.as_mut()?;
        let last_sign = self.born + Duration::from_millis(self.last_sign.load(Ordering::Relaxed));
        let quiet_since = suspicion.since.max(last_sign);
        if quiet_since.elapsed() < self.hung_after {
            return None;
        }
        // Silent on its pipes: is it still working?
        let cpu = cpu_ticks(self.pid);
        if cpu.is_some() && cpu != suspicion.cpu {
            suspicion.cpu = cpu;
            self.sign_of_life();
            return None;
        }
        let verdict = format!(
            "{}, and showed no sign of life (no message, no stderr line, no CPU time) for {:?}",
            suspicion.reason, self.hung_after
        );
        tracing::warn!(server = %self.server, "language server is hung: {verdict}");
        *self.hung.lock().unwrap() = Some(verdict.clone());
        guard.take();
        Some(verdict)
    }
}

/// A process's user and system CPU time so far, in clock ticks (`/proc/PID/stat`).
fn cpu_ticks(pid: Option<u32>) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid?)).ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_suspect_that_writes_or_computes_is_not_hung_and_a_silent_one_is() {
        let liveness = Liveness::new("test", Some(std::process::id()), Duration::ZERO);
        assert_eq!(liveness.hung(), None, "nothing suspected");
        liveness.suspect("did not answer `x`".into());
        // This process uses CPU between two looks: alive.
        let spin = Instant::now();
        while cpu_ticks(Some(std::process::id()))
            == liveness.suspicion.lock().unwrap().as_ref().unwrap().cpu
            && spin.elapsed() < Duration::from_secs(5)
        {
            std::hint::black_box((0..10_000).sum::<u64>());
        }
        assert_eq!(liveness.hung(), None, "it used CPU");
        liveness.answered();
        assert!(liveness.suspicion.lock().unwrap().is_none());

        // A process that no longer exists shows nothing: hung at once with a zero bound.
        let gone = Liveness::new("gone", Some(u32::MAX - 1), Duration::ZERO);
        gone.suspect("did not answer `y`".into());
        let verdict = gone.hung().expect("hung");
        assert!(verdict.contains("did not answer `y`"), "{verdict}");
        assert_eq!(gone.hung(), Some(verdict), "the verdict stands");
    }

    #[test]
    fn a_recent_sign_of_life_keeps_a_suspect_alive() {
        let liveness = Liveness::new("test", None, Duration::from_secs(60));
        liveness.suspect("did not answer `x`".into());
        liveness.sign_of_life();
        assert_eq!(liveness.hung(), None);
    }

    #[test]
    fn cpu_ticks_of_this_process_are_read() {
        assert!(cpu_ticks(Some(std::process::id())).is_some());
        assert_eq!(cpu_ticks(None), None);
    }
}
