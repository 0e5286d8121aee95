//! Inline completion: fill-in-the-middle suggestions for the editor's ghost text, grounded in
//! what the workspace's language servers know about the code around the cursor.
//!
//! The server edge (`server/inline.rs`) turns `textDocument/inlineCompletion` into a
//! `Request` and the `Suggestion` back into an LSP edit; everything between is here and
//! speaks no LSP:
//!
//! - `[completion]` in the config file ([`CompletionOptions`], resolved into
//!   [`CompletionConfig`]); off without a model;
//! - `context`: the bounded prefix and suffix windows of the editor's buffer, and the
//!   signatures of the identifiers near the cursor, from the warm child servers' hover, as
//!   comments at the start of the prompt in a stable order (so consecutive requests share the
//!   provider's cached prefix);
//! - `edit`: the model's text trimmed to the syntactic end (the line, or the block the line
//!   opens) and the part of the rest of the line it repeats, which the edit replaces;
//! - `cache`: recent answers by (text before, text after), so typing through a suggestion is
//!   answered without a request;
//! - `engine`: one request's life: cache, debounce, grounding, the FIM call (cancelled when the
//!   editor cancels or the next keystroke supersedes it), at most one in flight per document;
//! - [`log`]: the per-workspace completion log (not the agent's sessions: accepting a
//!   suggestion is not agent work) and `agent-lsp completions stats`.

pub(crate) mod cache;
pub(crate) mod context;
pub(crate) mod edit;
pub(crate) mod engine;
pub mod log;

use std::time::Duration;

use serde::Deserialize;

use crate::llm::provider::{ProviderConfig, ProviderOptions};

pub(crate) use engine::{Engine, Outcome, Request};

/// DeepSeek's FIM API: `POST {base}/completions` with `prompt` and `suffix`.
pub const DEFAULT_BASE_URL: &str = "https://api.deepseek.com/beta";

/// `[completion]` as written in the config file: every key optional. Without `model` inline
/// completion is off, whatever `enabled` says.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct CompletionOptions {
    /// Whether `serve` offers inline completion (default `true` once a model is set).
    pub enabled: Option<bool>,
    /// The FIM model (`deepseek-v4-flash`, or whatever the endpoint serves).
    pub model: Option<String>,
    /// The endpoint without `/completions` (default DeepSeek's beta API).
    pub base_url: Option<String>,
    /// The environment variable holding the key (default `DEEPSEEK_API_KEY`).
    pub api_key_env: Option<String>,
    /// Characters of the buffer before the cursor sent as the prompt (default 4000).
    pub prefix_chars: Option<usize>,
    /// Characters of the buffer after the cursor sent as the suffix (default 1500).
    pub suffix_chars: Option<usize>,
    /// The most tokens the model may answer with (default 128).
    pub max_tokens: Option<u32>,
    /// Estimated tokens the servers' signatures may add to the prompt (default 400; 0 turns
    /// grounding off).
    pub context_tokens: Option<usize>,
    /// Lines above the cursor whose identifiers are looked up (default 3).
    pub context_lines: Option<usize>,
    /// How long a request waits for the next keystroke before it asks anything (default 25).
    pub debounce_ms: Option<u64>,
    /// How long the language servers may take to answer the lookups, counted from the
    /// request's arrival, during the debounce (default 50: a warm server answers a hover in a
    /// few ms, and a slower lookup goes on for the next keystroke).
    pub grounding_timeout_ms: Option<u64>,
    /// How long a signature the servers gave is reused before it is asked again (default
    /// 10000; 0 asks every time). Every keystroke changes the buffer, and a server answers
    /// the next hover only once it has analysed the change, so asking again each time costs
    /// that analysis per request, for signatures that rarely change while a line is typed.
    pub signature_ttl_ms: Option<u64>,
    /// How long the whole model request may take (default 5000).
    pub timeout_ms: Option<u64>,
}

/// Resolved `[completion]`: what the engine runs with.
#[derive(Clone, Debug)]
pub struct CompletionConfig {
    /// The FIM model every request names.
    pub model: String,
    /// The endpoint, key and timeouts of the FIM calls (no retries).
    pub provider: ProviderConfig,
    /// Characters of the buffer before the cursor sent as the prompt.
    pub prefix_chars: usize,
    /// Characters of the buffer after the cursor sent as the suffix.
    pub suffix_chars: usize,
    /// The most tokens the model may answer with: a suggestion is a line or a block, and a
    /// short cap keeps the answer fast.
    pub max_tokens: u32,
    /// 0: no grounding.
    pub context_tokens: usize,
    /// Lines above the cursor whose identifiers are looked up in the servers.
    pub context_lines: usize,
    /// How long a request waits for the next keystroke before it asks the model.
    pub debounce: Duration,
    /// How long the servers' lookups may take, counted from the request's arrival.
    pub grounding_timeout: Duration,
    /// How long a signature the servers gave is reused before it is asked again (zero: every
    /// time).
    pub signature_ttl: Duration,
}

impl CompletionOptions {
    /// The values' own checks, run when the config file is read, so a bad value is an error
    /// naming the key rather than a completion that silently never comes.
    pub fn check(&self) -> anyhow::Result<()> {
        let positive = [
            ("prefix_chars", self.prefix_chars.map(|value| value as u64)),
            ("suffix_chars", self.suffix_chars.map(|value| value as u64)),
            ("max_tokens", self.max_tokens.map(u64::from)),
            ("timeout_ms", self.timeout_ms),
        ];
        for (key, value) in positive {
            anyhow::ensure!(
                value != Some(0),
                "[completion] {key} must be at least 1 (leave it out for the default)"
            );
        }
        if let Some(model) = &self.model {
            anyhow::ensure!(
                !model.trim().is_empty(),
                "[completion] model is empty: name the FIM model, or leave the key out to turn inline completion off"
            );
        }
        if let Some(base_url) = &self.base_url {
            let url = reqwest::Url::parse(base_url).map_err(|error| {
                anyhow::anyhow!("[completion] base_url `{base_url}` is not a URL: {error}")
            })?;
            anyhow::ensure!(
                matches!(url.scheme(), "http" | "https"),
                "[completion] base_url `{base_url}` must start with http:// or https://"
            );
        }
        Ok(())
    }

    /// The configuration inline completion runs with, or `None` when it is off (no model, or
    /// `enabled = false`). `env` looks up the key's variable.
    pub fn resolve(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> anyhow::Result<Option<CompletionConfig>> {
        self.check()?;
        let Some(model) = self.model.clone() else {
            return Ok(None);
        };
        if self.enabled == Some(false) {
            return Ok(None);
        }
        let timeout = Duration::from_millis(self.timeout_ms.unwrap_or(5_000));
        let mut provider = ProviderConfig::resolve(
            &ProviderOptions {
                base_url: Some(
                    self.base_url
                        .clone()
                        .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned()),
                ),
                model: Some(model.clone()),
                api_key_env: self.api_key_env.clone(),
                max_retries: Some(0),
                ..ProviderOptions::default()
            },
            env,
        )?;
        provider.request_timeout = timeout;
        provider.idle_timeout = timeout;
        provider.total_timeout = timeout;
        provider.connect_timeout = provider.connect_timeout.min(timeout);
        Ok(Some(CompletionConfig {
            model,
            provider,
            prefix_chars: self.prefix_chars.unwrap_or(4_000),
            suffix_chars: self.suffix_chars.unwrap_or(1_500),
            max_tokens: self.max_tokens.unwrap_or(128),
            context_tokens: self.context_tokens.unwrap_or(400),
            context_lines: self.context_lines.unwrap_or(3),
            debounce: Duration::from_millis(self.debounce_ms.unwrap_or(25)),
            grounding_timeout: Duration::from_millis(self.grounding_timeout_ms.unwrap_or(50)),
            signature_ttl: Duration::from_millis(self.signature_ttl_ms.unwrap_or(10_000)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(text: &str) -> anyhow::Result<CompletionOptions> {
        let options: CompletionOptions = toml::from_str(text)?;
        options.check()?;
        Ok(options)
    }

    #[test]
    fn off_without_a_model_or_when_disabled() {
        let none = |_: &str| None;
        assert!(options("").unwrap().resolve(none).unwrap().is_none());
        let disabled = options("model = \"m\"\nenabled = false").unwrap();
        assert!(disabled.resolve(none).unwrap().is_none());
        let on = options("model = \"m\"\nbase_url = \"http://127.0.0.1:9/v1\"").unwrap();
        let config = on
            .resolve(|name| (name == "DEEPSEEK_API_KEY").then(|| "k".into()))
            .unwrap()
            .unwrap();
        assert_eq!(config.provider.base_url, "http://127.0.0.1:9/v1");
        assert_eq!(config.provider.api_key.as_deref(), Some("k"));
        assert_eq!(config.provider.max_retries, 0);
        assert_eq!(config.max_tokens, 128);
    }

    #[test]
    fn bad_values_and_unknown_keys_are_errors_naming_the_key() {
        let error = options("model = \"m\"\nprefix_chars = 0").unwrap_err();
        assert!(error.to_string().contains("prefix_chars"), "{error}");
        let error = options("model = \"m\"\nbase_url = \"ftp://x\"").unwrap_err();
        assert!(error.to_string().contains("base_url"), "{error}");
        let error = options("modle = \"m\"").unwrap_err();
        assert!(error.to_string().contains("modle"), "{error}");
        let error = options("model = \" \"").unwrap_err();
        assert!(error.to_string().contains("model is empty"), "{error}");
    }
}
