//! Who answers a call whose permission is `ask`: the person at the terminal, the editor, or,
//! headless, nobody (then `ask` means deny unless `--yes` was given). The runtime asks; what
//! is asked and the answer are the front end's.

use futures_util::future::BoxFuture;

use crate::session::event::ToolCallRef;

/// Who answers an `ask` permission: the editor (a prompt to the programmer) or the terminal.
pub trait Asker: Send + Sync {
    /// Whether this call may run. The call carries the raw arguments, to show to the person.
    fn ask(&self, call: &ToolCallRef) -> BoxFuture<'static, bool>;

    /// Whether this call may run, where it needs approval for a reason of its own
    /// ([`Tool::approval_reason`](crate::plugin::tool::Tool::approval_reason)), which the question shows; an asker that shows nothing asks
    /// as [`Asker::ask`].
    fn ask_because(&self, call: &ToolCallRef, reason: &str) -> BoxFuture<'static, bool> {
        let _ = reason;
        self.ask(call)
    }

    /// How a refusal is explained to the model.
    fn refusal(&self, call: &ToolCallRef) -> String {
        format!(
            "the call to `{}` was refused: its permission is `ask` in the preset's permission policy and the user declined it; do not retry the same call, ask the user or take another way",
            call.name
        )
    }
}

/// The asker of a session with nobody to ask: `ask` means deny, unless `yes` (`--yes`) was given.
#[derive(Clone, Copy, Debug, Default)]
pub struct HeadlessAsker {
    /// Whether `ask` means allow (`--yes`) rather than deny.
    pub yes: bool,
}

impl Asker for HeadlessAsker {
    fn ask(&self, call: &ToolCallRef) -> BoxFuture<'static, bool> {
        tracing::info!(tool = %call.name, approved = self.yes, "headless permission `ask`");
        let yes = self.yes;
        Box::pin(async move { yes })
    }

    fn refusal(&self, call: &ToolCallRef) -> String {
        format!(
            "the call to `{}` was refused by the preset's permission policy: it needs approval (`ask`) and this session runs without anyone to ask (run with --yes to approve such calls); do not retry it, find another way or tell the user",
            call.name
        )
    }
}
