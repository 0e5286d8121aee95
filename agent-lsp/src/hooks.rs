//! Hooks: the user's own commands on the agent's events, in the format Claude Code made
//! common (docs/hooks.md is the user's guide; `config.rs` says where they are configured,
//! `answer.rs` what a hook's exit and answer mean, `claude.rs` the Claude Code dialect).
//!
//! The events: `SessionStart` (a conversation opens a session in this process),
//! `UserPromptSubmit` (before a prompt is taken), `PreToolUse` and `PostToolUse` (around each
//! tool call, the model's and a `run_code` program's), `Stop` and `SubagentStop` (the model
//! answered without calls; a sub-agent's session fires the second), `PreCompact` (before a
//! compaction folds the history).
//!
//! The tool runtime fires the tool events and the loop the others; each asks [`Hooks::fire`],
//! which runs the matching commands one after another in their configured order (so a
//! `PreToolUse` hook sees the input an earlier one rewrote, and the log's order is the order
//! they ran; Claude Code runs them in parallel), skips a command already run for this
//! occasion, and stops at the first that blocks. Every run is a `hook/run` event in the log,
//! and what it gives the model goes in through the log too (the call's result, a
//! `context/runtime` message), so a request is replayed byte for byte with hooks as without.

pub mod answer;
pub mod approval;
pub mod claude;
pub mod config;
mod record;
mod run;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use regex::Regex;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::sandbox::Sandbox;
use crate::session::event::{EventBody, HookRun};
use crate::session::{NewEvent, Session};
use answer::Permission;
use config::{DEFAULT_TIMEOUT_SECS, HooksOptions, MAX_TIMEOUT_SECS, Source};

/// The events hooks run on, named as in Claude Code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
pub enum HookEvent {
    /// A conversation opened the session in this process (`startup` for a new one, `resume`).
    SessionStart,
    /// A prompt is about to be taken.
    UserPromptSubmit,
    /// A tool call is about to run.
    PreToolUse,
    /// A tool call ran.
    PostToolUse,
    /// The model answered without calling a tool: the turn is about to end.
    Stop,
    /// A sub-agent's turn is about to end.
    SubagentStop,
    /// A compaction is about to fold the history (`manual` or `auto`).
    PreCompact,
}

impl HookEvent {
    /// Every event, in the order `agent-lsp hooks list` shows them.
    pub const ALL: [HookEvent; 7] = [
        HookEvent::SessionStart,
        HookEvent::UserPromptSubmit,
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::Stop,
        HookEvent::SubagentStop,
        HookEvent::PreCompact,
    ];

    /// The event's name, as configured and recorded.
    pub fn name(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "SessionStart",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::Stop => "Stop",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::PreCompact => "PreCompact",
        }
    }

    /// The event named `name`, if there is one.
    pub fn from_name(name: &str) -> Option<HookEvent> {
        HookEvent::ALL
            .into_iter()
            .find(|event| event.name() == name)
    }
}

/// One configured command.
#[derive(Clone, Debug)]
pub struct Hook {
    /// The event it runs on.
    pub event: HookEvent,
    /// The matcher as written.
    pub matcher: Option<String>,
    /// The matcher as a regular expression over the whole name; `None`: every one.
    regex: Option<Regex>,
    /// The command line.
    pub command: String,
    /// How long it may run.
    pub timeout: Duration,
    /// Where it was configured.
    pub source: Arc<Source>,
}

impl Hook {
    fn matches(&self, target: Option<&str>) -> bool {
        match (&self.regex, target) {
            (None, _) => true,
            (Some(regex), Some(target)) => regex.is_match(target),
            (Some(_), None) => true,
        }
    }
}

/// The hooks of one workspace, as read when its agents' tools were made.
#[derive(Clone, Debug, Default)]
pub struct Hooks {
    hooks: Vec<Hook>,
    sources: Vec<Arc<Source>>,
    root: PathBuf,
    sandbox: Option<Arc<Sandbox>>,
}

/// What a tool event is about.
#[derive(Clone, Debug)]
pub struct ToolOccasion<'a> {
    /// The call's id.
    pub id: &'a str,
    /// The tool's name (ours).
    pub name: &'a str,
    /// The arguments it runs with (ours).
    pub input: Value,
}

/// One firing of an event.
#[derive(Clone, Debug)]
pub struct Occasion<'a> {
    /// The event.
    pub event: HookEvent,
    /// The session it fires in.
    pub session_id: &'a str,
    /// That session's log (`transcript_path`).
    pub transcript: &'a Path,
    /// The tool call of a tool event.
    pub tool: Option<ToolOccasion<'a>>,
    /// What a matcher of another event is matched against (a trigger, a source).
    pub target: Option<&'a str>,
    /// The event's own fields (`prompt`, `stop_hook_active`, `tool_response`, …).
    pub fields: Map<String, Value>,
    /// A file whose changes are recorded (what a `PostToolUse` hook's call wrote).
    pub watch: Option<PathBuf>,
}

/// What the hooks of one occasion came to.
#[derive(Clone, Debug, Default)]
pub struct Fired {
    /// Each run, in order: the `hook/run` events to record.
    pub runs: Vec<HookRun>,
    /// Why the first that blocked did, and its command.
    pub blocked: Option<(String, String)>,
    /// The text they gave the model, each with its command.
    pub context: Vec<(String, String)>,
    /// The arguments the call runs with instead of the model's (`PreToolUse`).
    pub updated_input: Option<Value>,
    /// Their word on the call's permission (`PreToolUse`): the strictest one said.
    pub permission: Option<Permission>,
    /// The watched file before the first hook and after the last, when they changed it.
    pub changed: Option<(Vec<u8>, Vec<u8>)>,
    /// What the user should read: failures and the hooks' messages.
    pub notices: Vec<String>,
}

impl Hooks {
    /// The hooks `options` and the workspace's files configure for `root`; workspace files are
    /// looked up among the approvals under `state_root`. Commands run in `sandbox`, the one
    /// that holds the session's `shell`.
    pub fn load(
        options: &HooksOptions,
        root: &Path,
        state_root: Option<&Path>,
        sandbox: Option<Arc<Sandbox>>,
    ) -> Hooks {
        let mut hooks = Vec::new();
        let mut sources = Vec::new();
        for mut source in config::sources(options, root, state_root) {
            let mut read = Vec::new();
            for (event, groups) in &source.events {
                for group in groups {
                    let regex = match group.matcher.as_deref().map(str::trim) {
                        None | Some("" | "*") => None,
                        Some(matcher) => match Regex::new(&format!("^(?:{matcher})$")) {
                            Ok(regex) => Some(regex),
                            Err(error) => {
                                source.skipped.push(format!(
                                    "{}: the matcher `{matcher}` is not a regular expression ({error})",
                                    event.name()
                                ));
                                continue;
                            }
                        },
                    };
                    let inline = group.command.clone().map(|command| config::Command {
                        kind: "command".into(),
                        command,
                        timeout: group.timeout,
                    });
                    for command in group.hooks.iter().cloned().chain(inline) {
                        if command.kind != "command" {
                            source.skipped.push(format!(
                                "{}: a `{}` hook (only `command` hooks run here)",
                                event.name(),
                                command.kind
                            ));
                            continue;
                        }
                        let secs = command
                            .timeout
                            .unwrap_or(DEFAULT_TIMEOUT_SECS)
                            .clamp(1, MAX_TIMEOUT_SECS);
                        read.push((
                            *event,
                            group.matcher.clone(),
                            regex.clone(),
                            command.command,
                            secs,
                        ));
                    }
                }
            }
            let source = Arc::new(source);
            hooks.extend(
                read.into_iter()
                    .map(|(event, matcher, regex, command, secs)| Hook {
                        event,
                        matcher,
                        regex,
                        command,
                        timeout: Duration::from_secs(secs),
                        source: source.clone(),
                    }),
            );
            sources.push(source);
        }
        Hooks {
            hooks,
            sources,
            root: root.to_owned(),
            sandbox,
        }
    }

    /// Every configured hook, those that do not run (unapproved) included.
    pub fn all(&self) -> &[Hook] {
        &self.hooks
    }

    /// Where hooks were read from.
    pub fn sources(&self) -> &[Arc<Source>] {
        &self.sources
    }

    /// The hooks `source` configures, in their order.
    pub fn of<'a>(&'a self, source: &'a Arc<Source>) -> impl Iterator<Item = &'a Hook> {
        self.hooks
            .iter()
            .filter(move |hook| Arc::ptr_eq(&hook.source, source))
    }

    /// Whether any hook runs on `event`.
    pub fn has(&self, event: HookEvent) -> bool {
        self.hooks
            .iter()
            .any(|hook| hook.event == event && hook.source.runs())
    }

    /// Run the hooks of `occasion`, in order, until one blocks.
    pub async fn fire(&self, occasion: Occasion<'_>, cancel: &CancellationToken) -> Fired {
        let mut fired = Fired::default();
        if !self.has(occasion.event) {
            return fired;
        }
        let mut input = occasion.tool.as_ref().map(|tool| tool.input.clone());
        let mut ran: Vec<&str> = Vec::new();
        let first = occasion.watch.as_deref().and_then(record::read_watched);
        let mut last = first.clone();
        for hook in self
            .hooks
            .iter()
            .filter(|hook| hook.event == occasion.event && hook.source.runs())
        {
            let claude = hook.source.claude;
            let target = match &occasion.tool {
                Some(tool) if claude => Some(claude::tool_name(tool.name)),
                Some(tool) => Some(tool.name),
                None => occasion.target,
            };
            if !hook.matches(target) || ran.contains(&hook.command.as_str()) {
                continue;
            }
            // A cancelled turn starts no more hooks (one already running is killed with it).
            if cancel.is_cancelled() {
                break;
            }
            ran.push(&hook.command);
            let stdin = self.stdin(&occasion, hook, input.as_ref());
            let env = [
                ("CLAUDE_PROJECT_DIR", self.root.display().to_string()),
                ("AGENT_LSP_WORKSPACE", self.root.display().to_string()),
                ("AGENT_LSP_HOOK_EVENT", occasion.event.name().to_owned()),
                ("AGENT_LSP_SESSION_ID", occasion.session_id.to_owned()),
            ];
            let exit = run::run(
                &hook.command,
                &self.root,
                self.sandbox.as_deref(),
                &env,
                stdin,
                hook.timeout,
                cancel,
            )
            .await;
            let answer = answer::interpret(occasion.event, &exit);
            let now = occasion.watch.as_deref().and_then(record::read_watched);
            let changed = (now != last)
                .then(|| occasion.watch.as_deref().map(|path| self.shown(path)))
                .flatten();
            last = now;
            let updated = match (&answer.updated_input, &occasion.tool) {
                (Some(updated), Some(tool)) if claude => {
                    Some(claude::from_tool_input(tool.name, updated, &self.root))
                }
                (updated, _) => updated.clone(),
            };
            fired.runs.push(record::run_record(
                hook,
                &occasion,
                &exit,
                &answer,
                updated.clone(),
                changed,
            ));
            if let Some(updated) = updated {
                input = Some(updated.clone());
                fired.updated_input = Some(updated);
            }
            if let Some(failure) = &answer.failure {
                fired.notices.push(format!(
                    "the {} hook `{}` failed: {failure}",
                    occasion.event.name(),
                    hook.command
                ));
            }
            if let Some(notice) = answer.notice {
                fired.notices.push(format!(
                    "the {} hook `{}`: {notice}",
                    occasion.event.name(),
                    hook.command
                ));
            }
            if let Some(context) = answer.context {
                fired.context.push((hook.command.clone(), context));
            }
            match answer.permission {
                Some(Permission::Deny(reason)) => {
                    fired.blocked = Some((hook.command.clone(), reason));
                    break;
                }
                Some(permission) => {
                    // `ask` wins over `allow`: a hook that wants the user asked is heard.
                    fired.permission = match fired.permission.take() {
                        Some(ask @ Permission::Ask(_)) => Some(ask),
                        _ => Some(permission),
                    };
                }
                None => {}
            }
            if let Some(reason) = answer.block {
                fired.blocked = Some((hook.command.clone(), reason));
                break;
            }
        }
        if let (Some(first), Some(last)) = (first, last)
            && first != last
        {
            fired.changed = Some((first, last));
        }
        fired
    }

    /// Fire `event` (not a tool event) in `session`, with its own `fields`, matched on
    /// `target`, and record the runs at `(turn, step)`: how the loop and a compaction the user
    /// asked for run their hooks. `record_at: None` leaves the recording to the caller
    /// ([`record`]), which decides where the runs go once it knows what they said.
    #[allow(clippy::too_many_arguments)]
    pub async fn fire_in(
        &self,
        session: &mut Session,
        record_at: Option<(u32, u32)>,
        event: HookEvent,
        target: Option<&str>,
        fields: Map<String, Value>,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Fired> {
        let session_id = session.id().to_owned();
        let transcript = session.path().to_owned();
        let occasion = Occasion {
            event,
            session_id: &session_id,
            transcript: &transcript,
            tool: None,
            target,
            fields,
            watch: None,
        };
        let fired = self.fire(occasion, cancel).await;
        if let Some(at) = record_at {
            record(session, at, &fired)?;
        }
        Ok(fired)
    }

    /// `PreCompact` before a compaction the user asked for or the loop started: nothing it
    /// says stops the compaction (a full window must be folded).
    pub async fn pre_compact(
        &self,
        session: &mut Session,
        at: (u32, u32),
        manual: bool,
        cancel: &CancellationToken,
    ) -> anyhow::Result<()> {
        if !self.has(HookEvent::PreCompact) {
            return Ok(());
        }
        let trigger = if manual { "manual" } else { "auto" };
        let mut fields = Map::new();
        fields.insert("trigger".into(), trigger.into());
        fields.insert("custom_instructions".into(), "".into());
        self.fire_in(
            session,
            Some(at),
            HookEvent::PreCompact,
            Some(trigger),
            fields,
            cancel,
        )
        .await?;
        Ok(())
    }

    /// The event as JSON on the hook's stdin: Claude Code's fields, in its dialect for a hook
    /// from its settings.
    fn stdin(&self, occasion: &Occasion<'_>, hook: &Hook, input: Option<&Value>) -> Vec<u8> {
        let mut event = json!({
            "session_id": occasion.session_id,
            "transcript_path": occasion.transcript.display().to_string(),
            "cwd": self.root.display().to_string(),
            "hook_event_name": occasion.event.name(),
            "permission_mode": "default",
        });
        let fields = event.as_object_mut().expect("an object");
        if let Some(tool) = &occasion.tool {
            let input = input.cloned().unwrap_or(Value::Null);
            let (name, input) = if hook.source.claude {
                (
                    claude::tool_name(tool.name),
                    claude::tool_input(tool.name, &input, &self.root),
                )
            } else {
                (tool.name, input)
            };
            fields.insert("tool_name".into(), json!(name));
            fields.insert("tool_input".into(), input);
            fields.insert("tool_use_id".into(), json!(tool.id));
        }
        fields.extend(occasion.fields.clone());
        serde_json::to_vec(&event).expect("JSON serializes")
    }

    /// `path` as the log and the model name it: relative to the workspace when inside it.
    pub fn shown(&self, path: &Path) -> String {
        path.strip_prefix(&self.root)
            .unwrap_or(path)
            .display()
            .to_string()
    }
}

/// Append what `fired` ran to `session` at `(turn, step)`, and log what they reported.
pub fn record(
    session: &mut Session,
    (turn, step): (u32, u32),
    fired: &Fired,
) -> anyhow::Result<()> {
    for run in &fired.runs {
        session.append(NewEvent::new(turn, step, EventBody::HookRun(run.clone())))?;
    }
    for notice in &fired.notices {
        tracing::warn!("{notice}");
    }
    Ok(())
}
