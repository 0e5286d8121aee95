//! Provider settings: the optional fields a configuration file writes, resolved with their
//! defaults into the [`ProviderConfig`] a [`super::Provider`] is built from.
//!
//! Apart from the client because these are a contract with configuration files and presets
//! (every field optional, durations in plain numbers), and the defaults and the rule that the key
//! never reaches a log line are looked for here, not among the retries and timeouts.

use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// DeepSeek's API; any OpenAI-compatible base URL works (`https://api.openai.com/v1`,
/// `http://127.0.0.1:8080/v1`, ...).
pub const DEFAULT_BASE_URL: &str = "https://api.deepseek.com";
/// DeepSeek's fast model, which goes with [`DEFAULT_BASE_URL`].
const DEFAULT_MODEL: &str = "deepseek-v4-flash";
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
    /// The endpoint (see [`ProviderConfig::base_url`]); default [`DEFAULT_BASE_URL`]. Must be
    /// `http://` or `https://`.
    pub base_url: Option<String>,
    /// The model requests name; default DeepSeek's `deepseek-v4-flash`.
    pub model: Option<String>,
    /// Name of the environment variable holding the API key (default `DEEPSEEK_API_KEY`).
    pub api_key_env: Option<String>,
    /// [`ProviderConfig::request_timeout`] in seconds (default 120).
    pub request_timeout_secs: Option<u64>,
    /// [`ProviderConfig::connect_timeout`] in seconds (default 15).
    pub connect_timeout_secs: Option<u64>,
    /// [`ProviderConfig::idle_timeout`] in seconds (default 120).
    pub idle_timeout_secs: Option<u64>,
    /// [`ProviderConfig::total_timeout`] in seconds (default 900).
    pub total_timeout_secs: Option<u64>,
    /// [`ProviderConfig::max_retries`] (default 3); 0 turns retries off.
    pub max_retries: Option<u32>,
    /// [`ProviderConfig::backoff_base`] in milliseconds (default 500); tests shorten it so
    /// retries do not slow them down.
    pub backoff_base_ms: Option<u64>,
    /// [`ProviderConfig::backoff_cap`] in milliseconds (default 30 000).
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

    pub(super) fn endpoint(&self, path: &str) -> String {
        format!("{}/{path}", self.base_url.trim_end_matches('/'))
    }
}
