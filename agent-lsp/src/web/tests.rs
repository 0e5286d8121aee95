//! The web runtime against loopback HTTP servers: pinning (DNS rebinding), redirects, the byte
//! and time caps, provider selection, and the search providers' wire formats.
//!
//! The servers are plain TCP listeners writing HTTP/1.1 by hand, so that a test can send what
//! no well-behaved framework would (an endless body, a byte every few hundred milliseconds).
//! Loopback addresses are reached only through the explicit allowlist, the way a user's
//! configuration would allow them; nothing leaves the machine.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::fetch::{FetchError, FetchLimits, HttpFetcher};
use super::guard::{Guard, Resolver};
use super::*;

/// What a test server sends back for one request.
#[derive(Clone)]
enum Reply {
    Full {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// `text/plain` without a length, and then bytes until the client goes away.
    Endless,
    /// `text/plain` without a length, one byte every `every`, until the client goes away.
    Slow { every: Duration },
}

impl Reply {
    fn ok(content_type: &str, body: &str) -> Reply {
        Reply::Full {
            status: 200,
            headers: vec![("Content-Type".into(), content_type.into())],
            body: body.as_bytes().to_vec(),
        }
    }

    fn redirect(location: &str) -> Reply {
        Reply::Full {
            status: 302,
            headers: vec![("Location".into(), location.into())],
            body: Vec::new(),
        }
    }
}

/// A request as the server saw it.
#[derive(Clone, Debug)]
struct Seen {
    target: String,
    headers: HashMap<String, String>,
}

type Handler = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

/// A loopback HTTP/1.1 server; counts connections and records requests.
struct Server {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    async fn start(bind: &str, handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind(bind).await.expect("bind a loopback port");
        Server::serve(listener, Arc::new(handler))
    }

    fn serve(listener: TcpListener, handler: Handler) -> Server {
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (count, record) = (connections.clone(), seen.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let (handler, record) = (handler.clone(), record.clone());
                tokio::spawn(async move {
                    let _ = answer(stream, handler, record).await;
                });
            }
        });
        Server {
            addr,
            connections,
            seen,
        }
    }

    fn port(&self) -> u16 {
        self.addr.port()
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// Read one request head and write the reply; one request per connection (`Connection: close`),
/// which is what a fresh client per hop makes anyway.
async fn answer(
    mut stream: TcpStream,
    handler: Handler,
    record: Arc<Mutex<Vec<Seen>>>,
) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await? == 0 || head.len() > 16 * 1024 {
            return Ok(());
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let mut lines = head.lines();
    let target = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .unwrap_or("/")
        .to_owned();
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let seen = Seen { target, headers };
    record.lock().unwrap().push(seen.clone());
    match handler(&seen) {
        Reply::Full {
            status,
            headers,
            body,
        } => {
            let mut out = format!(
                "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
                body.len()
            );
            for (name, value) in headers {
                out.push_str(&format!("{name}: {value}\r\n"));
            }
            out.push_str("\r\n");
            stream.write_all(out.as_bytes()).await?;
            stream.write_all(&body).await?;
        }
        Reply::Endless => {
            stream
                .write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n",
                )
                .await?;
            let chunk = vec![b'x'; 8192];
            // Ends when the client hangs up (a write error); bounded by the test's cap.
            loop {
                stream.write_all(&chunk).await?;
            }
        }
        Reply::Slow { every } => {
            stream
                .write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n",
                )
                .await?;
            for _ in 0..200 {
                stream.write_all(b"x").await?;
                stream.flush().await?;
                tokio::time::sleep(every).await;
            }
        }
    }
    stream.shutdown().await
}

/// A resolver with scripted answers per host: each lookup takes the next answer (the last one
/// repeats), and every lookup is counted.
#[derive(Default)]
struct ScriptedResolver {
    answers: Mutex<HashMap<String, VecDeque<Vec<IpAddr>>>>,
    lookups: AtomicUsize,
}

impl ScriptedResolver {
    fn answer(self, host: &str, answers: &[&[&str]]) -> ScriptedResolver {
        self.answers.lock().unwrap().insert(
            host.to_owned(),
            answers
                .iter()
                .map(|ips| ips.iter().map(|ip| ip.parse().unwrap()).collect())
                .collect(),
        );
        self
    }

    fn lookups(&self) -> usize {
        self.lookups.load(Ordering::SeqCst)
    }
}

impl Resolver for ScriptedResolver {
    fn lookup(&self, host: &str, _port: u16) -> BoxFuture<'static, std::io::Result<Vec<IpAddr>>> {
        self.lookups.fetch_add(1, Ordering::SeqCst);
        let mut answers = self.answers.lock().unwrap();
        let answer = match answers.get_mut(host) {
            Some(queue) if queue.len() > 1 => Ok(queue.pop_front().unwrap()),
            Some(queue) => Ok(queue.front().cloned().unwrap_or_default()),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no such host",
            )),
        };
        Box::pin(async move { answer })
    }
}

fn fetcher(resolver: Arc<ScriptedResolver>, allow: &[&str], limits: FetchLimits) -> HttpFetcher {
    HttpFetcher::new(
        Guard::new(allow.iter().map(|net| net.parse().unwrap()).collect()),
        resolver,
        limits,
    )
}

fn loopback_only() -> &'static [&'static str] {
    &["127.0.0.1/32"]
}

#[tokio::test]
async fn dns_rebinding_connects_only_to_the_first_checked_address() {
    // The "public" address is the allowlisted 127.0.0.1; the rebinding answer is 127.0.0.2,
    // a loopback address the guard refuses. Both servers listen on the same port, so a second
    // lookup would reach the second one.
    let first = Server::start("127.0.0.1:0", |_| {
        Reply::ok("text/plain", "from the checked address")
    })
    .await;
    let second = Server::start(&format!("127.0.0.2:{}", first.port()), |_| {
        Reply::ok("text/plain", "from the rebound address")
    })
    .await;
    let resolver = Arc::new(
        ScriptedResolver::default().answer("rebind.test", &[&["127.0.0.1"], &["127.0.0.2"]]),
    );
    let fetcher = fetcher(resolver.clone(), loopback_only(), FetchLimits::default());

    let url = format!("http://rebind.test:{}/page", first.port());
    let fetched = fetcher.fetch(&url).await.unwrap();
    assert_eq!(fetched.body, b"from the checked address");
    assert_eq!(fetched.remote_addr, Some(first.addr));
    assert_eq!(
        resolver.lookups(),
        1,
        "one lookup per fetch, none by the HTTP client"
    );
    assert_eq!(first.connections(), 1);
    assert_eq!(second.connections(), 0);
    // The request still names the host, as it must for virtual hosts and TLS.
    assert_eq!(
        first.seen.lock().unwrap()[0].headers["host"],
        format!("rebind.test:{}", first.port())
    );

    // The next fetch is a new decision: the rebound answer is checked, and refused.
    let error = fetcher.fetch(&url).await.unwrap_err();
    assert_eq!(error.category(), "loopback", "{error}");
    assert_eq!(resolver.lookups(), 2);
    assert_eq!(second.connections(), 0);
}

#[tokio::test]
async fn a_host_with_one_refused_address_among_allowed_ones_is_not_connected_to() {
    let server = Server::start("127.0.0.1:0", |_| Reply::ok("text/plain", "reached")).await;
    let resolver =
        Arc::new(ScriptedResolver::default().answer("mixed.test", &[&["127.0.0.1", "10.1.2.3"]]));
    let fetcher = fetcher(resolver, loopback_only(), FetchLimits::default());
    let error = fetcher
        .fetch(&format!("http://mixed.test:{}/", server.port()))
        .await
        .unwrap_err();
    assert_eq!(error.category(), "private", "{error}");
    assert_eq!(server.connections(), 0);
}

#[tokio::test]
async fn without_the_allowlist_loopback_is_refused_before_connecting() {
    let server = Server::start("127.0.0.1:0", |_| Reply::ok("text/plain", "reached")).await;
    let resolver = Arc::new(ScriptedResolver::default().answer("localhost", &[&["127.0.0.1"]]));
    let fetcher = fetcher(resolver, &[], FetchLimits::default());
    for url in [
        format!("http://127.0.0.1:{}/", server.port()),
        format!("http://localhost:{}/", server.port()),
        format!("http://2130706433:{}/", server.port()),
    ] {
        let error = fetcher.fetch(&url).await.unwrap_err();
        assert_eq!(error.category(), "loopback", "{url}: {error}");
    }
    assert_eq!(server.connections(), 0);
}

#[tokio::test]
async fn redirects_are_followed_and_each_hop_is_checked() {
    let server = Server::start("127.0.0.1:0", |seen| match seen.target.as_str() {
        "/start" => Reply::redirect("/middle"),
        "/middle" => Reply::redirect("final"),
        "/final" => Reply::ok("text/html; charset=utf-8", "<h1>Done</h1>"),
        "/to-metadata" => Reply::redirect("http://169.254.169.254/latest/meta-data/"),
        "/to-internal" => Reply::redirect("http://internal.test/admin"),
        "/to-credentials" => Reply::redirect("http://user:secret@example.com/"),
        "/to-file" => Reply::redirect("file:///etc/passwd"),
        "/nowhere" => Reply::Full {
            status: 301,
            headers: vec![],
            body: vec![],
        },
        _ => Reply::ok("text/plain", "?"),
    })
    .await;
    let resolver = Arc::new(ScriptedResolver::default().answer("internal.test", &[&["10.0.0.7"]]));
    let fetcher = fetcher(resolver.clone(), loopback_only(), FetchLimits::default());
    let base = format!("http://127.0.0.1:{}", server.port());

    let fetched = fetcher.fetch(&format!("{base}/start")).await.unwrap();
    assert_eq!(fetched.final_url.as_str(), format!("{base}/final"));
    assert_eq!(fetched.url.as_str(), format!("{base}/start"));
    assert_eq!(fetched.redirects, 2);
    assert_eq!(fetched.body, b"<h1>Done</h1>");

    for (path, category, hop) in [
        ("/to-metadata", "link_local", 1),
        ("/to-internal", "private", 1),
        ("/to-credentials", "credentials", 1),
        ("/to-file", "scheme", 1),
    ] {
        match fetcher.fetch(&format!("{base}{path}")).await {
            Err(FetchError::Refused {
                refusal, hop: at, ..
            }) => {
                assert_eq!(refusal.category(), category, "{path}: {refusal}");
                assert_eq!(at, hop, "{path}");
            }
            other => panic!("{path}: {other:?}"),
        }
    }
    // Only the redirect to a name was looked up, once.
    assert_eq!(resolver.lookups(), 1);
    let error = fetcher.fetch(&format!("{base}/nowhere")).await.unwrap_err();
    assert_eq!(error.category(), "bad_redirect", "{error}");
}

#[tokio::test]
async fn an_endless_redirect_chain_stops_at_the_limit() {
    let server = Server::start("127.0.0.1:0", |seen| {
        let n: u32 = seen.target.trim_start_matches("/r").parse().unwrap_or(0);
        Reply::redirect(&format!("/r{}", n + 1))
    })
    .await;
    let limits = FetchLimits {
        max_redirects: 5,
        ..FetchLimits::default()
    };
    let fetcher = fetcher(Arc::default(), loopback_only(), limits);
    let error = fetcher
        .fetch(&format!("http://127.0.0.1:{}/r0", server.port()))
        .await
        .unwrap_err();
    assert_eq!(error.category(), "too_many_redirects");
    assert_eq!(
        error.to_string(),
        format!(
            "stopped after 5 redirects (the next one pointed to http://127.0.0.1:{}/r6); fetch that URL directly if it is the page you want",
            server.port()
        )
    );
    // The URL asked for and five redirects: six requests, not one more.
    assert_eq!(server.connections(), 6);
}

#[tokio::test]
async fn an_endless_body_is_cut_at_the_byte_cap() {
    let server = Server::start("127.0.0.1:0", |_| Reply::Endless).await;
    let limits = FetchLimits {
        max_response_bytes: 100_000,
        ..FetchLimits::default()
    };
    let fetcher = fetcher(Arc::default(), loopback_only(), limits);
    let started = Instant::now();
    let fetched = fetcher
        .fetch(&format!("http://127.0.0.1:{}/", server.port()))
        .await
        .unwrap();
    assert_eq!(fetched.body.len(), 100_000);
    assert!(fetched.truncated);
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn a_body_that_ends_at_the_cap_is_not_called_cut() {
    let server = Server::start("127.0.0.1:0", |_| Reply::ok("text/plain", "12345")).await;
    let limits = FetchLimits {
        max_response_bytes: 5,
        ..FetchLimits::default()
    };
    let fetched = fetcher(Arc::default(), loopback_only(), limits)
        .fetch(&format!("http://127.0.0.1:{}/", server.port()))
        .await
        .unwrap();
    assert_eq!(fetched.body, b"12345");
    assert!(!fetched.truncated);
}

#[tokio::test]
async fn a_slow_body_hits_the_time_cap() {
    let server = Server::start("127.0.0.1:0", |_| Reply::Slow {
        every: Duration::from_millis(200),
    })
    .await;
    let limits = FetchLimits {
        timeout: Duration::from_secs(1),
        ..FetchLimits::default()
    };
    let fetcher = fetcher(Arc::default(), loopback_only(), limits);
    let started = Instant::now();
    let error = fetcher
        .fetch(&format!("http://127.0.0.1:{}/", server.port()))
        .await
        .unwrap_err();
    let elapsed = started.elapsed();
    match &error {
        FetchError::TimedOut { bytes, limit, .. } => {
            assert!(*bytes >= 1, "some bytes came before the cap: {bytes}");
            assert_eq!(*limit, Duration::from_secs(1));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        elapsed >= Duration::from_millis(900) && elapsed < Duration::from_secs(5),
        "{elapsed:?}"
    );
}

fn options(toml_text: &str) -> WebOptions {
    toml::from_str(toml_text).unwrap()
}

fn env_with(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |name| {
        vars.iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| (*value).to_owned())
    }
}

fn search_selection(
    toml_text: &str,
    vars: &'static [(&'static str, &'static str)],
) -> Result<&'static str, String> {
    let web = WebRuntime::with(
        &options(toml_text),
        None,
        Arc::new(ScriptedResolver::default()),
        &env_with(vars),
    )
    .unwrap();
    web.search_provider().map_err(|error| error.to_string())
}

#[test]
fn search_provider_selection_is_strict() {
    let searxng = "[searxng]\nurl = \"http://127.0.0.1:8888\"\n";
    let key = &[("BRAVE_API_KEY", "k-123")];
    assert_eq!(search_selection(searxng, &[]), Ok("searxng"));
    assert_eq!(search_selection("", key), Ok("brave"));
    assert_eq!(
        search_selection("[brave]\napi_key_env = \"MY_KEY\"\n", &[("MY_KEY", "k")]),
        Ok("brave")
    );
    // An empty key is no key.
    assert!(search_selection("", &[("BRAVE_API_KEY", " ")]).is_err());
    assert_eq!(
        search_selection(&format!("search_provider = \"brave\"\n{searxng}"), key),
        Ok("brave")
    );
    assert_eq!(
        search_selection(&format!("search_provider = \"searxng\"\n{searxng}"), key),
        Ok("searxng")
    );

    let ambiguous = search_selection(searxng, key).unwrap_err();
    assert!(
        ambiguous.starts_with("several web_search providers are available (`searxng`, `brave`) and none is chosen; set `search_provider = \"…\"` in the [web] section of"),
        "{ambiguous}"
    );
    let none = search_selection("", &[]).unwrap_err();
    assert!(
        none.starts_with("web_search is not configured; to use it, set `url = \"http://127.0.0.1:8888\"` (your SearXNG instance) under [web.searxng]; or export BRAVE_API_KEY with a Brave Search API key"),
        "{none}"
    );
    assert_eq!(
        search_selection("search_provider = \"google\"", key).unwrap_err(),
        "`google` is not a web_search provider; the web_search providers are `searxng`, `brave`"
    );
    assert_eq!(
        search_selection("search_provider = \"brave\"", &[]).unwrap_err(),
        "the configured web_search provider `brave` is not available: export BRAVE_API_KEY with a Brave Search API key (or name another variable with `api_key_env` under [web.brave])"
    );
    assert_eq!(
        search_selection("[searxng]\nurl = \"not a url\"", &[])
            .unwrap_err()
            .split(" (in ")
            .next()
            .unwrap(),
        "web_search is not configured; to use it, [web.searxng] url: `not a url` is not a URL: relative URL without a base; or export BRAVE_API_KEY with a Brave Search API key (or name another variable with `api_key_env` under [web.brave])"
    );
}

#[tokio::test]
async fn fetch_provider_selection_and_harmless_errors() {
    let web = WebRuntime::with(
        &options("fetch_provider = \"curl\""),
        None,
        Arc::new(ScriptedResolver::default()),
        &env_with(&[]),
    )
    .unwrap();
    let error = web.fetch("https://example.com/").await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "`curl` is not a web_fetch provider; the web_fetch providers are `http`"
    );
    let error = WebRuntime::with(
        &options("allow_addresses = [\"127.0.0.1\", \"localhost\"]"),
        None,
        Arc::new(ScriptedResolver::default()),
        &env_with(&[]),
    )
    .err()
    .unwrap();
    assert_eq!(
        format!("{error:#}"),
        "invalid `allow_addresses` in the [web] configuration: `localhost` is neither an IP address nor a network like 127.0.0.0/8"
    );
    // No search provider: the search is an error to read, not a crash.
    let web = WebRuntime::with(
        &WebOptions::default(),
        None,
        Arc::new(ScriptedResolver::default()),
        &env_with(&[]),
    )
    .unwrap();
    let error = web.search("rust", None).await.unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("web_search is not configured"),
        "{error}"
    );
}

#[tokio::test]
async fn brave_is_asked_in_its_own_format() {
    let body = serde_json::json!({
        "type": "search",
        "query": {"original": "rust lsp"},
        "web": {"type": "search", "results": [
            {"title": "The <strong>Rust</strong> LSP", "url": "https://rust-analyzer.github.io/", "description": "An <strong>LSP</strong> server &amp; more", "language": "en"},
            {"title": "Second", "url": "https://example.org/", "description": "Two"},
            {"title": "Third", "url": "https://example.net/"}
        ]}
    })
    .to_string();
    let server = Server::start("127.0.0.1:0", move |_| Reply::ok("application/json", &body)).await;
    let text = format!(
        "[brave]\nurl = \"http://127.0.0.1:{}/\"\napi_key_env = \"TEST_BRAVE_KEY\"\n",
        server.port()
    );
    let web = WebRuntime::with(
        &options(&text),
        None,
        Arc::new(ScriptedResolver::default()),
        &env_with(&[("TEST_BRAVE_KEY", "key-42")]),
    )
    .unwrap();
    let results = web.search("rust lsp", Some(2)).await.unwrap();
    assert_eq!(results.provider, "brave");
    assert_eq!(
        results.hits,
        [
            SearchHit {
                title: "The Rust LSP".into(),
                url: "https://rust-analyzer.github.io/".into(),
                snippet: "An LSP server & more".into(),
            },
            SearchHit {
                title: "Second".into(),
                url: "https://example.org/".into(),
                snippet: "Two".into(),
            },
        ]
    );
    let seen = server.seen.lock().unwrap()[0].clone();
    assert_eq!(seen.target, "/res/v1/web/search?q=rust+lsp&count=2");
    assert_eq!(seen.headers["x-subscription-token"], "key-42");
}

#[tokio::test]
async fn a_searxng_error_says_how_to_enable_json() {
    let server = Server::start("127.0.0.1:0", |_| Reply::Full {
        status: 403,
        headers: vec![("Content-Type".into(), "text/html".into())],
        body: b"Forbidden".to_vec(),
    })
    .await;
    let text = format!(
        "[searxng]\nurl = \"http://127.0.0.1:{}/searx\"\n",
        server.port()
    );
    let web = WebRuntime::with(
        &options(&text),
        None,
        Arc::new(ScriptedResolver::default()),
        &env_with(&[]),
    )
    .unwrap();
    let error = web.search("q", None).await.unwrap_err();
    assert_eq!(
        format!("{error:#}"),
        "searxng answered HTTP 403 Forbidden: Forbidden (a SearXNG instance answers JSON only if `json` is in `search.formats` of its settings.yml)"
    );
    assert_eq!(
        server.seen.lock().unwrap()[0].target,
        "/searx/search?q=q&format=json"
    );
}
