//! What a run recorded, read back from its session log for the tests to check.

use agent_lsp::session::History;
use agent_lsp::session::event::EventBody;

/// What `pick` takes from the events of `history`, in log order.
pub fn picked<T>(history: &History, mut pick: impl FnMut(&EventBody) -> Option<T>) -> Vec<T> {
    history
        .events()
        .iter()
        .filter_map(|event| pick(&event.body))
        .collect()
}

/// The results of `name` calls in the log, in log order, as (call id, text).
pub fn tool_results(history: &History, name: &str) -> Vec<(String, String)> {
    picked(history, |body| match body {
        EventBody::ToolResult(result) if result.name == name => {
            Some((result.call_id.clone(), result.text.clone()))
        }
        _ => None,
    })
}

/// The text of every assistant message in the log, in log order.
pub fn assistant_texts(history: &History) -> Vec<String> {
    picked(history, |body| match body {
        EventBody::AssistantMessage(message) => Some(message.text.clone()),
        _ => None,
    })
}
