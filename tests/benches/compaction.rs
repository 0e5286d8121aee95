//! The cache-stability run: a scripted 150-step session (5 turns of 30 steps) through
//! the library's agent loop against the loopback model endpoint's prefix-cache simulation, with
//! a tool call and thinking on every step, the runtime context changing (the git branch moves
//! every 20 steps), old oversized results pruned, a context edit before the fourth turn (the
//! user folds the largest old tool result into a note, as in `agent.context.edit`), and several
//! compactions (soft 0.7, hard 0.8, keep the last 4 steps). Each workload runs once with
//! background checkpoints and once without; the bench prints one Markdown table for
//! BENCHMARKS.md.
//!
//! Two workloads, so that neither hides the other:
//!
//! - **realistic**, run in two windows (the standard preset's 128k would compact at most once in
//!   150 steps): 48 000 tokens, where the session compacts twice, the least a run must show,
//!   and 32 000 tokens, where it compacts four times. How often a session compacts is what
//!   moves the cache share, so both are reported. Tool
//!   results of the sizes a real coding session produces, in a fixed 20-step cycle: 5
//!   `lsp_definition`/`lsp_hover` answers of 200–400 B, 4 `grep` outputs of 1–2 kB, 6 `read`s of
//!   2–8 kB, 4 `edit` diffs of about 1 kB and 1 `list` of 600 B; on top of that a 20 kB `read` at
//!   steps 17, 47, 77, 107 and 137 (over the pruner's 8192-character threshold). The scripted
//!   model issues every call as a `read` of a workspace file rewritten to the step's size just
//!   before the call: the tool's name does not matter to the cache, the size of its result does;
//! - **worst case**, in a 64 000-token window (the workload of the first version of this bench):
//!   every step reads a whole 6 kB file, and every tenth step a 23 kB one. Every request adds
//!   about 1 550 new tokens, which no cache can serve, so this workload cannot reach 95 %.
//!
//! Misses are split by cause: tokens new since the previous loop request (appended: no cache
//! can serve them), and tokens lost because the request changed earlier than its end, charged
//! to what sits at the first message that differs from the previous loop request (a
//! `<compacted-summary>` checkpoint: compaction; a shortened tool result: pruning; a
//! `<folded-context>`: the context edit; anything else: other).
//!
//! Run: `cargo bench -p agent-tests --bench compaction`

#![allow(clippy::print_stdout)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_lsp::context_editor::ops::{BatchOptions, EditOp, FOLD_TAG, apply_batch};
use agent_lsp::session::event::EventBody;
use agent_tests::compaction_harness::{
    Harness, Script, is_summary_body, preset, push_responders, set_branch,
};
use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint};
use serde_json::Value;

const STEPS: usize = 150;
const TURNS: usize = 5;
const SUMMARY_DELAY: Duration = Duration::from_millis(400);
const STEP_DELAY: Duration = Duration::from_millis(5);
/// `read` adds a 7-character line number to every line of `LINE_BYTES`.
const LINE_BYTES: usize = 72;

/// Result sizes (bytes as the model sees them) of one 20-step cycle of the realistic workload.
const REALISTIC_CYCLE: [usize; 20] = [
    300,   // lsp_definition
    1_500, // grep
    4_000, // read
    1_000, // edit diff
    400,   // lsp_hover
    6_000, // read
    1_200, // grep
    250,   // lsp_definition
    900,   // edit diff
    2_500, // read
    350,   // lsp_hover
    2_000, // grep
    8_000, // read
    1_100, // edit diff
    600,   // list
    3_000, // read
    200,   // lsp_definition
    1_000, // grep
    5_000, // read
    1_000, // edit diff
];
/// The occasional large read of the realistic workload, every 30 steps from step 17.
const REALISTIC_LARGE: usize = 20_000;

#[derive(Clone, Copy, PartialEq)]
enum Workload {
    Realistic,
    WorstCase,
}

impl Workload {
    /// The size of the result of step `n` (1-based), for the realistic workload.
    fn result_bytes(n: usize) -> usize {
        if n % 30 == 17 {
            REALISTIC_LARGE
        } else {
            REALISTIC_CYCLE[(n - 1) % REALISTIC_CYCLE.len()]
        }
    }
}

/// `bytes` of distinct lines for step `n`, sized so that `read`'s numbered lines come to about
/// `bytes`.
/// Before this turn, the user folds a result with the context editor (`agent.context.edit`).
const CONTEXT_EDIT_BEFORE_TURN: usize = 3;

/// What a user does in the context editor between turns: fold the largest tool result that is
/// not among the last steps into a one-line note of their own. Returns the characters of the
/// result before and after.
fn fold_the_largest_old_result(harness: &mut Harness) -> (usize, usize) {
    let history = harness.session.history();
    let entries = history.surface().entries();
    let (seq, size) = entries[..entries.len().saturating_sub(8)]
        .iter()
        .filter_map(|entry| match &history.event(entry.seq)?.body {
            EventBody::ToolResult(result) => Some((entry.seq, result.text.len())),
            _ => None,
        })
        .max_by_key(|(_, size)| *size)
        .expect("an old tool result on the surface");
    let options = BatchOptions::between_turns(history, "editor", false);
    let fold = EditOp::Fold {
        id: seq,
        end: None,
        summary: Some("A long file read; nothing in it matters for the rest of the task.".into()),
    };
    apply_batch(&mut harness.session, &[fold], &options).expect("the context edit applies");
    let history = harness.session.history();
    let after = history
        .surface()
        .entries()
        .iter()
        .rev()
        .filter_map(|entry| match &history.event(entry.seq)?.body {
            EventBody::ToolResult(result) if result.text.starts_with(&format!("<{FOLD_TAG}")) => {
                Some(result.text.len())
            }
            _ => None,
        })
        .next()
        .expect("the folded result is on the surface");
    (size, after)
}

fn content(n: usize, bytes: usize) -> String {
    let lines = (bytes / (LINE_BYTES + 7)).max(1);
    let mut text = String::with_capacity(lines * (LINE_BYTES + 1));
    for line in 0..lines {
        let mut row = format!("step {n} line {line}: alpha beta gamma delta epsilon zeta eta ");
        while row.len() < LINE_BYTES - 1 {
            row.push('x');
        }
        row.push('\n');
        text.push_str(&row);
    }
    text
}

#[derive(Default)]
struct Figures {
    prompt_tokens: u64,
    cached_tokens: u64,
    main_prompt_tokens: u64,
    main_cached_tokens: u64,
    /// Loop-request tokens missed because they were new since the previous loop request: no
    /// cache can serve those.
    new_tokens: u64,
    /// Loop-request tokens missed because a checkpoint replaced the start of the history.
    lost_to_compaction: u64,
    /// Loop-request tokens missed because an old tool result was shortened.
    lost_to_pruning: u64,
    /// Loop-request tokens missed because the user's context edit folded an old result.
    lost_to_context_edit: u64,
    /// Loop-request tokens missed for any other change before the request's end.
    lost_other: u64,
    /// Characters of the result the context edit folded, and of what replaced it.
    context_edit: (usize, usize),
    violations: usize,
    committed: usize,
    discarded: usize,
    pruned: usize,
    /// Requests in which at least one result was shortened (each is one cache break at most).
    pruning_requests: usize,
    runtime_contexts: usize,
    summary_requests: usize,
    waited: Duration,
    longest_wait: Duration,
    wall: Duration,
}

fn run(workload: Workload, window: u64, background: bool) -> Figures {
    let endpoint = ModelEndpoint::start(
        EndpointConfig::default()
            .context_window(window)
            .reasoning_in_tool_stretches(true),
    )
    .expect("endpoint");
    let files = 12;
    let mut script = Script::new(files, STEPS / TURNS);
    script.summary_delay = SUMMARY_DELAY;
    script.step_delay = STEP_DELAY;
    let script = Arc::new(Mutex::new(script));
    push_responders(&endpoint, &script, STEPS * 2);
    let compaction = format!(
        "soft_ratio = 0.7\nhard_ratio = 0.8\nkeep_recent_steps = 4\nbackground = {background}"
    );
    let preset = preset(
        window,
        &compaction,
        "[plugins.tool_result_pruner]\nenabled = true\n",
    );
    let mut harness = Harness::new(&endpoint, preset, files, 6_000);
    let root = harness.workspace.path().to_owned();
    if workload == Workload::WorstCase {
        // One large file, read every tenth step; over the pruner's 8192-character threshold.
        std::fs::write(
            root.join("src/large.txt"),
            "large file line with some words in it\n".repeat(600),
        )
        .expect("large file");
        script.lock().expect("script").large = Some((10, "src/large.txt".into()));
    }
    script.lock().expect("script").on_main = Some(Box::new(move |n, _request| {
        // The runtime context changes every 20 steps.
        if n.is_multiple_of(20) {
            set_branch(&root, &format!("topic-{}", n / 20));
        }
        if workload == Workload::Realistic {
            // The file this step reads gets the size of this step's result.
            let text = content(n, Workload::result_bytes(n));
            std::fs::write(root.join(format!("src/file{}.txt", n % files)), text)
                .expect("step file");
        }
    }));

    let mut figures_edit = None;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let started = Instant::now();
    runtime.block_on(async {
        for turn in 0..TURNS {
            if turn == CONTEXT_EDIT_BEFORE_TURN {
                figures_edit = Some(fold_the_largest_old_result(&mut harness));
            }
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

    let stats = harness.agent.compaction_stats();
    let mut figures = Figures {
        context_edit: figures_edit.expect("the context edit ran"),
        violations: endpoint.violations().len(),
        waited: stats.waited,
        longest_wait: stats.longest_wait,
        wall,
        ..Figures::default()
    };
    let mut previous: Option<(u64, Vec<Value>)> = None;
    for request in &endpoint.chat_requests() {
        let (Some(usage), Some(body)) = (&request.usage, &request.body) else {
            continue;
        };
        figures.prompt_tokens += usage.prompt_tokens;
        figures.cached_tokens += usage.prompt_cache_hit_tokens;
        if is_summary_body(body) {
            figures.summary_requests += 1;
            continue;
        }
        figures.main_prompt_tokens += usage.prompt_tokens;
        figures.main_cached_tokens += usage.prompt_cache_hit_tokens;
        let missed = usage.prompt_tokens - usage.prompt_cache_hit_tokens;
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let Some((previous_prompt, previous_messages)) =
            previous.replace((usage.prompt_tokens, messages.clone()))
        else {
            figures.new_tokens += missed;
            continue;
        };
        let unavoidable = usage
            .prompt_tokens
            .saturating_sub(previous_prompt / 64 * 64)
            .min(missed);
        figures.new_tokens += unavoidable;
        let lost = missed - unavoidable;
        if lost == 0 {
            continue;
        }
        let first_change = messages
            .iter()
            .zip(&previous_messages)
            .position(|(now, before)| now != before);
        let cause = first_change.map(|at| &messages[at]);
        let text = cause.and_then(|message| message["content"].as_str());
        if text.is_some_and(|text| text.starts_with("<compacted-summary")) {
            figures.lost_to_compaction += lost;
        } else if text.is_some_and(|text| text.starts_with(&format!("<{FOLD_TAG}"))) {
            figures.lost_to_context_edit += lost;
        } else if text.is_some_and(|text| text.contains("pruned from this old tool result")) {
            figures.lost_to_pruning += lost;
        } else {
            figures.lost_other += lost;
        }
    }
    let history = harness.store().load(harness.session.id()).expect("log");
    let mut pruned_steps = std::collections::BTreeSet::new();
    for event in history.events() {
        match &event.body {
            EventBody::CompactionEnd(end) if end.outcome == "committed" => figures.committed += 1,
            EventBody::CompactionEnd(end) if end.outcome == "discarded" => figures.discarded += 1,
            EventBody::ToolResult(result) if result.meta.get("pruned").is_some() => {
                figures.pruned += 1;
                pruned_steps.insert((event.turn, event.step));
            }
            EventBody::RuntimeContext(_) => figures.runtime_contexts += 1,
            _ => {}
        }
    }
    figures.pruning_requests = pruned_steps.len();
    // The run is meant to have at least two compactions; a window where fewer happen measures
    // something else.
    assert!(
        figures.committed >= 2,
        "only {} compactions in a {window}-token window",
        figures.committed
    );
    figures
}

fn share(part: u64, whole: u64) -> String {
    format!("{:.1} %", part as f64 * 100.0 / whole.max(1) as f64)
}

fn main() {
    let columns = [
        (Workload::Realistic, 48_000, "realistic, 48k"),
        (Workload::Realistic, 32_000, "realistic, 32k"),
        (Workload::WorstCase, 64_000, "worst case, 64k"),
    ];
    let mut header = "| measure |".to_owned();
    let mut rule = "|---|".to_owned();
    let mut runs = Vec::new();
    for (workload, window, name) in columns {
        for (background, mode) in [(true, "background"), (false, "synchronous")] {
            runs.push(run(workload, window, background));
            header.push_str(&format!(" {name}, {mode} |"));
            rule.push_str("---|");
        }
    }
    println!("{header}\n{rule}");
    let row = |name: &str, cell: &dyn Fn(&Figures) -> String| {
        let cells = runs.iter().map(cell).collect::<Vec<_>>().join(" | ");
        println!("| {name} | {cells} |");
    };
    row("prompt tokens served from cache, all requests", &|f| {
        format!(
            "{} ({} of {})",
            share(f.cached_tokens, f.prompt_tokens),
            f.cached_tokens,
            f.prompt_tokens
        )
    });
    row(
        "prompt tokens served from cache, loop requests only",
        &|f| share(f.main_cached_tokens, f.main_prompt_tokens),
    );
    row(
        "loop-request tokens new since the previous request (no cache can serve them)",
        &|f| share(f.new_tokens, f.main_prompt_tokens),
    );
    row("loop-request tokens lost to compaction", &|f| {
        share(f.lost_to_compaction, f.main_prompt_tokens)
    });
    row("loop-request tokens lost to pruning", &|f| {
        share(f.lost_to_pruning, f.main_prompt_tokens)
    });
    row("loop-request tokens lost to the context edit", &|f| {
        share(f.lost_to_context_edit, f.main_prompt_tokens)
    });
    row(
        "context edit: the folded result, characters before → after",
        &|f| format!("{} → {}", f.context_edit.0, f.context_edit.1),
    );
    row("loop-request tokens lost to other changes", &|f| {
        share(f.lost_other, f.main_prompt_tokens)
    });
    row("protocol violations", &|f| f.violations.to_string());
    row("compactions committed (discarded candidates)", &|f| {
        format!("{} ({})", f.committed, f.discarded)
    });
    row("summary requests", &|f| f.summary_requests.to_string());
    row("tool results pruned (in how many requests)", &|f| {
        format!("{} ({})", f.pruned, f.pruning_requests)
    });
    row("runtime-context messages", &|f| {
        f.runtime_contexts.to_string()
    });
    row("pre-step wait for compaction, total (longest)", &|f| {
        format!(
            "{:.0} ms ({:.0} ms)",
            f.waited.as_secs_f64() * 1e3,
            f.longest_wait.as_secs_f64() * 1e3
        )
    });
    row("wall time of the 150 steps", &|f| {
        format!("{:.1} s", f.wall.as_secs_f64())
    });
}
