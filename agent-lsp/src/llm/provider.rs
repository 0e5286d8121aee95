//! The streaming client for DeepSeek and other OpenAI-compatible chat-completions endpoints.
//!
//! [`Provider::stream`] sends exactly the bytes of [`wire::chat_completions_body`] (so what
//! the log says was sent is what was sent, and `session replay` can reprint it), streams the
//! answer back as [`StreamDelta`]s for progress display, and returns the assembled
//! [`Completion`]. Failures come back classified as [`ProviderError`] so the loop can react:
//! compact on [`ProviderError::ContextOverflow`], show the fix for [`ProviderError::Auth`].
//!
//! Transient failures (rate limit, overload, network, timeouts) are retried with jittered
//! exponential backoff, but only while nothing of the answer has reached the caller: a retry
//! after a partial answer would show the programmer the same text twice. Every await also
//! watches the turn's cancellation token.
//!
//! Timeouts are per phase: on connecting, on waiting for the response headers, and on silence
//! between two pieces of the body. Over them, a generous total deadline bounds the whole
//! request, retries included, because the phases alone can be kept alive forever by an
//! endpoint that sends `: keep-alive` comments or a trickle of bytes; a long reasoning answer
//! may legitimately stream for many minutes, so the default is far above any real answer.
//! The SSE decoder (`sse.rs`) bounds what one line or event may hold, so an endless line is
//! refused at a few MiB rather than read until memory runs out; an answer (streamed or in one
//! piece) is refused once it passes [`MAX_ANSWER_BYTES`] (`body.rs` says why that size).

mod body;
mod error;
mod fim;
mod sse;
mod stream;

use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use anyhow::Context;
use futures_util::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE, RETRY_AFTER};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use self::body::Cap;
pub use self::body::{MAX_ANSWER_BYTES, MAX_BODY_BYTES, MAX_FIM_BODY_BYTES, MAX_FIM_TEXT_BYTES};
pub use self::error::{ProviderError, TimeoutPhase, classify_http_error, parse_retry_after};
pub use self::fim::{FimAnswer, FimRequest};
use self::stream::{Assembler, BodyError, read_sse, with_idle_timeout};
pub use self::stream::{Completion, StreamDelta, UsageFigures};
use crate::llm::{ModelRequest, wire};

/// DeepSeek's API; any OpenAI-compatible base URL works (`https://api.openai.com/v1`,
/// `http://127.0.0.1:8080/v1`, ...).
pub const DEFAULT_BASE_URL: &str = "https://api.deepseek.com";
pub const DEFAULT_MODEL: &str = "deepseek-v4-flash";
/// Where the API key is read from unless the configuration names another variable.
pub const DEFAULT_API_KEY_ENV: &str = "DEEPSEEK_API_KEY";
/// The longest `Retry-After` always waited out (when `backoff_cap` is shorter): rate limits
/// ask for a few seconds, and a short backoff cap chosen for fast retries of failures should
/// not turn a polite "try again in 1 s" into an error.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Provider settings as written in configuration files: every field optional, durations in
/// plain numbers. [`ProviderConfig::resolve`] fills in the defaults. The key itself is never
/// written in a configuration file, only the name of the variable that holds it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProviderOptions {
    pub base_url: Option<String>,
    pub model: Option<String>,
    /// Name of the environment variable holding the API key (default `DEEPSEEK_API_KEY`).
    pub api_key_env: Option<String>,
    pub request_timeout_secs: Option<u64>,
    pub connect_timeout_secs: Option<u64>,
    pub idle_timeout_secs: Option<u64>,
    pub total_timeout_secs: Option<u64>,
    pub max_retries: Option<u32>,
    pub backoff_base_ms: Option<u64>,
    pub backoff_cap_ms: Option<u64>,
}

/// Resolved provider settings.
#[derive(Clone, PartialEq, Eq)]
pub struct ProviderConfig {
    /// Without the trailing `/chat/completions`; a trailing slash is tolerated.
    pub base_url: String,
    /// Sent as `Authorization: Bearer`; `None` sends no header (local servers need none).
    pub api_key: Option<String>,
    /// The variable the key came from, named in the message of an authentication error.
    pub api_key_env: String,
    /// The model requests should name; the loop copies it into `ModelRequest::model`.
    pub model: String,
    /// Longest wait from sending a request to its response status and headers.
    pub request_timeout: Duration,
    /// Longest wait for the TCP and TLS connection.
    pub connect_timeout: Duration,
    /// Longest silence between two pieces of a streamed body (keep-alive comments count as
    /// life, so a request queued on the server does not time out while the server says so).
    pub idle_timeout: Duration,
    /// Longest a whole request may take, from the first attempt to the end of the last
    /// answer, retries and their waits included.
    pub total_timeout: Duration,
    /// Retries after the first attempt, for transient errors only.
    pub max_retries: u32,
    /// First backoff step; each retry doubles it, up to `backoff_cap`, with jitter.
    pub backoff_base: Duration,
    /// Longest backoff wait. A 429's `Retry-After` is waited out up to this or
    /// [`MAX_RETRY_AFTER`], whichever is longer; a longer one is not: the error is returned so
    /// the programmer sees how long the server asked to wait.
    pub backoff_cap: Duration,
}

impl Default for ProviderConfig {
    fn default() -> Self {
        ProviderConfig {
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_key: None,
            api_key_env: DEFAULT_API_KEY_ENV.to_owned(),
            model: DEFAULT_MODEL.to_owned(),
            request_timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(15),
            idle_timeout: Duration::from_secs(120),
            total_timeout: Duration::from_secs(900),
            max_retries: 3,
            backoff_base: Duration::from_millis(500),
            backoff_cap: Duration::from_secs(30),
        }
    }
}

impl std::fmt::Debug for ProviderConfig {
    // The key must never reach a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_key_env", &self.api_key_env)
            .field("model", &self.model)
            .field("request_timeout", &self.request_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("total_timeout", &self.total_timeout)
            .field("max_retries", &self.max_retries)
            .field("backoff_base", &self.backoff_base)
            .field("backoff_cap", &self.backoff_cap)
            .finish()
    }
}

impl ProviderConfig {
    /// Fill in defaults and read the key from the process environment.
    pub fn from_env(options: &ProviderOptions) -> anyhow::Result<ProviderConfig> {
        Self::resolve(options, |name| std::env::var(name).ok())
    }

    /// Fill in defaults; `env` looks up environment variables (injected so tests need not
    /// touch the process environment). An empty key counts as no key.
    pub fn resolve(
        options: &ProviderOptions,
        env: impl Fn(&str) -> Option<String>,
    ) -> anyhow::Result<ProviderConfig> {
        let defaults = ProviderConfig::default();
        let base_url = options
            .base_url
            .clone()
            .unwrap_or(defaults.base_url)
            .trim_end_matches('/')
            .to_owned();
        let url = reqwest::Url::parse(&base_url)
            .with_context(|| format!("provider base_url `{base_url}` is not a URL"))?;
        anyhow::ensure!(
            matches!(url.scheme(), "http" | "https"),
            "provider base_url `{base_url}` must start with http:// or https://"
        );
        let api_key_env = options.api_key_env.clone().unwrap_or(defaults.api_key_env);
        let api_key = env(&api_key_env)
            .map(|key| key.trim().to_owned())
            .filter(|key| !key.is_empty());
        let secs =
            |value: Option<u64>, default: Duration| value.map_or(default, Duration::from_secs);
        let millis =
            |value: Option<u64>, default: Duration| value.map_or(default, Duration::from_millis);
        Ok(ProviderConfig {
            base_url,
            api_key,
            api_key_env,
            model: options.model.clone().unwrap_or(defaults.model),
            request_timeout: secs(options.request_timeout_secs, defaults.request_timeout),
            connect_timeout: secs(options.connect_timeout_secs, defaults.connect_timeout),
            idle_timeout: secs(options.idle_timeout_secs, defaults.idle_timeout),
            total_timeout: secs(options.total_timeout_secs, defaults.total_timeout),
            max_retries: options.max_retries.unwrap_or(defaults.max_retries),
            backoff_base: millis(options.backoff_base_ms, defaults.backoff_base),
            backoff_cap: millis(options.backoff_cap_ms, defaults.backoff_cap),
        })
    }

    fn endpoint(&self, path: &str) -> String {
        format!("{}/{path}", self.base_url.trim_end_matches('/'))
    }
}

/// A client for one OpenAI-compatible endpoint. Cheap to share: clone it or put it in an
/// `Arc`; the connection pool is shared.
#[derive(Clone, Debug)]
pub struct Provider {
    config: ProviderConfig,
    client: reqwest::Client,
}

impl Provider {
    pub fn new(config: ProviderConfig) -> anyhow::Result<Provider> {
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .user_agent(concat!("agent-lsp/", env!("CARGO_PKG_VERSION")))
            .build()
            .context("failed to build the HTTP client")?;
        Ok(Provider { config, client })
    }

    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// Send `request` and stream the answer.
    ///
    /// The body is exactly `wire::chat_completions_body(request)`. `on_delta` sees reasoning,
    /// text and tool-call starts as they arrive; it is never called twice for the same piece,
    /// because nothing is retried once a piece was delivered. Returns
    /// [`ProviderError::Cancelled`] soon after `cancel` fires, dropping the connection.
    pub async fn stream(
        &self,
        request: &ModelRequest,
        cancel: &CancellationToken,
        mut on_delta: impl FnMut(StreamDelta) + Send,
    ) -> Result<Completion, ProviderError> {
        let body = wire::chat_completions_body(request);
        let url = self.config.endpoint("chat/completions");
        let deadline = Instant::now() + self.config.total_timeout;
        let mut attempt = 0;
        loop {
            tracing::debug!(
                index = request.index,
                model = %request.model,
                %url,
                bytes = body.len(),
                attempt,
                "sending model request"
            );
            let mut assembler = Assembler::default();
            let attempt_stream =
                self.attempt_stream(&url, &body, cancel, &mut assembler, &mut on_delta);
            let result = match tokio::time::timeout_at(deadline, attempt_stream).await {
                Ok(result) => result,
                Err(_elapsed) => Err(self.total_timeout()),
            };
            let error = match result {
                Ok(()) => {
                    let completion = assembler.finish()?;
                    tracing::debug!(
                        index = request.index,
                        finish_reason = ?completion.finish_reason,
                        usage = ?completion.usage,
                        tool_calls = completion.tool_calls.len(),
                        "model answer complete"
                    );
                    return Ok(completion);
                }
                Err(error) => error,
            };
            if assembler.delivered {
                // Part of the answer was shown already; a second attempt would repeat it.
                tracing::warn!(index = request.index, %error, "model stream failed after partial answer");
                return Err(error);
            }
            let Some(wait) = self.retry_delay(attempt, &error, deadline) else {
                return Err(error);
            };
            tracing::warn!(
                index = request.index,
                %error,
                attempt = attempt + 1,
                wait_ms = wait.as_millis() as u64,
                "retrying model request"
            );
            sleep_or_cancel(wait, cancel).await?;
            attempt += 1;
        }
    }

    /// One try: send, check the status, read the body into `assembler`.
    async fn attempt_stream(
        &self,
        url: &str,
        body: &str,
        cancel: &CancellationToken,
        assembler: &mut Assembler,
        on_delta: &mut (impl FnMut(StreamDelta) + Send),
    ) -> Result<(), ProviderError> {
        let request = self
            .client
            .post(url)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "text/event-stream")
            .body(body.to_owned());
        let response = self.send(request, cancel).await?;
        if answered_in_one_piece(&response) {
            // The server ignored `stream: true` and answered in one piece.
            let cap = Cap::Refuse {
                limit: MAX_BODY_BYTES,
                what: "in its one-piece JSON answer",
            };
            let bytes = self.read_whole(response, cancel, cap).await?;
            return assembler.push_whole_answer(&bytes, on_delta);
        }
        let connect_timeout = self.config.connect_timeout;
        let bytes = response.bytes_stream().map(move |piece| {
            piece.map_err(|error| {
                BodyError::Transport(ProviderError::from_transport(&error, connect_timeout))
            })
        });
        let bytes = with_idle_timeout(Box::pin(bytes), self.config.idle_timeout);
        read_sse(bytes, assembler, cancel, on_delta).await
    }

    /// The model ids the endpoint offers (`GET {base}/models`).
    pub async fn list_models(
        &self,
        cancel: &CancellationToken,
    ) -> Result<Vec<String>, ProviderError> {
        #[derive(Deserialize)]
        struct ModelList {
            data: Vec<ModelEntry>,
        }
        #[derive(Deserialize)]
        struct ModelEntry {
            id: String,
        }

        let url = self.config.endpoint("models");
        let deadline = Instant::now() + self.config.total_timeout;
        let mut attempt = 0;
        loop {
            let list = async {
                let response = self.send(self.client.get(&url), cancel).await?;
                let cap = Cap::Refuse {
                    limit: MAX_BODY_BYTES,
                    what: "in its model list",
                };
                let bytes = self.read_whole(response, cancel, cap).await?;
                let list: ModelList =
                    serde_json::from_slice(&bytes).map_err(|error| ProviderError::Protocol {
                        message: format!("the model list does not parse: {error}"),
                    })?;
                Ok(list.data.into_iter().map(|model| model.id).collect())
            };
            let result = match tokio::time::timeout_at(deadline, list).await {
                Ok(result) => result,
                Err(_elapsed) => Err(self.total_timeout()),
            };
            let error = match result {
                Ok(models) => return Ok(models),
                Err(error) => error,
            };
            let Some(wait) = self.retry_delay(attempt, &error, deadline) else {
                return Err(error);
            };
            tracing::warn!(%error, attempt = attempt + 1, "retrying model list request");
            sleep_or_cancel(wait, cancel).await?;
            attempt += 1;
        }
    }

    /// Send with the key, the response timeout and cancellation; turn a non-success status
    /// into a classified error.
    async fn send(
        &self,
        request: reqwest::RequestBuilder,
        cancel: &CancellationToken,
    ) -> Result<reqwest::Response, ProviderError> {
        let request = match &self.config.api_key {
            Some(key) => request.bearer_auth(key),
            None => request,
        };
        let timeout = self.config.request_timeout;
        let response = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(ProviderError::Cancelled),
            response = tokio::time::timeout(timeout, request.send()) => response,
        };
        let response = match response {
            Err(_elapsed) => {
                return Err(ProviderError::Timeout {
                    phase: TimeoutPhase::Response,
                    after: timeout,
                });
            }
            Ok(Err(error)) => {
                return Err(ProviderError::from_transport(
                    &error,
                    self.config.connect_timeout,
                ));
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        // The error body only refines the message; when it cannot be read, the status alone
        // still classifies the error.
        let cap = Cap::Truncate {
            limit: body::MAX_ERROR_BODY_BYTES,
        };
        let body = match self.read_whole(response, cancel, cap).await {
            Ok(body) => body,
            Err(ProviderError::Cancelled) => return Err(ProviderError::Cancelled),
            Err(error) => {
                tracing::debug!(%error, "could not read the error body");
                Vec::new()
            }
        };
        Err(classify_http_error(
            status.as_u16(),
            retry_after.as_deref(),
            &body,
            &self.config.api_key_env,
            SystemTime::now(),
        ))
    }

    fn total_timeout(&self) -> ProviderError {
        ProviderError::Timeout {
            phase: TimeoutPhase::Total,
            after: self.config.total_timeout,
        }
    }

    /// How long to wait before retry number `attempt + 1`, or `None` not to retry: the error
    /// is not transient, the retries are spent, the server asked for a longer wait than we
    /// wait out, or the retry could not start before the deadline.
    fn retry_delay(
        &self,
        attempt: u32,
        error: &ProviderError,
        deadline: Instant,
    ) -> Option<Duration> {
        if attempt >= self.config.max_retries || !error.is_transient() {
            return None;
        }
        let wait = match error {
            ProviderError::RateLimit {
                retry_after: Some(after),
                ..
            } => {
                let longest = self.config.backoff_cap.max(MAX_RETRY_AFTER);
                (*after <= longest).then_some(*after)?
            }
            _ => backoff(
                self.config.backoff_base,
                self.config.backoff_cap,
                attempt,
                random_unit(),
            ),
        };
        (Instant::now() + wait < deadline).then_some(wait)
    }
}

/// "Equal jitter" backoff: half of the exponential step is fixed, half random, so clients
/// that failed together do not retry together, yet each still waits a meaningful time.
/// `unit` is a random number in `[0, 1)`.
fn backoff(base: Duration, cap: Duration, attempt: u32, unit: f64) -> Duration {
    let step = base
        .saturating_mul(2u32.saturating_pow(attempt.min(16)))
        .min(cap);
    step / 2 + (step / 2).mul_f64(unit)
}

/// A random number in `[0, 1)` from the standard library's per-instance random hash keys;
/// jitter needs no cryptographic quality and not another dependency.
fn random_unit() -> f64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |since| since.subsec_nanos().into()),
    );
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

async fn sleep_or_cancel(wait: Duration, cancel: &CancellationToken) -> Result<(), ProviderError> {
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(ProviderError::Cancelled),
        () = tokio::time::sleep(wait) => Ok(()),
    }
}

/// Whether a server asked to stream (`stream: true`) answered with one JSON body instead, which
/// some OpenAI-compatible servers do; both the chat and the FIM calls read it whole then.
fn answered_in_one_piece(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim_start().starts_with("application/json"))
}

#[cfg(test)]
mod tests;
