//! Presets you make, through the real binary: `agent-lsp preset list|show|new` from a clean
//! user config folder, and the `creative` preset's agent writing a preset with `preset_write`
//! against the loopback model endpoint (an invalid one refused with the parser's error, the
//! corrected one saved and then used with `--preset NAME`; one that allows more than `creative`
//! or than the preset it replaces, or takes the name of the preset new sessions get, saved only
//! with the user's approval).

use std::path::{Path, PathBuf};
use std::process::Output;

use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, ModelTurn, Reply};
use serde_json::{Value, json};

/// The config file's folder is the user's agent-lsp folder, so the user's presets are
/// `<state>/presets/`.
type Fixture = agent_tests::cli::CliFixture;

fn fixture() -> Fixture {
    Fixture::new("[provider]\nrequest_timeout_secs = 20\n").with_files(&[("README.md", "# demo\n")])
}

fn user_presets(fixture: &Fixture) -> PathBuf {
    fixture.state.path().join("presets")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn canonical(path: &Path) -> PathBuf {
    path.canonicalize().unwrap()
}

/// `preset list --json` as (name, source, shadowed_by, shadows) rows.
fn listing(fixture: &Fixture) -> Vec<(String, String, Value, Value)> {
    let rows: Vec<Value> =
        serde_json::from_str(&fixture.ok(&["preset", "list", "--json"])).unwrap();
    rows.into_iter()
        .map(|row| {
            assert!(row["error"].is_null(), "{row}");
            (
                row["name"].as_str().unwrap().to_owned(),
                row["source"].as_str().unwrap().to_owned(),
                row["shadowed_by"].clone(),
                row["shadows"].clone(),
            )
        })
        .collect()
}

#[test]
fn preset_list_show_and_new_from_a_clean_config_folder() {
    let fixture = fixture();
    let builtins = [
        "code", "creative", "explore", "minimal", "readonly", "standard",
    ];
    let rows = listing(&fixture);
    assert_eq!(
        rows.iter()
            .map(|(name, source, ..)| (name.as_str(), source.as_str()))
            .collect::<Vec<_>>(),
        builtins.map(|name| (name, "built-in"))
    );
    let text = fixture.ok(&["preset", "list"]);
    assert!(
        text.lines()
            .any(|line| line.starts_with("creative") && line.contains("Builds presets")),
        "{text}"
    );

    // `show` prints the text as it is, so it can be saved and changed.
    let minimal = fixture.ok(&["preset", "show", "minimal"]);
    assert!(minimal.contains("description = \"File tools without shell"));

    // `new` copies into the user's folder (made on the way) and prints the path.
    let path = fixture.ok(&["preset", "new", "mine", "--from", "minimal"]);
    let expected = canonical(&user_presets(&fixture)).join("mine.toml");
    assert_eq!(path.trim(), expected.display().to_string());
    assert_eq!(std::fs::read_to_string(&expected).unwrap(), minimal);
    assert_eq!(fixture.ok(&["preset", "show", "mine"]), minimal);
    let error = fixture.fails(&["preset", "new", "mine", "--from", "standard"]);
    assert!(error.contains("already exists"), "{error}");
    assert_eq!(std::fs::read_to_string(&expected).unwrap(), minimal);

    // A user preset may replace a built-in one, and the listing says so.
    fixture.ok(&["preset", "new", "standard", "--from", "readonly"]);
    // A workspace preset only adds names.
    let error = fixture.fails(&[
        "preset",
        "new",
        "minimal",
        "--from",
        "minimal",
        "--scope",
        "workspace",
    ]);
    assert!(error.contains("never replaces"), "{error}");
    let path = fixture.ok(&[
        "preset",
        "new",
        "team",
        "--from",
        "mine",
        "--scope",
        "workspace",
    ]);
    assert_eq!(
        path.trim(),
        canonical(fixture.workspace.path())
            .join(".agent-lsp/presets/team.toml")
            .display()
            .to_string()
    );
    // A workspace preset named like a user one is listed, and not used.
    std::fs::write(
        fixture
            .workspace
            .path()
            .join(".agent-lsp/presets/mine.toml"),
        fixture.ok(&["preset", "show", "readonly"]),
    )
    .unwrap();
    let rows = listing(&fixture);
    let row = |name: &str, source: &str| {
        rows.iter()
            .find(|row| row.0 == name && row.1 == source)
            .map(|row| (row.2.clone(), row.3.clone()))
            .unwrap_or_else(|| panic!("no {source} preset {name}: {rows:?}"))
    };
    assert_eq!(row("standard", "user"), (Value::Null, json!(["built-in"])));
    assert_eq!(row("standard", "built-in"), (json!("user"), json!([])));
    assert_eq!(row("mine", "user"), (Value::Null, json!(["workspace"])));
    assert_eq!(row("mine", "workspace"), (json!("user"), json!([])));
    assert_eq!(row("team", "workspace"), (Value::Null, json!([])));
    assert_eq!(fixture.ok(&["preset", "show", "mine"]), minimal);
    let text = fixture.ok(&["preset", "list"]);
    assert!(
        text.lines().any(|line| line.starts_with("standard")
            && line.contains("user")
            && line.ends_with("(shadows the built-in preset)")),
        "{text}"
    );

    // The presets are what `--preset` finds: the user's `standard` is readonly's text.
    let catalog = fixture.ok(&["tool", "--list", "--preset", "standard"]);
    assert!(
        catalog
            .lines()
            .any(|line| line.starts_with("write") && line.contains("deny")),
        "{catalog}"
    );

    // Names that are not file names are refused, unknown names listed.
    let error = fixture.fails(&["preset", "new", "Bad.Name", "--from", "minimal"]);
    assert!(error.contains("is not a preset name"), "{error}");
    let error = fixture.fails(&["preset", "show", "nonesuch"]);
    assert!(
        error.contains("code, creative, explore, mine, minimal, readonly, standard, team"),
        "{error}"
    );
}

/// How the scripted model's preset is wrong.
#[derive(Clone, Copy)]
enum Draft {
    /// A misspelt `[model]` key: the TOML parser's error.
    ModelKey,
    /// A misspelt plugin key: the plugin registry's error.
    PluginKey,
    Correct,
}

/// The `minimal` preset renamed, with writing denied, and the mistake `draft` names.
fn reviewer_preset(draft: Draft) -> String {
    let text = agent_lsp::preset::catalog::builtin_text("minimal")
        .unwrap()
        .replace(
            "description = \"File tools without shell; no thinking; no plugins.\"",
            "description = \"Reviews code: reads, never writes.\"",
        )
        .replace(
            "default = \"allow\"",
            "default = \"allow\"\nwrite = \"deny\"\nedit = \"deny\"",
        );
    match draft {
        Draft::ModelKey => text.replace("max_steps = 20", "max_steps = 20\nmax_stepz = 5"),
        Draft::PluginKey => text.replace(
            "[plugins.runtime_context]\nenabled = false",
            "[plugins.runtime_context]\nenabled = false\nevery_step = true",
        ),
        Draft::Correct => text,
    }
}

/// The 1-based line of `draft`'s text that starts with `prefix`.
fn line_of(draft: Draft, prefix: &str) -> usize {
    reviewer_preset(draft)
        .lines()
        .position(|line| line.starts_with(prefix))
        .unwrap()
        + 1
}

#[test]
fn creative_refuses_an_invalid_preset_with_the_parsers_error_and_saves_the_corrected_one() {
    let fixture = fixture();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let write = |draft| json!({"name": "reviewer", "text": reviewer_preset(draft)}).to_string();
    // The user's presets folder as `$AGENT_LSP_CONFIG` names it.
    let user_file = fixture.state.path().join("presets/reviewer.toml");
    let shown = user_file.display().to_string();
    let shown_too = shown.clone();
    endpoint.push_all([
        Reply::Turn(
            ModelTurn::new()
                .reasoning("Write the reviewer preset.")
                .tool_call("preset_write", write(Draft::ModelKey)),
        ),
        Reply::from_fn(move |request| {
            let result = request.tool_result_text();
            // The parser's error: the file it would have been, the line and the key.
            assert!(result.contains("was not saved"), "{result}");
            let line = line_of(Draft::ModelKey, "max_stepz");
            assert!(
                result.contains(&format!("preset {shown}: TOML parse error at line {line}")),
                "{result}"
            );
            assert!(result.contains("unknown field `max_stepz`"), "{result}");
            ModelTurn::new()
                .reasoning("Drop the misspelt key; also inject the context every step.")
                .tool_call("preset_write", write(Draft::PluginKey))
                .into()
        }),
        Reply::from_fn(move |request| {
            let result = request.tool_result_text();
            // The plugin registry's check, in the same words `--preset` would use.
            let line = line_of(Draft::PluginKey, "every_step");
            assert!(
                result.contains(&format!(
                    "preset {shown_too}, line {line}: [plugins.runtime_context] `every_step`: unknown field `every_step`"
                )),
                "{result}"
            );
            ModelTurn::new()
                .reasoning("runtime_context has only `enabled`.")
                .tool_call("preset_write", write(Draft::Correct))
                .into()
        }),
        Reply::from_fn(|request| {
            let result = request.tool_result_text();
            assert!(result.contains("saved preset `reviewer`"), "{result}");
            assert!(result.contains("--preset reviewer"), "{result}");
            Reply::text("Saved `reviewer`: run it with --preset reviewer.")
        }),
    ]);
    // The reviewer allows the `lsp_*` tools, which `creative` lacks: saving it needs the user's
    // approval, which --yes gives.
    let output = fixture.run(&[
        "run",
        "--yes",
        "--preset",
        "creative",
        "--base-url",
        &endpoint.base_url(),
        "Make me a preset for reviewing code",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("Saved `reviewer`"));
    endpoint.assert_no_violations();
    assert_eq!(endpoint.remaining_replies(), 0);

    // The creative agent had the tool, and the saved text is the corrected one.
    let first = endpoint.chat_requests()[0].body.clone().unwrap();
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["glob", "grep", "list", "preset_write", "read"]);
    assert_eq!(
        std::fs::read_to_string(&user_file).unwrap(),
        reviewer_preset(Draft::Correct)
    );
    // Its system prompt carries the preset reference people read, and the example.
    let system = first["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("# Building presets"), "{system}");
    assert!(
        system.contains(agent_lsp::preset::catalog::builtin_text("standard").unwrap()),
        "{system}"
    );
    assert!(system.contains("## Presets you make"), "{system}");
    let store = fixture.store();
    let creative = store.resolve("last").unwrap();
    let header = store.load(&creative).unwrap().header().unwrap().clone();
    assert_eq!(header.preset, "creative");

    // The saved preset is usable by name: the new session records it.
    endpoint.push(Reply::text("Reviewing."));
    let output = fixture.run(&[
        "run",
        "--preset",
        "reviewer",
        "--base-url",
        &endpoint.base_url(),
        "Review the README",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    endpoint.assert_no_violations();
    // Two sessions started within a second need not sort in start order, so the new one is
    // the one that is not the first.
    let ids = store.ids().unwrap();
    assert_eq!(ids.len(), 2, "{ids:?}");
    let session = ids.iter().find(|id| **id != creative).unwrap();
    let header = store.load(session).unwrap().header().unwrap().clone();
    assert_eq!(header.preset, "reviewer");
    assert_eq!(
        header.preset_text.as_deref(),
        Some(reviewer_preset(Draft::Correct).as_str())
    );
    let listed = fixture.ok(&["preset", "list"]);
    assert!(
        listed.lines().any(|line| line.starts_with("reviewer")
            && line.contains("user")
            && line.contains("Reviews code")),
        "{listed}"
    );
}

/// A preset enabling `enabled`, with these `[permissions]` lines.
fn preset_text(enabled: &[&str], permissions: &str) -> String {
    format!(
        "description = \"Made by the creative agent.\"\n[model]\nmax_steps = 5\ncontext_window = 32000\n[tools]\nenabled = {enabled:?}\n[permissions]\n{permissions}\n"
    )
}

/// A step of `creative` (thinking mode) that saves `name` with `text`.
fn save(name: &str, text: &str, overwrite: bool) -> Reply {
    ModelTurn::new()
        .reasoning("Save it.")
        .tool_call(
            "preset_write",
            json!({"name": name, "text": text, "overwrite": overwrite}).to_string(),
        )
        .into()
}

/// A reply that checks the newest tool result the request shows, then gives `next` (or ends
/// the turn).
fn then(check: impl FnOnce(&str) + Send + 'static, next: Option<Reply>) -> Reply {
    Reply::from_fn(move |request| {
        check(&request.tool_result_text());
        next.unwrap_or_else(|| ModelTurn::new().reasoning("Done.").content("Done.").into())
    })
}

#[test]
fn creative_saves_a_preset_allowing_more_or_replacing_the_default_only_with_approval() {
    // The user's own default preset, `daily`: the standard one, where leaving the sandbox asks.
    let fixture = Fixture::new("preset = \"daily\"\n[provider]\nrequest_timeout_secs = 20\n");
    std::fs::create_dir_all(user_presets(&fixture)).unwrap();
    let daily = agent_lsp::preset::catalog::builtin_text("standard").unwrap();
    let daily_file = user_presets(&fixture).join("daily.toml");
    std::fs::write(&daily_file, daily).unwrap();
    let loose_daily = daily.replace("shell = \"ask\"", "shell = \"allow\"");
    assert_ne!(loose_daily, daily);
    // Narrower than creative: new, so it is saved unasked.
    let reader = preset_text(
        &["read", "grep"],
        "default = \"deny\"\nread = \"allow\"\ngrep = \"allow\"",
    );
    // New, but it allows `edit`, which creative lacks.
    let editor = preset_text(&["read", "edit"], "default = \"allow\"");

    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let refused = |needs: &'static [&'static str]| {
        move |result: &str| {
            assert!(
                result.contains("this call needs the user's approval whatever the preset allows")
                    && result.contains("run with --yes"),
                "{result}"
            );
            for reason in needs {
                assert!(result.contains(reason), "{result}");
            }
        }
    };
    endpoint.push_all([
        save("daily", &loose_daily, true),
        then(
            refused(&[
                "`daily` is the preset every new session gets",
                "than `creative`, the preset running now: ",
                "`shell`: allow (not enabled there)",
                "than the preset it replaces (",
                "`shell`: allow (ask there)",
            ]),
            Some(save("editor", &editor, false)),
        ),
        then(
            refused(&["`edit`: allow (not enabled there)"]),
            Some(save("reader", &reader, false)),
        ),
        then(
            |result| assert!(result.contains("saved preset `reader`"), "{result}"),
            None,
        ),
    ]);
    // Nobody to ask: `run` without --yes.
    let output = fixture.run(&[
        "run",
        "--preset",
        "creative",
        "--base-url",
        &endpoint.base_url(),
        "Let my daily preset run commands",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    endpoint.assert_no_violations();
    assert_eq!(endpoint.remaining_replies(), 0);
    assert_eq!(std::fs::read_to_string(&daily_file).unwrap(), daily);
    assert!(!user_presets(&fixture).join("editor.toml").exists());
    assert_eq!(
        std::fs::read_to_string(user_presets(&fixture).join("reader.toml")).unwrap(),
        reader
    );

    // The plain `run` (the default preset, `daily`) still asks before a command that leaves
    // the sandbox.
    endpoint.push_all([
        Reply::Turn(ModelTurn::new().reasoning("Run it.").tool_call(
            "shell",
            json!({"command": "touch ran", "leave_sandbox": "all"}).to_string(),
        )),
        then(
            |result| assert!(result.contains("needs approval (`ask`)"), "{result}"),
            None,
        ),
    ]);
    let output = fixture.run(&["run", "--base-url", &endpoint.base_url(), "Run it"]);
    assert!(output.status.success(), "{}", stderr(&output));
    endpoint.assert_no_violations();
    assert_eq!(endpoint.remaining_replies(), 0);
    assert!(!fixture.workspace.path().join("ran").exists());
}

/// The `window/showMessageRequest` messages the editor was sent.
fn questions(editor: &agent_tests::editor::Editor) -> Vec<String> {
    editor
        .server_requests
        .iter()
        .filter(|request| request["method"] == "window/showMessageRequest")
        .map(|request| request["params"]["message"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_editor_is_asked_before_creative_replaces_the_default_preset() {
    let fixture = Fixture::new("preset = \"daily\"\n");
    std::fs::create_dir_all(user_presets(&fixture)).unwrap();
    let daily = agent_lsp::preset::catalog::builtin_text("standard").unwrap();
    let daily_file = user_presets(&fixture).join("daily.toml");
    std::fs::write(&daily_file, daily).unwrap();
    let loose_daily = daily.replace("shell = \"ask\"", "shell = \"allow\"");
    let root = canonical(fixture.workspace.path());
    let mut editor = agent_tests::editor::Editor::start(fixture.command(&["serve"]));
    editor.initialize_with(&root, json!({"preset": "creative"}));
    let mut write = |answer: &str| {
        editor.message_answer = Some(answer.into());
        let result = editor.request(
            "workspace/executeCommand",
            json!({"command": "agent.tool", "arguments": [{"name": "preset_write", "arguments": {"name": "daily", "text": loose_daily, "overwrite": true}}]}),
        );
        assert!(result.get("error").is_none(), "{result}");
        result["result"].clone()
    };
    // The programmer says no: nothing is written, and the model is told why.
    let denied = write("Deny");
    assert_eq!(denied["is_error"], true, "{denied}");
    assert!(
        denied["text"]
            .as_str()
            .unwrap()
            .contains("`daily` is the preset every new session gets"),
        "{denied}"
    );
    assert_eq!(std::fs::read_to_string(&daily_file).unwrap(), daily);
    // Then yes: it is written.
    let allowed = write("Allow");
    assert_eq!(allowed["is_error"], false, "{allowed}");
    assert_eq!(std::fs::read_to_string(&daily_file).unwrap(), loose_daily);
    let asked = questions(&editor);
    assert_eq!(asked.len(), 2, "{asked:?}");
    for question in &asked {
        assert!(
            question.starts_with(
                "agent-lsp: the agent wants to run `preset_write`, which needs your approval because `daily` is the preset every new session gets"
            ) && question.contains("`shell`: allow (ask there)"),
            "{question}"
        );
    }
    editor.shutdown();
}
