//! agent-lsp: a coding agent that lives inside the editor as a language server.
//!
//! Modules in reading order:
//! - [`agent`]: the loop (session → turn → step) and its plugin events;
//! - [`session`]: the append-only session log, the surface and the derived messages; every
//!   model request is derived from it (docs/architecture.md, "The one rule");
//! - [`compaction`]: memory for long sessions: checkpoints, tool-result pruning, recall;
//! - [`completion`]: inline completion for the editor's ghost text, grounded in the servers;
//! - [`memory`]: memory across sessions: notes per workspace and per user, with provenance;
//! - [`plans`]: the `todo` plan the model keeps and the session's goal, both read from the log;
//! - [`context`]: system prompt assembly, runtime context projection, request building and
//!   replay;
//! - [`llm`]: provider-neutral requests and the wire formats they are sent in;
//! - [`tools`]: the ToolRuntime (registry, permissions, limits, recording) and the file tools,
//!   confined by [`workspace`];
//! - [`web`]: `web_search` and `web_fetch` behind the SSRF guard;
//! - `tokens`: the token meter;
//! - `trajectory`: a session exported as cells, as JSON or a self-contained HTML page;
//! - `session_report`: recorded sessions as JSON, for `session list|show --json` and the MCP
//!   server's `session_list` and `session_show`;
//! - `instructions`: the project's and the user's `AGENTS.md` as prompt sections;
//! - `skills`: folders of instructions for one kind of task, listed in the prompt and loaded
//!   with the `skill` tool;
//! - `activity`: the live board of running jobs and sub-agents, for the editor's views;
//! - [`jobs`]: background jobs (`shell` with `background`, `job_output`, `job_kill`,
//!   `job_list`) and the notice of their end;
//! - `code`: code mode: `run_code`, a JavaScript program that calls the session's tools;
//! - [`subagents`]: the `task` tool: sub-agents in sessions of their own, with budgets;
//! - [`host`]: the one place an agent is started and driven: a preset's plugins and tool
//!   catalog, its session, its turns; `run`, `tool`, `serve`, `mcp serve` and sub-agents are
//!   its clients;
//! - [`preset`]: named assemblies of model settings, tools, permissions and plugins;
//! - `server`: `agent-lsp serve`, the editor-facing server brokering the child servers;
//! - [`shared_bridge`]: one warm bridge per workspace, shared by the user's processes over
//!   an owner-only socket (`local_socket`);
//! - [`cli`]: the terminal commands, and `config`: the user's configuration file;
//! - [`canonical`]: byte-stable JSON and digests;
//! - [`logging`]: tracing to stderr, never stdout.

#![warn(missing_docs)]

pub mod acp;
pub(crate) mod activity;
pub mod agent;
pub(crate) mod approvals;
pub mod canonical;
pub mod cli;
pub(crate) mod code;
pub mod compaction;
pub mod completion;
pub(crate) mod config;
pub mod context;
pub mod context_editor;
pub mod file_index;
pub mod hooks;
pub mod host;
pub(crate) mod instructions;
pub mod jobs;
pub mod llm;
pub(crate) mod local_socket;
pub mod logging;
pub mod mcp;
pub mod mcp_serve;
pub mod memory;
pub(crate) mod permissions;
pub mod plans;
pub mod plugin;
pub mod preset;
pub mod rewind;
pub mod sandbox;
pub(crate) mod server;
pub mod session;
pub(crate) mod session_report;
pub mod shared_bridge;
pub(crate) mod skills;
pub mod snapshots;
pub mod subagents;
pub(crate) mod tokens;
pub mod tools;
pub(crate) mod trajectory;
pub mod web;
pub mod workspace;
