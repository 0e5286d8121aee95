//! Plans end to end: the `todo` tool over a 30-step session of `agent-lsp run` (the real binary,
//! the `standard` preset, the loopback model endpoint and its prefix-cache simulation): the list
//! reaches the model as runtime context once per change and never through the system prompt, the
//! cache keeps serving at least 95 % of the prompt tokens, progress shows each change, and the
//! turn that answers with items open says so and exits 4; `session show` and the trajectory show
//! the plan. And the session's goal, verbatim after two compactions (the library's loop with a
//! small window), then a goal set as `agent.goal.set` records it carried by the next one; and
//! the editor's side: `agent.goal.set`, the plan in `agent.status`, `$/progress` and a turn's
//! answer.

use std::sync::{Arc, Mutex};

use agent_lsp::plans;
use agent_lsp::session::History;
use agent_lsp::session::event::{EventBody, EventKind};
use agent_tests::compaction_harness::{Harness, Next, Script, is_summary_body, push_responders};
use agent_tests::editor::Editor;
use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, ModelTurn};
use serde_json::{Value, json};

type Fixture = agent_tests::cli::CliFixture;

const FILES: usize = 8;

fn fixture() -> Fixture {
    let fixture = Fixture::new("");
    agent_tests::compaction_harness::write_files(fixture.workspace.path(), FILES, 400);
    fixture
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A `todo` call's arguments.
fn todo(items: &[(&str, &str)]) -> String {
    json!({"items": items.iter().map(|(text, status)| json!({"text": text, "status": status})).collect::<Vec<_>>()})
        .to_string()
}

/// The `<todo>` message of a list, as the model must read it.
fn rendered(items: &[(&str, &str)]) -> String {
    let lines = items
        .iter()
        .map(|(text, status)| {
            let mark = match *status {
                "done" => "[x]",
                "in_progress" => "[>]",
                _ => "[ ]",
            };
            format!("{mark} {text}")
        })
        .collect::<Vec<_>>();
    format!("<todo>\n{}\n</todo>", lines.join("\n"))
}

/// The `context/runtime` events of the plans plugin: (seq, step, text).
fn plan_contexts(history: &History) -> Vec<(u64, u32, String)> {
    history
        .events()
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::RuntimeContext(context) if context.source.as_deref() == Some("plans") => {
                Some((event.seq, event.step, context.text.clone()))
            }
            _ => None,
        })
        .collect()
}

const A: &[(&str, &str)] = &[
    ("Read the sources", "in_progress"),
    ("Find where the lines are numbered", "pending"),
    ("Write the summary", "pending"),
];
const B: &[(&str, &str)] = &[
    ("Read the sources", "done"),
    ("Find where the lines are numbered", "in_progress"),
    ("Write the summary", "pending"),
];
const C: &[(&str, &str)] = &[
    ("Read the sources", "done"),
    ("Find where the lines are numbered", "done"),
    ("Write the summary", "in_progress"),
];
const D: &[(&str, &str)] = &[
    ("Read the sources", "done"),
    ("Find where the lines are numbered", "done"),
    ("Write the summary", "done"),
    ("Check the numbers again", "pending"),
];

#[test]
fn todo_over_a_30_step_session_reaches_the_model_once_per_change_and_keeps_the_cache() {
    let fixture = fixture();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    // The model's 30 steps: the plan written, changed three times, sent once more unchanged and
    // once broken (two items in progress), and reads of the workspace's files in between; the
    // last step answers with one item still open.
    let calls: Vec<(usize, String)> = vec![
        (1, todo(A)),
        (8, todo(B)),
        (12, todo(B)),
        (15, todo(C)),
        (
            18,
            todo(&[
                ("Write the summary", "in_progress"),
                ("Check", "in_progress"),
            ]),
        ),
        (22, todo(D)),
    ];
    for step in 1..=30 {
        let turn = ModelTurn::new().reasoning(format!("Step {step}: what next."));
        let turn = match calls.iter().find(|(at, _)| *at == step) {
            Some((_, arguments)) => turn.tool_call("todo", arguments.clone()),
            None if step < 30 => turn.tool_call(
                "read",
                json!({"path": format!("src/file{}.txt", step % FILES)}).to_string(),
            ),
            None => turn.content("The lines are numbered in `read`; the summary is written."),
        };
        endpoint.push(turn);
    }
    let output = fixture.run(&[
        "run",
        "--base-url",
        &endpoint.base_url(),
        "Summarize how the files in src/ are numbered.",
    ]);
    let stderr = text(&output.stderr);
    endpoint.assert_no_violations();

    // The turn answered with an item open: a line naming it, and exit code 4.
    assert_eq!(output.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains(
            "agent-lsp: 1 plan item is still open: [ ] Check the numbers again\nsession "
        ),
        "{stderr}"
    );
    // Progress shows the plan each time it changed, and says when a call changed nothing.
    let plan_lines = stderr
        .lines()
        .filter(|line| line.starts_with("✓ todo"))
        .collect::<Vec<_>>();
    assert_eq!(
        plan_lines,
        [
            "✓ todo → plan 0/3 done, now: Read the sources",
            "✓ todo → plan 1/3 done, now: Find where the lines are numbered",
            "✓ todo → plan unchanged",
            "✓ todo → plan 2/3 done, now: Write the summary",
            "✓ todo → plan 3/4 done, next: Check the numbers again",
        ],
        "{stderr}"
    );
    assert!(
        stderr.contains("\n✗ todo → error: 2 items are in_progress (items 1, 2), and at most"),
        "{stderr}"
    );

    let store = fixture.store();
    let history = store.load("last").unwrap();
    assert_eq!(history.n_requests(), 30);
    // The list entered the session as runtime context exactly once per change, in the step
    // right after the call that changed it.
    let contexts = plan_contexts(&history);
    assert_eq!(
        contexts
            .iter()
            .map(|(_, step, text)| (*step, text.clone()))
            .collect::<Vec<_>>(),
        [
            (2, rendered(A)),
            (9, rendered(B)),
            (16, rendered(C)),
            (23, rendered(D)),
        ]
    );
    // The model saw each of them in every request from then on, and never in the system prompt.
    let bodies = endpoint
        .chat_requests()
        .into_iter()
        .map(|request| request.body.unwrap())
        .collect::<Vec<_>>();
    assert_eq!(bodies.len(), 30);
    for (index, body) in bodies.iter().enumerate() {
        let step = index as u32 + 1;
        let messages = body["messages"].as_array().unwrap();
        let system = messages[0]["content"].as_str().unwrap();
        assert!(!system.contains("<todo>"), "request {step}: {system}");
        let seen = messages
            .iter()
            .filter(|message| {
                message["role"] == "user"
                    && message["content"]
                        .as_str()
                        .is_some_and(|text| text.starts_with("<todo>"))
            })
            .count();
        let expected = contexts.iter().filter(|(_, at, _)| *at <= step).count();
        assert_eq!(seen, expected, "request {step}");
    }
    let digests = history
        .events()
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::RequestHeader(header) => Some(header.system_digest.clone()),
            _ => None,
        })
        .collect::<std::collections::BTreeSet<_>>();
    assert_eq!(digests.len(), 1, "the system prompt changed: {digests:?}");

    // The prefix cache: every request repeats the one before it and appends.
    let usages = endpoint
        .chat_requests()
        .into_iter()
        .map(|request| request.usage.unwrap())
        .collect::<Vec<_>>();
    let prompt: u64 = usages.iter().map(|usage| usage.prompt_tokens).sum();
    let hit: u64 = usages
        .iter()
        .map(|usage| usage.prompt_cache_hit_tokens)
        .sum();
    let share = hit as f64 / prompt as f64;
    // The first request has nothing to hit: its system prompt and catalog are new.
    let first = &usages[0];
    let later: (u64, u64) = usages[1..].iter().fold((0, 0), |(hit, prompt), usage| {
        (
            hit + usage.prompt_cache_hit_tokens,
            prompt + usage.prompt_tokens,
        )
    });
    eprintln!(
        "cache: {hit} of {prompt} prompt tokens over 30 requests ({:.2} %); the first request's {} all missed; requests 2-30: {:.2} %; {} plan contexts",
        share * 100.0,
        first.prompt_tokens,
        later.0 as f64 / later.1 as f64 * 100.0,
        contexts.len()
    );
    assert!(share >= 0.95, "cache-hit share {share:.4} ({hit}/{prompt})");
    assert!(later.0 as f64 >= 0.95 * later.1 as f64, "{later:?}");

    // The current plan, as the log says it, in `session show` and the trajectory.
    let (_, plan) = plans::current(&history).unwrap();
    assert_eq!(plan.open().count(), 1);
    let shown = fixture.run(&["session", "show", "last"]);
    let shown = text(&shown.stdout);
    assert!(
        shown.contains("goal       (first prompt) Summarize how the files in src/ are numbered.\n"),
        "{shown}"
    );
    assert!(
        shown.contains("plan       3/4 done, next: Check the numbers again (todo result 1")
            && shown.contains(
                "\n           [x] Write the summary\n           [ ] Check the numbers again\n"
            ),
        "{shown}"
    );
    let trajectory: Value = serde_json::from_slice(
        &fixture
            .run(&["session", "trajectory", "last", "--format", "json"])
            .stdout,
    )
    .unwrap();
    assert_eq!(trajectory["plan"]["open"], 1, "{}", trajectory["plan"]);
    assert_eq!(
        trajectory["plan"]["goal"],
        "Summarize how the files in src/ are numbered."
    );
    let todo_cells = trajectory["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|cell| cell["tool"]["name"] == "todo")
        .collect::<Vec<_>>();
    assert_eq!(todo_cells.len(), 6);
    // Five calls recorded a plan; the broken one did not.
    assert_eq!(
        todo_cells
            .iter()
            .filter(|cell| cell["plan"]["items"].is_array())
            .count(),
        5
    );
    // The HTML page renders them as checklists, and the current plan at the top.
    let page = crate::context_editor::artifacts_dir().join("plans-trajectory.html");
    let written = fixture.run(&[
        "session",
        "trajectory",
        "last",
        "--format",
        "html",
        "-o",
        page.to_str().unwrap(),
    ]);
    assert!(written.status.success(), "{}", text(&written.stderr));
    let dom = crate::context_editor::run_chromium(&[
        "--dump-dom".into(),
        format!("file://{}", page.display()),
    ]);
    let summary = crate::context_editor::between(&dom, "<pre id=\"render-summary\">", "</pre>");
    let summary: Value = serde_json::from_str(&summary.replace("&quot;", "\"")).unwrap();
    assert_eq!(summary["plan_items"], 4, "{summary}");
    assert_eq!(summary["todo_cells_with_plan"], 5, "{summary}");

    // `session goal` prints the goal, and sets another, as `agent.goal.set` does.
    let goal = |args: &[&str]| {
        text(
            &fixture
                .run(&[&["session", "goal", "last"], args].concat())
                .stdout,
        )
    };
    assert_eq!(goal(&[]), "Summarize how the files in src/ are numbered.\n");
    assert!(goal(&["Count the lines too."]).starts_with("goal set (event "));
    assert_eq!(goal(&[]), "Count the lines too.\n");
}

#[test]
fn run_json_shows_each_plan_change_and_the_open_items_at_the_end() {
    let fixture = fixture();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all([
        ModelTurn::new().reasoning("Plan first.").tool_call(
            "todo",
            todo(&[("Read", "in_progress"), ("Answer", "pending")]),
        ),
        ModelTurn::new()
            .reasoning("Done reading.")
            .tool_call("todo", todo(&[("Read", "done"), ("Answer", "done")])),
        ModelTurn::new().content("All done."),
    ]);
    let output = fixture.run(&[
        "run",
        "--json",
        "--base-url",
        &endpoint.base_url(),
        "Read and answer.",
    ]);
    endpoint.assert_no_violations();
    // Every item done: an ordinary answer.
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let lines = text(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .collect::<Vec<_>>();
    let plans = lines
        .iter()
        .filter(|line| line["type"] == "plan")
        .map(|line| (line["done"].clone(), line["open"].clone()))
        .collect::<Vec<_>>();
    assert_eq!(plans, [(json!(0), json!(2)), (json!(2), json!(0))]);
    let end = lines.last().unwrap();
    assert_eq!(end["type"], "end");
    assert_eq!(end["outcome"], "answered");
    assert_eq!(end["open_items"], json!([]));
}

/// A goal with what a summary would lose: line breaks, runs of spaces, quotes, non-ASCII.
const GOAL: &str = "Make `parse_list()` accept a trailing comma,\n  but keep   the error for `[,]` exactly as it is: \"expected a value\" — ✓ naïve cases too.";

/// Let the scripted model answer (end the turn) after `steps` more steps.
fn answer_after(script: &Mutex<Script>, steps: usize) {
    let mut script = script.lock().unwrap();
    script.answer_every = script.main_requests + steps;
}

#[tokio::test]
async fn the_goal_survives_two_compactions_verbatim_and_a_goal_set_later_the_next_one() {
    let endpoint = ModelEndpoint::start(
        EndpointConfig::default()
            .reasoning_in_tool_stretches(true)
            .context_window(9000),
    )
    .unwrap();
    let script = Arc::new(Mutex::new(Script::new(6, 1000)));
    script.lock().unwrap().queued = vec![Next::Call("todo".into(), todo(A))];
    push_responders(&endpoint, &script, 200);
    let preset = agent_lsp::preset::Preset::parse(
        "plans-compaction",
        "the plans test preset",
        "description = \"plans and compaction\"\n\
         [model]\nthinking = \"enabled\"\nmax_steps = 200\ncontext_window = 8000\n\
         [tools]\nenabled = [\"read\", \"recall_history\", \"todo\"]\n\
         [permissions]\ndefault = \"allow\"\n\
         [plugins.plans]\nenabled = true\n\
         [plugins.compaction]\nenabled = true\nsoft_ratio = 0.5\nhard_ratio = 0.75\nkeep_recent_steps = 2\nbackground = false\n",
    )
    .unwrap();
    let mut harness = Harness::new(&endpoint, preset, 6, 2000);
    let mut turns = 0;
    while checkpoints(harness.session.history()).len() < 2 {
        turns += 1;
        assert!(turns <= 3, "no second compaction after {turns} turns");
        answer_after(&script, 14);
        let prompt = if turns == 1 { GOAL } else { "Go on." };
        harness.turn(prompt).await;
    }
    endpoint.assert_no_violations();
    let history = harness.store().load(harness.session.id()).unwrap();
    let checkpoints_before = checkpoints(&history);
    // The first prompt left the surface with the first fold; each checkpoint carries it
    // verbatim, from the log: the summaries the model wrote never mention it.
    let first_prompt = plans::goal(&history).unwrap();
    assert_eq!(first_prompt.text, GOAL);
    assert!(!history.surface().contains(first_prompt.seq));
    let block = format!("<goal>\n{GOAL}\n</goal>");
    for (seq, text) in &checkpoints_before {
        assert!(text.contains(&block), "checkpoint {seq}:\n{text}");
    }
    for event in history.events() {
        if let EventBody::CompactionSummary(summary) = &event.body {
            assert!(!summary.text.contains("trailing comma"), "{}", summary.text);
        }
    }
    // And the model had it, byte for byte, in every request: first as the prompt, then in the
    // checkpoint that replaced it.
    let in_json = |text: &str| {
        let quoted = serde_json::to_string(text).unwrap();
        quoted[1..quoted.len() - 1].to_owned()
    };
    let mains = endpoint
        .chat_requests()
        .into_iter()
        .filter_map(|request| request.body)
        .filter(|body| !is_summary_body(body))
        .map(|body| body.to_string())
        .collect::<Vec<_>>();
    assert!(mains.iter().all(|body| body.contains(&in_json(GOAL))));
    assert!(mains.last().unwrap().contains(&in_json(&block)));

    // A goal set as the editor's `agent.goal.set` sets it: shown to the model with the plan at
    // the next step, and carried by the next checkpoint instead of the first prompt.
    let set = plans::set_goal(
        &mut harness.session,
        "Trailing commas, nothing else.",
        "editor",
    )
    .unwrap();
    assert_eq!(plans::goal(harness.session.history()).unwrap(), set);
    let mut turns = 0;
    while checkpoints(harness.session.history()).len() == checkpoints_before.len() {
        turns += 1;
        assert!(turns <= 2, "no compaction after the goal was set");
        answer_after(&script, 14);
        harness.turn("Go on.").await;
    }
    endpoint.assert_no_violations();
    let history = harness.session.history().clone();
    let contexts = plan_contexts(&history);
    assert!(
        contexts.iter().any(|(_, _, text)| text
            .starts_with("<goal>\nTrailing commas, nothing else.\n</goal>\n<todo>\n")),
        "{contexts:?}"
    );
    let (_, newest) = checkpoints(&history).pop().unwrap();
    assert!(
        newest.contains("The session's goal (set by the programmer), verbatim:\n<goal>\nTrailing commas, nothing else.\n</goal>\n"),
        "{newest}"
    );
    assert!(!newest.contains(GOAL), "{newest}");
    eprintln!(
        "goal: {} checkpoints carried the first prompt verbatim, then the set goal; {} plan contexts",
        checkpoints_before.len(),
        contexts.len()
    );
}

/// The committed checkpoints: (seq, text).
fn checkpoints(history: &History) -> Vec<(u64, String)> {
    history
        .events()
        .iter()
        .filter(|event| event.kind() == EventKind::UserMessage)
        .filter_map(|event| match &event.body {
            EventBody::UserMessage(message) if message.origin == "compaction" => {
                Some((event.seq, message.text.clone()))
            }
            _ => None,
        })
        .collect()
}

/// `agent-lsp serve` for a workspace of text files, with the loopback model and `preset`.
fn serve(fixture: &Fixture, base_url: &str, preset: &str) -> Editor {
    let mut command = std::process::Command::new(agent_tests::workspace_bin("agent-lsp"));
    command
        .env("AGENT_LSP_STATE_DIR", fixture.state.path())
        .env("AGENT_LSP_CONFIG", &fixture.config)
        .env_remove("DEEPSEEK_API_KEY")
        .arg("--workspace")
        .arg(fixture.workspace.path())
        .arg("serve");
    let mut editor = Editor::start(command);
    editor.initialize_with(
        fixture.workspace.path(),
        json!({"baseUrl": base_url, "apiKey": "sk-test", "model": "deepseek-v4-flash", "preset": preset}),
    );
    editor
}

fn execute(editor: &mut Editor, command: &str, argument: Value) -> Value {
    editor.request(
        "workspace/executeCommand",
        json!({"command": command, "arguments": [argument]}),
    )
}

#[test]
fn the_editor_sets_the_goal_and_sees_the_plan_in_status_progress_and_the_turns_answer() {
    let fixture = fixture();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let mut editor = serve(&fixture, &endpoint.base_url(), "standard");
    let status = execute(&mut editor, "agent.status", Value::Null);
    assert_eq!(
        status["result"]["plan"],
        json!({"goal": null, "goal_source": null, "items": [], "open": 0}),
        "{status}"
    );

    let set = execute(
        &mut editor,
        "agent.goal.set",
        json!({"goal": " Number every line of src/ \n"}),
    );
    assert_eq!(set["result"]["goal"], "Number every line of src/", "{set}");
    let status = execute(&mut editor, "agent.status", Value::Null);
    assert_eq!(
        status["result"]["plan"]["goal"],
        "Number every line of src/"
    );
    assert_eq!(status["result"]["plan"]["goal_source"], "set");

    // The first request shows the model the goal the editor set, with no plan yet; the plan
    // it writes reaches the next request.
    endpoint.push(agent_tests::model_endpoint::Reply::from_fn(|request| {
        let goal = request
            .messages
            .iter()
            .filter_map(|message| message.content.as_deref())
            .find(|text| text.starts_with("<goal>"));
        assert_eq!(goal, Some("<goal>\nNumber every line of src/\n</goal>"));
        ModelTurn::new()
            .tool_call("todo", todo(&[("Read", "done"), ("Number", "in_progress")]))
            .into()
    }));
    endpoint.push(agent_tests::model_endpoint::Reply::from_fn(|request| {
        let last = request.last_user_text().unwrap_or_default().to_owned();
        assert_eq!(
            last,
            "<goal>\nNumber every line of src/\n</goal>\n<todo>\n[x] Read\n[>] Number\n</todo>"
        );
        agent_tests::model_endpoint::Reply::text("Numbering is under way.")
    }));
    let answer = execute(&mut editor, "agent.ask", json!({"prompt": "Go."}));
    let result = &answer["result"];
    assert_eq!(result["outcome"], "answered", "{answer}");
    assert_eq!(
        result["plan"],
        json!({"goal": "Number every line of src/", "goal_source": "set",
               "items": [{"text": "Read", "status": "done"}, {"text": "Number", "status": "in_progress"}], "open": 1}),
        "{answer}"
    );
    editor.wait_for("the plan's progress", |message| {
        message["method"] == "$/progress"
            && message["params"]["value"]["message"] == "plan 1/2 done, now: Number"
    });
    editor.wait_for("the end naming the open item", |message| {
        message["method"] == "$/progress"
            && message["params"]["value"]["kind"] == "end"
            && message["params"]["value"]["message"] == "done in 2 steps; 1 plan item is still open"
    });
    let status = execute(&mut editor, "agent.status", Value::Null);
    assert_eq!(status["result"]["plan"], result["plan"], "{status}");
    endpoint.assert_no_violations();
    editor.shutdown();

    // A preset without the plans plugin has nobody to show the goal to: refused, with why.
    let mut editor = serve(&fixture, &endpoint.base_url(), "minimal");
    let refused = execute(&mut editor, "agent.goal.set", json!({"goal": "Anything"}));
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("preset `minimal` has no plans plugin ([plugins.plans])"),
        "{refused}"
    );
    editor.shutdown();
}
