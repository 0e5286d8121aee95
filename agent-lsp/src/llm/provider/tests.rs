//! HTTP-level tests of [`Provider`] against a tiny canned-response server on loopback.
//!
//! The server speaks just enough HTTP/1.1 for reqwest: it reads one request per connection,
//! records it, and answers with the next canned response (close-delimited body, optional
//! delays), so retries, timeouts and cancellation can be observed from both sides.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;
use crate::llm::{Message, ModelParams, Thinking};

#[derive(Clone, Default)]
struct Canned {
    status: u16,
    headers: Vec<(&'static str, String)>,
    /// Wait before sending the status line (to trip the response timeout).
    header_delay: Duration,
    /// Body pieces, each sent after its delay.
    body: Vec<(Duration, String)>,
}

impl Canned {
    fn sse(body: &str) -> Canned {
        Canned {
            status: 200,
            headers: vec![("content-type", "text/event-stream".into())],
            body: vec![(Duration::ZERO, body.to_owned())],
            ..Canned::default()
        }
    }

    fn error(status: u16, content_type: &str, body: &str) -> Canned {
        Canned {
            status,
            headers: vec![("content-type", content_type.into())],
            body: vec![(Duration::ZERO, body.to_owned())],
            ..Canned::default()
        }
    }
}

#[derive(Debug)]
struct Recorded {
    head: String,
    body: Vec<u8>,
}

struct Server {
    base_url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl Server {
    /// Serve `responses` in order, one per connection; past the end, answer 500.
    async fn start(responses: Vec<Canned>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&requests);
        tokio::spawn(async move {
            let mut responses = responses.into_iter();
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let canned = responses
                    .next()
                    .unwrap_or_else(|| Canned::error(500, "text/plain", "no canned response left"));
                let recorded = Arc::clone(&recorded);
                tokio::spawn(async move {
                    let Some(request) = read_request(&mut socket).await else {
                        return;
                    };
                    recorded.lock().unwrap().push(request);
                    tokio::time::sleep(canned.header_delay).await;
                    let mut head =
                        format!("HTTP/1.1 {} Canned\r\nconnection: close\r\n", canned.status);
                    for (name, value) in &canned.headers {
                        head.push_str(&format!("{name}: {value}\r\n"));
                    }
                    head.push_str("\r\n");
                    if socket.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    for (delay, piece) in canned.body {
                        tokio::time::sleep(delay).await;
                        if socket.write_all(piece.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                    let _ = socket.shutdown().await;
                });
            }
        });
        Server { base_url, requests }
    }

    fn request_count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }

    fn provider(&self, configure: impl FnOnce(&mut ProviderConfig)) -> Provider {
        let mut config = ProviderConfig {
            base_url: format!("{}/", self.base_url),
            api_key: Some("sk-test".into()),
            backoff_base: Duration::from_millis(10),
            backoff_cap: Duration::from_secs(2),
            request_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(5),
            ..ProviderConfig::default()
        };
        configure(&mut config);
        Provider::new(config).unwrap()
    }
}

async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<Recorded> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break end + 4;
        }
        let read = socket.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let length = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    while buffer.len() < head_end + length {
        let read = socket.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
    Some(Recorded {
        head,
        body: buffer[head_end..head_end + length].to_vec(),
    })
}

fn model_request() -> ModelRequest {
    ModelRequest {
        index: 3,
        model: "deepseek-v4-flash".into(),
        params: ModelParams {
            thinking: Some(Thinking::Enabled),
            ..ModelParams::default()
        },
        system: "You are terse.".into(),
        tools: vec![],
        messages: vec![Message::User {
            text: "Say hi".into(),
        }],
    }
}

const ANSWER: &str = concat!(
    ": keep-alive\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"greet\"}}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\n",
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":2,\"prompt_cache_hit_tokens\":8}}\n\n",
    "data: [DONE]\n\n",
);

async fn run(provider: &Provider) -> (Result<Completion, ProviderError>, Vec<StreamDelta>) {
    let mut deltas = Vec::new();
    let result = provider
        .stream(&model_request(), &CancellationToken::new(), |delta| {
            deltas.push(delta)
        })
        .await;
    (result, deltas)
}

#[tokio::test]
async fn sends_the_exact_wire_body_and_assembles_the_answer() {
    let server = Server::start(vec![Canned::sse(ANSWER)]).await;
    let (result, deltas) = run(&server.provider(|_| {})).await;
    let completion = result.unwrap();
    assert_eq!(completion.text, "hi");
    assert_eq!(completion.reasoning.as_deref(), Some("greet"));
    let usage = completion.usage_event(3).unwrap();
    assert_eq!((usage.index, usage.cache_read, usage.input), (3, 8, 2));
    assert_eq!(deltas.len(), 2);

    let requests = server.requests.lock().unwrap();
    let request = &requests[0];
    assert!(
        request
            .head
            .starts_with("POST /chat/completions HTTP/1.1\r\n"),
        "{}",
        request.head
    );
    let head = request.head.to_lowercase();
    assert!(
        head.contains("\r\ncontent-type: application/json\r\n"),
        "{head}"
    );
    assert!(
        head.contains("\r\nauthorization: bearer sk-test\r\n"),
        "{head}"
    );
    assert_eq!(
        String::from_utf8(request.body.clone()).unwrap(),
        wire::chat_completions_body(&model_request())
    );
}

#[tokio::test]
async fn rate_limit_waits_for_retry_after_then_succeeds() {
    let mut limited = Canned::error(
        429,
        "application/json",
        r#"{"error":{"message":"Rate Limit Reached"}}"#,
    );
    limited.headers.push(("retry-after", "1".into()));
    let server = Server::start(vec![limited, Canned::sse(ANSWER)]).await;
    let started = Instant::now();
    let (result, _) = run(&server.provider(|_| {})).await;
    assert_eq!(result.unwrap().text, "hi");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn overload_is_retried() {
    let overloaded = Canned::error(
        503,
        "text/plain",
        r#"{"error":{"message":"Server overloaded"}}"#,
    );
    let server = Server::start(vec![overloaded, Canned::sse(ANSWER)]).await;
    let (result, _) = run(&server.provider(|_| {})).await;
    assert_eq!(result.unwrap().text, "hi");
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn auth_and_balance_errors_are_not_retried() {
    let server = Server::start(vec![
        // JSON sent as text/plain, as DeepSeek sometimes does.
        Canned::error(
            401,
            "text/plain",
            r#"{"error":{"message":"Authentication Fails"}}"#,
        ),
        Canned::sse(ANSWER),
    ])
    .await;
    let error = run(&server.provider(|_| {})).await.0.unwrap_err();
    assert!(
        matches!(&error, ProviderError::Auth { status: 401, message, .. } if message == "Authentication Fails"),
        "{error:?}"
    );
    assert!(error.to_string().contains("DEEPSEEK_API_KEY"), "{error}");
    assert_eq!(server.request_count(), 1);

    let server = Server::start(vec![
        Canned::error(
            402,
            "application/json",
            r#"{"error":{"message":"Insufficient Balance"}}"#,
        ),
        Canned::sse(ANSWER),
    ])
    .await;
    let error = run(&server.provider(|_| {})).await.0.unwrap_err();
    assert!(matches!(error, ProviderError::Balance { .. }), "{error:?}");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn response_timeout_is_retried_then_reported() {
    let slow = Canned {
        header_delay: Duration::from_secs(10),
        ..Canned::sse(ANSWER)
    };
    let server = Server::start(vec![slow.clone(), slow]).await;
    let provider = server.provider(|config| {
        config.request_timeout = Duration::from_millis(200);
        config.max_retries = 1;
    });
    let error = run(&provider).await.0.unwrap_err();
    assert!(
        matches!(
            error,
            ProviderError::Timeout {
                phase: TimeoutPhase::Response,
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn no_retry_once_part_of_the_answer_was_streamed() {
    let stalls = Canned {
        body: vec![
            (
                Duration::ZERO,
                "data: {\"choices\":[{\"delta\":{\"content\":\"par\"}}]}\n\n".into(),
            ),
            (Duration::from_secs(10), "data: [DONE]\n\n".into()),
        ],
        ..Canned::sse("")
    };
    let server = Server::start(vec![stalls, Canned::sse(ANSWER)]).await;
    let provider = server.provider(|config| config.idle_timeout = Duration::from_millis(300));
    let (result, deltas) = run(&provider).await;
    assert!(
        matches!(
            result,
            Err(ProviderError::Timeout {
                phase: TimeoutPhase::Idle,
                ..
            })
        ),
        "{result:?}"
    );
    assert_eq!(deltas, vec![StreamDelta::Text("par".into())]);
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn cancellation_ends_the_stream_promptly() {
    let stalls = Canned {
        body: vec![
            (
                Duration::ZERO,
                "data: {\"choices\":[{\"delta\":{\"content\":\"par\"}}]}\n\n".into(),
            ),
            (Duration::from_secs(30), "data: [DONE]\n\n".into()),
        ],
        ..Canned::sse("")
    };
    let server = Server::start(vec![stalls]).await;
    let provider = server.provider(|_| {});
    let cancel = CancellationToken::new();
    let started = Instant::now();
    let result = provider
        .stream(&model_request(), &cancel, |_| cancel.cancel())
        .await;
    assert_eq!(result, Err(ProviderError::Cancelled));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );

    // A token cancelled during the backoff wait stops the retries too.
    let server = Server::start(vec![Canned::error(503, "text/plain", "busy")]).await;
    let provider = server.provider(|config| config.backoff_base = Duration::from_secs(20));
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        canceller.cancel();
    });
    let result = provider.stream(&model_request(), &cancel, |_| {}).await;
    assert_eq!(result, Err(ProviderError::Cancelled));
}

#[tokio::test]
async fn unreachable_endpoint_is_a_network_error() {
    // Bind and drop to get a loopback port nobody listens on.
    let port = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let provider = Provider::new(ProviderConfig {
        base_url: format!("http://127.0.0.1:{port}"),
        max_retries: 1,
        backoff_base: Duration::from_millis(10),
        ..ProviderConfig::default()
    })
    .unwrap();
    let error = run(&provider).await.0.unwrap_err();
    assert!(matches!(error, ProviderError::Network { .. }), "{error:?}");
}

#[tokio::test]
async fn lists_models() {
    let server = Server::start(vec![Canned::error(
        200,
        "application/json",
        r#"{"object":"list","data":[{"id":"deepseek-v4-flash","object":"model","owned_by":"deepseek"},{"id":"deepseek-v4-pro","object":"model"}]}"#,
    )])
    .await;
    let models = server
        .provider(|_| {})
        .list_models(&CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(models, vec!["deepseek-v4-flash", "deepseek-v4-pro"]);
    let requests = server.requests.lock().unwrap();
    assert!(
        requests[0].head.starts_with("GET /models HTTP/1.1\r\n"),
        "{}",
        requests[0].head
    );
}

#[test]
fn config_resolution() {
    let config = ProviderConfig::resolve(&ProviderOptions::default(), |name| {
        (name == "DEEPSEEK_API_KEY").then(|| " sk-1 ".into())
    })
    .unwrap();
    assert_eq!(config.base_url, "https://api.deepseek.com");
    assert_eq!(config.model, "deepseek-v4-flash");
    assert_eq!(config.api_key.as_deref(), Some("sk-1"));
    assert!(!format!("{config:?}").contains("sk-1"));

    let options = ProviderOptions {
        base_url: Some("http://127.0.0.1:8080/v1/".into()),
        api_key_env: Some("LOCAL_KEY".into()),
        idle_timeout_secs: Some(7),
        ..ProviderOptions::default()
    };
    let config = ProviderConfig::resolve(&options, |name| {
        (name == "DEEPSEEK_API_KEY").then(|| "sk-1".into())
    })
    .unwrap();
    assert_eq!(
        config.endpoint("chat/completions"),
        "http://127.0.0.1:8080/v1/chat/completions"
    );
    assert_eq!(
        config.api_key, None,
        "a configured variable replaces DEEPSEEK_API_KEY"
    );
    assert_eq!(config.api_key_env, "LOCAL_KEY");
    assert_eq!(config.idle_timeout, Duration::from_secs(7));

    let bad = ProviderOptions {
        base_url: Some("ftp://example.invalid".into()),
        ..ProviderOptions::default()
    };
    assert!(ProviderConfig::resolve(&bad, |_| None).is_err());
}

#[test]
fn backoff_grows_with_jitter_and_stops_at_the_cap() {
    let base = Duration::from_millis(100);
    let cap = Duration::from_secs(1);
    assert_eq!(backoff(base, cap, 0, 0.0), Duration::from_millis(50));
    assert_eq!(backoff(base, cap, 0, 0.5), Duration::from_millis(75));
    assert_eq!(backoff(base, cap, 2, 0.0), Duration::from_millis(200));
    assert_eq!(
        backoff(base, cap, 30, 0.999),
        cap / 2 + (cap / 2).mul_f64(0.999)
    );
    let unit = random_unit();
    assert!((0.0..1.0).contains(&unit));
}

/// The agent loop spawns model calls on the runtime, so the futures must be `Send`.
#[test]
fn futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let provider = Provider::new(ProviderConfig::default()).unwrap();
    let cancel = CancellationToken::new();
    let request = model_request();
    let (sender, _receiver) = std::sync::mpsc::channel();
    assert_send(&provider.stream(&request, &cancel, move |delta| {
        let _ = sender.send(delta);
    }));
    assert_send(&provider.list_models(&cancel));
}
