//! Session log benchmarks: append throughput, open + derive time, and per-step derive cost as
//! the session grows. Run with `cargo bench -p agent-lsp --bench session_log`; it prints a
//! Markdown table for BENCHMARKS.md. Figures are wall-clock on whatever machine runs it.

#![allow(clippy::print_stdout)]

use std::path::Path;
use std::time::{Duration, Instant};

use agent_lsp::session::event::{
    AssistantMessage, EventBody, RequestContext, RequestHeader, SCHEMA_VERSION, SessionHeader,
    SurfaceOp, ToolCallEvent, ToolCallRef, ToolResult, Usage, UserMessage,
};
use agent_lsp::session::log::Durability;
use agent_lsp::session::{NewEvent, Session};

fn header() -> SessionHeader {
    SessionHeader {
        schema: SCHEMA_VERSION,
        session_id: "bench".into(),
        workspace: "/bench".into(),
        preset: "standard".into(),
        preset_text: None,
        agent_version: "bench".into(),
        parent: None,
    }
}

const CODE: &str =
    "    let value = parse(&input)?; // a typical line of a tool result, about 60 characters\n";

/// Append one realistic agent step (about 8 events): request header and context, an assistant
/// message with a tool call, the call and its result, usage, and every fifth step a user prompt.
fn append_step(session: &mut Session, step: u64) {
    let turn = (step / 5) as u32;
    let index = session.history().n_requests() + 1;
    let last = session.history().last_seq();
    if step.is_multiple_of(5) {
        let text = format!("Please look at module {step} and fix the failing test in it.");
        session
            .append(NewEvent::new(
                turn,
                0,
                EventBody::UserMessage(UserMessage {
                    text,
                    origin: "prompt".into(),
                }),
            ))
            .unwrap();
    }
    let header = RequestHeader {
        index,
        wire: "openai-chat/1".into(),
        model: "deepseek-v4-flash".into(),
        params: serde_json::json!({}),
        system_digest: "s".into(),
        tools_digest: "t".into(),
        system: (index == 1).then(|| "You are agent-lsp.".into()),
        tools: (index == 1).then(Vec::new),
        sections: Vec::new(),
    };
    session
        .append(NewEvent::new(turn, 1, EventBody::RequestHeader(header)))
        .unwrap();
    let context = RequestContext {
        index,
        generation: 0,
        through_seq: last,
        event_seqs: vec![[2, last]],
        estimated_tokens: 1000,
    };
    session
        .append(NewEvent::new(turn, 1, EventBody::RequestContext(context)))
        .unwrap();
    let id = format!("call_{step}");
    let call = ToolCallRef {
        id: id.clone(),
        name: "read".into(),
        arguments: format!(r#"{{"path":"src/m{step}.rs"}}"#),
    };
    let message = AssistantMessage {
        text: String::new(),
        reasoning: Some("I should read the file first.".into()),
        tool_calls: vec![call],
    };
    session
        .append(NewEvent::new(turn, 1, EventBody::AssistantMessage(message)))
        .unwrap();
    let call = ToolCallEvent {
        call_id: id.clone(),
        name: "read".into(),
        arguments: format!(r#"{{"path":"src/m{step}.rs"}}"#),
        sandbox: None,
    };
    session
        .append(NewEvent::new(turn, 1, EventBody::ToolCall(call)))
        .unwrap();
    let result = ToolResult {
        call_id: id,
        name: "read".into(),
        text: CODE.repeat(8),
        meta: serde_json::json!({"truncated": false}),
    };
    session
        .append(NewEvent::new(turn, 1, EventBody::ToolResult(result)))
        .unwrap();
    let usage = Usage {
        index,
        prompt_tokens: 1000,
        completion_tokens: 40,
        cache_read: 960,
        input: 40,
    };
    session
        .append(NewEvent::new(turn, 1, EventBody::Usage(usage)))
        .unwrap();
    // Every 1000 steps a compaction replaces the older half of the surface.
    if step % 1000 == 999 {
        let entries = session.history().surface().entries();
        let start = entries[0].seq;
        let ends = entries[entries.len() / 2..]
            .iter()
            .take(3)
            .map(|entry| entry.seq)
            .collect::<Vec<_>>();
        let summary = EventBody::UserMessage(UserMessage {
            text: "<compacted-summary>…</compacted-summary>".into(),
            origin: "compaction".into(),
        });
        // The first end that keeps every tool call with its result wins.
        let replaced = ends.into_iter().any(|end| {
            let event =
                NewEvent::new(turn, 0, summary.clone()).with_op(SurfaceOp::Replace { start, end });
            session.append(event).is_ok()
        });
        assert!(replaced, "no compaction range was valid");
    }
}

fn build(path: &Path, n_events: u64) -> Session {
    let mut session = Session::create(path, header(), Durability::Batched).unwrap();
    let mut step = 0;
    while session.history().last_seq() < n_events {
        append_step(&mut session, step);
        step += 1;
        if step % 64 == 0 {
            session.flush().unwrap();
        }
    }
    session.flush().unwrap();
    session
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    println!("| measure | figure |");
    println!("|---|---|");

    // Durable appends: one fsync per event.
    let path = dir.path().join("durable.jsonl");
    let mut session = Session::create(&path, header(), Durability::Sync).unwrap();
    let n = 2000;
    let start = Instant::now();
    for index in 0..n {
        let text = format!("event {index}: {}", &CODE[..60]);
        session
            .append(NewEvent::new(
                1,
                0,
                EventBody::UserMessage(UserMessage {
                    text,
                    origin: "prompt".into(),
                }),
            ))
            .unwrap();
    }
    let elapsed = start.elapsed();
    println!(
        "| appends/s, durable (fsync per event, {n} events) | {:.0} |",
        n as f64 / elapsed.as_secs_f64()
    );
    drop(session);

    // Batched appends: realistic steps, one fsync per 64 steps.
    let path = dir.path().join("batched.jsonl");
    let start = Instant::now();
    let session = build(&path, 100_000);
    let elapsed = start.elapsed();
    let n = session.history().last_seq();
    println!(
        "| appends/s, batched (fsync per 64 steps, {n} events) | {:.0} |",
        n as f64 / elapsed.as_secs_f64()
    );
    drop(session);

    // Open + derive at three sizes.
    let mut per_step = Vec::new();
    for n_events in [1_000u64, 10_000, 100_000] {
        let path = dir.path().join(format!("open-{n_events}.jsonl"));
        drop(build(&path, n_events));
        let bytes = std::fs::metadata(&path).unwrap().len();
        let samples = (0..5)
            .map(|_| {
                let start = Instant::now();
                let mut session = Session::open(&path, Durability::Batched).unwrap();
                let n_messages = session.derive_messages().len();
                assert!(n_messages > 0);
                start.elapsed()
            })
            .collect::<Vec<_>>();
        println!(
            "| open + derive, {n_events} events ({:.1} MB), median of 5 | {:.1} ms |",
            bytes as f64 / 1e6,
            median(samples).as_secs_f64() * 1e3
        );
        if n_events != 10_000 {
            per_step.push((n_events, path));
        }
    }

    // Per-step cost: append one step and derive, on a small and a large session.
    let mut results = Vec::new();
    for (n_events, path) in &per_step {
        let mut session = Session::open(path, Durability::Batched).unwrap();
        session.derive_messages();
        let mut append_and_derive = Vec::new();
        let mut derive_only = Vec::new();
        for step in 0..3000 {
            let start = Instant::now();
            append_step(&mut session, 10_000_000 + step);
            let appended = start.elapsed();
            let start = Instant::now();
            std::hint::black_box(session.derive_messages().len());
            let derived = start.elapsed();
            // Compaction steps rebuild the cache by design; they are measured by open + derive.
            if step % 1000 != 999 {
                append_and_derive.push(appended + derived);
                derive_only.push(derived);
            }
        }
        results.push((*n_events, median(append_and_derive), median(derive_only)));
    }
    for (n_events, both, derive) in &results {
        println!(
            "| per step at {n_events} events: append a step + derive (median) | {:.1} µs (derive alone {:.2} µs) |",
            both.as_secs_f64() * 1e6,
            derive.as_secs_f64() * 1e6
        );
    }
    let ratio = results[1].1.as_secs_f64() / results[0].1.as_secs_f64();
    let derive_ratio = results[1].2.as_secs_f64() / results[0].2.as_secs_f64();
    println!(
        "| per-step ratio 100k / 1k events (target ≤ 1.5) | {ratio:.2} (derive alone {derive_ratio:.2}) |"
    );
}
