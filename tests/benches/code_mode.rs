//! Code mode against plain tool calls: the same 30-lookup task (the signature of 30 functions,
//! each asked of pyright with `lsp_hover` at its call site in `main.py`) scripted three ways
//! through the real binary against the loopback model endpoint (its tokenizer and prefix-cache
//! simulation):
//!
//! - **plain, one call a step**: the model asks for one hover per step (30 steps), then answers;
//! - **plain, five calls a step**: the same lookups batched five to a step (6 steps);
//! - **code mode**: one `run_code` program makes the 30 hovers and prints a 30-line table,
//!   then the model answers.
//!
//! Reported: requests, prompt tokens, the cached share, and the wall time of each run (pyright's
//! start included).
//!
//! Run: `bash .ci/tools.sh && cargo build --workspace --bins && cargo bench -p agent-tests --bench code_mode --profile dev`

#![allow(clippy::print_stdout)]

use std::time::Instant;

use agent_tests::cli::CliFixture;
use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, ModelTurn, Reply, Route};
use serde_json::json;

const LOOKUPS: usize = 30;

fn hover(n: usize) -> serde_json::Value {
    json!({"path": "main.py", "line": n + 2 + LOOKUPS, "symbol": format!("fetch_{n}")})
}

const PROGRAM: &str = r#"const rows = [];
for (let n = 0; n < 30; n++) {
  const text = await tools.lsp_hover({path: "main.py", line: n + 32, symbol: `fetch_${n}`});
  const signature = text.split("\n").find(line => line.includes(`def fetch_${n}`)) || "?";
  rows.push(`fetch_${n}: ${signature.trim()}`);
}
console.log(rows.join("\n"));"#;

/// 30 modules, each with a documented function, and `main.py` calling each.
fn project() -> CliFixture {
    let mut files = vec![("pyrightconfig.json".to_owned(), "{}".to_owned())];
    let mut main = String::new();
    for n in 0..LOOKUPS {
        files.push((
            format!("feeds/feed_{n}.py"),
            format!("def fetch_{n}(url: str, retries: int = {n}, timeout: float = 2.5) -> bytes:\n    \"\"\"Fetch feed {n} from `url`, retrying {n} times; raises TimeoutError after `timeout` seconds.\"\"\"\n    raise NotImplementedError\n"),
        ));
        main.push_str(&format!("from feeds.feed_{n} import fetch_{n}\n"));
    }
    main.push('\n');
    for n in 0..LOOKUPS {
        main.push_str(&format!(
            "data_{n} = fetch_{n}(\"https://example.com/{n}\")\n"
        ));
    }
    files.push(("feeds/__init__.py".into(), String::new()));
    files.push(("main.py".into(), main));
    let borrowed = files
        .iter()
        .map(|(path, text)| (path.as_str(), text.as_str()))
        .collect::<Vec<_>>();
    CliFixture::new("[provider]\nrequest_timeout_secs = 120\n").with_files(&borrowed)
}

struct Figures {
    requests: usize,
    prompt: u64,
    cached: u64,
    seconds: f64,
}

fn run(per_step: Option<usize>) -> Figures {
    let fixture = project();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let route: Route = std::sync::Arc::new(move |request| {
        let step = request.answers();
        match per_step {
            None if step == 0 => ModelTurn::new()
                .reasoning("One program for all of them.")
                .tool_call("run_code", json!({"code": PROGRAM}).to_string())
                .into(),
            Some(batch) if step * batch < LOOKUPS => {
                let mut turn = ModelTurn::new().reasoning("The next signatures.");
                for n in step * batch..((step + 1) * batch).min(LOOKUPS) {
                    turn = turn.tool_call("lsp_hover", hover(n).to_string());
                }
                turn.into()
            }
            _ => {
                Reply::text("All 30 fetch functions take (url, retries, timeout) and return bytes.")
            }
        }
    });
    endpoint.route(64, route);
    let preset = if per_step.is_some() {
        "readonly"
    } else {
        "code"
    };
    let started = Instant::now();
    let output = fixture
        .command(&[
            "run",
            "--preset",
            preset,
            "--base-url",
            &endpoint.base_url(),
            "What are the signatures of the 30 fetch functions main.py calls?",
        ])
        .env("PATH", agent_tests::tools_path())
        .output()
        .unwrap();
    let seconds = started.elapsed().as_secs_f64();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    endpoint.assert_no_violations();
    let requests = endpoint.chat_requests();
    let mut figures = Figures {
        requests: requests.len(),
        prompt: 0,
        cached: 0,
        seconds,
    };
    for request in &requests {
        let usage = request.usage.as_ref().expect("served");
        figures.prompt += usage.prompt_tokens;
        figures.cached += usage.prompt_cache_hit_tokens;
    }
    // Every lookup got its answer from pyright: 30 signatures, in hover results or in the
    // program's table.
    let history = fixture.store().load("last").unwrap();
    let signatures: usize = history
        .events()
        .iter()
        .filter_map(|event| match &event.body {
            agent_lsp::session::event::EventBody::ToolResult(result) => {
                Some(result.text.matches("def fetch_").count())
            }
            _ => None,
        })
        .sum();
    assert_eq!(signatures, LOOKUPS, "every lookup answered");
    figures
}

fn main() {
    let plain = run(Some(1));
    let batched = run(Some(5));
    let code = run(None);
    println!(
        "| measure | plain, one call a step | plain, five calls a step | code mode (`run_code`) |"
    );
    println!("|---|---|---|---|");
    println!(
        "| requests | {} | {} | {} |",
        plain.requests, batched.requests, code.requests
    );
    println!(
        "| prompt tokens | {} | {} | {} |",
        plain.prompt, batched.prompt, code.prompt
    );
    let share = |f: &Figures| format!("{:.1} %", 100.0 * f.cached as f64 / f.prompt.max(1) as f64);
    println!(
        "| served from cache | {} | {} | {} |",
        share(&plain),
        share(&batched),
        share(&code)
    );
    println!(
        "| wall time (pyright's start included) | {:.1} s | {:.1} s | {:.1} s |",
        plain.seconds, batched.seconds, code.seconds
    );
    println!(
        "| code mode's prompt tokens against the run's | {:.3} | {:.3} | 1 |",
        code.prompt as f64 / plain.prompt as f64,
        code.prompt as f64 / batched.prompt as f64
    );
}
