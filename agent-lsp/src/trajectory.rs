//! Trajectory export: a session as a list of cells, as JSON or as one self-contained HTML page.
//!
//! A trajectory is what a person reads to understand a run, so it follows the log in order and
//! keeps every payload raw: the tool arguments exactly as the model sent them (also when they
//! are not valid JSON), each result exactly as the model saw it, and per model request the
//! token and cache figures the provider reported. Cell kinds:
//! - `system`: the system prompt and tool catalog, whenever a request used new ones;
//! - `user`: the programmer's prompts;
//! - `context`: runtime context and the context editor's pinned or replaced text;
//! - `compacted`: compaction checkpoints, folds, and pruned or folded tool results;
//! - `message`: the model's answers (text, reasoning, the request's figures) and failed requests;
//! - `tool`: one tool call of a model step with its result;
//! - `subtool`: a call nested under something other than one of this session's model messages:
//!   a sub-agent's calls, under the parent's `task` cell (its `subagent`, with the child's
//!   figures and outcome, read from the child's own log), and a tool run outside a model step
//!   (by the programmer through `agent-lsp tool` or the editor's `agent.tool`), and the calls
//!   a tool made itself (a `run_code` program's, from `subtool/call` and `subtool/result`),
//!   under its cell (`nested`).
//!
//! - `hook`: one of the user's hooks that ran (`hook/run`): under its call's cell (`hooks`) for
//!   `PreToolUse` and `PostToolUse`, else in the log's order; the title says what it came to.
//!
//! A `todo` call's cell also carries the plan it recorded (`plan`), a goal that was set (in the
//! editor or with `agent-lsp session goal`) is a `user` cell, and the trajectory's own `plan` is the session's goal and current plan, so a
//! reader sees how the plan moved.
//!
//! The HTML page (`trajectory/page.html`) embeds the JSON and renders it with inline script and
//! style, loads nothing from the network, and shows JSON payloads and results as collapsible
//! trees.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

use crate::plans::Plan;
use crate::session::History;
use crate::session::event::{EventBody, SubagentEnd, SubagentStart};

/// One cell of a trajectory.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cell {
    /// `system`, `user`, `context`, `compacted`, `message`, `tool`, `subtool`, `files`,
    /// `rewind` or `hook`.
    pub kind: &'static str,
    /// The event the cell starts at.
    pub seq: u64,
    pub turn: u32,
    pub step: u32,
    pub ts: String,
    pub title: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolCell>,
    /// The model request this cell answers (messages) or introduced (system).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<RequestFigures>,
    /// Whether the cell's content is on the current surface (what the model sees now).
    pub on_surface: bool,
    /// Tool catalog, on system cells.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Value>,
    /// The plan a successful `todo` call recorded, on its tool cell.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<Plan>,
    /// The sub-agent a `task` call ran, on its tool cell.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subagent: Option<Box<SubagentCell>>,
    /// The calls a tool made itself (`run_code`'s program), as `subtool` cells, on its cell.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nested: Vec<Cell>,
    /// The user's hooks that ran for a call (`PreToolUse`, `PostToolUse`), as `hook` cells, on
    /// its cell.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<Cell>,
}

/// A sub-agent under its parent's `task` cell: how it ran, and its calls as `subtool` cells
/// (each with the raw arguments and the result its model saw; a grandchild nests the same way).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SubagentCell {
    pub start: SubagentStart,
    /// `None` while it runs, or when its parent's process died before it ended.
    pub end: Option<SubagentEnd>,
    /// The child's requests' figures, from its log.
    pub totals: Totals,
    pub cells: Vec<Cell>,
}

/// A tool call with its result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolCell {
    pub call_id: String,
    pub name: String,
    /// The raw argument string exactly as the model sent it.
    pub arguments: String,
    /// The result text exactly as the model saw it first (`None` while the call had no result).
    pub result: Option<String>,
    pub meta: Value,
    /// Seq of the `tool/result` event.
    pub result_seq: Option<u64>,
}

/// Token and cache figures of one model request.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RequestFigures {
    pub index: u64,
    pub model: String,
    pub generation: u64,
    pub estimated_tokens: u64,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub cache_read: Option<u64>,
    pub input: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A whole trajectory.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Trajectory {
    pub session: String,
    pub preset: String,
    pub workspace: String,
    pub created: String,
    pub requests: Vec<RequestFigures>,
    pub totals: Totals,
    /// The session's goal and its current plan (`plans::view`).
    pub plan: Value,
    pub cells: Vec<Cell>,
}

/// Sums over all requests.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    pub requests: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cache_read: u64,
    pub input: u64,
}

/// The trajectory of a recorded session, with the calls of each sub-agent whose session `load`
/// finds (by id) as `subtool` cells under the `task` cell that ran it.
pub fn build_with(history: &History, load: &dyn Fn(&str) -> Option<History>) -> Trajectory {
    let header = history.header();
    let mut requests: Vec<RequestFigures> = Vec::new();
    let mut cells: Vec<Cell> = Vec::new();
    // Where each call's tool cell is, to put its result in.
    let mut call_cells: HashMap<String, usize> = HashMap::new();
    // Request index → message cell, for usage records that follow the answer.
    let mut answer_cells: HashMap<u64, usize> = HashMap::new();
    let mut current_request: Option<u64> = None;
    let surface = history.surface();
    for event in history.events() {
        let cell = |kind: &'static str, title: String, text: Option<String>| Cell {
            kind,
            seq: event.seq,
            turn: event.turn,
            step: event.step,
            ts: event.ts.clone(),
            title,
            text,
            reasoning: None,
            tool: None,
            request: None,
            on_surface: surface.contains(event.seq),
            tools: None,
            plan: None,
            subagent: None,
            nested: Vec::new(),
            hooks: Vec::new(),
        };
        match &event.body {
            EventBody::RequestHeader(header) => {
                current_request = Some(header.index);
                requests.push(RequestFigures {
                    index: header.index,
                    model: header.model.clone(),
                    ..RequestFigures::default()
                });
                if let Some(system) = &header.system {
                    let mut system_cell = cell(
                        "system",
                        format!("system prompt and tools (request {})", header.index),
                        Some(system.clone()),
                    );
                    // The system prompt is part of every request, not of the surface.
                    system_cell.on_surface = true;
                    system_cell.tools = header
                        .tools
                        .as_ref()
                        .and_then(|tools| serde_json::to_value(tools).ok());
                    cells.push(system_cell);
                }
            }
            EventBody::RequestContext(context) => {
                if let Some(request) = requests.iter_mut().find(|r| r.index == context.index) {
                    request.generation = context.generation;
                    request.estimated_tokens = context.estimated_tokens;
                }
            }
            EventBody::Usage(usage) => {
                if let Some(request) = requests.iter_mut().find(|r| r.index == usage.index) {
                    request.prompt_tokens = Some(usage.prompt_tokens);
                    request.completion_tokens = Some(usage.completion_tokens);
                    request.cache_read = Some(usage.cache_read);
                    request.input = Some(usage.input);
                    if let Some(at) = answer_cells.get(&usage.index) {
                        cells[*at].request = Some(request.clone());
                    }
                }
            }
            EventBody::RequestError(error) => {
                if let Some(request) = requests.iter_mut().find(|r| r.index == error.index) {
                    request.error = Some(format!("{}: {}", error.class, error.message));
                    let mut failed = cell(
                        "message",
                        format!("request {} failed ({})", error.index, error.class),
                        Some(error.message.clone()),
                    );
                    failed.request = Some(request.clone());
                    cells.push(failed);
                }
            }
            EventBody::UserMessage(message) => {
                let kind = match message.origin.as_str() {
                    "prompt" => "user",
                    "compaction" => "compacted",
                    crate::context_editor::ops::ORIGIN
                        if message
                            .text
                            .starts_with(&format!("<{}", crate::context_editor::ops::FOLD_TAG)) =>
                    {
                        "compacted"
                    }
                    _ => "context",
                };
                let title = match kind {
                    "user" => format!("prompt (turn {})", event.turn),
                    "compacted" => format!("{} checkpoint", message.origin),
                    _ => message.origin.clone(),
                };
                cells.push(cell(kind, title, Some(message.text.clone())));
            }
            EventBody::RuntimeContext(context) => {
                let title = match &context.source {
                    Some(source) => format!("runtime context ({source})"),
                    None => "runtime context".into(),
                };
                cells.push(cell("context", title, Some(context.text.clone())));
            }
            EventBody::AssistantMessage(message) => {
                // A call run outside a model step comes with an empty assistant message that only
                // carries it (`ToolRuntime::run_one`); it gets a subtool cell and no message cell.
                let outside_step = event.step == 0;
                if !outside_step {
                    let mut answer = cell(
                        "message",
                        match current_request {
                            Some(index) => format!("answer to request {index}"),
                            None => "answer".into(),
                        },
                        Some(message.text.clone()),
                    );
                    answer.reasoning = message.reasoning.clone();
                    if let Some(index) = current_request {
                        answer.request = requests.iter().find(|r| r.index == index).cloned();
                        answer_cells.insert(index, cells.len());
                    }
                    cells.push(answer);
                }
                for call in &message.tool_calls {
                    let kind = if outside_step { "subtool" } else { "tool" };
                    let mut tool = cell(kind, format!("{} ({})", call.name, call.id), None);
                    tool.tool = Some(ToolCell {
                        call_id: call.id.clone(),
                        name: call.name.clone(),
                        arguments: call.arguments.clone(),
                        result: None,
                        meta: Value::Null,
                        result_seq: None,
                    });
                    call_cells.insert(call.id.clone(), cells.len());
                    cells.push(tool);
                }
            }
            EventBody::ToolResult(result) => {
                let first_result = call_cells
                    .get(&result.call_id)
                    .and_then(|at| cells[*at].tool.as_ref().map(|tool| (at, tool)))
                    .filter(|(_, tool)| tool.result.is_none())
                    .map(|(at, _)| *at);
                match first_result {
                    Some(at) => {
                        let on_surface = surface.contains(event.seq);
                        let target = &mut cells[at];
                        target.on_surface = on_surface;
                        if let Some(tool) = target.tool.as_mut() {
                            tool.result = Some(result.text.clone());
                            tool.meta = result.meta.clone();
                            tool.result_seq = Some(event.seq);
                        }
                        if result.name == crate::plans::TOOL {
                            target.plan = result
                                .meta
                                .get("plan")
                                .and_then(|plan| serde_json::from_value(plan.clone()).ok());
                        }
                    }
                    None => {
                        // A later result for the same call: the pruner's or the editor's copy.
                        cells.push(cell(
                            "compacted",
                            format!("{} result replaced ({})", result.name, result.call_id),
                            Some(result.text.clone()),
                        ));
                    }
                }
            }
            EventBody::SubagentStart(start) => {
                if let Some(at) = call_cells.get(&start.call_id) {
                    let child = load(&start.child).map(|child| build_with(&child, load));
                    cells[*at].subagent = Some(Box::new(SubagentCell {
                        start: start.clone(),
                        end: None,
                        totals: child.as_ref().map(|c| c.totals.clone()).unwrap_or_default(),
                        cells: child.map(subtools).unwrap_or_default(),
                    }));
                }
            }
            EventBody::SubtoolCall(call) => {
                if let Some(at) = call_cells.get(&call.parent_call_id) {
                    let mut nested =
                        cell("subtool", format!("{} ({})", call.name, call.call_id), None);
                    // Nested calls live in the log only; the model saw their parent's result.
                    nested.on_surface = false;
                    nested.tool = Some(ToolCell {
                        call_id: call.call_id.clone(),
                        name: call.name.clone(),
                        arguments: call.arguments.clone(),
                        result: None,
                        meta: Value::Null,
                        result_seq: None,
                    });
                    cells[*at].nested.push(nested);
                }
            }
            EventBody::SubtoolResult(result) => {
                let nested = call_cells
                    .get(&result.parent_call_id)
                    .and_then(|at| {
                        cells[*at].nested.iter_mut().rev().find(|cell| {
                            cell.tool
                                .as_ref()
                                .is_some_and(|tool| tool.call_id == result.call_id)
                        })
                    })
                    .and_then(|cell| cell.tool.as_mut());
                if let Some(tool) = nested {
                    tool.result = Some(result.text.clone());
                    tool.meta = result.meta.clone();
                    tool.result_seq = Some(event.seq);
                }
            }
            EventBody::SubagentEnd(end) => {
                if let Some(subagent) = call_cells
                    .get(&end.call_id)
                    .and_then(|at| cells[*at].subagent.as_mut())
                {
                    subagent.end = Some(end.clone());
                }
            }
            EventBody::PluginState(state) if state.plugin == crate::plans::PLUGIN => {
                if let Some(goal) = state.data["goal"].as_str() {
                    let by = match state.data["by"].as_str() {
                        Some("editor") => " in the editor",
                        Some("cli") => " with `session goal`",
                        _ => "",
                    };
                    let mut goal = cell("user", format!("goal (set{by})"), Some(goal.to_owned()));
                    // Only the log holds it; the model reads it in the plan's runtime context.
                    goal.on_surface = false;
                    cells.push(goal);
                }
            }
            EventBody::FileCheckpoint(checkpoint)
                if checkpoint.changed_total > 0 || checkpoint.error.is_some() =>
            {
                let title = match &checkpoint.error {
                    Some(_) => format!("file checkpoint ({}) failed", checkpoint.reason.as_str()),
                    None => format!(
                        "file checkpoint ({}): {} changed",
                        checkpoint.reason.as_str(),
                        checkpoint.changed_total
                    ),
                };
                let text = checkpoint
                    .error
                    .clone()
                    .unwrap_or_else(|| checkpoint.changed.join("\n"));
                cells.push(cell("files", title, Some(text)));
            }
            EventBody::HookRun(run) => {
                let mut hook = cell("hook", hook_title(run), Some(hook_text(run)));
                // What a hook gave the model is in the result or the context it went into.
                hook.on_surface = false;
                // A program's call (`PARENT.N`) shows its hooks under the program's cell.
                let call = run.call_id.as_deref().and_then(|id| {
                    call_cells
                        .get(id)
                        .or_else(|| call_cells.get(id.split_once('.')?.0))
                });
                match call {
                    Some(at) => cells[*at].hooks.push(hook),
                    None => cells.push(hook),
                }
            }
            EventBody::RewindEnd(end) => {
                let title = format!("{}: {}", end.rewind_id, end.outcome);
                let mut lines: Vec<String> = end
                    .restored
                    .iter()
                    .map(|restored| format!("restored {} ({})", restored.path, restored.via))
                    .collect();
                lines.extend(
                    end.kept
                        .iter()
                        .map(|kept| format!("kept {}: {}", kept.path, kept.why)),
                );
                cells.push(cell("rewind", title, Some(lines.join("\n"))));
            }
            _ => {}
        }
    }
    // The prompts of turns a standing rewind took back say so (an undo clears the mark).
    let rewound = crate::rewind::attribution::rewound_by(history);
    for cell in cells.iter_mut().filter(|cell| cell.kind == "user") {
        if let Some(rewind) = rewound.get(&cell.turn) {
            cell.title = format!("{} — taken back by {rewind}", cell.title);
        }
    }
    let mut totals = Totals {
        requests: requests.len() as u64,
        ..Totals::default()
    };
    for request in &requests {
        totals.prompt_tokens += request.prompt_tokens.unwrap_or(0);
        totals.completion_tokens += request.completion_tokens.unwrap_or(0);
        totals.cache_read += request.cache_read.unwrap_or(0);
        totals.input += request.input.unwrap_or(0);
    }
    Trajectory {
        session: header.map(|h| h.session_id.clone()).unwrap_or_default(),
        preset: header.map(|h| h.preset.clone()).unwrap_or_default(),
        workspace: header.map(|h| h.workspace.clone()).unwrap_or_default(),
        created: history
            .events()
            .first()
            .map(|event| event.ts.clone())
            .unwrap_or_default(),
        requests,
        totals,
        plan: crate::plans::view(history),
        cells,
    }
}

/// A child's calls as the `subtool` cells of its parent's trajectory.
fn subtools(child: Trajectory) -> Vec<Cell> {
    child
        .cells
        .into_iter()
        .filter(|cell| cell.tool.is_some())
        .map(|cell| Cell {
            kind: "subtool",
            ..cell
        })
        .collect()
}

/// The page template; `__TRAJECTORY_JSON__` is replaced by the data.
const PAGE: &str = include_str!("trajectory/page.html");

/// The trajectory as one self-contained HTML page.
pub fn to_html(trajectory: &Trajectory) -> anyhow::Result<String> {
    let data = serde_json::to_string(trajectory)?
        // The JSON sits in a <script> element: no `<` may close it early. `<` only occurs inside
        // JSON strings, where `\u003c` means the same.
        .replace('<', "\\u003c")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029");
    let title = format!("agent-lsp trajectory {}", trajectory.session)
        .replace('&', "&amp;")
        .replace('<', "&lt;");
    Ok(PAGE
        .replace("__TRAJECTORY_TITLE__", &title)
        .replacen("__TRAJECTORY_JSON__", &data, 1))
}

/// A hook cell's title: the event, the command and what came of it.
fn hook_title(run: &crate::session::event::HookRun) -> String {
    let exit = run
        .exit_code
        .map(|code| format!(", exit {code}"))
        .unwrap_or_default();
    format!(
        "{} hook `{}`: {}{exit}, {} ms",
        run.event, run.command, run.outcome, run.duration_ms
    )
}

/// A hook cell's text: why it blocked or failed, what it added, rewrote or changed, and what
/// it printed.
fn hook_text(run: &crate::session::event::HookRun) -> String {
    let mut lines = Vec::new();
    if let Some(reason) = &run.reason {
        lines.push(format!("reason: {reason}"));
    }
    if let Some(permission) = &run.permission {
        lines.push(format!("permission: {permission}"));
    }
    if let Some(input) = &run.updated_input {
        lines.push(format!("updated input: {input}"));
    }
    if let Some(context) = &run.context {
        lines.push(format!("added for the model: {context}"));
    }
    if let Some(message) = &run.message {
        lines.push(format!("said to the user: {message}"));
    }
    if !run.changed.is_empty() {
        lines.push(format!("changed: {}", run.changed.join(", ")));
    }
    for (name, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        if !text.is_empty() {
            lines.push(format!("{name}:\n{text}"));
        }
    }
    lines.join("\n")
}
