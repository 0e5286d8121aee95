//! Search providers for `web_search`: SearXNG's JSON API and Brave's Web Search API.
//!
//! The search endpoint is the user's own configuration, so it is trusted like the model
//! endpoint and not put through the SSRF guard (a SearXNG instance usually runs on the
//! user's machine or network). What it returns is only text until the model asks for a page,
//! and that fetch goes through the guard.

use std::time::Duration;

use anyhow::Context;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use serde::Deserialize;
use url::Url;

/// One search result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchHit {
    pub title: String,
    pub url: String,
    pub snippet: String,
}

/// A search API.
pub trait SearchProvider: Send + Sync {
    /// The id the configuration selects it by (`[web] search_provider`).
    fn id(&self) -> &'static str;
    /// At most `max_results` results for `query`.
    fn search(
        &self,
        query: &str,
        max_results: usize,
    ) -> BoxFuture<'static, anyhow::Result<Vec<SearchHit>>>;
}

/// The most bytes of a search response read; results pages are small.
const MAX_RESPONSE_BYTES: usize = 1024 * 1024;
/// The most characters kept of one title or snippet.
const MAX_FIELD_CHARS: usize = 400;

fn client(timeout: Duration) -> anyhow::Result<reqwest::Client> {
    reqwest::Client::builder()
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!(
            "agent-lsp/",
            env!("CARGO_PKG_VERSION"),
            " (web_search)"
        ))
        .build()
        .context("failed to build the search HTTP client")
}

/// Send `request`, read at most [`MAX_RESPONSE_BYTES`] of the answer, and parse it as `T`;
/// a non-success status is an error carrying the start of the body, where APIs explain it,
/// and the provider's `hint` for that status, if it has one.
async fn get_json<T: serde::de::DeserializeOwned>(
    provider: &str,
    request: reqwest::RequestBuilder,
    hint: fn(reqwest::StatusCode) -> Option<&'static str>,
) -> anyhow::Result<T> {
    let response = request
        .send()
        .await
        .with_context(|| format!("the {provider} search request failed"))?;
    let status = response.status();
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.with_context(|| format!("reading the {provider} response failed"))?;
        body.extend_from_slice(&chunk);
        if body.len() >= MAX_RESPONSE_BYTES {
            anyhow::bail!("the {provider} response is larger than {MAX_RESPONSE_BYTES} bytes");
        }
    }
    if !status.is_success() {
        let text = String::from_utf8_lossy(&body);
        let text: String = text.chars().take(300).collect();
        let hint = hint(status)
            .map(|hint| format!(" ({hint})"))
            .unwrap_or_default();
        anyhow::bail!("{provider} answered HTTP {status}: {}{hint}", text.trim());
    }
    serde_json::from_slice(&body)
        .with_context(|| format!("the {provider} response is not the JSON it should be"))
}

fn clip(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MAX_FIELD_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// A SearXNG instance's JSON API (`GET /search?q=…&format=json`; the instance must list `json`
/// in `search.formats` of its `settings.yml`).
pub struct Searxng {
    base: Url,
    client: reqwest::Client,
}

impl Searxng {
    pub fn new(base: Url, timeout: Duration) -> anyhow::Result<Searxng> {
        Ok(Searxng {
            base,
            client: client(timeout)?,
        })
    }

    fn endpoint(&self, query: &str) -> Url {
        let mut url = self.base.clone();
        let path = format!("{}/search", self.base.path().trim_end_matches('/'));
        url.set_path(&path);
        url.query_pairs_mut()
            .clear()
            .append_pair("q", query)
            .append_pair("format", "json");
        url
    }
}

#[derive(Deserialize)]
struct SearxngResponse {
    #[serde(default)]
    results: Vec<SearxngResult>,
}

#[derive(Deserialize)]
struct SearxngResult {
    url: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    content: Option<String>,
}

impl SearchProvider for Searxng {
    fn id(&self) -> &'static str {
        "searxng"
    }

    fn search(
        &self,
        query: &str,
        max_results: usize,
    ) -> BoxFuture<'static, anyhow::Result<Vec<SearchHit>>> {
        let request = self
            .client
            .get(self.endpoint(query))
            .header(reqwest::header::ACCEPT, "application/json");
        Box::pin(async move {
            let response: SearxngResponse = get_json("searxng", request, |status| {
                (status == reqwest::StatusCode::FORBIDDEN).then_some(
                    "a SearXNG instance answers JSON only if `json` is in `search.formats` of its settings.yml",
                )
            })
            .await?;
            Ok(response
                .results
                .into_iter()
                .take(max_results)
                .map(|result| SearchHit {
                    title: clip(&result.title),
                    url: result.url,
                    snippet: clip(result.content.as_deref().unwrap_or_default()),
                })
                .collect())
        })
    }
}

/// Brave's Web Search API (`GET /res/v1/web/search`, key in `X-Subscription-Token`).
pub struct Brave {
    base: Url,
    api_key: String,
    client: reqwest::Client,
}

pub const BRAVE_DEFAULT_URL: &str = "https://api.search.brave.com";

impl Brave {
    pub fn new(base: Url, api_key: String, timeout: Duration) -> anyhow::Result<Brave> {
        Ok(Brave {
            base,
            api_key,
            client: client(timeout)?,
        })
    }
}

#[derive(Deserialize)]
struct BraveResponse {
    #[serde(default)]
    web: Option<BraveWeb>,
}

#[derive(Deserialize)]
struct BraveWeb {
    #[serde(default)]
    results: Vec<BraveResult>,
}

#[derive(Deserialize)]
struct BraveResult {
    url: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    description: Option<String>,
}

/// Brave marks the matched words in snippets with `<strong>`; the model needs plain text.
fn strip_tags(text: &str) -> String {
    static TAG: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"</?[a-zA-Z][^>]*>").expect("tag pattern"));
    TAG.replace_all(text, "")
        .replace("&amp;", "&")
        .replace("&quot;", "\"")
        .replace("&#x27;", "'")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
}

impl SearchProvider for Brave {
    fn id(&self) -> &'static str {
        "brave"
    }

    fn search(
        &self,
        query: &str,
        max_results: usize,
    ) -> BoxFuture<'static, anyhow::Result<Vec<SearchHit>>> {
        let mut url = self.base.clone();
        let path = format!(
            "{}/res/v1/web/search",
            self.base.path().trim_end_matches('/')
        );
        url.set_path(&path);
        url.query_pairs_mut()
            .clear()
            .append_pair("q", query)
            .append_pair("count", &max_results.clamp(1, 20).to_string());
        let request = self
            .client
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json")
            .header("X-Subscription-Token", &self.api_key);
        Box::pin(async move {
            let response: BraveResponse = get_json("brave", request, |status| {
                matches!(status.as_u16(), 401 | 403 | 422)
                    .then_some("check the API key in the variable named by [web.brave] api_key_env")
            })
            .await?;
            Ok(response
                .web
                .map(|web| web.results)
                .unwrap_or_default()
                .into_iter()
                .take(max_results)
                .map(|result| SearchHit {
                    title: clip(&strip_tags(&result.title)),
                    url: result.url,
                    snippet: clip(&strip_tags(
                        result.description.as_deref().unwrap_or_default(),
                    )),
                })
                .collect())
        })
    }
}
