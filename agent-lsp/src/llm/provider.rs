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
mod config;
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
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use self::body::Cap;
pub use self::body::{MAX_ANSWER_BYTES, MAX_BODY_BYTES, MAX_FIM_BODY_BYTES, MAX_FIM_TEXT_BYTES};
pub use self::config::{
    DEFAULT_API_KEY_ENV, DEFAULT_BASE_URL, MAX_RETRY_AFTER, ProviderConfig, ProviderOptions,
};
pub use self::error::{ProviderError, TimeoutPhase, classify_http_error, parse_retry_after};
pub use self::fim::{FimAnswer, FimRequest};
use self::stream::{Assembler, BodyError, read_sse, with_idle_timeout};
pub use self::stream::{Completion, StreamDelta, UsageFigures};
use crate::llm::{ModelRequest, wire};

/// A client for one OpenAI-compatible endpoint. Cheap to share: clone it or put it in an
/// `Arc`; the connection pool is shared.
#[derive(Clone, Debug)]
pub struct Provider {
    config: ProviderConfig,
    client: reqwest::Client,
}

impl Provider {
    /// A client for the endpoint `config` names. Nothing is sent until the first request, so
    /// this fails only when the HTTP client itself cannot be built (its TLS backend).
    pub fn new(config: ProviderConfig) -> anyhow::Result<Provider> {
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .user_agent(concat!("agent-lsp/", env!("CARGO_PKG_VERSION")))
            .build()
            .context("failed to build the HTTP client")?;
        Ok(Provider { config, client })
    }

    /// The settings this client was built with, for the model name the loop writes into each
    /// request.
    pub(crate) fn config(&self) -> &ProviderConfig {
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
