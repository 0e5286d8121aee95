//! The loopback model endpoint (`agent_tests::model_endpoint`) as a process of its own, for
//! tests that are not Rust: the VS Code UI test (`editors/vscode/e2e/`) starts it, points the
//! extension at it and reads back what it served. It is the same endpoint as the Rust tests',
//! with the same rules enforced, so a request the editor provokes that DeepSeek would refuse
//! fails the UI test too.
//!
//! ```text
//! model-endpoint --script replies.json [--api-key KEY] [--delta-bytes N] [--fim TEXT]
//! ```
//!
//! `--fim TEXT` answers every fill-in-the-middle request (`POST /v1/completions`,
//! `/beta/completions`: inline completion) with TEXT, streamed; without it they are refused.
//!
//! The script is a JSON array of replies, answered in order:
//! `{"content": "…", "reasoning": "…", "tool_calls": [{"name": "edit", "arguments": {…}}],
//! "chunk_delay_ms": 50, "expect_user": "text the last user message must contain"}`.
//! The first line on stdout is `listening on http://127.0.0.1:PORT/v1`; each served request is
//! a line on stderr. The endpoint serves until its stdin closes (so it never outlives the test
//! that started it), then exits 0, or 1 with the reasons when it refused a request or replies
//! are left unspent.

use std::io::{Read, Write};
use std::process::ExitCode;
use std::time::Duration;

use agent_tests::model_endpoint::{EndpointConfig, FimReply, ModelEndpoint, ModelTurn, Reply};
use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptedReply {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ScriptedToolCall>,
    #[serde(default)]
    chunk_delay_ms: u64,
    /// A check on the request (a text some user message of it must contain), so that a reply
    /// meant for one turn never answers another.
    #[serde(default)]
    expect_user: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptedToolCall {
    name: String,
    /// The arguments as a JSON object (sent as its text) or as the text itself.
    arguments: Value,
}

struct Options {
    script: std::path::PathBuf,
    api_key: Option<String>,
    delta_bytes: Option<usize>,
    fim: Option<String>,
}

fn options() -> anyhow::Result<Options> {
    let mut script = None;
    let mut api_key = None;
    let mut delta_bytes = None;
    let mut fim = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--script" => script = Some(value()?.into()),
            "--api-key" => api_key = Some(value()?),
            "--delta-bytes" => delta_bytes = Some(value()?.parse().context("--delta-bytes")?),
            "--fim" => fim = Some(value()?),
            other => bail!(
                "unknown argument `{other}`; usage: model-endpoint --script FILE [--api-key KEY] [--delta-bytes N] [--fim TEXT]"
            ),
        }
    }
    Ok(Options {
        script: script.context("--script FILE is required")?,
        api_key,
        delta_bytes,
        fim,
    })
}

fn reply(index: usize, scripted: ScriptedReply) -> anyhow::Result<Reply> {
    let mut turn = ModelTurn::new().chunk_delay(Duration::from_millis(scripted.chunk_delay_ms));
    if let Some(content) = scripted.content {
        turn = turn.content(content);
    }
    if let Some(reasoning) = scripted.reasoning {
        turn = turn.reasoning(reasoning);
    }
    for call in scripted.tool_calls {
        let arguments = match call.arguments {
            Value::String(text) => text,
            object => serde_json::to_string(&object)?,
        };
        turn = turn.tool_call(call.name, arguments);
    }
    let expect = scripted.expect_user;
    Ok(Reply::from_fn(move |request| {
        // The user's words, wherever the agent put them (runtime context comes as a user
        // message of its own).
        let user: String = request
            .messages
            .iter()
            .filter(|message| message.role == "user")
            .filter_map(|message| message.content.as_deref())
            .collect::<Vec<_>>()
            .join("\n");
        eprintln!(
            "model-endpoint: request #{} ({} messages) gets reply {index}",
            request.index,
            request.messages.len()
        );
        // A panic here is answered with a 500 and recorded as a violation.
        if let Some(expected) = expect {
            assert!(
                user.contains(&expected),
                "reply {index} expects a user message containing {expected:?}, got {user:?}"
            );
        }
        turn.into()
    }))
}

fn run() -> anyhow::Result<bool> {
    let options = options()?;
    let text = std::fs::read_to_string(&options.script)
        .with_context(|| format!("read the script {}", options.script.display()))?;
    let script: Vec<ScriptedReply> = serde_json::from_str(&text)
        .with_context(|| format!("parse the script {}", options.script.display()))?;
    let mut config = EndpointConfig::default();
    if let Some(key) = options.api_key {
        config = config.api_key(key);
    }
    if let Some(bytes) = options.delta_bytes {
        config = config.delta_bytes(bytes);
    }
    let endpoint = ModelEndpoint::start(config)?;
    for (index, scripted) in script.into_iter().enumerate() {
        endpoint.push(reply(index, scripted)?);
    }
    if let Some(text) = options.fim {
        endpoint.fim_responder(std::sync::Arc::new(move |call| {
            eprintln!("model-endpoint: FIM request #{} answered", call.index);
            FimReply::text(text.clone())
        }));
    }
    let mut stdout = std::io::stdout();
    writeln!(stdout, "listening on {}", endpoint.base_url())?;
    stdout.flush()?;
    // Serve until whoever started us closes our stdin (or dies).
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    let violations = endpoint.violations();
    for violation in &violations {
        eprintln!("model-endpoint: refused: {violation}");
    }
    let left = endpoint.remaining_replies();
    if left > 0 {
        eprintln!("model-endpoint: {left} scripted replies were not used");
    }
    eprintln!(
        "model-endpoint: served {} chat requests and {} FIM requests",
        endpoint.chat_requests().len(),
        endpoint.fim_calls().len()
    );
    Ok(violations.is_empty() && left == 0)
}

fn main() -> ExitCode {
    // A failed `expect_user` check is a panic in the reply closure, which the endpoint records
    // as a violation; one line says which, without a backtrace.
    std::panic::set_hook(Box::new(|info| eprintln!("model-endpoint: {info}")));
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("model-endpoint: {error:#}");
            ExitCode::from(2)
        }
    }
}
