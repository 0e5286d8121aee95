//! Code mode: the `run_code` tool runs a JavaScript program that calls the session's tools
//! itself (loops, filters, joins over many lookups), and only what the program prints and
//! returns enters the context: one model step instead of one per lookup, each re-sending the
//! whole prefix.
//!
//! Why it is built this way:
//! - **Every call is a tool call.** `await tools.NAME(args)` goes through the session's
//!   [`ToolRuntime`](crate::tools::ToolRuntime) exactly as a model's call does (the permission
//!   guard, an `ask` asks the same person, the tool's timeout, the output cap) and is recorded
//!   as a `subtool/call` and `subtool/result` pair naming the `run_code` call
//!   ([`crate::plugin::tool::NestedCalls`]). The pairs are log-only, so a request built from
//!   the log, and its replay, are the same as if the program had made no call; the trajectory
//!   shows them as `subtool` cells under the `run_code` cell.
//! - **The engine is QuickJS, in a process of its own** (`engine.rs`; docs/decisions/0005
//!   and 0006): a program has nothing of the host but `tools` and `console` (no modules, no
//!   clock, no fetch, no file or process API), and a memory limit, a wall-time deadline, a
//!   number of calls and an output cap, each ending it with an error that says which. Each
//!   program runs in `agent-lsp __run-code` (`child.rs`), which asks this process for each
//!   tool call over its stdin and stdout (`wire.rs`); `process.rs` kills it at its deadline,
//!   when the turn is cancelled, and at its call past the limit. In a thread it could not be
//!   stopped: QuickJS polls its interrupt handler in the bytecode loop only, so a native loop
//!   (`new Array(2**32-1).join('')`) ran on for minutes, a core busy, after `run_code` gave up
//!   on it, and no thread can be killed. What the program printed is kept in this process
//!   (`output.rs`), so it survives the kill.
//! - **The API is documented from the catalog** (`api.rs`): the `code_mode` plugin's section
//!   lists each tool as `await tools.NAME({…})` with its parameters, generated from the same
//!   schemas the model's own calls use, so the two never disagree.

mod api;
mod child;
pub mod engine;
mod output;
mod process;
mod tool;
mod wire;

use std::sync::Arc;

use serde::Deserialize;

use crate::plugin::registry::{InvalidSetting, Parts, PluginHost, PluginSettings};
pub use api::CodeModePlugin;
pub use child::run as run_engine_process;
pub use process::SUBCOMMAND as ENGINE_SUBCOMMAND;
pub use tool::RunCode;

/// The plugin's name in presets.
pub const PLUGIN: &str = "code_mode";
/// The tool's name.
pub const TOOL: &str = "run_code";

/// `[plugins.code_mode]` of a preset.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodeModeSettings {
    pub enabled: bool,
    /// A program's wall time, in seconds (a call may ask for less).
    #[serde(default = "default_wall_secs")]
    pub wall_secs: u64,
    /// A program's memory, in MiB.
    #[serde(default = "default_memory_mb")]
    pub memory_mb: u64,
    /// Tool calls one program may make.
    #[serde(default = "default_max_calls")]
    pub max_calls: u32,
    /// What a program's output keeps, in bytes: its first and last half when it printed more.
    #[serde(default = "default_output_bytes")]
    pub output_bytes: usize,
    /// Whether the system prompt gets the section documenting `tools` (the `code` preset's).
    #[serde(default = "default_true")]
    pub api_section: bool,
}

fn default_wall_secs() -> u64 {
    60
}

fn default_memory_mb() -> u64 {
    64
}

fn default_max_calls() -> u32 {
    200
}

fn default_output_bytes() -> usize {
    64 * 1024
}

fn default_true() -> bool {
    true
}

impl CodeModeSettings {
    /// The registry entry: the tool, and the section when the preset wants it.
    pub fn parts(settings: CodeModeSettings, _host: &PluginHost) -> anyhow::Result<Parts> {
        let plugin = settings
            .api_section
            .then(|| Box::new(CodeModePlugin) as Box<dyn crate::plugin::Plugin>);
        Ok(Parts {
            plugin,
            tools: vec![Arc::new(RunCode::new(settings))],
            shell: None,
        })
    }
}

impl PluginSettings for CodeModeSettings {
    fn enabled(&self) -> bool {
        self.enabled
    }

    fn validate(&self) -> Result<(), InvalidSetting> {
        InvalidSetting::within("wall_secs", self.wall_secs, 1..=600)?;
        InvalidSetting::within("memory_mb", self.memory_mb, 8..=1024)?;
        InvalidSetting::within("max_calls", self.max_calls, 1..=10_000)?;
        InvalidSetting::within("output_bytes", self.output_bytes, 1024..=1024 * 1024)?;
        Ok(())
    }
}
