//! Calls a tool makes itself (`run_code`'s `await tools.NAME(…)`), run by the same runtime as
//! the model's: the permission guard (an `ask` asks the same person), the tool's timeout, the
//! output cap, cancellation with the calling call. Each is recorded as it happens through the
//! calling call's [`EventSink`]: a `subtool/call` with the arguments as passed, a
//! `subtool/result` with the result as the tool got it (see `session/event/subtool.rs` for why
//! these are log-only kinds).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::{CallSession, Prepared, ToolRuntime};

use crate::plugin::outcomes::ToolOutput;

use crate::llm::ToolDef;
use crate::plugin::tool::EventSink;
use crate::plugin::tool::NestedCalls;
use crate::session::event::{EventBody, SubtoolCall, SubtoolResult, ToolCallRef};

/// The nested calls of one call.
pub(super) struct Nested {
    runtime: ToolRuntime,
    parent: ToolCallRef,
    session_path: PathBuf,
    session_id: String,
    call_seq: u64,
    events: EventSink,
    cancel: CancellationToken,
    count: AtomicU32,
}

impl std::fmt::Debug for Nested {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nested")
            .field("parent", &self.parent.id)
            .field("count", &self.count)
            .finish()
    }
}

impl Nested {
    pub(super) fn new(
        runtime: ToolRuntime,
        parent: &ToolCallRef,
        session: CallSession<'_>,
        cancel: CancellationToken,
    ) -> Nested {
        Nested {
            runtime,
            parent: parent.clone(),
            session_path: session.path.to_owned(),
            session_id: session.id.to_owned(),
            call_seq: session.call_seq,
            events: session.events.clone(),
            cancel,
            count: AtomicU32::new(0),
        }
    }
}

impl NestedCalls for Nested {
    fn call(&self, name: &str, arguments: String) -> BoxFuture<'static, ToolOutput> {
        let number = self.count.fetch_add(1, Ordering::Relaxed) + 1;
        let call = ToolCallRef {
            id: format!("{}.{number}", self.parent.id),
            name: name.to_owned(),
            arguments,
        };
        let parent = self.parent.id.clone();
        let runtime = self.runtime.clone();
        let (path, id, call_seq) = (
            self.session_path.clone(),
            self.session_id.clone(),
            self.call_seq,
        );
        let (events, cancel) = (self.events.clone(), self.cancel.clone());
        Box::pin(async move {
            let found = runtime.resolve(&call);
            events.record(EventBody::SubtoolCall(SubtoolCall {
                parent_call_id: parent.clone(),
                call_id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
                sandbox: runtime.sandbox_record(&found),
            }));
            // A tool that calls tools is not one of them: a program cannot start a program.
            let prepared = match runtime.registry.get(&call.name) {
                Some(tool) if tool.calls_tools() => Prepared::Done(ToolOutput::error(format!(
                    "`{}` cannot be called from inside `{}`",
                    call.name, parent
                ))),
                _ => {
                    let record = |run| {
                        events.record(EventBody::HookRun(run));
                        Ok(())
                    };
                    match runtime
                        .guard(&call, found, (&id, &path), record, &cancel)
                        .await
                    {
                        Ok(prepared) => prepared,
                        Err(error) => Prepared::Done(ToolOutput::error(format!("{error:#}"))),
                    }
                }
            };
            let (output, duration) = match prepared {
                Prepared::Done(output) => (output, std::time::Duration::ZERO),
                Prepared::Run { tool, args, grant } => {
                    let session = CallSession {
                        path: &path,
                        id: &id,
                        call_seq,
                        events: &events,
                    };
                    runtime
                        .run_guarded(&call, tool, args, grant, &cancel, session)
                        .await
                }
            };
            let output = runtime.finish(output, duration, None);
            events.record(EventBody::SubtoolResult(SubtoolResult {
                parent_call_id: parent,
                call_id: call.id,
                name: call.name,
                text: output.text.clone(),
                meta: output.meta.clone(),
            }));
            output
        })
    }

    fn catalog(&self) -> Vec<ToolDef> {
        self.runtime
            .catalog()
            .into_iter()
            .filter(|def| {
                self.runtime
                    .registry
                    .get(&def.name)
                    .is_some_and(|tool| !tool.calls_tools())
            })
            .collect()
    }
}
