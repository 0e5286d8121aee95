//! A conversation: one session and what runs in it. It is the whole of what a front end does
//! with an agent: submit a prompt (the turn's events go to the front end's `TurnUi`, a token
//! cancels it), run one tool call as the user's own, and read the session.

use tokio_util::sync::CancellationToken;

use crate::agent::{Agent, TurnOutcome, TurnUi};
use crate::llm::provider::Provider;
use crate::plugin::outcomes::ToolCallOutcome;
use crate::preset::Preset;
use crate::session::Session;
use crate::tools::ToolRuntime;

/// An agent and its tools before they have a session (see `Host::open`).
pub(super) struct Unrecorded {
    pub agent: Option<Agent>,
    pub tools: ToolRuntime,
    pub provider: Option<Provider>,
}

impl Unrecorded {
    pub fn into_conversation(self, session: Session, preset: Preset) -> Conversation {
        Conversation {
            session,
            tools: self.tools,
            preset,
            agent: self.agent,
            provider: self.provider,
        }
    }
}

/// One session with its preset's plugins and tools and, when a model is configured, the
/// agent that runs its turns.
pub struct Conversation {
    /// The session every turn and call is recorded in.
    pub session: Session,
    /// The preset's tools: what the agent calls, and what [`Conversation::call`] runs.
    pub tools: ToolRuntime,
    preset: Preset,
    /// `None` when no model is configured.
    agent: Option<Agent>,
    provider: Option<Provider>,
}

impl Conversation {
    /// The preset the session runs with.
    pub fn preset(&self) -> &Preset {
        &self.preset
    }

    /// The model the turns run on, `None` when none is configured.
    pub fn provider(&self) -> Option<&Provider> {
        self.provider.as_ref()
    }

    /// Whether a prompt can be submitted: a model is configured.
    pub fn has_model(&self) -> bool {
        self.agent.is_some()
    }

    /// Whether `prompt` may be submitted: the error says why not (no model, or it is too long
    /// to record), before anything is written.
    pub fn check_prompt(&self, prompt: &str) -> anyhow::Result<()> {
        let Some(agent) = self.agent.as_ref() else {
            anyhow::bail!("no model is configured");
        };
        agent.prompt_text(prompt).map(drop)
    }

    /// Run one turn for `prompt` to its end: its events go to `ui` as they happen, and
    /// `cancel` stops it cleanly (the session stays consistent). Without a model this is an
    /// error and nothing is recorded; check [`Conversation::has_model`] first to say so in
    /// the front end's own words.
    pub async fn submit(
        &mut self,
        prompt: &str,
        cancel: &CancellationToken,
        ui: &mut dyn TurnUi,
    ) -> anyhow::Result<TurnOutcome> {
        let Some(agent) = self.agent.as_mut() else {
            anyhow::bail!("no model is configured");
        };
        agent.run_turn(&mut self.session, prompt, cancel, ui).await
    }

    /// Run the tool `name` once with `arguments` (JSON text, as a model would send them), as
    /// the user's own call: through the same permission, timeout and cap as the model's, and
    /// recorded in the session.
    pub async fn call(
        &mut self,
        name: &str,
        arguments: &str,
        cancel: &CancellationToken,
    ) -> anyhow::Result<ToolCallOutcome> {
        self.tools
            .run_one(&mut self.session, name, arguments, cancel)
            .await
    }

    /// The tools and the session apart, for a front end that runs calls from several clients
    /// at once (`mcp serve` locks the session per call, not the conversation).
    pub fn into_tools_and_session(self) -> (ToolRuntime, Session) {
        (self.tools, self.session)
    }
}
