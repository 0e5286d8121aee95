//! The guard a call passes before it runs: its arguments parse, its tool exists, its permission
//! (and any reason it needs the user's approval although allowed) is asked about, and a write to
//! a protected path is refused. What it turns a call into is [`Prepared`](super::Prepared):
//! run it, or the result it gets without running.

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{
    Grant, Permission, Prepared, ToolRuntime, cancelled_before_start, parse_raw_arguments,
    protected,
};

/// A call's tool and its parsed arguments.
pub(super) type Resolved = (std::sync::Arc<dyn crate::plugin::tool::Tool>, CallArgs);
use crate::hooks::answer::Permission as HookPermission;
use crate::plugin::outcomes::ToolOutput;
use crate::plugin::tool::CallArgs;
use crate::sandbox::Confinement;
use crate::session::event::ToolCallRef;

impl ToolRuntime {
    /// The `path` argument of a call, when it names a protected path: as shown to the model,
    /// and why it is protected. Judged on the physical path, so `a/../.git/config` and a link
    /// into `.git/` count too; a path that does not resolve is refused by the tool itself.
    pub(super) fn protected_path(&self, args: &Value) -> Option<(String, &'static str)> {
        let path = self.workspace.resolve(args.get("path")?.as_str()?).ok()?;
        let relative = path.strip_prefix(self.workspace.root()).ok()?;
        let why = match protected::protected_reason(relative) {
            Some((_, why)) => why,
            None if protected::in_configured_hooks(self.workspace.root(), &path) => {
                protected::HOOKS_REASON
            }
            None => return None,
        };
        Some((self.workspace.display(&path), why))
    }

    /// The call's tool and its parsed arguments, or the result of a call that cannot run (its
    /// arguments do not parse, its tool does not exist). Done once per call: the `tool/call`
    /// record ([`ToolRuntime::sandbox_record`]) and the guard ([`ToolRuntime::prepare`]) share
    /// it, and so does the tool's typed parse.
    pub(super) fn resolve(&self, call: &ToolCallRef) -> Result<Resolved, ToolOutput> {
        let args = CallArgs::from(parse_raw_arguments(&call.arguments)?);
        let Some(tool) = self.registry.get(&call.name) else {
            return Err(ToolOutput::error(format!(
                "there is no tool named `{}`; the tools are {}",
                call.name,
                self.registry.names().collect::<Vec<_>>().join(", ")
            ))
            .with_meta("unknown_tool", true));
        };
        Ok((tool.clone(), args))
    }

    /// Apply the permission policy to a resolved call, and what the `PreToolUse` hooks said
    /// of it: `allow` answers the question the tool's permission would ask (not the questions
    /// of leaving the sandbox, a protected path or the tool's own reason; a denied tool stays
    /// denied), `ask` asks where the policy allows.
    pub(super) async fn prepare(
        &self,
        call: &ToolCallRef,
        resolved: Result<Resolved, ToolOutput>,
        hook: Option<HookPermission>,
        cancel: &CancellationToken,
    ) -> Prepared {
        let (tool, args) = match resolved {
            Ok(resolved) => resolved,
            Err(output) => return Prepared::Done(output),
        };
        let mut permission = self.policy.permission(&call.name);
        // A command the sandbox holds gets the preset's `sandboxed` permission in place of its
        // tool's (a denied tool stays denied); one that asks to leave it is asked for.
        let holding = self.sandbox.as_ref().filter(|sandbox| sandbox.holds());
        let confinement = match (tool.confinement(&args), holding) {
            (Confinement::Leaves(leave), Some(sandbox)) if sandbox.allows(leave) => {
                Confinement::Held
            }
            (confinement, _) => confinement,
        };
        let mut leave_reason = None;
        match (confinement, holding) {
            (Confinement::Held, Some(_)) => {
                if let Some(sandboxed) = self.policy.sandboxed
                    && permission != Permission::Deny
                {
                    permission = sandboxed;
                }
            }
            (Confinement::Leaves(leave), Some(sandbox)) => {
                leave_reason = Some(sandbox.leave_reason(leave));
            }
            _ => {}
        }
        // A PreToolUse hook's `allow` answers the question the tool's own permission would
        // ask; what else asks (leaving the sandbox, a protected path, the tool's own reason)
        // still does, and a denied tool stays denied.
        if matches!(hook, Some(HookPermission::Allow)) && permission == Permission::Ask {
            tracing::info!(tool = %call.name, "a PreToolUse hook allowed the call");
            permission = Permission::Allow;
        }
        let protected = (!tool.read_only())
            .then(|| self.protected_path(args.json()))
            .flatten();
        if let Some((shown, _)) = &protected
            && self.policy.protected_paths > permission
        {
            tracing::info!(tool = %call.name, path = %shown, "a protected path: {}", self.policy.protected_paths.as_str());
            permission = self.policy.protected_paths;
        }
        // A call that does more than its tool's permission covers is asked for.
        let reason = (permission != Permission::Deny)
            .then(|| {
                let own = tool.approval_reason(&self.workspace, &args);
                match (leave_reason, own) {
                    (Some(leave), Some(own)) => Some(format!("{leave}; and {own}")),
                    (leave, own) => leave.or(own),
                }
            })
            .flatten();
        if let Some(reason) = &reason
            && permission == Permission::Allow
        {
            tracing::info!(tool = %call.name, reason, "the call needs the user's approval");
            permission = Permission::Ask;
        }
        // A hook's `ask` asks where the policy would allow.
        let mut hook_why = None;
        if let Some(HookPermission::Ask(reason)) = &hook
            && permission != Permission::Deny
        {
            hook_why = Some(format!(
                "a PreToolUse hook asked for it{}",
                reason
                    .as_deref()
                    .map(|reason| format!(": {reason}"))
                    .unwrap_or_default()
            ));
            permission = Permission::Ask;
        }
        let refused = |default: String| match &protected {
            Some((shown, why)) => format!(
                "`{shown}` is a protected path ({why}), and this session may not write it without the user's approval; do not retry, tell the user what you wanted to change there"
            ),
            None => default,
        };
        // Why the person is asked, when they are: what the call does beyond its tool's
        // permission and the protected path it writes, so an "always" answer covers exactly
        // that; the same words are recorded with the answer.
        let protected_why = protected
            .as_ref()
            .map(|(shown, why)| format!("it writes `{shown}`, a protected path ({why})"));
        let why = match (&reason, protected_why) {
            (Some(reason), Some(path)) => Some(format!("{reason}; and {path}")),
            (reason, path) => reason.clone().or(path),
        };
        let why = match (why, hook_why) {
            (Some(why), Some(hook)) => Some(format!("{why}; and {hook}")),
            (why, hook) => why.or(hook),
        };
        let asked = |answer: &str| {
            json!({
                "why": why.as_deref().unwrap_or("the tool's permission is `ask`"),
                "answer": answer,
            })
        };
        let allowed = match permission {
            Permission::Allow => true,
            Permission::Deny => {
                tracing::info!(tool = %call.name, call_id = %call.id, "call denied by policy");
                return Prepared::Done(
                    ToolOutput::error(refused(format!(
                        "the call to `{}` was refused by the preset's permission policy (`{}` is denied in this session); do not retry it, find another way or tell the user",
                        call.name, call.name
                    )))
                    .with_meta("refused", permission.as_str()),
                );
            }
            Permission::Ask => {
                let asked = match &why {
                    Some(why) => self.asker.ask_because(call, why),
                    None => self.asker.ask(call),
                };
                tokio::select! {
                    approved = asked => approved,
                    () = cancel.cancelled() => return Prepared::Done(cancelled_before_start(&call.name)),
                }
            }
        };
        if !allowed {
            tracing::info!(tool = %call.name, call_id = %call.id, "call not approved");
            let refusal = match &reason {
                Some(reason) => format!(
                    "this call needs the user's approval whatever the preset allows, because {reason}. {}",
                    self.asker.refusal(call)
                ),
                None => self.asker.refusal(call),
            };
            return Prepared::Done(
                ToolOutput::error(refused(refusal))
                    .with_meta("refused", permission.as_str())
                    .with_meta("asked", asked("declined")),
            );
        }
        let leave = match confinement {
            Confinement::Leaves(leave) => Some(leave),
            _ => None,
        };
        Prepared::Run {
            tool,
            args,
            grant: Grant {
                sandbox: self
                    .sandbox
                    .as_ref()
                    .and_then(|sandbox| sandbox.for_call(leave)),
                asked: (permission == Permission::Ask).then(|| asked("allowed")),
                hook_notices: Vec::new(),
            },
        }
    }

    /// What the `tool/call` record of a resolved call says of the sandbox: for a command, the
    /// policy and mechanism that hold it and what it asks beyond them; `None` for a call that
    /// runs no command (one that does not resolve runs nothing).
    pub(super) fn sandbox_record(&self, resolved: &Result<Resolved, ToolOutput>) -> Option<Value> {
        let sandbox = self.sandbox.as_ref()?;
        let (tool, args) = resolved.as_ref().ok()?;
        let mut record = sandbox.describe();
        match tool.confinement(args) {
            Confinement::NotACommand => return None,
            Confinement::Held => {}
            Confinement::Leaves(leave) => record["leave"] = json!(leave.as_str()),
        }
        Some(record)
    }
}
