//! What the loop learns from a failed model request: the class recorded in `request/error`, and
//! the context window a provider states when it refuses a request as too long (pressure checks
//! use the smaller of it and the preset's from then on, also after a restart).

use crate::llm::provider::ProviderError;
use crate::session::event::EventBody;

/// The window a context-overflow message states ("maximum context length is 65536 tokens", as
/// DeepSeek and OpenAI word it), if it states one.
pub(super) fn stated_context_window(message: &str) -> Option<u64> {
    let (_, rest) = message.split_once("maximum context length is ")?;
    let digits = rest
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>();
    digits.parse().ok()
}

/// The smallest context window the session's `request/error` events recorded.
pub(super) fn learned_context_window(history: &crate::session::History) -> Option<u64> {
    history
        .events()
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::RequestError(error) => error.context_window,
            _ => None,
        })
        .min()
}

/// The class recorded in `request/error`.
pub fn error_class(error: &ProviderError) -> &'static str {
    match error {
        ProviderError::Auth { .. } => "auth",
        ProviderError::Balance { .. } => "balance",
        ProviderError::RateLimit { .. } => "rate_limit",
        ProviderError::Overloaded { .. } => "overloaded",
        ProviderError::ContextOverflow { .. } => "context_overflow",
        ProviderError::BadRequest { .. } => "bad_request",
        ProviderError::Http { .. } => "http",
        ProviderError::Timeout { .. } => "timeout",
        ProviderError::Network { .. } => "network",
        ProviderError::Cancelled => "cancelled",
        ProviderError::Protocol { .. } => "protocol",
        ProviderError::TooLarge { .. } => "too_large",
    }
}
