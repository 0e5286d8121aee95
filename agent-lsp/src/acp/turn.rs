//! `session/prompt`: one turn, streamed to the client as it runs.
//!
//! The model's text and thinking go out as they stream; everything else comes from the
//! session log itself: the log is read from where it stood when the turn began, at each of
//! the loop's events and every [`TICK`] while a call runs, and each new event becomes its
//! updates ([`super::updates`]), so what the client sees is what the log holds, and a nested
//! call (`run_code`'s, a sub-agent's, whose log is followed too) shows up while it runs.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentBlock, EmbeddedResourceResource, PromptRequest, PromptResponse, SessionId,
    SessionUpdate, StopReason,
};
use tokio_util::sync::CancellationToken;

use super::options::{self, Slash};
use super::sessions::Live;
use super::tail::{Sender, Tail};
use super::updates::{self, Reading};
use super::{Acp, AcpError, lock};
use crate::agent::{AgentEvent, TurnOutcome, TurnUi};
use crate::llm::provider::StreamDelta;

/// How often the log is read while a call runs, for the calls nested in it.
const TICK: Duration = Duration::from_millis(200);

/// Run the prompt's turn, cancelled by `cancel`, and say how it stopped.
pub(super) async fn prompt(
    acp: &Acp,
    live: &Live,
    request: PromptRequest,
    cancel: &CancellationToken,
    connection: &ConnectionTo<Client>,
) -> Result<PromptResponse, AcpError> {
    let workspace = live.place.store.workspace().to_owned();
    let mut text = prompt_text(&request.prompt, &workspace)?;
    let (preset, model) = {
        let settings = lock(&live.settings);
        (settings.preset.clone(), settings.model.clone())
    };
    let skills = options::skills(&workspace, &preset)
        .into_iter()
        .map(|(name, _)| name)
        .collect::<Vec<_>>();
    // Only a prompt holds the conversation for long, and this is the session's only one
    // (`start_turn`); a `session/close` that came first has let go of it.
    let mut conversation = live.conversation.lock().await;
    match options::slash(&text, &skills) {
        Some(Slash::Compact) => {
            // The conversation lets go of the log; the next prompt opens it again.
            *conversation = None;
            return compact(acp, live, &preset, model.as_deref(), cancel, connection).await;
        }
        Some(Slash::Memory) => return memory(live, connection),
        Some(Slash::Skill { name, rest }) => text = options::skill_prompt(&name, &rest),
        None => {}
    }
    live.open_conversation(&mut conversation, acp, &text)?;
    let conversation = conversation.as_mut().expect("opened");
    conversation
        .check_prompt(&text)
        .map_err(|error| AcpError::params(format!("{error:#}")))?;
    let tail = Arc::new(Mutex::new(Tail::new(
        live.log_path(),
        workspace,
        Sender {
            connection: connection.clone(),
            session: request.session_id.clone(),
        },
        preset.file.model.context_window,
        Reading::Live,
    )));
    *lock(&live.tail) = Some(tail.clone());
    let ticking = tokio::spawn({
        let tail = tail.clone();
        async move {
            loop {
                tokio::time::sleep(TICK).await;
                lock(&tail).pump();
            }
        }
    });
    let mut ui = StreamUi { tail: tail.clone() };
    let outcome = conversation.submit(&text, cancel, &mut ui).await;
    ticking.abort();
    *lock(&live.tail) = None;
    lock(&tail).pump();
    let stop = match outcome.map_err(|error| AcpError::failed(format!("{error:#}")))? {
        TurnOutcome::Answered { .. } => StopReason::EndTurn,
        TurnOutcome::StepLimit { .. } => StopReason::MaxTurnRequests,
        TurnOutcome::Cancelled { .. } => StopReason::Cancelled,
    };
    Ok(PromptResponse::new(stop))
}

/// `/compact`: compact the session now, and say what came of it as the agent's message.
async fn compact(
    acp: &Acp,
    live: &Live,
    preset: &crate::preset::Preset,
    model: Option<&str>,
    cancel: &CancellationToken,
    connection: &ConnectionTo<Client>,
) -> Result<PromptResponse, AcpError> {
    let provider = acp.provider(model, preset)?;
    let message = if !lock(&live.settings).recorded {
        "nothing to compact: the session has no turn yet".to_owned()
    } else {
        let mut session = tokio::task::block_in_place(|| {
            live.place
                .store
                .open(&live.id, crate::session::log::Durability::Sync)
        })
        .map_err(AcpError::internal)?;
        let hooks = live
            .conversation
            .lock()
            .await
            .as_ref()
            .and_then(|conversation| conversation.tools.hooks().cloned());
        crate::host::compact_now(
            &mut session,
            preset,
            &provider,
            None,
            hooks.as_deref(),
            cancel,
        )
        .await
        .map_err(|error| AcpError::failed(format!("{error:#}")))?
        .message
    };
    say(connection, &live.id, &message);
    Ok(PromptResponse::new(StopReason::EndTurn))
}

/// `/memory`: the memories a session of this workspace starts with, as the agent's message.
fn memory(live: &Live, connection: &ConnectionTo<Client>) -> Result<PromptResponse, AcpError> {
    let listed = crate::memory::Memories::for_store(&live.place.store)
        .list()
        .map_err(AcpError::internal)?;
    let message = if listed.is_empty() {
        "no memories yet: the agent saves one with its `memory` tool when you ask it to remember something".to_owned()
    } else {
        listed
            .iter()
            .map(|memory| format!("- {}", memory.render()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    say(connection, &live.id, &message);
    Ok(PromptResponse::new(StopReason::EndTurn))
}

/// A command's reply, as the agent's message (not in the log: a command is no turn).
fn say(connection: &ConnectionTo<Client>, session: &str, text: &str) {
    super::send(
        connection,
        &SessionId::new(session.to_owned()),
        SessionUpdate::AgentMessageChunk(updates::text_chunk(text)),
    );
}

/// The prompt's content blocks as one text: text as it is, a link to a workspace file as its
/// `@path` mention (the model reads it with `read`, recorded and guarded), other links as
/// Markdown, and an embedded resource's text with its URI.
fn prompt_text(blocks: &[ContentBlock], workspace: &Path) -> Result<String, AcpError> {
    let mut parts = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(text) => parts.push(text.text.clone()),
            ContentBlock::ResourceLink(link) => parts.push(
                mention(&link.uri, workspace)
                    .unwrap_or_else(|| format!("[{}]({})", link.name, link.uri)),
            ),
            ContentBlock::Resource(resource) => match &resource.resource {
                EmbeddedResourceResource::TextResourceContents(contents) => {
                    let name = mention(&contents.uri, workspace).unwrap_or(contents.uri.clone());
                    parts.push(format!("{name}:\n```\n{}\n```", contents.text));
                }
                _ => {
                    return Err(AcpError::params(
                        "a binary resource cannot be part of a prompt; attach text",
                    ));
                }
            },
            _ => {
                return Err(AcpError::params(
                    "only text and resources can be part of a prompt (the agent offers no image or audio)",
                ));
            }
        }
    }
    let text = parts.join("\n");
    if text.trim().is_empty() {
        return Err(AcpError::params("the prompt is empty"));
    }
    Ok(text)
}

/// `@path` for a `file://` URI inside `workspace`.
fn mention(uri: &str, workspace: &Path) -> Option<String> {
    let path = url::Url::parse(uri).ok()?.to_file_path().ok()?;
    let relative = path.strip_prefix(workspace).ok()?;
    let relative = relative.to_str()?;
    (!relative.is_empty()).then(|| format!("@{relative}"))
}

/// The streamed text, and the log read at each of the loop's events.
struct StreamUi {
    tail: Arc<Mutex<Tail>>,
}

impl TurnUi for StreamUi {
    fn delta(&mut self, delta: &StreamDelta) {
        let tail = lock(&self.tail);
        match delta {
            StreamDelta::Text(text) => tail
                .sender
                .send(SessionUpdate::AgentMessageChunk(updates::text_chunk(text))),
            StreamDelta::Reasoning(text) => tail
                .sender
                .send(SessionUpdate::AgentThoughtChunk(updates::text_chunk(text))),
            StreamDelta::ToolCallStarted { .. } => {}
        }
    }

    fn event(&mut self, _event: &AgentEvent<'_>) {
        lock(&self.tail).pump();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::{ResourceLink, TextContent};

    #[test]
    fn a_link_to_a_workspace_file_is_its_mention_and_images_are_refused() {
        let workspace = Path::new("/w");
        let text = prompt_text(
            &[
                ContentBlock::Text(TextContent::new("look at")),
                ContentBlock::ResourceLink(ResourceLink::new("a.py", "file:///w/src/a.py")),
                ContentBlock::ResourceLink(ResourceLink::new("b", "file:///elsewhere/b")),
            ],
            workspace,
        )
        .unwrap();
        assert_eq!(text, "look at\n@src/a.py\n[b](file:///elsewhere/b)");
        assert!(prompt_text(&[], workspace).is_err());
    }
}
