//! A command's output as the result keeps it: the head and the tail of each stream, read as it
//! comes so that a command printing gigabytes holds only the capture's bytes in memory.

use tokio::io::{AsyncRead, AsyncReadExt};

use std::time::Duration;

/// Bytes kept from a stream: the first half and the last half of this.
pub const CAPTURE_BYTES: usize = 64 * 1024;
/// How long to wait for the output pipes to close once the command has exited and its group
/// was killed; only a process that left the group (`setsid`) can keep them open longer.
pub const PIPE_GRACE: Duration = Duration::from_secs(2);

/// The head and tail of a stream, and its total length, without holding all of it in memory.
#[derive(Default)]
pub struct Captured {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    /// Every byte the stream gave, kept or not.
    pub total: usize,
}

impl Captured {
    /// Take `bytes`, keeping the head and the latest tail.
    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len();
        let half = CAPTURE_BYTES / 2;
        if self.head.len() < half {
            let take = bytes.len().min(half - self.head.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        self.tail.extend(bytes);
        let excess = self.tail.len().saturating_sub(half);
        self.tail.drain(..excess);
    }

    /// The kept head and tail, with a marker saying how much was cut between them.
    pub fn render(&self) -> String {
        let kept = self.head.len() + self.tail.len();
        let mut bytes = self.head.clone();
        if self.total > kept {
            bytes.extend_from_slice(
                format!("\n[… {} bytes of output cut here …]\n", self.total - kept).as_bytes(),
            );
        }
        bytes.extend(self.tail.iter());
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// What a capture task read, and whether it reached the end of its pipe in time.
pub async fn collect(task: tokio::task::JoinHandle<Captured>) -> (Captured, bool) {
    let abort = task.abort_handle();
    match tokio::time::timeout(PIPE_GRACE, task).await {
        Ok(Ok(captured)) => (captured, true),
        _ => {
            abort.abort();
            (Captured::default(), false)
        }
    }
}

/// Read `stream` to its end into a capture.
pub async fn capture(mut stream: impl AsyncRead + Unpin) -> Captured {
    let mut captured = Captured::default();
    let mut buffer = vec![0u8; 8192];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return captured,
            Ok(n) => captured.push(&buffer[..n]),
        }
    }
}
