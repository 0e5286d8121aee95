//! The `agent-lsp` binary: parse arguments, set up logging, run the command.

use std::process::ExitCode;

fn main() -> ExitCode {
    agent_lsp::logging::init();
    let code = match agent_lsp::cli::run() {
        Ok(code) => code,
        Err(error) => {
            eprintln!("agent-lsp: {error:#}");
            ExitCode::FAILURE
        }
    };
    // No background job outlives the process, whatever still held it.
    agent_lsp::jobs::kill_all();
    // Nor an MCP server.
    agent_lsp::mcp::client::stop_all();
    code
}
