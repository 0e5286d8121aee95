//! Delegation: the same exploration scripted two ways through the real binary (`agent-lsp run`,
//! the `standard` preset) against the loopback model endpoint, whose prefix-cache simulation
//! reports each request's cached tokens:
//!
//! - **direct**: the parent reads the 20 files of the workspace itself, 4 `read` calls a step
//!   for 5 steps, then answers;
//! - **delegated**: the parent makes one `task` call; an `explore` sub-agent makes the same 20
//!   reads in its own session (4 a step for 5 steps) and answers with a 20-line summary, which
//!   is all the parent's context gets; then the parent answers.
//!
//! The files are generated Python modules of about 2.5 kB (a docstring, a class, functions).
//! Reported for each way: the parent's requests, its final context (the prompt tokens of its last
//! request, as the endpoint counts them), the parent's total prompt tokens and cache share, and
//! for the delegated way the child's figures and the sum over both sessions.
//!
//! Run: `cargo build --workspace --bins && cargo bench -p agent-tests --bench subagents --profile dev`
//! (the figures are token counts, the same on every run; the debug binary is used).

#![allow(clippy::print_stdout)]

use std::sync::Arc;

use agent_tests::cli::CliFixture;
use agent_tests::model_endpoint::{
    ChatRequest, EndpointConfig, ModelEndpoint, ModelTurn, RecordedRequest, Reply, Route,
};
use serde_json::json;

const FILES: usize = 20;
const PER_STEP: usize = 4;

fn path(n: usize) -> String {
    format!("src/mod_{n:02}.py")
}

/// A Python module of about 2.5 kB, different for every `n`.
fn module(n: usize) -> String {
    let mut text = format!(
        "\"\"\"Module {n}: reading and checking the records of feed {n}.\n\nEach record is a line of comma-separated fields; the parser keeps the\nposition of the first bad field so the caller can report it.\n\"\"\"\n\nimport csv\nimport io\n\n\nclass Feed{n}Error(ValueError):\n    \"\"\"A record of feed {n} that does not parse.\"\"\"\n\n    def __init__(self, line, column, reason):\n        super().__init__(f\"line {{line}}, column {{column}}: {{reason}}\")\n        self.line = line\n        self.column = column\n\n\n"
    );
    for f in 0..6 {
        text.push_str(&format!(
            "def parse_{n}_{f}(text, strict=True):\n    \"\"\"Parse the records of part {f} of feed {n}; strict mode refuses empty fields.\"\"\"\n    records = []\n    for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):\n        if strict and any(not field for field in row):\n            raise Feed{n}Error(number, row.index(\"\") + 1, \"empty field\")\n        records.append(tuple(field.strip() for field in row))\n    return records\n\n\n"
        ));
    }
    text
}

fn call_reads(first: usize) -> Reply {
    let mut turn = ModelTurn::new().reasoning("Read the next files.");
    for n in first..(first + PER_STEP).min(FILES) {
        turn = turn.tool_call("read", json!({"path": path(n)}).to_string());
    }
    turn.into()
}

/// The 20-line summary the sub-agent answers with.
fn summary() -> String {
    (0..FILES)
        .map(|n| {
            format!(
                "- {}: Feed{n}Error and parse_{n}_0 … parse_{n}_5 (csv rows, strict mode refuses empty fields, line 20ff.)",
                path(n)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_child(request: &ChatRequest) -> bool {
    request
        .system_text()
        .is_some_and(|text| text.contains("You are a sub-agent"))
}

/// Figures of a set of requests.
#[derive(Default)]
struct Figures {
    requests: usize,
    last_prompt: u64,
    prompt: u64,
    cached: u64,
}

impl Figures {
    fn of<'a>(requests: impl Iterator<Item = &'a RecordedRequest>) -> Figures {
        let mut figures = Figures::default();
        for request in requests {
            let usage = request.usage.as_ref().expect("a served request");
            figures.requests += 1;
            figures.last_prompt = usage.prompt_tokens;
            figures.prompt += usage.prompt_tokens;
            figures.cached += usage.prompt_cache_hit_tokens;
        }
        figures
    }

    fn share(&self) -> String {
        format!(
            "{:.1} % ({} of {})",
            100.0 * self.cached as f64 / self.prompt.max(1) as f64,
            self.cached,
            self.prompt
        )
    }
}

/// Run one way; the parent's and the child's requests.
fn run(delegate: bool) -> (Vec<RecordedRequest>, Vec<RecordedRequest>) {
    let files = (0..FILES).map(|n| (path(n), module(n))).collect::<Vec<_>>();
    let borrowed = files
        .iter()
        .map(|(path, text)| (path.as_str(), text.as_str()))
        .collect::<Vec<_>>();
    let fixture = CliFixture::new("[provider]\nrequest_timeout_secs = 60\n").with_files(&borrowed);
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let route: Route = Arc::new(move |request| {
        let step = request.answers();
        let reads_done = step * PER_STEP >= FILES;
        if is_child(request) || !delegate {
            if !reads_done {
                return call_reads(step * PER_STEP);
            }
            return if is_child(request) {
                Reply::text(summary())
            } else {
                Reply::text("The feeds' parsers all refuse empty fields in strict mode.")
            };
        }
        match step {
            0 => ModelTurn::new()
                .reasoning("Delegate the reading.")
                .tool_call(
                    "task",
                    json!({"prompt": format!("Read {} … {} and list, per file, its error class and parse functions with what they check.", path(0), path(FILES - 1))}).to_string(),
                )
                .into(),
            _ => Reply::text("The feeds' parsers all refuse empty fields in strict mode."),
        }
    });
    endpoint.route(64, route);
    let output = fixture.run(&[
        "run",
        "--yes",
        "--base-url",
        &endpoint.base_url(),
        "Which of the feed parsers refuse empty fields?",
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    endpoint.assert_no_violations();
    let (children, parent): (Vec<_>, Vec<_>) =
        endpoint.chat_requests().into_iter().partition(|request| {
            request.body.as_ref().is_some_and(|body| {
                body["messages"][0]["content"]
                    .as_str()
                    .is_some_and(|text| text.contains("You are a sub-agent"))
            })
        });
    (parent, children)
}

fn main() {
    let (direct, none) = run(false);
    assert!(none.is_empty());
    let (parent, child) = run(true);
    let direct = Figures::of(direct.iter());
    let delegated = Figures::of(parent.iter());
    let child = Figures::of(child.iter());
    let both = Figures {
        requests: delegated.requests + child.requests,
        last_prompt: delegated.last_prompt,
        prompt: delegated.prompt + child.prompt,
        cached: delegated.cached + child.cached,
    };
    println!(
        "| measure | parent reads 20 files itself | parent delegates to one `explore` sub-agent |"
    );
    println!("|---|---|---|");
    println!(
        "| parent's requests | {} | {} |",
        direct.requests, delegated.requests
    );
    println!(
        "| parent's final context (prompt tokens of its last request) | {} | {} |",
        direct.last_prompt, delegated.last_prompt
    );
    println!(
        "| parent's prompt tokens, all requests (from cache) | {} | {} |",
        direct.share(),
        delegated.share()
    );
    println!(
        "| sub-agent's requests; prompt tokens (from cache) | – | {}; {} |",
        child.requests,
        child.share()
    );
    println!(
        "| both sessions: requests; prompt tokens (from cache) | {}; {} | {}; {} |",
        direct.requests,
        direct.share(),
        both.requests,
        both.share()
    );
}
