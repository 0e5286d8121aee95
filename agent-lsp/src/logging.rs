//! Logging setup: `tracing` to stderr, filtered by `AGENT_LSP_LOG` (default `warn`), and, once
//! an editor has connected to `serve`, to the editor as `window/logMessage`.
//!
//! stdout is reserved for the protocol (`serve`) and for command output, so nothing logs there.
//! An editor treats everything a server writes on stderr as an error (Neovim files each line
//! under `[ERROR]` in its LSP log), so while an editor is connected each event goes to it with
//! its level as the message type instead; stderr keeps what happens before the connection
//! exists and after it ends.

use std::cell::Cell;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};

use tracing::Level;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// Where log lines go while an editor is connected: `(message type, line)`, the type as
/// `window/logMessage` numbers it (1 error, 2 warning, 3 info, 4 log).
pub type EditorSink = Arc<dyn Fn(u8, &str) + Send + Sync>;

static EDITOR: Mutex<Option<EditorSink>> = Mutex::new(None);

thread_local! {
    /// Set while a line is being handed to the editor, so a log event raised on the way there
    /// (a failing write) goes to stderr instead of coming back in.
    static IN_SINK: Cell<bool> = const { Cell::new(false) };
}

pub fn init() {
    let filter =
        EnvFilter::try_from_env("AGENT_LSP_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(Destination)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .try_init();
}

/// Send log lines to the editor until the returned guard is dropped.
pub fn to_editor(sink: EditorSink) -> EditorLogGuard {
    *EDITOR.lock().expect("log sink") = Some(sink);
    EditorLogGuard(())
}

/// Sends log lines back to stderr when dropped (the editor connection ended).
pub struct EditorLogGuard(());

impl Drop for EditorLogGuard {
    fn drop(&mut self) {
        *EDITOR.lock().expect("log sink") = None;
    }
}

/// The `MakeWriter` of the subscriber: one [`Line`] per event, knowing the event's level.
struct Destination;

impl<'a> MakeWriter<'a> for Destination {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        Line::new(Level::INFO)
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Line {
        Line::new(*meta.level())
    }
}

/// One formatted event, written out whole when dropped.
struct Line {
    level: Level,
    text: Vec<u8>,
}

impl Line {
    fn new(level: Level) -> Line {
        Line {
            level,
            text: Vec::new(),
        }
    }
}

impl Write for Line {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.text.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        if self.text.is_empty() {
            return;
        }
        let sink = EDITOR.lock().map(|sink| sink.clone()).unwrap_or(None);
        match sink {
            Some(sink) if !IN_SINK.get() => {
                IN_SINK.set(true);
                let line = String::from_utf8_lossy(&self.text);
                sink(message_type(self.level), line.trim_end());
                IN_SINK.set(false);
            }
            _ => {
                let _ = std::io::stderr().write_all(&self.text);
            }
        }
    }
}

/// `window/logMessage`'s type for a level.
fn message_type(level: Level) -> u8 {
    match level {
        Level::ERROR => 1,
        Level::WARN => 2,
        Level::INFO => 3,
        Level::DEBUG | Level::TRACE => 4,
    }
}
