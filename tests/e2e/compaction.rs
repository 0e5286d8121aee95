//! Compaction end to end: the library's agent loop in long scripted sessions against the loopback
//! model endpoint (which enforces the API's rules, refuses prompts over its window and simulates
//! the prefix cache), with the session log read back and replayed.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_lsp::agent::TurnOutcome;
use agent_lsp::context::request::replay_request;
use agent_lsp::llm::wire;
use agent_lsp::session::History;
use agent_lsp::session::event::{Event, EventBody, SurfaceOp};
use agent_tests::compaction_harness::{
    Harness, Next, Script, is_summary_body, is_summary_request, preset, push_responders,
};
use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, Reply, Rule};
use serde_json::Value;

const FILES: usize = 6;
const FILE_BYTES: usize = 2000;

fn endpoint(window: Option<u64>) -> ModelEndpoint {
    let mut config = EndpointConfig::default().reasoning_in_tool_stretches(true);
    if let Some(window) = window {
        config = config.context_window(window);
    }
    ModelEndpoint::start(config).unwrap()
}

fn bodies(endpoint: &ModelEndpoint) -> Vec<Value> {
    endpoint
        .chat_requests()
        .into_iter()
        .filter(|request| request.status == 200)
        .map(|request| request.body.unwrap())
        .collect()
}

fn main_bodies(endpoint: &ModelEndpoint) -> Vec<Value> {
    bodies(endpoint)
        .into_iter()
        .filter(|body| !is_summary_body(body))
        .collect()
}

fn messages(body: &Value) -> &Vec<Value> {
    body["messages"].as_array().unwrap()
}

fn ends<'a>(events: &'a [Event], outcome: &str) -> Vec<&'a Event> {
    events
        .iter()
        .filter(
            |event| matches!(&event.body, EventBody::CompactionEnd(end) if end.outcome == outcome),
        )
        .collect()
}

fn checkpoints(events: &[Event]) -> Vec<&Event> {
    events
        .iter()
        .filter(|event| matches!(&event.body, EventBody::UserMessage(message) if message.origin == "compaction"))
        .collect()
}

/// Every main request the endpoint served is what `replay_request` rebuilds from the log.
fn assert_main_requests_replay(history: &History, endpoint: &ModelEndpoint) {
    let served = endpoint
        .chat_requests()
        .into_iter()
        .filter(|request| request.status == 200)
        .filter(|request| !is_summary_body(request.body.as_ref().unwrap()))
        .collect::<Vec<_>>();
    let errors = history
        .events()
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::RequestError(error) => Some(error.index),
            _ => None,
        })
        .collect::<Vec<_>>();
    let answered = (1..=history.n_requests())
        .filter(|index| !errors.contains(index))
        .collect::<Vec<_>>();
    assert_eq!(answered.len(), served.len());
    for (index, request) in answered.into_iter().zip(served) {
        let rebuilt = wire::chat_completions_body(&replay_request(history, index).unwrap());
        assert_eq!(
            rebuilt,
            String::from_utf8_lossy(&request.raw),
            "request {index} does not replay byte-identically"
        );
    }
}

/// The summary request replays a served prompt verbatim and only appends the instruction.
fn assert_summaries_replay_the_prefix(endpoint: &ModelEndpoint) {
    let requests = endpoint.chat_requests();
    let mut checked = 0;
    for (position, request) in requests.iter().enumerate() {
        let Some(body) = &request.body else { continue };
        if request.status != 200 || !is_summary_body(body) {
            continue;
        }
        let summary = messages(body);
        let prefix = &summary[..summary.len() - 1];
        assert!(
            requests[..position]
                .iter()
                .any(|earlier| earlier
                    .body
                    .as_ref()
                    .is_some_and(|earlier| !is_summary_body(earlier)
                        && messages(earlier).starts_with(prefix)
                        && earlier["tools"] == body["tools"])),
            "summary request #{position} does not replay an earlier prompt's prefix"
        );
        let usage = request.usage.as_ref().unwrap();
        // Everything but the instruction (about 250 tokens) and the last partial block is cached.
        assert!(
            usage.prompt_cache_hit_tokens + 400 >= usage.prompt_tokens,
            "summary request #{position}: {usage:?}"
        );
        checked += 1;
    }
    assert!(checked > 0, "no summary request was served");
}

#[tokio::test]
async fn compaction_past_the_soft_and_hard_marks_commits_a_background_checkpoint_and_continues() {
    let endpoint = endpoint(None);
    let script = Arc::new(Mutex::new(Script::new(FILES, 16)));
    push_responders(&endpoint, &script, 40);
    let preset = preset(
        8000,
        "soft_ratio = 0.5\nhard_ratio = 0.75\nkeep_recent_steps = 2\nbackground = true",
        "",
    );
    let mut harness = Harness::new(&endpoint, preset, FILES, FILE_BYTES);

    let outcome = harness.turn("Read every file in src/ and report.").await;
    assert_eq!(
        outcome,
        TurnOutcome::Answered {
            text: "Done with part 16.".into(),
            steps: 16
        }
    );
    endpoint.assert_no_violations();

    let history = harness.store().load(harness.session.id()).unwrap();
    let events = history.events();
    let committed = ends(events, "committed");
    assert!(!committed.is_empty(), "no compaction committed");
    let starts = events
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::CompactionStart(start) => Some((event.seq, start)),
            _ => None,
        })
        .collect::<Vec<_>>();
    assert_eq!(starts[0].1.trigger, "background");

    // The checkpoint: a user message replacing the range, naming its sources.
    let checkpoint = checkpoints(events)[0];
    let (start_seq, start) = starts[0];
    assert_eq!(
        checkpoint.surface_op,
        Some(SurfaceOp::Replace {
            start: start.start,
            end: start.end
        })
    );
    assert_eq!(checkpoint.source_event_seqs[0], start_seq);
    assert_eq!(
        &checkpoint.source_event_seqs[2..],
        start.entry_seqs.as_slice()
    );
    let EventBody::UserMessage(message) = &checkpoint.body else {
        unreachable!()
    };
    assert!(
        message
            .text
            .starts_with(&format!("<compacted-summary id=\"cmp-{start_seq}\">")),
        "{}",
        message.text
    );
    assert!(message.text.contains("read-1 read"), "{}", message.text);
    assert!(message.text.contains("## Critical Context"));

    // The candidate folded everything the surface held when it started (the steps expected
    // before the hard mark were more than `keep_recent_steps`), so what stays verbatim after the
    // checkpoint is exactly the steps made until the commit, and they are at least 2.
    let at_start = history.prefix(start_seq - 1).unwrap();
    assert_eq!(
        at_start.surface().entries().last().unwrap().seq,
        start.end,
        "the candidate kept recent steps out of its range"
    );
    let at_commit = history.prefix(checkpoint.seq).unwrap();
    let tail = steps_after_checkpoint(&at_commit);
    assert!(tail >= 2, "only {tail} steps kept after the checkpoint");
    let made_since_start = events
        .iter()
        .filter(|event| event.seq > start_seq && event.seq < checkpoint.seq)
        .filter(|event| matches!(event.body, EventBody::AssistantMessage(_)))
        .count();
    assert_eq!(tail, made_since_start);

    // The loop went on after the commit, with the checkpoint first in the history.
    let mains = main_bodies(&endpoint);
    let last = mains.last().unwrap();
    let first_user = messages(last)
        .iter()
        .find(|message| message["role"] == "user")
        .unwrap();
    assert!(
        first_user["content"]
            .as_str()
            .unwrap()
            .starts_with("<compacted-summary")
    );
    assert!(
        harness
            .notices
            .0
            .lock()
            .unwrap()
            .iter()
            .any(|line| line.contains("prepared in the background")),
        "{:?}",
        harness.notices.0.lock().unwrap()
    );
    let stats = harness.agent.compaction_stats();
    assert!(
        stats.committed >= 1 && stats.candidates_started >= 1,
        "{stats:?}"
    );

    assert_summaries_replay_the_prefix(&endpoint);
    assert_main_requests_replay(&history, &endpoint);
    agent_tests::assert_tool_pairing(history.clone().derive_messages());
}

/// Distinct model steps on the surface after its first entry, the checkpoint.
fn steps_after_checkpoint(history: &History) -> usize {
    let entries = history.surface().entries();
    assert!(matches!(
        &history.event(entries[0].seq).unwrap().body,
        EventBody::UserMessage(message) if message.origin == "compaction"
    ));
    let mut steps = entries[1..]
        .iter()
        .map(|entry| {
            let event = history.event(entry.seq).unwrap();
            (event.turn, event.step)
        })
        .collect::<Vec<_>>();
    steps.dedup();
    steps.len()
}

#[tokio::test]
async fn a_candidate_that_would_keep_too_few_recent_steps_is_discarded_for_a_synchronous_compaction()
 {
    // A roomy gap between the marks: the candidate expects more than 3 steps before the hard
    // mark and folds everything. Then one huge result jumps to the hard mark a step later.
    let endpoint = endpoint(None);
    let script = Arc::new(Mutex::new(Script::new(FILES, 24)));
    let summary_seen = Arc::new(Mutex::new(false));
    for _ in 0..40 {
        let script = script.clone();
        let summary_seen = summary_seen.clone();
        endpoint.push(Reply::from_fn(move |request| {
            let mut script = script.lock().unwrap();
            let mut seen = summary_seen.lock().unwrap();
            if is_summary_request(request) {
                *seen = true;
                if script.summary_requests == 0 {
                    // The candidate's summary would take ten minutes: a discard that waited
                    // for it would hang the turn.
                    script.summary_delay = Duration::from_secs(600);
                    let reply = script.reply(request);
                    script.summary_delay = Duration::ZERO;
                    return reply;
                }
            } else if *seen && script.summary_requests == 1 && script.queued.is_empty() {
                // The first main request after the candidate's summary call arrived.
                script.queued.push(Next::ReadPath("big.txt".into()));
                *seen = false;
            }
            script.reply(request)
        }));
    }
    let preset = preset(
        10_000,
        "soft_ratio = 0.4\nhard_ratio = 0.75\nkeep_recent_steps = 3\nbackground = true",
        "",
    );
    let mut harness = Harness::new(&endpoint, preset, FILES, FILE_BYTES);
    let big = (0..400)
        .map(|line| format!("big line {line}: one two three four five six\n"))
        .collect::<String>();
    std::fs::write(harness.workspace.path().join("big.txt"), big).unwrap();

    let outcome = tokio::time::timeout(
        Duration::from_secs(120),
        harness.turn("Read every file and report."),
    )
    .await
    .expect("the discard does not wait for the candidate's summary");
    assert!(
        matches!(outcome, TurnOutcome::Answered { .. }),
        "{outcome:?}"
    );
    endpoint.assert_no_violations();

    let history = harness.store().load(harness.session.id()).unwrap();
    let events = history.events();
    let discarded = ends(events, "discarded");
    assert_eq!(discarded.len(), 1, "{events:#?}");
    let EventBody::CompactionEnd(end) = &discarded[0].body else {
        unreachable!()
    };
    assert_eq!(
        end.reason.as_deref(),
        Some("committing it now would keep fewer than the last 3 steps")
    );
    // The synchronous compaction right after it folds a range that keeps the last 3 steps.
    let starts = events
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::CompactionStart(start) => Some(start.trigger.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>();
    assert_eq!(starts[..2], ["background", "pre_step"]);
    let checkpoint = checkpoints(events)[0];
    let at_commit = history.prefix(checkpoint.seq).unwrap();
    assert_eq!(steps_after_checkpoint(&at_commit), 3);
    assert_main_requests_replay(&history, &endpoint);
    let stats = harness.agent.compaction_stats();
    assert_eq!(
        (stats.discarded, stats.committed >= 1),
        (1, true),
        "{stats:?}"
    );
}

#[tokio::test]
async fn context_overflow_compacts_and_retries_the_request_once() {
    // The preset believes in a huge window, so only the endpoint's refusal can trigger.
    let endpoint = endpoint(Some(5000));
    let script = Arc::new(Mutex::new(Script::new(FILES, 16)));
    push_responders(&endpoint, &script, 40);
    let preset = preset(1_000_000, "keep_recent_steps = 2", "");
    let mut harness = Harness::new(&endpoint, preset, FILES, FILE_BYTES);

    let outcome = harness.turn("Read the files.").await;
    assert!(
        matches!(outcome, TurnOutcome::Answered { steps: 16, .. }),
        "{outcome:?}"
    );
    let violations = endpoint.take_violations();
    assert!(!violations.is_empty());
    assert!(
        violations.iter().all(|v| v.rule == Rule::ContextLength),
        "{violations:?}"
    );

    let history = harness.store().load(harness.session.id()).unwrap();
    let events = history.events();
    let overflows = events
        .iter()
        .filter(|event| matches!(&event.body, EventBody::RequestError(error) if error.class == "context_overflow"))
        .count();
    let overflow_compactions = events
        .iter()
        .filter(|event| matches!(&event.body, EventBody::CompactionStart(start) if start.trigger == "overflow"))
        .count();
    assert_eq!(overflows, violations.len());
    assert_eq!(overflow_compactions, overflows);
    // After the first refusal the loop uses the window the provider stated, so later
    // compactions happen before a step instead of after another refusal.
    assert_eq!(overflows, 1);
    assert!(ends(events, "committed").len() >= overflows);
    // Each refused request was followed by exactly one retry that the endpoint served.
    assert_eq!(
        history.n_requests() as usize,
        main_bodies(&endpoint).len() + overflows
    );
    assert_main_requests_replay(&history, &endpoint);
    let learned = events.iter().find_map(|event| match &event.body {
        EventBody::RequestError(error) => error.context_window,
        _ => None,
    });
    assert_eq!(
        learned,
        Some(5000),
        "the stated window is recorded with the error"
    );

    // A new process continuing the session (`agent-lsp run --session`) knows the window from
    // the log: it compacts before a step instead of overflowing once more first.
    harness.new_process(&endpoint, preset_for_new_process());
    push_responders(&endpoint, &script, 40);
    let outcome = harness.turn("Read the files again.").await;
    assert!(
        matches!(outcome, TurnOutcome::Answered { .. }),
        "{outcome:?}"
    );
    assert_eq!(endpoint.take_violations(), [], "no second overflow");
    let history = harness.store().load(harness.session.id()).unwrap();
    let overflows = history
        .events()
        .iter()
        .filter(|event| matches!(&event.body, EventBody::RequestError(error) if error.class == "context_overflow"))
        .count();
    assert_eq!(overflows, 1);
}

/// The preset of [`context_overflow_compacts_and_retries_the_request_once`], as a new process
/// would load it again (it still believes in a huge window).
fn preset_for_new_process() -> agent_lsp::preset::Preset {
    preset(1_000_000, "keep_recent_steps = 2", "")
}

#[tokio::test]
async fn a_failed_summary_leaves_the_surface_as_it_was_and_three_failures_stop_auto_compaction() {
    let endpoint = endpoint(None);
    let mut script = Script::new(FILES, 20);
    script.fail_summaries = Some(400);
    let script = Arc::new(Mutex::new(script));
    push_responders(&endpoint, &script, 40);
    let preset = preset(
        8000,
        "soft_ratio = 0.5\nhard_ratio = 0.75\nkeep_recent_steps = 2\nbackground = false",
        "",
    );
    let mut harness = Harness::new(&endpoint, preset, FILES, FILE_BYTES);

    let outcome = harness.turn("Read the files.").await;
    assert!(
        matches!(outcome, TurnOutcome::Answered { steps: 20, .. }),
        "{outcome:?}"
    );
    // The summary calls were refused with a scripted 400 (not a rule violation), three times,
    // and then no more were made.
    assert_eq!(script.lock().unwrap().summary_requests, 3);
    endpoint.assert_no_violations();

    let history = harness.store().load(harness.session.id()).unwrap();
    let events = history.events();
    let failed = ends(events, "failed");
    assert_eq!(failed.len(), 3);
    let flags = failed
        .iter()
        .map(|event| match &event.body {
            EventBody::CompactionEnd(end) => end.auto_disabled,
            _ => unreachable!(),
        })
        .collect::<Vec<_>>();
    assert_eq!(flags, [false, false, true]);
    assert!(checkpoints(events).is_empty());
    assert_eq!(history.generation(), 0, "the surface never changed");
    // Every request extends the one before: nothing of the history was replaced.
    let mains = main_bodies(&endpoint);
    for pair in mains.windows(2) {
        assert!(messages(&pair[1]).starts_with(messages(&pair[0])));
    }
    let notices = harness.notices.0.lock().unwrap().clone();
    assert_eq!(notices.len(), 3, "{notices:?}");
    assert!(
        notices[2].contains("automatic compaction is stopped for this session"),
        "{notices:?}"
    );
    assert_main_requests_replay(&history, &endpoint);
}

#[tokio::test]
async fn recall_history_returns_a_shadowed_tool_result_verbatim() {
    let endpoint = endpoint(None);
    let script = Arc::new(Mutex::new(Script::new(FILES, 18)));
    let recalled = Arc::new(Mutex::new(None::<String>));
    for _ in 0..40 {
        let script = script.clone();
        let recalled = recalled.clone();
        endpoint.push(Reply::from_fn(move |request| {
            let compacted = request.messages.iter().any(|message| {
                message
                    .content
                    .as_deref()
                    .is_some_and(|text| text.starts_with("<compacted-summary"))
            });
            let mut recalled = recalled.lock().unwrap();
            if compacted && !is_summary_request(request) && recalled.is_none() {
                *recalled = Some(String::new());
                return agent_tests::model_endpoint::ModelTurn::new()
                    .reasoning("I need the first file again, verbatim.")
                    .tool_call_with_id("recall-1", "recall_history", r#"{"tool_call_id":"read-1"}"#)
                    .into();
            }
            if let Some(text) = request.tool_result("recall-1")
                && recalled.as_deref() == Some("")
            {
                *recalled = Some(text.to_owned());
            }
            drop(recalled);
            script.lock().unwrap().reply(request)
        }));
    }
    let preset = preset(
        8000,
        "soft_ratio = 0.5\nhard_ratio = 0.75\nkeep_recent_steps = 2\nbackground = false",
        "",
    );
    let mut harness = Harness::new(&endpoint, preset, FILES, FILE_BYTES);

    harness.turn("Read the files.").await;
    endpoint.assert_no_violations();

    let history = harness.store().load(harness.session.id()).unwrap();
    let original = history
        .events()
        .iter()
        .find_map(|event| match &event.body {
            EventBody::ToolResult(result) if result.call_id == "read-1" => {
                Some(result.text.clone())
            }
            _ => None,
        })
        .unwrap();
    assert!(original.contains("file 1 line 40: alpha"), "{original}");
    let recalled = recalled.lock().unwrap().clone().expect("recall was made");
    assert!(
        recalled.contains(&original),
        "the recalled text does not hold the original result verbatim:\n{recalled}"
    );
    assert!(recalled.contains("tool call read-1"), "{recalled}");
    // It was shadowed: the request that asked for it no longer carried the original result.
    let recall_result = history
        .events()
        .iter()
        .find_map(|event| match &event.body {
            EventBody::ToolResult(result) if result.call_id == "recall-1" => Some(result),
            _ => None,
        })
        .unwrap();
    assert_eq!(recall_result.text, recalled);
    let mains = main_bodies(&endpoint);
    let asked = mains
        .iter()
        .position(|body| body.to_string().contains("recall-1"))
        .unwrap();
    assert!(
        !messages(&mains[asked - 1])
            .iter()
            .any(|m| m["tool_call_id"] == "read-1")
    );
}
