//! The cache-stability run (issue 8): a scripted 150-step session through the library's agent
//! loop against the loopback model endpoint's prefix-cache simulation, with tool calls, thinking
//! on every step, runtime-context changes (the git branch moves), old oversized results pruned,
//! and several compactions. Run once with background checkpoints and once without; prints a
//! Markdown table for BENCHMARKS.md.
//!
//! Run: `cargo bench -p agent-tests --bench compaction`

#![allow(clippy::print_stdout)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_lsp::session::event::EventBody;
use agent_tests::compaction_harness::{
    Harness, Script, is_summary_body, preset, push_responders, set_branch,
};
use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint};

const STEPS: usize = 150;
const TURNS: usize = 5;
const WINDOW: u64 = 64_000;
const FILES: usize = 12;
const FILE_BYTES: usize = 6_000;
/// Every this many steps the model reads one large file, which the pruner shortens later.
const LARGE_EVERY: usize = 10;
const SUMMARY_DELAY: Duration = Duration::from_millis(400);
const STEP_DELAY: Duration = Duration::from_millis(5);

struct Figures {
    prompt_tokens: u64,
    cached_tokens: u64,
    main_prompt_tokens: u64,
    main_cached_tokens: u64,
    /// Loop-request tokens missed because they were new since the previous loop request: no
    /// cache can serve those.
    new_tokens: u64,
    violations: usize,
    committed: usize,
    discarded: usize,
    pruned: usize,
    runtime_contexts: usize,
    summary_requests: usize,
    waited: Duration,
    longest_wait: Duration,
    wall: Duration,
}

fn run(background: bool) -> Figures {
    let endpoint = ModelEndpoint::start(
        EndpointConfig::default()
            .context_window(WINDOW)
            .reasoning_in_tool_stretches(true),
    )
    .expect("endpoint");
    let mut script = Script::new(FILES, STEPS / TURNS);
    script.summary_delay = SUMMARY_DELAY;
    script.step_delay = STEP_DELAY;
    let script = Arc::new(Mutex::new(script));
    push_responders(&endpoint, &script, STEPS * 2);
    let compaction = format!(
        "soft_ratio = 0.6\nhard_ratio = 0.8\nkeep_recent_steps = 4\nbackground = {background}"
    );
    let preset = preset(
        WINDOW,
        &compaction,
        "[plugins.tool_result_pruner]\nenabled = true\n",
    );
    let mut harness = Harness::new(&endpoint, preset, FILES, FILE_BYTES);
    // One large file, read now and then; over the pruner's 8192-character threshold.
    std::fs::write(
        harness.workspace.path().join("src/large.txt"),
        "large file line with some words in it\n".repeat(600),
    )
    .expect("large file");
    let root = harness.workspace.path().to_owned();
    script.lock().expect("script").on_main = Some(Box::new(move |n, _request| {
        // The runtime context changes every 20 steps.
        if n.is_multiple_of(20) {
            set_branch(&root, &format!("topic-{}", n / 20));
        }
    }));
    script.lock().expect("script").large = Some((LARGE_EVERY, "src/large.txt".into()));

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let started = Instant::now();
    runtime.block_on(async {
        for turn in 0..TURNS {
            let outcome = harness
                .turn(&format!("Part {turn}: read the files in src/ and report."))
                .await;
            assert!(
                matches!(outcome, agent_lsp::agent::TurnOutcome::Answered { .. }),
                "{outcome:?}"
            );
        }
    });
    let wall = started.elapsed();

    let requests = endpoint.chat_requests();
    let mut figures = Figures {
        prompt_tokens: 0,
        cached_tokens: 0,
        main_prompt_tokens: 0,
        main_cached_tokens: 0,
        new_tokens: 0,
        violations: endpoint.violations().len(),
        committed: 0,
        discarded: 0,
        pruned: 0,
        runtime_contexts: 0,
        summary_requests: 0,
        waited: harness.agent.compaction_stats().waited,
        longest_wait: harness.agent.compaction_stats().longest_wait,
        wall,
    };
    let mut previous_prompt = 0;
    for request in &requests {
        let Some(usage) = &request.usage else {
            continue;
        };
        figures.prompt_tokens += usage.prompt_tokens;
        figures.cached_tokens += usage.prompt_cache_hit_tokens;
        if request.body.as_ref().is_some_and(is_summary_body) {
            figures.summary_requests += 1;
        } else {
            figures.main_prompt_tokens += usage.prompt_tokens;
            figures.main_cached_tokens += usage.prompt_cache_hit_tokens;
            let unavoidable = usage
                .prompt_tokens
                .saturating_sub(previous_prompt / 64 * 64)
                .min(usage.prompt_tokens - usage.prompt_cache_hit_tokens);
            figures.new_tokens += unavoidable;
            previous_prompt = usage.prompt_tokens;
        }
    }
    let history = harness.store().load(harness.session.id()).expect("log");
    for event in history.events() {
        match &event.body {
            EventBody::CompactionEnd(end) if end.outcome == "committed" => figures.committed += 1,
            EventBody::CompactionEnd(end) if end.outcome == "discarded" => figures.discarded += 1,
            EventBody::ToolResult(result) if result.meta.get("pruned").is_some() => {
                figures.pruned += 1
            }
            EventBody::RuntimeContext(_) => figures.runtime_contexts += 1,
            _ => {}
        }
    }
    figures
}

fn share(part: u64, whole: u64) -> String {
    format!("{:.1} %", part as f64 * 100.0 / whole.max(1) as f64)
}

fn main() {
    let with = run(true);
    let without = run(false);
    println!("| measure | background checkpoints | synchronous only |\n|---|---|---|");
    let row = |name: &str, a: String, b: String| println!("| {name} | {a} | {b} |");
    row(
        "prompt tokens served from cache, all requests",
        format!(
            "{} ({} of {})",
            share(with.cached_tokens, with.prompt_tokens),
            with.cached_tokens,
            with.prompt_tokens
        ),
        format!(
            "{} ({} of {})",
            share(without.cached_tokens, without.prompt_tokens),
            without.cached_tokens,
            without.prompt_tokens
        ),
    );
    row(
        "prompt tokens served from cache, loop requests only",
        share(with.main_cached_tokens, with.main_prompt_tokens),
        share(without.main_cached_tokens, without.main_prompt_tokens),
    );
    row(
        "loop-request tokens new since the previous request (no cache can serve them)",
        share(with.new_tokens, with.main_prompt_tokens),
        share(without.new_tokens, without.main_prompt_tokens),
    );
    row(
        "loop-request tokens missed for other reasons (compaction, pruning, runtime context)",
        share(
            with.main_prompt_tokens - with.main_cached_tokens - with.new_tokens,
            with.main_prompt_tokens,
        ),
        share(
            without.main_prompt_tokens - without.main_cached_tokens - without.new_tokens,
            without.main_prompt_tokens,
        ),
    );
    row(
        "protocol violations",
        with.violations.to_string(),
        without.violations.to_string(),
    );
    row(
        "compactions committed (discarded candidates)",
        format!("{} ({})", with.committed, with.discarded),
        format!("{} ({})", without.committed, without.discarded),
    );
    row(
        "summary requests",
        with.summary_requests.to_string(),
        without.summary_requests.to_string(),
    );
    row(
        "tool results pruned",
        with.pruned.to_string(),
        without.pruned.to_string(),
    );
    row(
        "runtime-context messages",
        with.runtime_contexts.to_string(),
        without.runtime_contexts.to_string(),
    );
    row(
        "pre-step wait for compaction, total (longest)",
        format!(
            "{:.0} ms ({:.0} ms)",
            with.waited.as_secs_f64() * 1e3,
            with.longest_wait.as_secs_f64() * 1e3
        ),
        format!(
            "{:.0} ms ({:.0} ms)",
            without.waited.as_secs_f64() * 1e3,
            without.longest_wait.as_secs_f64() * 1e3
        ),
    );
    row(
        "wall time of the 150 steps",
        format!("{:.1} s", with.wall.as_secs_f64()),
        format!("{:.1} s", without.wall.as_secs_f64()),
    );
}
