//! Test support for agent-lsp end-to-end tests: locating the built binaries, building sessions
//! through the real library API, and checking the invariants every test shares.

pub mod model_endpoint;

use std::path::PathBuf;

use agent_lsp::llm::Message;

/// Path of a binary built by this workspace (`agent-lsp`, `log-writer`, …).
///
/// `cargo test --workspace` / `cargo nextest run --workspace` build every package's binaries
/// next to the test executables' `deps/` folder, so the binary is looked up there.
pub fn workspace_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target profile directory");
    let path = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is missing: run the tests with `cargo nextest run --workspace` (or `cargo build --workspace`) so the binaries are built",
        path.display()
    );
    path
}

/// Check the wire-level pairing rule on a derived history: every assistant message with tool
/// calls is followed directly by tool messages answering exactly those calls; only the last such
/// message may still wait for some of its results, and then nothing but its results follow it.
pub fn assert_tool_pairing(messages: &[Message]) {
    let mut index = 0;
    while index < messages.len() {
        match &messages[index] {
            Message::Assistant { tool_calls, .. } if !tool_calls.is_empty() => {
                let mut open = tool_calls
                    .iter()
                    .map(|call| call.id.clone())
                    .collect::<Vec<_>>();
                index += 1;
                while let Some(Message::Tool { call_id, .. }) = messages.get(index) {
                    let position = open.iter().position(|id| id == call_id).unwrap_or_else(|| {
                        panic!("tool result `{call_id}` answers no open call: {messages:#?}")
                    });
                    open.remove(position);
                    index += 1;
                }
                assert!(
                    open.is_empty() || index == messages.len(),
                    "calls {open:?} are separated from their results: {messages:#?}"
                );
            }
            Message::Tool { call_id, .. } => {
                panic!("orphan tool result `{call_id}`: {messages:#?}")
            }
            _ => index += 1,
        }
    }
}
