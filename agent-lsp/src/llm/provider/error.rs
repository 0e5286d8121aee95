//! What can go wrong talking to a model endpoint, classified so the loop can react.
//!
//! The agent loop needs more than "HTTP failed": a context overflow triggers compaction, a
//! rate limit is waited out, a bad key must reach the programmer with the fix. So every
//! failure is sorted into one [`ProviderError`] variant here, from the HTTP status and the
//! error body, and each variant's message says what happened and what to do about it.

use std::fmt;
use std::time::{Duration, SystemTime};

use serde_json::Value;

/// Longest error text kept from a response body; bodies can be whole HTML pages.
const MAX_MESSAGE_CHARS: usize = 2_000;

/// Why a model call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// 401 or 403: the key is missing, wrong, or lacks permission.
    #[error(
        "the endpoint rejected the API key (HTTP {status}: {message}): set {key_env} to a valid key for this endpoint"
    )]
    Auth {
        /// 401 or 403, as the endpoint answered.
        status: u16,
        /// The error text from the response body, cut to a couple of thousand characters.
        message: String,
        /// The environment variable the key is read from, so the message can name it.
        key_env: String,
    },
    /// 402: the account has run out of credit.
    #[error(
        "the account behind the API key has insufficient balance (HTTP 402: {message}): top up the account or configure another provider"
    )]
    Balance {
        /// The error text from the response body, cut to a couple of thousand characters (bodies
        /// can be whole HTML pages).
        message: String,
    },
    /// 429: too many requests; `retry_after` is the server's `Retry-After`, if it sent one.
    #[error("the endpoint is rate limiting requests (HTTP 429: {message}): {}", retry_advice(*.retry_after))]
    RateLimit {
        /// The wait the endpoint asked for (`Retry-After`), which the retry honours.
        retry_after: Option<Duration>,
        /// The error text from the response body, cut to a couple of thousand characters.
        message: String,
    },
    /// 500, 502, 503, 504: the server is failing or overloaded; usually transient.
    #[error(
        "the endpoint is overloaded or failing (HTTP {status}: {message}): try again in a little while"
    )]
    Overloaded {
        /// 500, 502, 503 or 504, as the endpoint answered.
        status: u16,
        /// The error text from the response body, cut to a couple of thousand characters (bodies
        /// can be whole HTML pages).
        message: String,
    },
    /// The request does not fit the model's context window; the loop compacts and retries.
    #[error(
        "the request exceeds the model's context length ({message}): compact the session or start a new one"
    )]
    ContextOverflow {
        /// The endpoint's own words, which may state the window the session learns from.
        message: String,
    },
    /// 400 or 422 for any other reason: the request itself is wrong; retrying will not help.
    #[error(
        "the endpoint refused the request as invalid (HTTP {status}: {message}): check the model name and model parameters"
    )]
    BadRequest {
        /// 400 or 422, as the endpoint answered.
        status: u16,
        /// The error text from the response body, cut to a couple of thousand characters (bodies
        /// can be whole HTML pages).
        message: String,
    },
    /// Any other unexpected status (404 from a wrong base URL, 405, 501, ...).
    #[error(
        "the endpoint answered with unexpected HTTP {status} ({message}): check the provider's base_url and model"
    )]
    Http {
        /// The status no other variant covers.
        status: u16,
        /// The error text from the response body, cut to a couple of thousand characters (bodies
        /// can be whole HTML pages).
        message: String,
    },
    /// The endpoint did not answer in time.
    #[error("{}", timeout_message(*.phase, *.after))]
    Timeout {
        /// Which wait ran out, so the message names the setting to raise.
        phase: TimeoutPhase,
        /// How long that wait was.
        after: Duration,
    },
    /// The connection could not be made or broke.
    #[error(
        "could not talk to the endpoint: {message}: check the network and the provider's base_url"
    )]
    Network {
        /// What the HTTP client reported (DNS, refused connection, TLS, a reset).
        message: String,
    },
    /// The turn's cancellation token fired.
    #[error("the model request was cancelled")]
    Cancelled,
    /// The answer did not follow the OpenAI-compatible streaming format.
    #[error(
        "the endpoint sent a malformed answer: {message}: check that base_url points at an OpenAI-compatible API"
    )]
    Protocol {
        /// What did not parse, and where.
        message: String,
    },
    /// The endpoint sent more than an answer may hold (`limit` bytes of `what`), which no model
    /// writes before its `max_tokens`: a broken or hostile endpoint. Reading stopped there, so
    /// memory stays bounded, and the partial answer was dropped, not recorded; not retried, since
    /// the same endpoint would send the same again.
    #[error(
        "the endpoint sent more than {} {what}, more than any model writes in one answer: reading stopped there and nothing of the answer was recorded: check the endpoint behind base_url and the model's max_tokens",
        format_size(*.limit)
    )]
    TooLarge {
        /// What grew too large, for the message (`bytes of answer`, `events`).
        what: &'static str,
        /// The cap it passed, in the unit `what` names.
        limit: usize,
    },
}

/// `bytes` as a short size: `16 MiB`, `64 KiB`.
fn format_size(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}

/// Which wait ran out, so the message can name the setting to raise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutPhase {
    /// Opening the TCP/TLS connection.
    Connect,
    /// Waiting for the response status and headers.
    Response,
    /// Waiting for the next piece of a streamed body.
    Idle,
    /// The whole request, retries and their waits included: the deadline that bounds a
    /// request whatever the endpoint sends (keep-alive comments forever, a trickle of bytes).
    Total,
}

impl TimeoutPhase {
    fn option_name(self) -> &'static str {
        match self {
            TimeoutPhase::Connect => "connect",
            TimeoutPhase::Response => "request",
            TimeoutPhase::Idle => "idle",
            TimeoutPhase::Total => "total",
        }
    }
}

fn timeout_message(phase: TimeoutPhase, after: Duration) -> String {
    match phase {
        TimeoutPhase::Total => format!(
            "the endpoint did not finish its answer within {}, the deadline of a whole request \
             (retries included): check the endpoint, or raise the provider's total_timeout_secs",
            format_duration(after)
        ),
        _ => format!(
            "no answer from the endpoint within {} while {phase}: check the network, or raise \
             the provider's {} timeout",
            format_duration(after),
            phase.option_name()
        ),
    }
}

impl fmt::Display for TimeoutPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimeoutPhase::Connect => "connecting",
            TimeoutPhase::Response => "waiting for the response",
            TimeoutPhase::Idle => "waiting for the next part of the stream",
            TimeoutPhase::Total => "receiving the whole answer",
        })
    }
}

impl ProviderError {
    /// Whether trying the same request again may succeed. Only these are retried, and only
    /// while nothing of the answer has been streamed to the caller yet.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ProviderError::RateLimit { .. }
                | ProviderError::Overloaded { .. }
                | ProviderError::Timeout { .. }
                | ProviderError::Network { .. }
        )
    }

    /// Turn a transport error into `Network`, or `Timeout` when reqwest's own connect timeout
    /// fired, keeping the whole source chain: reqwest's top-level text ("error sending
    /// request") hides the useful part ("connection refused").
    pub(crate) fn from_transport(error: &reqwest::Error, connect_timeout: Duration) -> Self {
        if error.is_timeout() && error.is_connect() {
            return ProviderError::Timeout {
                phase: TimeoutPhase::Connect,
                after: connect_timeout,
            };
        }
        ProviderError::Network {
            message: error_chain(error),
        }
    }
}

/// Sort a non-success HTTP answer into a [`ProviderError`].
///
/// `body` is parsed as JSON whatever the content type claims (DeepSeek sometimes sends JSON
/// error bodies as `text/plain`); when it is not JSON the raw text is the message.
/// `retry_after` is the raw `Retry-After` header, interpreted against `now`.
pub fn classify_http_error(
    status: u16,
    retry_after: Option<&str>,
    body: &[u8],
    key_env: &str,
    now: SystemTime,
) -> ProviderError {
    let message = error_message(status, body);
    match status {
        401 | 403 => ProviderError::Auth {
            status,
            message,
            key_env: key_env.to_owned(),
        },
        402 => ProviderError::Balance { message },
        429 => ProviderError::RateLimit {
            retry_after: retry_after.and_then(|value| parse_retry_after(value, now)),
            message,
        },
        500 | 502 | 503 | 504 => ProviderError::Overloaded { status, message },
        400 | 413 if mentions_context_overflow(&message) => {
            ProviderError::ContextOverflow { message }
        }
        400 | 422 => ProviderError::BadRequest { status, message },
        _ => ProviderError::Http { status, message },
    }
}

/// Classify an error object that arrives inside an otherwise successful (HTTP 200) answer,
/// as some servers report failures that happen after the headers were sent.
pub(crate) fn classify_inline_error(error: &Value) -> ProviderError {
    let message = message_from_json(error).unwrap_or_else(|| truncate(&error.to_string()));
    let status = error
        .get("code")
        .and_then(Value::as_u64)
        .or_else(|| error.get("status").and_then(Value::as_u64))
        .and_then(|code| u16::try_from(code).ok());
    match status {
        Some(status) if (400..600).contains(&status) => classify_http_error(
            status,
            None,
            message.as_bytes(),
            "the API key variable",
            SystemTime::now(),
        ),
        _ if mentions_context_overflow(&message) => ProviderError::ContextOverflow { message },
        _ => ProviderError::Protocol {
            message: format!("the endpoint reported an error in the stream: {message}"),
        },
    }
}

/// Parse `Retry-After`: either delay seconds or an HTTP-date (RFC 9110 §10.2.3). A date in the
/// past means "now".
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    // Not in the RFC, but some servers send fractional seconds.
    if let Ok(seconds) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).ok();
    }
    // IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") is a valid RFC 2822 date.
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let at = SystemTime::from(date);
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The human-readable message of an error body: `error.message`, `message`, `detail`,
/// `error` as a string, in that order; else the raw text; else the status reason.
fn error_message(status: u16, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if let Ok(value) = serde_json::from_str::<Value>(text)
        && let Some(message) = message_from_json(&value)
    {
        return message;
    }
    if text.is_empty() {
        let reason = reqwest::StatusCode::from_u16(status)
            .ok()
            .and_then(|status| status.canonical_reason())
            .unwrap_or("no error message");
        return reason.to_owned();
    }
    truncate(text)
}

fn message_from_json(value: &Value) -> Option<String> {
    let error = value.get("error").unwrap_or(value);
    let message = match error {
        Value::String(message) => Some(message.as_str()),
        Value::Object(_) => error
            .get("message")
            .or_else(|| error.get("detail"))
            .or_else(|| value.get("message"))
            .or_else(|| value.get("detail"))
            .and_then(Value::as_str),
        _ => None,
    }?;
    Some(truncate(message.trim()))
}

fn mentions_context_overflow(message: &str) -> bool {
    let message = message.to_lowercase();
    [
        "context length",
        "context_length",
        "context window",
        "maximum context",
    ]
    .iter()
    .any(|needle| message.contains(needle))
}

fn truncate(text: &str) -> String {
    match text.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

fn retry_advice(retry_after: Option<Duration>) -> String {
    match retry_after {
        Some(after) => format!(
            "wait {} before trying again, or lower the request rate",
            format_duration(after)
        ),
        None => "wait a moment before trying again, or lower the request rate".to_owned(),
    }
}

fn format_duration(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{}s", duration.as_secs())
    } else {
        format!("{:.1}s", duration.as_secs_f64())
    }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(status: u16, body: &str) -> ProviderError {
        classify_http_error(
            status,
            None,
            body.as_bytes(),
            "DEEPSEEK_API_KEY",
            SystemTime::UNIX_EPOCH,
        )
    }

    #[test]
    fn statuses_map_to_variants() {
        let deepseek_401 = r#"{"error":{"message":"Authentication Fails, Your api key: ****abcd is invalid","type":"authentication_error","param":null,"code":"invalid_request_error"}}"#;
        let error = classify(401, deepseek_401);
        assert_eq!(
            error,
            ProviderError::Auth {
                status: 401,
                message: "Authentication Fails, Your api key: ****abcd is invalid".into(),
                key_env: "DEEPSEEK_API_KEY".into(),
            }
        );
        assert!(
            error.to_string().contains("set DEEPSEEK_API_KEY"),
            "{error}"
        );

        assert!(matches!(
            classify(402, r#"{"error":{"message":"Insufficient Balance"}}"#),
            ProviderError::Balance { message } if message == "Insufficient Balance"
        ));
        for status in [500, 502, 503, 504] {
            assert!(matches!(
                classify(status, "Server overloaded"),
                ProviderError::Overloaded { status: s, .. } if s == status
            ));
        }
        assert!(matches!(
            classify(422, r#"{"error":{"message":"Invalid Parameters"}}"#),
            ProviderError::BadRequest { status: 422, .. }
        ));
        assert!(matches!(
            classify(404, ""),
            ProviderError::Http { status: 404, message } if message == "Not Found"
        ));
    }

    #[test]
    fn json_body_is_parsed_whatever_the_content_type() {
        // The caller never looks at the content type: a text/plain JSON body parses the same.
        let error = classify(400, r#"  {"error":{"message":"Invalid model"}}  "#);
        assert_eq!(
            error,
            ProviderError::BadRequest {
                status: 400,
                message: "Invalid model".into()
            }
        );
        // Shapes other servers use.
        assert!(matches!(classify(400, r#"{"detail":"nope"}"#),
            ProviderError::BadRequest { message, .. } if message == "nope"));
        assert!(matches!(classify(400, r#"{"error":"flat"}"#),
            ProviderError::BadRequest { message, .. } if message == "flat"));
        assert!(matches!(classify(400, "<html>bad gateway</html>"),
            ProviderError::BadRequest { message, .. } if message == "<html>bad gateway</html>"));
    }

    #[test]
    fn context_overflow_keeps_the_message() {
        let body = r#"{"error":{"message":"This model's maximum context length is 131072 tokens. However, you requested 140000 tokens (139000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error"}}"#;
        let error = classify(400, body);
        let ProviderError::ContextOverflow { message } = &error else {
            panic!("{error:?}");
        };
        assert!(message.starts_with("This model's maximum context length is 131072"));
        assert!(error.to_string().contains("compact the session"));
        assert!(matches!(
            classify(400, r#"{"error":{"message":"context_length_exceeded"}}"#),
            ProviderError::ContextOverflow { .. }
        ));
    }

    #[test]
    fn retry_after_seconds_and_http_date() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777); // 1994-11-06 08:49:37Z
        assert_eq!(parse_retry_after("7", now), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after(" 1.5 ", now),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:47 GMT", now),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);

        let error = classify_http_error(429, Some("3"), b"Rate Limit Reached", "K", now);
        assert_eq!(
            error,
            ProviderError::RateLimit {
                retry_after: Some(Duration::from_secs(3)),
                message: "Rate Limit Reached".into()
            }
        );
        assert!(error.to_string().contains("wait 3s"), "{error}");
    }

    #[test]
    fn only_transient_errors_are_retryable() {
        assert!(classify(429, "").is_transient());
        assert!(classify(503, "").is_transient());
        for status in [400, 401, 402, 404, 422] {
            assert!(!classify(status, "").is_transient(), "{status}");
        }
        assert!(!ProviderError::Cancelled.is_transient());
        assert!(
            !ProviderError::Protocol {
                message: String::new()
            }
            .is_transient()
        );
    }

    #[test]
    fn inline_stream_errors() {
        let overflow = serde_json::json!({"message": "maximum context length exceeded"});
        assert!(matches!(
            classify_inline_error(&overflow),
            ProviderError::ContextOverflow { .. }
        ));
        let overloaded = serde_json::json!({"message": "busy", "code": 503});
        assert!(matches!(
            classify_inline_error(&overloaded),
            ProviderError::Overloaded { status: 503, .. }
        ));
    }
}
