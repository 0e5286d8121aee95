//! Web knowledge for the model: the [`WebRuntime`] behind the `web_search` and `web_fetch`
//! tools (docs/architecture.md, "Knowledge: files, symbols, web").
//!
//! - `search`: search providers (SearXNG, Brave); the user's configuration picks one.
//! - `fetch`: the plain HTTP fetch provider, every hop through the `guard`.
//! - `guard`: the SSRF guard: http(s) only, no credentials, public addresses only, checked
//!   after one DNS lookup and pinned.
//! - `content`: HTML as Markdown, text as is, other types described; framed as untrusted.
//!
//! Provider selection is strict, so that a search never goes somewhere the user did not
//! expect: a configured provider id wins; otherwise the one available provider is used;
//! several available and none chosen is an error naming them, and none available is an error
//! saying what to configure. Errors are tool results, never crashes: the tools are in the
//! catalog whether or not a provider is configured.

pub(crate) mod content;
pub(crate) mod fetch;
pub(crate) mod guard;
pub(crate) mod search;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures_util::future::BoxFuture;
use ipnet::IpNet;
use serde::Deserialize;
use url::Url;

use self::content::Rendered;
use self::fetch::{FetchError, FetchLimits, Fetched, HttpFetcher};
use self::guard::{Guard, Resolver, SystemResolver};
use self::search::{Brave, SearchHit, SearchProvider, Searxng};

/// `[web]` in the configuration file. Every key is optional.
///
/// ```toml
/// [web]
/// search_provider = "searxng"     # needed only when several providers are available
/// timeout_secs = 20
///
/// [web.searxng]
/// url = "http://127.0.0.1:8888"
///
/// [web.brave]
/// api_key_env = "BRAVE_API_KEY"   # the name of the variable, never the key
/// ```
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WebOptions {
    /// The search provider to use (`searxng`, `brave`); required only when several are
    /// available.
    pub search_provider: Option<String>,
    /// The fetch provider to use; `http` is the only one.
    pub fetch_provider: Option<String>,
    #[serde(default)]
    pub searxng: SearxngOptions,
    #[serde(default)]
    pub brave: BraveOptions,
    /// Seconds a search or a whole fetch (redirects and body included) may take (default 20).
    pub timeout_secs: Option<u64>,
    /// Redirects `web_fetch` follows, each checked again (default 5).
    pub max_redirects: Option<u32>,
    /// Body bytes `web_fetch` downloads; the rest is not read (default 2 MiB).
    pub max_response_bytes: Option<usize>,
    /// Bytes of page text given to the model (default 64 KiB).
    pub max_text_bytes: Option<usize>,
    /// Search results returned when the model does not ask for a number (default 8, at most
    /// 20).
    pub max_results: Option<usize>,
    /// Addresses or networks (`127.0.0.1`, `10.0.0.0/8`) exempt from the public-address rule.
    /// For tests against loopback servers; leave empty otherwise.
    #[serde(default)]
    pub allow_addresses: Vec<String>,
}

/// `[web.searxng]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearxngOptions {
    /// The instance's base URL; JSON output must be enabled in its settings.
    pub url: Option<String>,
}

/// `[web.brave]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BraveOptions {
    /// The environment variable holding the API key (default `BRAVE_API_KEY`).
    pub api_key_env: Option<String>,
    /// The API's base URL (default `https://api.search.brave.com`).
    pub url: Option<String>,
}

pub(crate) const DEFAULT_TIMEOUT_SECS: u64 = 20;
pub(crate) const DEFAULT_MAX_TEXT_BYTES: usize = 64 * 1024;
pub(crate) const DEFAULT_MAX_RESULTS: usize = 8;
pub(crate) const MAX_RESULTS: usize = 20;
const BRAVE_DEFAULT_KEY_ENV: &str = "BRAVE_API_KEY";

/// Why no provider could be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SelectionError {
    #[error("`{id}` is not a {what} provider; the {what} providers are {known}")]
    Unknown {
        what: &'static str,
        id: String,
        known: String,
    },
    #[error("the configured {what} provider `{id}` is not available: {missing}")]
    Unavailable {
        what: &'static str,
        id: String,
        missing: String,
    },
    #[error(
        "several {what} providers are available ({ids}) and none is chosen; set `{key} = \"…\"` in the [web] section of {config}"
    )]
    Ambiguous {
        what: &'static str,
        ids: String,
        key: &'static str,
        config: String,
    },
    #[error("{what} is not configured; to use it, {hints} (in {config})")]
    NoneAvailable {
        what: &'static str,
        hints: String,
        config: String,
    },
}

/// A provider that could be selected, or what it lacks to be available.
struct Candidate<P: ?Sized> {
    id: &'static str,
    provider: Result<Arc<P>, String>,
}

/// The strict selection rule (module docs).
fn select<P: ?Sized>(
    what: &'static str,
    key: &'static str,
    configured: Option<&str>,
    candidates: Vec<Candidate<P>>,
    config_file: &str,
) -> Result<Arc<P>, SelectionError> {
    if let Some(id) = configured {
        let known = candidates
            .iter()
            .map(|candidate| format!("`{}`", candidate.id))
            .collect::<Vec<_>>()
            .join(", ");
        let candidate = candidates
            .into_iter()
            .find(|candidate| candidate.id == id)
            .ok_or_else(|| SelectionError::Unknown {
                what,
                id: id.to_owned(),
                known,
            })?;
        return candidate
            .provider
            .map_err(|missing| SelectionError::Unavailable {
                what,
                id: id.to_owned(),
                missing,
            });
    }
    let (available, missing): (Vec<_>, Vec<_>) = candidates
        .into_iter()
        .partition(|candidate| candidate.provider.is_ok());
    match available.len() {
        1 => Ok(available
            .into_iter()
            .next()
            .and_then(|candidate| candidate.provider.ok())
            .expect("one available provider")),
        0 => Err(SelectionError::NoneAvailable {
            what,
            hints: missing
                .into_iter()
                .filter_map(|candidate| candidate.provider.err())
                .collect::<Vec<_>>()
                .join("; or "),
            config: config_file.to_owned(),
        }),
        _ => Err(SelectionError::Ambiguous {
            what,
            ids: available
                .iter()
                .map(|candidate| format!("`{}`", candidate.id))
                .collect::<Vec<_>>()
                .join(", "),
            key,
            config: config_file.to_owned(),
        }),
    }
}

/// A way to fetch a URL for the model.
pub(crate) trait FetchProvider: Send + Sync {
    fn id(&self) -> &'static str;
    fn fetch(&self, url: &str) -> BoxFuture<'static, Result<Fetched, FetchError>>;
}

impl FetchProvider for HttpFetcher {
    fn id(&self) -> &'static str {
        "http"
    }

    fn fetch(&self, url: &str) -> BoxFuture<'static, Result<Fetched, FetchError>> {
        let fetcher = self.clone();
        let url = url.to_owned();
        Box::pin(async move { HttpFetcher::fetch(&fetcher, &url).await })
    }
}

/// A fetched page, rendered for the model.
#[derive(Clone, Debug)]
pub struct Page {
    /// The fetch provider's id (`http`), for the result's facts.
    pub provider: &'static str,
    /// The response as it came: the final URL after redirects, the status, the raw body and the
    /// address it came from.
    pub fetched: Fetched,
    /// The body as the model reads it: Markdown, text or a description, framed as untrusted.
    pub rendered: Rendered,
}

/// Why `web_fetch` produced no page.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WebFetchError {
    #[error(transparent)]
    Selection(#[from] SelectionError),
    #[error(transparent)]
    Fetch(FetchError),
}

/// Results of one search.
#[derive(Clone, Debug)]
pub(crate) struct SearchResults {
    pub provider: &'static str,
    pub hits: Vec<SearchHit>,
}

/// The selected providers and the limits of the web tools.
#[derive(Clone)]
pub struct WebRuntime {
    search: Result<Arc<dyn SearchProvider>, SelectionError>,
    fetch: Result<Arc<dyn FetchProvider>, SelectionError>,
    timeout: Duration,
    max_text_bytes: usize,
    max_results: usize,
}

impl WebRuntime {
    /// The providers `options` make available, with the system resolver and the process
    /// environment (for API keys). Fails only on options that cannot mean anything (an
    /// allowlist entry that is not an address or network); a missing provider is an error
    /// result of the tool, not of this. `config_file` is where the user writes `[web]`, as the
    /// errors that say what to configure name it (the caller knows it; this module reads no
    /// configuration of its own).
    pub(crate) fn new(
        options: &WebOptions,
        config_file: Option<&Path>,
    ) -> anyhow::Result<WebRuntime> {
        WebRuntime::with(options, config_file, Arc::new(SystemResolver), &|name| {
            std::env::var(name).ok()
        })
    }

    /// [`WebRuntime::new`] with a given resolver and environment.
    pub(crate) fn with(
        options: &WebOptions,
        config_file: Option<&Path>,
        resolver: Arc<dyn Resolver>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> anyhow::Result<WebRuntime> {
        let config_file = config_file.map_or_else(
            || "the config file".to_owned(),
            |path| path.display().to_string(),
        );
        let timeout =
            Duration::from_secs(options.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS).max(1));
        let allow = options
            .allow_addresses
            .iter()
            .map(|entry| parse_network(entry))
            .collect::<anyhow::Result<Vec<_>>>()
            .context("invalid `allow_addresses` in the [web] configuration")?;
        let defaults = FetchLimits::default();
        let limits = FetchLimits {
            max_redirects: options.max_redirects.unwrap_or(defaults.max_redirects),
            max_response_bytes: options
                .max_response_bytes
                .unwrap_or(defaults.max_response_bytes)
                .max(1),
            timeout,
        };
        let fetchers: Vec<Candidate<dyn FetchProvider>> = vec![Candidate {
            id: "http",
            provider: Ok(Arc::new(HttpFetcher::new(
                Guard::new(allow),
                resolver,
                limits,
            ))),
        }];
        let fetch = select(
            "web_fetch",
            "fetch_provider",
            options.fetch_provider.as_deref(),
            fetchers,
            &config_file,
        );
        let search = select(
            "web_search",
            "search_provider",
            options.search_provider.as_deref(),
            search_candidates(options, timeout, env),
            &config_file,
        );
        Ok(WebRuntime {
            search,
            fetch,
            timeout,
            max_text_bytes: options
                .max_text_bytes
                .unwrap_or(DEFAULT_MAX_TEXT_BYTES)
                .max(1),
            max_results: options
                .max_results
                .unwrap_or(DEFAULT_MAX_RESULTS)
                .clamp(1, MAX_RESULTS),
        })
    }

    /// How long a call may take: the fetch or search time limit, plus a margin so that the
    /// tool's own timeout (which says what happened) fires before the runtime's.
    pub(crate) fn call_timeout(&self) -> Duration {
        self.timeout + Duration::from_secs(5)
    }

    /// The id of the selected search provider, or why there is none.
    pub(crate) fn search_provider(&self) -> Result<&'static str, &SelectionError> {
        self.search.as_ref().map(|provider| provider.id())
    }

    pub(crate) async fn search(
        &self,
        query: &str,
        max_results: Option<usize>,
    ) -> anyhow::Result<SearchResults> {
        let provider = self.search.clone()?;
        let max_results = max_results
            .unwrap_or(self.max_results)
            .clamp(1, MAX_RESULTS);
        let hits = tokio::time::timeout(self.timeout, provider.search(query, max_results))
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "the {} search did not answer within {} s",
                    provider.id(),
                    self.timeout.as_secs()
                )
            })??;
        Ok(SearchResults {
            provider: provider.id(),
            hits,
        })
    }

    /// Fetch `url` through the guard and render it for the model. The HTML conversion runs
    /// on a blocking thread: it is CPU work on up to `max_response_bytes`.
    pub(crate) async fn fetch(&self, url: &str) -> Result<Page, WebFetchError> {
        let provider = self.fetch.clone()?;
        let fetched = provider.fetch(url).await.map_err(WebFetchError::Fetch)?;
        let max_text_bytes = self.max_text_bytes;
        let (fetched, rendered) = tokio::task::spawn_blocking(move || {
            let rendered = content::render(&fetched, max_text_bytes);
            (fetched, rendered)
        })
        .await
        .expect("rendering a page does not panic");
        Ok(Page {
            provider: provider.id(),
            fetched,
            rendered,
        })
    }
}

/// An allowlist entry: an address (a one-address network) or a network in CIDR notation.
fn parse_network(entry: &str) -> anyhow::Result<IpNet> {
    let entry = entry.trim();
    if let Ok(net) = entry.parse::<IpNet>() {
        return Ok(net);
    }
    entry
        .parse::<std::net::IpAddr>()
        .map(IpNet::from)
        .map_err(|_| {
            anyhow::anyhow!("`{entry}` is neither an IP address nor a network like 127.0.0.0/8")
        })
}

/// Every search provider, available or with what it lacks.
fn search_candidates(
    options: &WebOptions,
    timeout: Duration,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<Candidate<dyn SearchProvider>> {
    let searxng = match options.searxng.url.as_deref() {
        None => Err(
            "set `url = \"http://127.0.0.1:8888\"` (your SearXNG instance) under [web.searxng]"
                .to_owned(),
        ),
        Some(raw) => parse_base_url(raw)
            .and_then(|base| Searxng::new(base, timeout))
            .map(|provider| Arc::new(provider) as Arc<dyn SearchProvider>)
            .map_err(|error| format!("[web.searxng] url: {error:#}")),
    };
    let key_env = options
        .brave
        .api_key_env
        .as_deref()
        .unwrap_or(BRAVE_DEFAULT_KEY_ENV);
    let brave = match env(key_env).filter(|key| !key.trim().is_empty()) {
        None => Err(format!(
            "export {key_env} with a Brave Search API key (or name another variable with `api_key_env` under [web.brave])"
        )),
        Some(key) => parse_base_url(
            options
                .brave
                .url
                .as_deref()
                .unwrap_or(search::BRAVE_DEFAULT_URL),
        )
        .and_then(|base| Brave::new(base, key.trim().to_owned(), timeout))
        .map(|provider| Arc::new(provider) as Arc<dyn SearchProvider>)
        .map_err(|error| format!("[web.brave] url: {error:#}")),
    };
    vec![
        Candidate {
            id: "searxng",
            provider: searxng,
        },
        Candidate {
            id: "brave",
            provider: brave,
        },
    ]
}

fn parse_base_url(raw: &str) -> anyhow::Result<Url> {
    let url = Url::parse(raw).with_context(|| format!("`{raw}` is not a URL"))?;
    anyhow::ensure!(
        matches!(url.scheme(), "http" | "https"),
        "`{raw}` is not an http(s) URL"
    );
    Ok(url)
}

#[cfg(test)]
mod tests;
