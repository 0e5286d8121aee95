//! The tool runtime's side of the user's hooks (`crate::hooks`): `PreToolUse` before a call's
//! permission is decided, `PostToolUse` once it ran and before its result is recorded, so
//! what a hook says, blocks or changes is in the call's `tool/result`, which is what the model
//! reads and what a replay rebuilds.

use std::path::Path;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::guard::Resolved;
use super::{CallSession, Prepared, ToolRuntime};
use crate::hooks::answer::Permission;
use crate::hooks::{HookEvent, Occasion, ToolOccasion};
use crate::plugin::outcomes::ToolOutput;
use crate::plugin::tool::CallArgs;
use crate::session::event::{EventBody, HookRun, ToolCallRef};

/// The most of a changed file's diff a result shows.
const MAX_DIFF_BYTES: usize = 16 * 1024;

/// What the `PreToolUse` hooks made of a call: it (its arguments maybe rewritten) or the
/// result it gets without running, their word on its permission, and their runs to record.
struct PreToolUse {
    resolved: Result<Resolved, ToolOutput>,
    permission: Option<Permission>,
    runs: Vec<HookRun>,
    /// What they reported without blocking (a failure).
    notices: Vec<String>,
}

impl ToolRuntime {
    /// Run the `PreToolUse` hooks of a resolved call (one that does not resolve runs none).
    async fn pre_tool_use(
        &self,
        call: &ToolCallRef,
        resolved: Result<Resolved, ToolOutput>,
        session: (&str, &Path),
        cancel: &CancellationToken,
    ) -> PreToolUse {
        let passed = |resolved| PreToolUse {
            resolved,
            permission: None,
            runs: Vec::new(),
            notices: Vec::new(),
        };
        let Some(hooks) = self
            .hooks
            .as_ref()
            .filter(|hooks| hooks.has(HookEvent::PreToolUse))
        else {
            return passed(resolved);
        };
        let Ok((tool, args)) = resolved else {
            return passed(resolved);
        };
        let occasion = Occasion {
            event: HookEvent::PreToolUse,
            session_id: session.0,
            transcript: session.1,
            tool: Some(ToolOccasion {
                id: &call.id,
                name: &call.name,
                input: args.json().clone(),
            }),
            target: None,
            fields: serde_json::Map::new(),
            watch: None,
        };
        let fired = hooks.fire(occasion, cancel).await;
        for notice in &fired.notices {
            tracing::warn!(call_id = %call.id, "{notice}");
        }
        let resolved = match (fired.blocked, fired.updated_input) {
            (Some((command, reason)), _) => Err(ToolOutput::error(format!(
                "blocked by the user's PreToolUse hook `{command}`: {reason}"
            ))
            .with_meta("hook_blocked", reason)),
            (None, Some(updated)) => {
                tracing::info!(call_id = %call.id, "a PreToolUse hook rewrote the call's arguments");
                Ok((tool, CallArgs::from(updated)))
            }
            (None, None) => Ok((tool, args)),
        };
        PreToolUse {
            resolved,
            permission: fired.permission,
            runs: fired.runs,
            notices: fired.notices,
        }
    }

    /// What a resolved call turns into before it runs: its `PreToolUse` hooks (their runs
    /// handed to `record`), then the permission guard with what they said. The one way the
    /// model's calls and a program's calls are prepared.
    pub(super) async fn guard(
        &self,
        call: &ToolCallRef,
        resolved: Result<Resolved, ToolOutput>,
        session: (&str, &Path),
        mut record: impl FnMut(HookRun) -> anyhow::Result<()>,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Prepared> {
        let hooked = self.pre_tool_use(call, resolved, session, cancel).await;
        for run in hooked.runs {
            record(run)?;
        }
        Ok(self
            .prepare(call, hooked.resolved, hooked.permission, cancel)
            .await
            .with_hook_notices(hooked.notices))
    }

    /// Run the `PostToolUse` hooks of a call that ran with `input`, and add to its output what
    /// they said and how they changed the file it wrote.
    /// `notices` are what its `PreToolUse` hooks reported, recorded with the result.
    pub(super) async fn post_tool_use(
        &self,
        call: &ToolCallRef,
        input: Option<Value>,
        output: ToolOutput,
        session: CallSession<'_>,
        notices: Vec<String>,
        cancel: &CancellationToken,
    ) -> ToolOutput {
        let with_notices = |output: ToolOutput, notices: Vec<String>| {
            if notices.is_empty() {
                output
            } else {
                output.with_meta("hook_notices", notices)
            }
        };
        let (Some(hooks), Some(input)) = (self.hooks.as_ref(), input) else {
            return with_notices(output, notices);
        };
        if cancel.is_cancelled() {
            return with_notices(output, notices);
        }
        // The file the call wrote, whose changes by the hooks the model is shown; not one whose
        // change landed in the editor's unsaved buffer, since the hooks see the disk.
        let in_buffer = output.meta.get("buffer") == Some(&Value::Bool(true));
        let watch = (!output.is_error && !in_buffer)
            .then(|| input.get("path").and_then(Value::as_str))
            .flatten()
            .and_then(|path| self.workspace.resolve(path).ok());
        let mut fields = serde_json::Map::new();
        fields.insert(
            "tool_response".into(),
            serde_json::json!({
                "text": output.text,
                "is_error": output.is_error,
                "success": !output.is_error,
                "filePath": watch.as_ref().map(|path| path.display().to_string()),
            }),
        );
        let occasion = Occasion {
            event: HookEvent::PostToolUse,
            session_id: session.id,
            transcript: session.path,
            tool: Some(ToolOccasion {
                id: &call.id,
                name: &call.name,
                input,
            }),
            target: None,
            fields,
            watch: watch.clone(),
        };
        let fired = hooks.fire(occasion, cancel).await;
        let missed_buffer = in_buffer && !fired.runs.is_empty();
        for run in fired.runs {
            session.events.record(EventBody::HookRun(run));
        }
        for notice in &fired.notices {
            tracing::warn!(call_id = %call.id, "{notice}");
        }
        let notices = [notices, fired.notices].concat();
        if fired.context.is_empty() && fired.changed.is_none() && !missed_buffer {
            return with_notices(output, notices);
        }
        let mut text = output.text.trim_end().to_owned();
        if missed_buffer {
            text.push_str(
                "\n\n[the user's PostToolUse hooks ran on the file on disk; this change is in the editor's unsaved buffer, which they did not see]",
            );
        }
        for (command, context) in &fired.context {
            text.push_str(&format!(
                "\n\n[the user's PostToolUse hook `{command}` said:]\n{context}"
            ));
        }
        let mut output = output;
        if let (Some((before, after)), Some(path)) = (&fired.changed, &watch) {
            let shown = hooks.shown(path);
            let before = String::from_utf8_lossy(before);
            let after = String::from_utf8_lossy(after);
            let diff = similar::TextDiff::from_lines(&before, &after)
                .unified_diff()
                .context_radius(2)
                .header(&shown, &shown)
                .to_string();
            let (diff, _) = super::cap_text(&diff, MAX_DIFF_BYTES);
            text.push_str(&format!(
                "\n\n[the user's PostToolUse hooks changed `{shown}` after this call; it now differs from what the call wrote:]\n{diff}"
            ));
            output = output.with_meta("hook_changed", shown);
        }
        with_notices(ToolOutput { text, ..output }, notices)
    }
}
