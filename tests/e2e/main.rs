//! End-to-end tests of agent-lsp: real processes, real files, real protocol.

mod agent_run;
mod bridge_faults;
mod bridge_first_contact;
mod compaction;
mod conformance;
mod context_editor;
mod editors;
mod file_search;
mod first_contact;
mod hardening;
mod listen_auth;
mod lsp_tools;
mod model_endpoint;
mod provider_faults;
mod proxy_order;
mod restarts;
mod serve;
mod serve_agent;
mod serve_unserved;
mod session_crash;
mod session_props;
mod session_replay;
mod session_resume;
mod shell_tool;
mod vscode;
mod web;
