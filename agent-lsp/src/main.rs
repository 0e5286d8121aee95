//! The `agent-lsp` binary: parse arguments, set up logging, run the command.

use std::process::ExitCode;

fn main() -> ExitCode {
    // A background job's watchdog is this binary started again; it does nothing else.
    if let Some(code) = agent_lsp::jobs::watchdog::main_hook() {
        return code;
    }
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
