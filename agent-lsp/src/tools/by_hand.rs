//! A call the user runs by hand, outside any model step (`agent-lsp tool`, `agent.tool`,
//! `mcp serve`): recorded as a turn of its own so the session stays valid and the model later
//! sees what the user ran.

use std::collections::HashMap;

use tokio_util::sync::CancellationToken;

use super::ToolRuntime;
use crate::plugin::outcomes::ToolCallOutcome;
use crate::session::event::{AssistantMessage, CheckpointReason, EventBody, ToolCallRef};
use crate::session::{NewEvent, Session};

impl ToolRuntime {
    /// Run one tool outside a model turn (`agent-lsp tool NAME --args JSON`) and record it.
    ///
    /// The session only accepts a tool result that answers a call on its surface, so the run is
    /// recorded as a turn of its own (the last turn + 1, step 0, "outside of model steps"): an
    /// `assistant/message` with empty text carrying the one call (id `user-<seq>`), then the
    /// `tool/call` and `tool/result` events as [`ToolRuntime::execute`] writes them. The result's
    /// meta has `"origin": "user"`, saying the call came from the user rather than the model.
    /// The pair stays on the surface, so the model later sees what the user ran.
    pub async fn run_one(
        &self,
        session: &mut Session,
        name: &str,
        arguments: &str,
        cancel: &CancellationToken,
    ) -> anyhow::Result<ToolCallOutcome> {
        let history = session.history();
        let turn = history.next_turn();
        let call = ToolCallRef {
            id: format!("user-{}", history.last_seq() + 1),
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        };
        // A call that may write is a turn of its own for a rewind: what the files held before
        // it, and after.
        let writes = self
            .registry
            .get(name)
            .is_some_and(|tool| !tool.read_only());
        if writes {
            self.checkpoint(session, turn, 0, CheckpointReason::TurnStart, Vec::new())
                .await?;
        }
        session.append(NewEvent::new(
            turn,
            0,
            EventBody::AssistantMessage(AssistantMessage {
                text: String::new(),
                reasoning: None,
                tool_calls: vec![call.clone()],
            }),
        ))?;
        let mut outcomes = self
            .execute_inner(
                session,
                turn,
                0,
                &[call],
                &HashMap::new(),
                cancel,
                Some("user"),
            )
            .await?;
        if writes {
            self.checkpoint(session, turn, 0, CheckpointReason::TurnEnd, Vec::new())
                .await?;
        }
        Ok(outcomes.pop().expect("one call, one outcome"))
    }
}
