//! Logging setup: `tracing` to stderr, filtered by `AGENT_LSP_LOG` (default `warn`), and, once
//! an editor has connected to `serve`, to the editor as `window/logMessage`.
//!
//! With several editors connected at once (`serve --listen`), lines go to stderr: a line does
//! not say which connection it is about.
//!
//! stdout is reserved for the protocol (`serve`) and for command output, so nothing logs there.
//! An editor treats everything a server writes on stderr as an error (Neovim files each line
//! under `[ERROR]` in its LSP log), so while an editor is connected each event goes to it with
//! its level as the message type instead; stderr keeps what happens before the connection
//! exists and after it ends.

use std::cell::Cell;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tracing::Level;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// Where log lines go while an editor is connected: `(message type, line)`, the type as
/// `window/logMessage` numbers it (1 error, 2 warning, 3 info, 4 log).
pub type EditorSink = Arc<dyn Fn(u8, &str) + Send + Sync>;

/// The sinks of the editors connected now, each with its guard's number. Lines go to the
/// editor while exactly one is connected; with several (`serve --listen`), which connection a
/// line is about is not known here, so it goes to stderr rather than to an editor it may not
/// concern.
static EDITORS: Mutex<Vec<(u64, EditorSink)>> = Mutex::new(Vec::new());
static NEXT_GUARD: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Set while a line is being handed to the editor, so a log event raised on the way there
    /// (a failing write) goes to stderr instead of coming back in.
    static IN_SINK: Cell<bool> = const { Cell::new(false) };
}

/// Install the process's subscriber: filtered by `AGENT_LSP_LOG` (default `warn`), written to
/// stderr, or to the one connected editor (see [`to_editor`]). A second call does nothing.
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

/// Send log lines to the editor until the returned guard is dropped (while it is the only
/// editor connected).
pub fn to_editor(sink: EditorSink) -> EditorLogGuard {
    let guard = NEXT_GUARD.fetch_add(1, Ordering::Relaxed);
    EDITORS.lock().expect("log sinks").push((guard, sink));
    EditorLogGuard(guard)
}

/// Stops sending log lines to its editor when dropped (the editor connection ended).
pub struct EditorLogGuard(u64);

impl Drop for EditorLogGuard {
    fn drop(&mut self) {
        EDITORS
            .lock()
            .expect("log sinks")
            .retain(|(guard, _)| *guard != self.0);
    }
}

/// The one connected editor's sink, if exactly one is connected.
fn editor_sink() -> Option<EditorSink> {
    let editors = EDITORS.lock().ok()?;
    match editors.as_slice() {
        [(_, sink)] => Some(sink.clone()),
        _ => None,
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
        match editor_sink() {
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

/// What a caught panic said (its `&str` or `String` payload), for the log line and the error
/// reply or result that take the panicked work's place.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(line: &str) {
        let mut writer = Line::new(Level::WARN);
        writer.write_all(line.as_bytes()).unwrap();
    }

    #[test]
    fn lines_go_to_the_one_editor_connected_and_to_no_editor_of_several() {
        let received = Arc::new(Mutex::new(Vec::<(char, String)>::new()));
        let sink = |name: char| -> EditorSink {
            let received = received.clone();
            Arc::new(move |_, line| received.lock().unwrap().push((name, line.to_owned())))
        };
        let first = to_editor(sink('a'));
        log("one\n");
        let second = to_editor(sink('b'));
        log("two\n");
        // The first editor leaving does not take the second one's log away.
        drop(first);
        log("three\n");
        drop(second);
        log("four\n");
        let received = received.lock().unwrap().clone();
        assert_eq!(
            received,
            [('a', "one".to_owned()), ('b', "three".to_owned())]
        );
    }
}
