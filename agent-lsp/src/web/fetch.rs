//! The plain HTTP fetch provider: a GET through the [guard](super::guard) with the
//! connection pinned to the checked addresses, redirects followed by hand, and caps on bytes
//! and time.
//!
//! Pinning: every request (every redirect hop) gets a client of its own whose only DNS
//! resolver is `PinnedResolver`. It answers the checked host with the checked addresses and
//! refuses every other name, so reqwest never does a lookup of its own: what was checked is
//! what is connected to (no DNS rebinding). The client also ignores proxy settings, since a
//! proxy would resolve the name again, out of the guard's sight.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use tokio::time::Instant;
use url::Url;

use super::guard::{Guard, Refusal, Resolver, Target};

/// Caps of one fetch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchLimits {
    /// Redirects followed before giving up.
    pub max_redirects: u32,
    /// Body bytes read; the rest is not downloaded and the result says it was truncated.
    pub max_response_bytes: usize,
    /// The whole fetch, every hop and the body included.
    pub timeout: Duration,
}

impl Default for FetchLimits {
    fn default() -> FetchLimits {
        FetchLimits {
            max_redirects: 5,
            max_response_bytes: 2 * 1024 * 1024,
            timeout: Duration::from_secs(20),
        }
    }
}

/// A response as received, before it is rendered for the model.
#[derive(Clone, Debug)]
pub struct Fetched {
    /// The URL that was asked for.
    pub url: Url,
    /// The URL that answered, after redirects.
    pub final_url: Url,
    pub status: u16,
    /// The `Content-Type` header, as sent.
    pub content_type: Option<String>,
    /// At most `max_response_bytes` of the body.
    pub body: Vec<u8>,
    /// Whether the body was cut at the byte cap.
    pub truncated: bool,
    pub redirects: u32,
    /// The address the final response came from.
    pub remote_addr: Option<SocketAddr>,
}

/// Why a fetch produced no page.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("refused to fetch {url}: {refusal}")]
    Refused {
        url: String,
        refusal: Refusal,
        /// 0 for the URL asked for, n for the n-th redirect.
        hop: u32,
    },
    #[error(
        "stopped after {limit} redirects (the next one pointed to {location}); fetch that URL directly if it is the page you want"
    )]
    TooManyRedirects { limit: u32, location: String },
    #[error("{url} answered {status} with a redirect but no usable Location header")]
    BadRedirect { url: String, status: u16 },
    #[error(
        "the fetch of {url} did not finish within {} s ({bytes} body bytes received); try again later or another source",
        limit.as_secs_f64()
    )]
    TimedOut {
        url: String,
        limit: Duration,
        bytes: usize,
    },
    #[error("the request to {url} failed: {source}")]
    Http {
        url: String,
        #[source]
        source: reqwest::Error,
    },
}

impl FetchError {
    /// A stable category for the tool's meta.
    pub fn category(&self) -> &'static str {
        match self {
            FetchError::Refused { refusal, .. } => refusal.category(),
            FetchError::TooManyRedirects { .. } => "too_many_redirects",
            FetchError::BadRedirect { .. } => "bad_redirect",
            FetchError::TimedOut { .. } => "timed_out",
            FetchError::Http { .. } => "http",
        }
    }
}

/// reqwest's resolver for one request: the checked host maps to the checked addresses, and
/// any other lookup is an error (there should be none; this makes sure).
struct PinnedResolver {
    host: String,
    addrs: Vec<SocketAddr>,
}

impl Resolve for PinnedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let answer = if name.as_str().eq_ignore_ascii_case(&self.host) {
            let addrs: Addrs = Box::new(self.addrs.clone().into_iter());
            Ok(addrs)
        } else {
            tracing::warn!(name = name.as_str(), pinned = %self.host, "unexpected lookup refused");
            Err(format!(
                "lookup of `{}` refused: only the checked host `{}` may be connected to",
                name.as_str(),
                self.host
            )
            .into())
        };
        Box::pin(async move { answer })
    }
}

/// `web_fetch`'s default provider.
#[derive(Clone)]
pub struct HttpFetcher {
    guard: Guard,
    resolver: Arc<dyn Resolver>,
    limits: FetchLimits,
}

impl HttpFetcher {
    pub fn new(guard: Guard, resolver: Arc<dyn Resolver>, limits: FetchLimits) -> HttpFetcher {
        HttpFetcher {
            guard,
            resolver,
            limits,
        }
    }

    /// GET `url`, following up to `max_redirects` redirects, each hop checked by the guard
    /// and pinned to its checked addresses; at most `max_response_bytes` of the body are read,
    /// and the whole fetch stops at `timeout`.
    pub async fn fetch(&self, url: &str) -> Result<Fetched, FetchError> {
        let deadline = Instant::now() + self.limits.timeout;
        let refused = |url: &str, refusal, hop| FetchError::Refused {
            url: url.to_owned(),
            refusal,
            hop,
        };
        let requested = self
            .guard
            .check_url(url)
            .map_err(|refusal| refused(url, refusal, 0))?;
        let mut current = requested.clone();
        let mut hop = 0;
        loop {
            let target = self
                .guard
                .check(current.clone(), self.resolver.as_ref())
                .await
                .map_err(|refusal| refused(current.as_str(), refusal, hop))?;
            tracing::debug!(url = %target.url, addrs = ?target.addrs, hop, "fetching");
            let response = self.send(&target, deadline).await?;
            let status = response.status();
            if status.is_redirection() && status != reqwest::StatusCode::NOT_MODIFIED {
                let location = response
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|value| value.to_str().ok())
                    .and_then(|location| current.join(location).ok());
                let Some(next) = location else {
                    return Err(FetchError::BadRedirect {
                        url: current.to_string(),
                        status: status.as_u16(),
                    });
                };
                if hop >= self.limits.max_redirects {
                    return Err(FetchError::TooManyRedirects {
                        limit: self.limits.max_redirects,
                        location: next.to_string(),
                    });
                }
                hop += 1;
                // Check what can be said from the URL alone before spending a lookup on it.
                self.guard
                    .check_url(next.as_str())
                    .map_err(|refusal| refused(next.as_str(), refusal, hop))?;
                current = next;
                continue;
            }
            let content_type = response
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned);
            let remote_addr = response.remote_addr();
            let (body, truncated) = self.read_body(&current, response, deadline).await?;
            return Ok(Fetched {
                url: requested,
                final_url: current,
                status: status.as_u16(),
                content_type,
                body,
                truncated,
                redirects: hop,
                remote_addr,
            });
        }
    }

    async fn send(
        &self,
        target: &Target,
        deadline: Instant,
    ) -> Result<reqwest::Response, FetchError> {
        let http = |source| FetchError::Http {
            url: target.url.to_string(),
            source,
        };
        // IP literals are connected to directly, without the resolver; it is set all the same
        // so that no lookup of any kind can happen.
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(self.limits.timeout)
            .user_agent(concat!(
                "agent-lsp/",
                env!("CARGO_PKG_VERSION"),
                " (web_fetch)"
            ))
            .dns_resolver(Arc::new(PinnedResolver {
                host: target.host.clone(),
                addrs: target.addrs.clone(),
            }))
            .build()
            .map_err(http)?;
        let request = client
            .get(target.url.clone())
            .header(
                reqwest::header::ACCEPT,
                "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
            )
            .send();
        match tokio::time::timeout_at(deadline, request).await {
            Ok(result) => result.map_err(http),
            Err(_) => Err(FetchError::TimedOut {
                url: target.url.to_string(),
                limit: self.limits.timeout,
                bytes: 0,
            }),
        }
    }

    /// Read the body up to the byte cap, then stop (dropping the response closes the
    /// connection, so an endless body costs no more than the cap).
    async fn read_body(
        &self,
        url: &Url,
        response: reqwest::Response,
        deadline: Instant,
    ) -> Result<(Vec<u8>, bool), FetchError> {
        let cap = self.limits.max_response_bytes;
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        loop {
            let chunk = match tokio::time::timeout_at(deadline, stream.next()).await {
                Err(_) => {
                    return Err(FetchError::TimedOut {
                        url: url.to_string(),
                        limit: self.limits.timeout,
                        bytes: body.len(),
                    });
                }
                Ok(None) => return Ok((body, false)),
                Ok(Some(chunk)) => chunk.map_err(|source| FetchError::Http {
                    url: url.to_string(),
                    source,
                })?,
            };
            let room = cap - body.len();
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                return Ok((body, true));
            }
            body.extend_from_slice(&chunk);
        }
    }
}
