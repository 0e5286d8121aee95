//! One call's run: under its timeout and the turn's cancellation, with a panic caught and
//! recorded as its result, the files it wrote shown to the language servers (their fresh
//! diagnostics join the result), and its output capped and stamped with its facts.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{
    CallSession, Grant, ToolRuntime, WriteObserver, cancelled_before_start, cap_text, nested,
    panicked,
};
use crate::plugin::outcomes::ToolOutput;
use crate::plugin::tool::{CallArgs, Tool, ToolContext};
use crate::session::event::ToolCallRef;

impl ToolRuntime {
    /// Run one call with its timeout, stopping it when the turn is cancelled.
    pub(super) async fn run_guarded(
        &self,
        call: &ToolCallRef,
        tool: Arc<dyn Tool>,
        args: CallArgs,
        grant: Grant,
        cancel: &CancellationToken,
        session: CallSession<'_>,
    ) -> (ToolOutput, Duration) {
        if cancel.is_cancelled() {
            return (cancelled_before_start(&call.name), Duration::ZERO);
        }
        let timeout = tool.timeout(&args).unwrap_or(self.limits.timeout);
        let call_cancel = cancel.child_token();
        let ctx = ToolContext {
            workspace: self.workspace.clone(),
            cancel: call_cancel.clone(),
            call_id: call.id.clone(),
            session_path: Some(session.path.to_owned()),
            session_id: Some(session.id.to_owned()),
            call_seq: Some(session.call_seq),
            buffers: self.buffers.clone(),
            sandbox: grant.sandbox,
            events: Some(session.events.clone()),
            calls: tool.calls_tools().then(|| {
                Arc::new(nested::Nested::new(
                    self.clone(),
                    call,
                    session,
                    call_cancel.clone(),
                )) as Arc<dyn crate::plugin::tool::NestedCalls>
            }),
        };
        let read_only = tool.read_only();
        // What `PostToolUse` hooks are told the call ran with.
        let input = self
            .hooks
            .as_ref()
            .filter(|hooks| hooks.has(crate::hooks::HookEvent::PostToolUse))
            .map(|_| args.json().clone());
        let started = Instant::now();
        let span = tracing::info_span!("tool", name = %call.name, call_id = %call.id);
        // A tool's panic, in the call that makes its future or in the future itself, is the
        // call's result: the turn, the other calls of the batch and the session go on.
        let name = call.name.clone();
        let run = match std::panic::catch_unwind(AssertUnwindSafe(|| tool.run(ctx, args))) {
            Ok(run) => AssertUnwindSafe(run)
                .catch_unwind()
                .map(move |result| result.unwrap_or_else(|panic| panicked(&name, &*panic)))
                .boxed(),
            Err(panic) => {
                let output = panicked(&name, &*panic);
                async move { output }.boxed()
            }
        }
        .instrument(span.clone());
        let output = tokio::select! {
            biased;
            result = tokio::time::timeout(timeout, run) => match result {
                Ok(output) => output,
                Err(_) => {
                    call_cancel.cancel();
                    ToolOutput::error(format!(
                        "`{}` did not finish within {} s and was stopped{}; try a smaller request",
                        call.name,
                        timeout.as_secs_f64(),
                        if read_only { "" } else { " (it may have taken effect partly: check before retrying)" },
                    ))
                    .with_meta("timed_out", true)
                }
            },
            () = cancel.cancelled() => {
                call_cancel.cancel();
                let effect = if read_only {
                    "it had no effect"
                } else {
                    "it may or may not have taken effect: check before retrying"
                };
                ToolOutput::error(format!(
                    "cancelled: the user cancelled the turn while `{}` was running; {effect}",
                    call.name
                ))
                .with_meta("cancelled", true)
            }
        };
        let output = self
            .post_tool_use(call, input, output, session, grant.hook_notices, cancel)
            .await;
        let output = match &self.write_observer {
            Some(observer) if !read_only && !output.is_error => {
                self.after_write(observer.as_ref(), output).await
            }
            _ => output,
        };
        // What the user was asked for this call and answered is part of its record.
        let output = match grant.asked {
            Some(asked) => output.with_meta("asked", asked),
            None => output,
        };
        let duration = started.elapsed();
        tracing::info!(
            parent: &span,
            duration_ms = duration.as_millis() as u64,
            is_error = output.is_error,
            "tool call finished"
        );
        (output, duration)
    }

    /// Tell the write observer about the file a successful mutating call changed, and append
    /// what it says (the file's fresh diagnostics) to the result.
    pub(super) async fn after_write(
        &self,
        observer: &dyn WriteObserver,
        output: ToolOutput,
    ) -> ToolOutput {
        let Some(source) = output.meta.get("source").and_then(Value::as_str) else {
            return output;
        };
        let Ok(path) = self.workspace.resolve(source) else {
            return output;
        };
        match observer.after_write(&self.workspace, &path).await {
            Some(report) => {
                let text = format!("{}\n\n{report}", output.text.trim_end());
                ToolOutput { text, ..output }.with_meta("after_write", report)
            }
            None => output,
        }
    }

    /// Cap the text and complete the meta the log records.
    pub(super) fn finish(
        &self,
        output: ToolOutput,
        duration: Duration,
        origin: Option<&str>,
    ) -> ToolOutput {
        let original_len = output.text.len();
        let (text, truncated) = cap_text(&output.text, self.limits.max_output_bytes);
        // A tool that cut its content itself (a fetched page) has said so already.
        let truncated = truncated || output.meta.get("truncated") == Some(&Value::Bool(true));
        let mut output = ToolOutput {
            text,
            meta: output.meta,
            is_error: output.is_error,
        }
        .with_meta("truncated", truncated)
        .with_meta("original_len", original_len)
        .with_meta("duration_ms", duration.as_millis() as u64)
        .with_meta("is_error", output.is_error);
        if let Some(origin) = origin {
            output = output.with_meta("origin", origin);
        }
        output
    }
}
