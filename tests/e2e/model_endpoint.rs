//! The loopback model endpoint, through real HTTP: the wire format it streams, the API rules it
//! enforces, its cache figures and its scripted failures.

use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use agent_tests::model_endpoint::{
    EndpointConfig, ModelEndpoint, ModelTurn, Reply, Rule, text_tokens,
};
use futures_util::StreamExt as _;
use serde_json::{Value, json};

const MODEL: &str = "deepseek-v4-flash";

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("http client")
}

fn chat_url(endpoint: &ModelEndpoint) -> String {
    format!("{}/chat/completions", endpoint.base_url())
}

async fn post(endpoint: &ModelEndpoint, body: &Value) -> reqwest::Response {
    client()
        .post(chat_url(endpoint))
        .json(body)
        .send()
        .await
        .expect("request reaches the endpoint")
}

async fn post_raw(endpoint: &ModelEndpoint, raw: &'static str) -> reqwest::Response {
    client()
        .post(chat_url(endpoint))
        .header("content-type", "application/json")
        .body(raw)
        .send()
        .await
        .expect("request reaches the endpoint")
}

/// A streaming request body as agent-lsp sends it.
fn streaming(messages: Value) -> Value {
    json!({
        "model": MODEL,
        "messages": messages,
        "stream": true,
        "stream_options": { "include_usage": true },
    })
}

fn plain(messages: Value) -> Value {
    json!({ "model": MODEL, "messages": messages, "stream": false })
}

fn thinking(mut body: Value, on: bool) -> Value {
    let kind = if on { "enabled" } else { "disabled" };
    body["thinking"] = json!({ "type": kind });
    body
}

fn system(text: &str) -> Value {
    json!({ "role": "system", "content": text })
}

fn user(text: &str) -> Value {
    json!({ "role": "user", "content": text })
}

fn answer(text: &str) -> Value {
    json!({ "role": "assistant", "content": text })
}

fn calls(reasoning: Option<&str>, ids: &[&str]) -> Value {
    let calls = ids
        .iter()
        .map(|id| json!({ "id": id, "type": "function", "function": { "name": "read", "arguments": "{}" } }))
        .collect::<Vec<_>>();
    let mut message = json!({ "role": "assistant", "content": "", "tool_calls": calls });
    if let Some(reasoning) = reasoning {
        message["reasoning_content"] = reasoning.into();
    }
    message
}

fn tool(id: &str, text: &str) -> Value {
    json!({ "role": "tool", "tool_call_id": id, "content": text })
}

/// The `data:` payloads of an SSE body. Checks the framing on the way: blank-line separated
/// events, only `data:` lines and `:` comments, `[DONE]` last.
fn sse(text: &str) -> Vec<Value> {
    assert!(
        text.ends_with("data: [DONE]\n\n"),
        "stream does not end in [DONE]: {text}"
    );
    let mut events = Vec::new();
    for block in text.split("\n\n").filter(|block| !block.is_empty()) {
        if block.starts_with(':') {
            continue;
        }
        let data = block
            .strip_prefix("data: ")
            .unwrap_or_else(|| panic!("not an SSE data event: {block:?}"));
        if data != "[DONE]" {
            events.push(serde_json::from_str(data).expect("chunk is JSON"));
        }
    }
    events
}

#[derive(Debug, Default, PartialEq)]
struct Fragments {
    id: Option<String>,
    name: Option<String>,
    arguments: String,
    pieces: usize,
}

#[tokio::test]
async fn streamed_turn_reassembles_reasoning_text_and_tool_calls() {
    let endpoint = ModelEndpoint::start(
        EndpointConfig::default()
            .delta_bytes(5)
            .keep_alive_between_chunks(true),
    )
    .unwrap();
    let reasoning = "The file will say; read it, then grep. Ünïcode too.";
    let arguments = r#"{"path":"src/main.rs","line":42}"#;
    endpoint.push(
        ModelTurn::new()
            .reasoning(reasoning)
            .content("Reading it.")
            .tool_call("read", arguments)
            .tool_call_with_id("mine", "grep", r#"{"pattern":"fn main"}"#),
    );
    let body = thinking(streaming(json!([system("sys"), user("read main")])), true);

    let response = post(&endpoint, &body).await;
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    let text = response.text().await.unwrap();
    assert!(
        text.contains(": keep-alive\n\n"),
        "keep-alive lines were asked for"
    );
    let chunks = sse(&text);

    let mut got_reasoning = String::new();
    let mut content = String::new();
    let mut tool_calls: Vec<Fragments> = Vec::new();
    let mut finish_reasons = Vec::new();
    let mut usage = None;
    for (position, chunk) in chunks.iter().enumerate() {
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert_eq!(chunk["id"], chunks[0]["id"]);
        assert_eq!(chunk["model"], MODEL);
        let choices = chunk["choices"].as_array().unwrap();
        if choices.is_empty() {
            assert_eq!(position, chunks.len() - 1, "the usage chunk comes last");
            usage = Some(chunk["usage"].clone());
            continue;
        }
        assert!(usage.is_none());
        let choice = &choices[0];
        assert_eq!(choice["index"], 0);
        assert!(choice["logprobs"].is_null());
        let delta = &choice["delta"];
        if position == 0 {
            assert_eq!(delta["role"], "assistant");
        }
        let piece_of_reasoning = delta["reasoning_content"].as_str().unwrap_or("");
        if !piece_of_reasoning.is_empty() {
            assert!(
                content.is_empty() && tool_calls.is_empty(),
                "reasoning comes first"
            );
        }
        got_reasoning.push_str(piece_of_reasoning);
        let piece_of_content = delta["content"].as_str().unwrap_or("");
        if !piece_of_content.is_empty() {
            assert!(tool_calls.is_empty(), "content comes before the calls");
        }
        content.push_str(piece_of_content);
        for fragment in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = fragment["index"].as_u64().unwrap() as usize;
            if index == tool_calls.len() {
                tool_calls.push(Fragments::default());
            }
            let call = &mut tool_calls[index];
            if let Some(id) = fragment["id"].as_str() {
                assert!(
                    call.id.is_none() && call.arguments.is_empty(),
                    "id only on the first fragment"
                );
                assert_eq!(fragment["type"], "function");
                call.id = Some(id.into());
                call.name = fragment["function"]["name"].as_str().map(Into::into);
            } else {
                assert!(
                    fragment.get("type").is_none() && fragment["function"].get("name").is_none()
                );
            }
            call.arguments
                .push_str(fragment["function"]["arguments"].as_str().unwrap());
            call.pieces += 1;
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            finish_reasons.push(reason.to_owned());
        }
    }

    assert_eq!(got_reasoning, reasoning);
    assert_eq!(content, "Reading it.");
    assert_eq!(finish_reasons, ["tool_calls"]);
    assert_eq!(tool_calls.len(), 2);
    assert_eq!(tool_calls[0].id.as_deref(), Some("call_00_r0"));
    assert_eq!(tool_calls[0].name.as_deref(), Some("read"));
    assert_eq!(tool_calls[0].arguments, arguments);
    assert!(
        tool_calls[0].pieces > 3,
        "arguments are split: {tool_calls:?}"
    );
    assert_eq!(tool_calls[1].id.as_deref(), Some("mine"));
    assert_eq!(tool_calls[1].arguments, r#"{"pattern":"fn main"}"#);

    let usage = usage.expect("a usage chunk");
    let recorded = endpoint.requests();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].raw, serde_json::to_vec(&body).unwrap());
    assert_eq!(recorded[0].body.as_ref(), Some(&body));
    let figures = recorded[0].usage.clone().unwrap();
    assert_eq!(usage, figures.to_json());
    assert_eq!(
        usage["completion_tokens_details"]["reasoning_tokens"],
        text_tokens(reasoning)
    );
    assert_eq!(usage["prompt_cache_hit_tokens"], 0);
    assert_eq!(figures.prompt_tokens, (3 + 1 + 1) + (3 + 1 + 3));
    endpoint.assert_no_violations();
}

/// Send `body`; `None` expects it served, `Some` expects the rule's 400 with `text` in its
/// message, and the scripted reply left unspent.
async fn check(endpoint: &ModelEndpoint, body: Value, expected: Option<(Rule, &str)>) {
    let before = endpoint.remaining_replies();
    let response = post(endpoint, &body).await;
    let status = response.status().as_u16();
    let answer: Value = response.json().await.unwrap();
    match expected {
        None => {
            assert_eq!(status, 200, "{answer}");
            assert_eq!(answer["choices"][0]["message"]["content"], "ok");
            assert_eq!(endpoint.remaining_replies(), before - 1);
            endpoint.assert_no_violations();
        }
        Some((rule, text)) => {
            assert_eq!(status, 400, "{answer}");
            let error = &answer["error"];
            let message = error["message"].as_str().unwrap();
            assert!(message.contains(text), "{message:?} lacks {text:?}");
            assert_eq!(error["type"], "invalid_request_error");
            assert_eq!(error["code"], "invalid_request_error");
            assert!(error["param"].is_null());
            assert_eq!(
                endpoint.remaining_replies(),
                before,
                "no reply is spent on a refusal"
            );
            let violations = endpoint.take_violations();
            assert_eq!(violations.len(), 1, "{violations:?}");
            assert_eq!(violations[0].rule, rule);
            assert_eq!(violations[0].message, message);
        }
    }
}

#[tokio::test]
async fn each_rule_refuses_a_bad_history_and_passes_a_good_one() {
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all((0..8).map(|_| Reply::text("ok")));
    let missing = "insufficient tool messages following tool_calls message";
    let orphan =
        "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'";

    let good = json!([
        system("sys"),
        user("q"),
        calls(Some("r"), &["c1", "c2"]),
        tool("c2", "two"),
        tool("c1", "one"),
        answer("done"),
        user("next"),
    ]);
    check(&endpoint, thinking(plain(good), true), None).await;
    let empty_reasoning = json!([user("q"), calls(Some(""), &["c1"]), tool("c1", "one")]);
    check(&endpoint, thinking(plain(empty_reasoning), true), None).await;

    let unanswered = json!([
        user("q"),
        calls(Some("r"), &["c1", "c2"]),
        tool("c1", "one"),
        user("more")
    ]);
    check(
        &endpoint,
        plain(unanswered),
        Some((Rule::MissingToolResults, missing)),
    )
    .await;
    let separated = json!([
        user("q"),
        calls(None, &["c1"]),
        user("more"),
        tool("c1", "one")
    ]);
    check(
        &endpoint,
        plain(separated),
        Some((Rule::MissingToolResults, missing)),
    )
    .await;
    let trailing = json!([user("q"), calls(None, &["c1"])]);
    check(
        &endpoint,
        plain(trailing),
        Some((Rule::MissingToolResults, missing)),
    )
    .await;

    let stray = json!([user("q"), tool("c9", "?")]);
    check(
        &endpoint,
        plain(stray),
        Some((Rule::OrphanToolResult, orphan)),
    )
    .await;
    let wrong_id = json!([user("q"), calls(None, &["c1"]), tool("c2", "?")]);
    check(
        &endpoint,
        plain(wrong_id),
        Some((Rule::OrphanToolResult, orphan)),
    )
    .await;
    let answered_twice = json!([
        user("q"),
        calls(None, &["c1"]),
        tool("c1", "a"),
        tool("c1", "b")
    ]);
    check(
        &endpoint,
        plain(answered_twice),
        Some((Rule::OrphanToolResult, orphan)),
    )
    .await;

    let no_reasoning = json!([
        system("sys"),
        user("q"),
        calls(None, &["c1"]),
        tool("c1", "one")
    ]);
    let text = "Missing `reasoning_content` field in the assistant message at message index 2.";
    check(
        &endpoint,
        thinking(plain(no_reasoning.clone()), true),
        Some((Rule::MissingReasoningContent, text)),
    )
    .await;
    check(
        &endpoint,
        thinking(plain(no_reasoning.clone()), false),
        None,
    )
    .await;
    check(&endpoint, plain(no_reasoning), None).await;
    let null_reasoning = json!([user("q"), { "role": "assistant", "content": null, "reasoning_content": null,
        "tool_calls": [{ "id": "c1", "type": "function", "function": { "name": "read", "arguments": "{}" } }] },
        tool("c1", "one")]);
    check(
        &endpoint,
        thinking(plain(null_reasoning), true),
        Some((Rule::MissingReasoningContent, "message index 1")),
    )
    .await;

    check(
        &endpoint,
        json!({ "messages": [user("q")] }),
        Some((Rule::InvalidBody, "missing field `model`")),
    )
    .await;
    let parts = json!([{ "role": "user", "content": [{ "type": "text", "text": "q" }] }]);
    check(
        &endpoint,
        plain(parts),
        Some((Rule::InvalidBody, "messages[0]")),
    )
    .await;
    check(
        &endpoint,
        plain(json!([])),
        Some((Rule::EmptyMessages, "too short")),
    )
    .await;
    let mut unknown = plain(json!([user("q")]));
    unknown["model"] = "gpt-4o".into();
    check(
        &endpoint,
        unknown,
        Some((Rule::UnknownModel, "Model Not Exist")),
    )
    .await;
    check(&endpoint, plain(json!([user("q")])), None).await;

    let response = post_raw(&endpoint, r#"{"model": "deepseek-v4-flash", "messages": ["#).await;
    assert_eq!(response.status(), 400);
    let answer: Value = response.json().await.unwrap();
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("Failed to parse the request body as JSON"),
        "{message}"
    );
    let violations = endpoint.take_violations();
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].rule, Rule::MalformedJson);
    assert_eq!(endpoint.remaining_replies(), 3);
}

#[tokio::test]
async fn the_stricter_passback_rule_covers_the_whole_tool_stretch() {
    let endpoint =
        ModelEndpoint::start(EndpointConfig::default().reasoning_in_tool_stretches(true)).unwrap();
    endpoint.push(Reply::text("ok"));
    let mut final_answer = answer("done");
    let history = |final_answer: &Value| {
        json!([
            user("q"),
            calls(Some("r"), &["c1"]),
            tool("c1", "one"),
            final_answer,
            user("next"),
            answer("plain")
        ])
    };
    let text = "at message index 3.";
    check(
        &endpoint,
        thinking(plain(history(&final_answer)), true),
        Some((Rule::MissingReasoningContent, text)),
    )
    .await;
    // The answer after the next user message is in a stretch without tools: no reasoning needed.
    final_answer["reasoning_content"] = "".into();
    check(
        &endpoint,
        thinking(plain(history(&final_answer)), true),
        None,
    )
    .await;
}

#[tokio::test]
async fn the_cache_hit_grows_with_a_shared_prefix_and_is_zero_for_another_prompt() {
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all((0..4).map(|_| Reply::text("hi")));
    let long = "s".repeat(2000);
    let other = "t".repeat(2000);

    let usage_of = |answer: &Value| {
        let usage = &answer["usage"];
        let prompt = usage["prompt_tokens"].as_u64().unwrap();
        let hit = usage["prompt_cache_hit_tokens"].as_u64().unwrap();
        assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], hit);
        assert_eq!(
            usage["prompt_cache_miss_tokens"].as_u64().unwrap(),
            prompt - hit
        );
        (prompt, hit)
    };
    let first = json!([system(&long), user("hello")]);
    let answer1: Value = post(&endpoint, &plain(first)).await.json().await.unwrap();
    assert_eq!(answer1["object"], "chat.completion");
    assert_eq!(answer1["choices"][0]["message"]["content"], "hi");
    // System: 3 framing + 1 marker + 2000 / 4; user: 3 + 1 + ceil(5 / 4).
    assert_eq!(usage_of(&answer1), (504 + 6, 0));

    let extended = json!([system(&long), user("hello"), answer("hi"), user("more")]);
    let answer2: Value = post(&endpoint, &plain(extended.clone()))
        .await
        .json()
        .await
        .unwrap();
    // The whole first prompt is a prefix of this one: 510 tokens, cached in whole 64-token blocks.
    assert_eq!(usage_of(&answer2), (510 + 5 + 5, 448));

    let answer3: Value = post(&endpoint, &plain(extended))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(usage_of(&answer3), (520, 512));

    let unrelated = json!([system(&other), user("hello")]);
    let answer4: Value = post(&endpoint, &plain(unrelated))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(usage_of(&answer4), (510, 0));

    let recorded = endpoint
        .chat_requests()
        .iter()
        .map(|request| request.usage.as_ref().unwrap().prompt_cache_hit_tokens)
        .collect::<Vec<_>>();
    assert_eq!(recorded, [0, 448, 512, 0]);
    endpoint.assert_no_violations();
}

#[tokio::test]
async fn a_prompt_past_the_window_gets_deepseeks_context_length_error() {
    let endpoint = ModelEndpoint::start(EndpointConfig::default().context_window(1354)).unwrap();
    endpoint.push(Reply::text("fits"));
    let mut body = plain(json!([user(&"x".repeat(5000))]));
    body["max_tokens"] = 101.into();

    let response = post(&endpoint, &body).await;
    assert_eq!(response.status(), 400);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(
        answer["error"]["message"],
        "This model's maximum context length is 1354 tokens. However, you requested 1355 tokens \
         (1254 in the messages, 101 in the completion). Please reduce the length of the messages \
         or completion."
    );
    let violations = endpoint.take_violations();
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].rule, Rule::ContextLength);

    body["max_tokens"] = 100.into();
    let response = post(&endpoint, &body).await;
    assert_eq!(
        response.status(),
        200,
        "a request that fits exactly is served"
    );
    endpoint.assert_no_violations();
}

#[tokio::test]
async fn scripted_failures_come_back_as_scripted() {
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push(Reply::rate_limited(Some(7)));
    endpoint.push(Reply::overloaded());
    endpoint.push(Reply::insufficient_balance());
    endpoint.push(Reply::auth_failed("abcd"));
    let body = streaming(json!([user("q")]));

    let response = post(&endpoint, &body).await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "7");
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["error"]["message"], "Rate Limit Reached");

    let statuses_and_messages = [
        (503, "Server Overloaded"),
        (402, "Insufficient Balance"),
        (
            401,
            "Authentication Fails, Your api key: ****abcd is invalid",
        ),
    ];
    for (status, message) in statuses_and_messages {
        let response = post(&endpoint, &body).await;
        assert_eq!(response.status(), status);
        let answer: Value = response.json().await.unwrap();
        assert_eq!(answer["error"]["message"], message);
    }
    endpoint.assert_no_violations();

    // The script is spent: the next request is the test's mistake, and says so.
    let response = post(&endpoint, &body).await;
    assert_eq!(response.status(), 500);
    let answer: Value = response.json().await.unwrap();
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("script exhausted")
    );
    let violations = endpoint.take_violations();
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].rule, Rule::ScriptExhausted);
}

#[tokio::test]
async fn models_are_listed_and_the_api_key_is_checked() {
    let endpoint = ModelEndpoint::start(
        EndpointConfig::default()
            .models(["deepseek-v4-flash", "deepseek-v4-pro"])
            .api_key("sk-test-key"),
    )
    .unwrap();
    for url in [
        format!("{}/models", endpoint.base_url()),
        format!("{}/models", endpoint.root_url()),
    ] {
        let response = client()
            .get(&url)
            .bearer_auth("sk-test-key")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{url}");
        let list: Value = response.json().await.unwrap();
        assert_eq!(
            list,
            json!({ "object": "list", "data": [
                { "id": "deepseek-v4-flash", "object": "model", "owned_by": "deepseek" },
                { "id": "deepseek-v4-pro", "object": "model", "owned_by": "deepseek" },
            ]})
        );
    }

    endpoint.push(Reply::text("ok"));
    let body = plain(json!([user("q")]));
    let url = format!("{}/chat/completions", endpoint.root_url());
    let no_key = client().post(&url).json(&body).send().await.unwrap();
    assert_eq!(no_key.status(), 401);
    let answer: Value = no_key.json().await.unwrap();
    assert_eq!(answer["error"]["type"], "authentication_error");
    assert_eq!(
        answer["error"]["message"],
        "Authentication Fails (auth header format should be Bearer sk-...)"
    );
    let wrong_key = client()
        .post(&url)
        .bearer_auth("sk-nope-wxyz")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(wrong_key.status(), 401);
    let answer: Value = wrong_key.json().await.unwrap();
    assert_eq!(
        answer["error"]["message"],
        "Authentication Fails, Your api key: ****wxyz is invalid"
    );
    let right_key = client()
        .post(&url)
        .bearer_auth("sk-test-key")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(right_key.status(), 200);

    let rules = endpoint
        .take_violations()
        .iter()
        .map(|violation| violation.rule)
        .collect::<Vec<_>>();
    assert_eq!(rules, [Rule::Authentication, Rule::Authentication]);
    let paths = endpoint
        .requests()
        .iter()
        .map(|request| request.path.clone())
        .collect::<Vec<_>>();
    assert_eq!(
        paths,
        [
            "/v1/models",
            "/models",
            "/chat/completions",
            "/chat/completions",
            "/chat/completions"
        ]
    );
}

#[tokio::test]
async fn hangs_stalls_and_cuts_reach_the_client_as_timeouts_and_errors() {
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push(Reply::hang());
    endpoint.push(
        ModelTurn::new()
            .content("slow")
            .first_byte_delay(Duration::from_millis(400)),
    );
    endpoint.push(ModelTurn::new().content("abc").stall_after(2));
    endpoint.push(ModelTurn::new().content("abc").cut_after(1));
    endpoint.push(Reply::text("still here"));
    let body = streaming(json!([user("q")]));
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(200))
        .build()
        .unwrap();

    let hung = impatient.post(chat_url(&endpoint)).json(&body).send().await;
    assert!(hung.expect_err("no answer ever comes").is_timeout());
    let slow = impatient.post(chat_url(&endpoint)).json(&body).send().await;
    assert!(
        slow.expect_err("the headers come after 400 ms")
            .is_timeout()
    );

    let stalled = post(&endpoint, &body).await;
    assert_eq!(stalled.status(), 200);
    let mut stream = stalled.bytes_stream();
    let mut received = Vec::new();
    let outcome = tokio::time::timeout(Duration::from_millis(300), async {
        while let Some(piece) = stream.next().await {
            received.extend_from_slice(&piece.unwrap());
        }
    })
    .await;
    assert!(outcome.is_err(), "the stream stalls");
    let received = String::from_utf8(received).unwrap();
    assert_eq!(received.matches("data: ").count(), 2, "{received}");

    let cut = post(&endpoint, &body).await;
    assert_eq!(cut.status(), 200);
    assert!(cut.text().await.is_err(), "the body breaks off");

    let after: Value = post(&endpoint, &plain(json!([user("q")])))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(after["choices"][0]["message"]["content"], "still here");
    endpoint.assert_no_violations();
}

#[tokio::test]
async fn keep_alive_lines_fill_the_wait_in_both_modes() {
    let endpoint =
        ModelEndpoint::start(EndpointConfig::default().keep_alive(Duration::from_millis(20)))
            .unwrap();
    let wait = Duration::from_millis(150);
    endpoint.push(ModelTurn::new().content("streamed").first_byte_delay(wait));
    endpoint.push(ModelTurn::new().content("whole").first_byte_delay(wait));

    let started = Instant::now();
    let response = post(&endpoint, &streaming(json!([user("q")]))).await;
    assert!(
        started.elapsed() < wait,
        "the headers go out before the wait"
    );
    let text = response.text().await.unwrap();
    assert!(
        text.starts_with(": keep-alive\n\n: keep-alive\n\n"),
        "{text}"
    );
    let content = sse(&text)
        .iter()
        .filter_map(|chunk| {
            chunk["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect::<String>();
    assert_eq!(content, "streamed");

    let text = post(&endpoint, &plain(json!([user("q")])))
        .await
        .text()
        .await
        .unwrap();
    assert!(text.starts_with("\n\n"), "{text:?}");
    let answer: Value = serde_json::from_str(text.trim_start()).unwrap();
    assert_eq!(answer["choices"][0]["message"]["content"], "whole");
    endpoint.assert_no_violations();
}

#[tokio::test]
async fn a_reply_can_be_computed_from_the_tool_results() {
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push(
        ModelTurn::new()
            .reasoning("read first")
            .tool_call("read", r#"{"path":"a"}"#),
    );
    endpoint.push(Reply::from_fn(|request| {
        let results = request.trailing_tool_results();
        assert_eq!(results.len(), 1);
        let text = request.tool_result("call_00_r0").unwrap_or("nothing");
        Reply::text(format!("the file says {text}"))
    }));
    endpoint.push(Reply::from_fn(|_| panic!("a broken script")));

    let first: Value = post(&endpoint, &thinking(plain(json!([user("read a")])), true))
        .await
        .json()
        .await
        .unwrap();
    let message = &first["choices"][0]["message"];
    assert_eq!(first["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(message["tool_calls"][0]["id"], "call_00_r0");
    assert_eq!(message["reasoning_content"], "read first");

    // The assistant message goes back as it came, reasoning and all.
    let history = json!([user("read a"), message, tool("call_00_r0", "hello")]);
    let second: Value = post(&endpoint, &thinking(plain(history.clone()), true))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        second["choices"][0]["message"]["content"],
        "the file says hello"
    );

    let third = post(&endpoint, &thinking(plain(history), true)).await;
    assert_eq!(third.status(), 500);
    let violations = endpoint.take_violations();
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].rule, Rule::ReplyPanicked);
    assert_eq!(violations[0].detail, "a broken script");
}

#[test]
fn dropping_an_endpoint_with_unseen_violations_fails_the_test() {
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let response = post(&endpoint, &plain(json!([]))).await;
        assert_eq!(response.status(), 400);
    });
    let dropped = std::panic::catch_unwind(AssertUnwindSafe(|| drop(endpoint)));
    let message = dropped.expect_err("drop panics");
    let message = message.downcast_ref::<String>().unwrap();
    assert!(message.contains("EmptyMessages"), "{message}");
}
