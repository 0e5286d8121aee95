//! Logging setup: `tracing` to stderr, filtered by `AGENT_LSP_LOG` (default `warn`).
//!
//! stdout is reserved for the protocol (`serve`) and for command output, so nothing logs there.

use tracing_subscriber::EnvFilter;

pub fn init() {
    let filter =
        EnvFilter::try_from_env("AGENT_LSP_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
