//! A command's output as the result keeps it: the head and the tail of each stream, read as it
//! comes so that a command printing gigabytes holds only the capture's bytes in memory.

use tokio::io::{AsyncRead, AsyncReadExt};

use super::{PIPE_GRACE, SHELL_CAPTURE_BYTES};

/// The head and tail of a stream, and its total length, without holding all of it in memory.
#[derive(Default)]
pub(super) struct Captured {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    pub(super) total: usize,
}

impl Captured {
    pub(super) fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len();
        let half = SHELL_CAPTURE_BYTES / 2;
        if self.head.len() < half {
            let take = bytes.len().min(half - self.head.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        self.tail.extend(bytes);
        let excess = self.tail.len().saturating_sub(half);
        self.tail.drain(..excess);
    }

    pub(super) fn render(&self) -> String {
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
pub(super) async fn collect(task: tokio::task::JoinHandle<Captured>) -> (Captured, bool) {
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
pub(super) async fn capture(mut stream: impl AsyncRead + Unpin) -> Captured {
    let mut captured = Captured::default();
    let mut buffer = vec![0u8; 8192];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return captured,
            Ok(n) => captured.push(&buffer[..n]),
        }
    }
}
