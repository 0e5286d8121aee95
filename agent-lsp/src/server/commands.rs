//! `workspace/executeCommand`: the agent's commands, or the child that announced the command.
//!
//! Every command takes at most one argument, a JSON object, decoded into the command's typed
//! argument ([`Command::decode`]): a malformed one is refused with `InvalidParams` naming the
//! field, before anything runs. The families:
//! - `agent.ask {prompt}`: ask in the workspace's chat document (`[editor] chat_file`), where
//!   the answer streams; `agent.ask {uri, range}` (the "Ask agent about selection" action)
//!   instead writes a prompt quoting the selection there and shows it, for the programmer to
//!   finish and send.
//! - `agent.explain {uri, range}`: "Explain with agent": the same, sent at once.
//! - `agent.send {uri, position}`: send the prompt under the cursor of a prompt document; the
//!   answer streams into it below the prompt.
//! - `agent.fix {uri, diagnostic}`: a turn that fixes one diagnostic; its edits arrive through
//!   `workspace/applyEdit`, then the diagnostics of the changed files are checked and reported.
//! - `agent.cancel`: stop the running turn (the log stays consistent).
//! - `agent.compact`: compact the session now (a checkpoint summary replaces older history).
//! - `agent.session.new`, `agent.session.list`.
//! - `agent.status`: `{session, running, context_tokens, cache_hit_share, plan, activity}` for an
//!   editor's status bar, from the session's last `usage` event (`null` figures before the first
//!   request), its plan (`plans::view`: `{goal, goal_source, items: [{text, status}], open}`)
//!   and the activity board's entries (`activity::Entry`: jobs and sub-agents, running and
//!   recently ended).
//! - `agent.activity.cancel {id}`: stop a running job or sub-agent of the board.
//! - `agent.mcp.approve`: ask the programmer to approve the workspace's `.mcp.json` as it is
//!   now (`window/showMessageRequest`), recorded as `agent-lsp mcp approve` records it.
//! - `agent.hooks.approve`: the same for the workspace's hooks files (`.agent-lsp/hooks.toml`,
//!   a Claude Code settings file inside the workspace), recorded as `agent-lsp hooks approve`
//!   records it.
//! - `agent.goal.set {goal}`: the session's goal from now on (it replaces the first prompt as
//!   the goal that every compaction carries verbatim), recorded in the session log; refused
//!   while a turn runs and in a session whose preset has no `[plugins.plans]`.
//! - `agent.tool {name, arguments}`: run one agent tool without a model, in the server's
//!   session, over the editor's buffers; the answer is `{text, is_error, meta, session}`.
//! - `agent.context.show {session?, query?, role?, sort?, preview?}`: the context editor's
//!   segments view, `{session, segments: [{id, role, source, tokens, preview, referenced, …}],
//!   totals}`; `agent.context.edit {session?, ops, force?}` applies a batch of
//!   `{op: fold|pin|delete|replace, id, end?, summary?|text?}` and answers
//!   `{applied, edit_id, snapshot, generation, results, …}`, or `{applied: false,
//!   needs_confirmation: true, message, referenced}` for a delete of referenced segments without
//!   `force`; `agent.context.rollback {session?, snapshot}`. Without `session` they work on the
//!   server's current session (refused while a turn runs; pass `session` to read it then).
//! - `agent.memory.list {scope?}` (`{memories, caps}`), `agent.memory.remember {text, scope?}`,
//!   `agent.memory.forget {id}`, `agent.memory.edit {id, text}`: the memories new sessions get;
//!   a change records the editor's session (or `editor`) as where it came from.
//!
//! A turn's command answers when the turn ends, with `{outcome, steps, text, session, plan, ...}`.
//!
//! Where they live: [`chat`] (ask, explain, send: turns in prompt documents), [`fix`],
//! [`session`] (cancel, compact, sessions, status, the goal, one tool, cancelling an entry), [`context`] (the context
//! editor), [`memory`] (memories across sessions).

mod chat;
mod context;
mod fix;
mod memory;
mod rewind;
mod session;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use lsp_bridge::lsp_types::{Range, Url};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::agent::buffers::EditorBuffers;
use super::codes::REQUEST_FAILED;
use super::{Reply, ResponseError, Shared, codes, internal};
use lsp_bridge::jsonrpc::decode_params as decode;

/// The commands this server owns, announced in `executeCommandProvider`.
pub const COMMANDS: [&str; 24] = [
    "agent.ask",
    "agent.explain",
    "agent.send",
    "agent.fix",
    "agent.cancel",
    "agent.session.new",
    "agent.session.list",
    "agent.tool",
    "agent.compact",
    "agent.context.show",
    "agent.context.edit",
    "agent.context.rollback",
    "agent.status",
    "agent.goal.set",
    "agent.memory.list",
    "agent.memory.remember",
    "agent.memory.forget",
    "agent.memory.edit",
    "agent.activity.cancel",
    "agent.mcp.approve",
    "agent.hooks.approve",
    "agent.rewind.turns",
    "agent.rewind",
    "agent.rewind.undo",
];

/// One of our commands with its argument, as the editor sent it.
enum Command {
    Ask(chat::AskArgument),
    Explain(Selection),
    Send(chat::SendArgument),
    Fix(Box<fix::FixArgument>),
    Cancel,
    Compact,
    SessionNew,
    SessionList,
    Status,
    GoalSet(session::GoalArgument),
    Tool(session::ToolArgument),
    ContextShow(context::ShowArgument),
    ContextEdit(context::EditArgument),
    ContextRollback(context::RollbackArgument),
    Memory(memory::MemoryCommand),
    ActivityCancel(session::ActivityArgument),
    McpApprove,
    HooksApprove,
    RewindTurns(rewind::TurnsArgument),
    Rewind(rewind::RewindArgument),
    RewindUndo(rewind::UndoArgument),
}

/// `workspace/executeCommand`'s params, as far as the envelope goes.
#[derive(Deserialize)]
struct ExecuteCommandParams {
    command: String,
    #[serde(default)]
    arguments: Option<Vec<Value>>,
}

/// The argument of a command that takes none: `{}` or nothing.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoArgument {}

/// A selection in a document: what "Explain with agent" and "Ask agent about selection" carry.
#[derive(Deserialize)]
pub(super) struct Selection {
    uri: Url,
    #[serde(deserialize_with = "lsp_bridge::jsonrpc::object")]
    range: Range,
}

impl Command {
    /// Decode `params` into a command of ours; `MethodNotFound` for a command nobody announced.
    fn decode(params: Value) -> Result<Command, ResponseError> {
        if !params.is_object() {
            return Err(ResponseError::invalid_params(
                "`workspace/executeCommand` takes {\"command\": ..., \"arguments\": [...]}",
            ));
        }
        let ExecuteCommandParams { command, arguments } =
            decode("workspace/executeCommand", params)?;
        let mut arguments = arguments.unwrap_or_default();
        if arguments.len() > 1 {
            return Err(ResponseError::invalid_params(format!(
                "`{command}` takes one argument (a JSON object) in `arguments`, not {}",
                arguments.len()
            )));
        }
        // `[null]` is how some clients write "no argument".
        let argument = arguments
            .pop()
            .filter(|argument| !argument.is_null())
            .unwrap_or_else(|| json!({}));
        let name = command.as_str();
        if !argument.is_object() && COMMANDS.contains(&name) {
            return Err(ResponseError::invalid_params(format!(
                "`{name}` takes a JSON object as its argument, not {argument}"
            )));
        }
        let none = |argument: Value| decode::<NoArgument>(name, argument).map(|_| ());
        Ok(match name {
            "agent.ask" => Command::Ask(decode(name, argument)?),
            "agent.explain" => Command::Explain(decode(name, argument)?),
            "agent.send" => Command::Send(decode(name, argument)?),
            "agent.fix" => Command::Fix(Box::new(decode(name, argument)?)),
            "agent.tool" => Command::Tool(decode(name, argument)?),
            "agent.goal.set" => Command::GoalSet(decode(name, argument)?),
            "agent.activity.cancel" => Command::ActivityCancel(decode(name, argument)?),
            "agent.context.show" => Command::ContextShow(decode(name, argument)?),
            "agent.rewind.turns" => Command::RewindTurns(decode(name, argument)?),
            "agent.rewind" => Command::Rewind(decode(name, argument)?),
            "agent.rewind.undo" => Command::RewindUndo(decode(name, argument)?),
            "agent.context.edit" => Command::ContextEdit(decode(name, argument)?),
            "agent.context.rollback" => Command::ContextRollback(decode(name, argument)?),
            "agent.memory.list" => {
                Command::Memory(memory::MemoryCommand::List(decode(name, argument)?))
            }
            "agent.memory.remember" => {
                Command::Memory(memory::MemoryCommand::Remember(decode(name, argument)?))
            }
            "agent.memory.forget" => {
                Command::Memory(memory::MemoryCommand::Forget(decode(name, argument)?))
            }
            "agent.memory.edit" => {
                Command::Memory(memory::MemoryCommand::Edit(decode(name, argument)?))
            }
            "agent.cancel" => none(argument).map(|()| Command::Cancel)?,
            "agent.compact" => none(argument).map(|()| Command::Compact)?,
            "agent.session.new" => none(argument).map(|()| Command::SessionNew)?,
            "agent.session.list" => none(argument).map(|()| Command::SessionList)?,
            "agent.status" => none(argument).map(|()| Command::Status)?,
            "agent.mcp.approve" => none(argument).map(|()| Command::McpApprove)?,
            "agent.hooks.approve" => none(argument).map(|()| Command::HooksApprove)?,
            other => {
                return Err(ResponseError::new(
                    codes::METHOD_NOT_FOUND,
                    format!("unknown command `{other}`"),
                ));
            }
        })
    }
}

/// Run one of our commands.
pub(super) async fn execute(
    shared: &Arc<Shared>,
    params: Value,
    cancel: &CancellationToken,
) -> Reply {
    let host = &shared.host;
    match Command::decode(params)? {
        Command::Ask(argument) => chat::ask(shared, argument, cancel).await,
        Command::Explain(selection) => chat::explain(shared, selection, cancel).await,
        Command::Send(argument) => chat::send(shared, argument, cancel).await,
        Command::Fix(argument) => fix::fix(shared, *argument, cancel).await,
        Command::Cancel => Ok(json!({"cancelled": host.cancel()})),
        Command::Compact => host.compact(shared, cancel).await,
        Command::SessionNew => host.new_session(shared).await,
        Command::SessionList => Ok(json!(host.store()?.ids().map_err(internal)?)),
        Command::Status => session::status(shared).await,
        Command::GoalSet(argument) => session::set_goal(shared, argument).await,
        Command::Tool(argument) => session::run_tool(shared, argument, cancel).await,
        Command::ContextShow(argument) => context::show(shared, argument).await,
        Command::ContextEdit(argument) => context::edit(shared, argument, cancel).await,
        Command::ContextRollback(argument) => context::rollback(shared, argument).await,
        Command::Memory(command) => memory::run(shared, command).await,
        Command::ActivityCancel(argument) => session::cancel_activity(shared, argument),
        Command::McpApprove => host.approve_mcp(shared).await,
        Command::HooksApprove => host.approve_hooks(shared).await,
        Command::RewindTurns(argument) => rewind::turns(shared, argument).await,
        Command::Rewind(argument) => rewind::rewind(shared, argument).await,
        Command::RewindUndo(argument) => rewind::undo(shared, argument).await,
    }
}

/// The file a command's `uri` names.
fn path_of(uri: &Url) -> Result<PathBuf, ResponseError> {
    uri.to_file_path()
        .map_err(|()| ResponseError::invalid_params(format!("`uri`: `{uri}` is not a file URI")))
}

/// The editor's text of `path` (unsaved changes included), else the disk's.
fn current_text(shared: &Arc<Shared>, path: &Path) -> Result<String, ResponseError> {
    shared.text_or_disk(path).map_err(|error| {
        ResponseError::new(
            REQUEST_FAILED,
            format!("cannot read {}: {error}", path.display()),
        )
    })
}

/// `@path` for a workspace file, as the model is told to read it.
fn mention(shared: &Arc<Shared>, path: &Path) -> Result<String, ResponseError> {
    let workspace = crate::workspace::Workspace::new(shared.host.workspace()?).map_err(internal)?;
    if !path.starts_with(workspace.root()) {
        return Err(ResponseError::new(
            codes::INVALID_PARAMS,
            format!("{} is outside the workspace", path.display()),
        ));
    }
    let shown = workspace.display(path);
    Ok(crate::file_index::insert_text(
        &shown,
        crate::file_index::EntryKind::File,
    ))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::COMMANDS;
    use crate::server::code_actions::KINDS;

    const EXTENSIONS_DOC: &str = include_str!("../../../docs/lsp-extensions.md");

    /// The first backticked name of each table row between the headings `from` and `to`.
    fn table_names(from: &str, to: &str) -> BTreeSet<&'static str> {
        let start = EXTENSIONS_DOC.find(from).expect("section") + from.len();
        let end = start + EXTENSIONS_DOC[start..].find(to).expect("next section");
        EXTENSIONS_DOC[start..end]
            .lines()
            .filter_map(|line| line.strip_prefix("| `"))
            .filter_map(|rest| rest.split('`').next())
            .collect()
    }

    /// Tidy: docs/lsp-extensions.md documents exactly the commands and code action kinds the
    /// server announces, so plugin authors can trust it.
    #[test]
    fn the_extensions_doc_lists_exactly_the_commands_and_action_kinds() {
        let commands: BTreeSet<&str> = COMMANDS.into_iter().collect();
        assert_eq!(table_names("## Commands", "## Code actions"), commands);
        let kinds: BTreeSet<&str> = KINDS.into_iter().collect();
        assert_eq!(table_names("## Code actions", "## Prompt documents"), kinds);
    }
}
