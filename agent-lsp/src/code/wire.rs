//! What `run_code` and its engine process say to each other: newline-delimited JSON, one
//! message a line, over the engine process's stdin (to it) and stdout (from it). The engine
//! process is the same binary (`agent-lsp __run-code`), so both ends are always of the same
//! version and this is no stable contract; it is kept in this one module all the same.

use serde::{Deserialize, Serialize};

use super::engine::{Ended, Limits};

/// To the engine process.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToEngine {
    /// The first line: the program, the names `tools` has, its limits (the wall time left
    /// when this was sent), and the process that started it, which it must not outlive.
    Start {
        program: String,
        tools: Vec<String>,
        limits: Limits,
        parent: u32,
    },
    /// The result of the program's last `Call`: its text, or the message of a failed call.
    Answer { result: Result<String, String> },
}

/// From the engine process.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FromEngine {
    /// A line the program printed, and the bytes cut from it because it was too long to keep.
    Print { line: String, cut: usize },
    /// The program called `tools.NAME(arguments)` and waits for the `Answer`.
    Call { name: String, arguments: String },
    /// The program ended; the engine process exits after this line.
    Ended(Ended),
}

impl ToEngine {
    /// The message as one line, newline included.
    pub fn line(&self) -> String {
        line(self)
    }
}

impl FromEngine {
    /// The message as one line, newline included.
    pub fn line(&self) -> String {
        line(self)
    }
}

fn line(message: &impl Serialize) -> String {
    let mut text = serde_json::to_string(message).expect("a wire message serializes");
    text.push('\n');
    text
}
