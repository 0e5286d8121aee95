//! What a new user meets in the first hour, checked with the parts they use: a real headless
//! Neovim with the plugin in front of `agent-lsp serve` and pyright, the scripted editor where
//! the protocol itself is the point, and the loopback model endpoint. Each test names the
//! behaviour a first user found wrong: answers that did not stream, turns that waited on an
//! echo, labelled edits printed one per chunk, a folder completion that closed its mention, the
//! server's log filed as errors, `cmd` taken as a prefix, an error shown twice and a chat
//! document made for a turn that could not run; and `@` completion in a prompt document opened
//! first, with Neovim's default `completeopt`, which offered nothing, inserted the document
//! itself while the user typed, and stopped inside a quoted folder.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, ModelTurn, Reply};
use serde_json::{Value, json};

use crate::editors::{nvim_command, repo, wait_bounded};

/// The answer the model streams, in 4-byte chunks 40 ms apart (about 2 s in all).
const ANSWER: &str = "Hello! This answer arrives in small pieces, forty milliseconds apart, \
                      the way a fast model streams its tokens, so the chat document should \
                      grow while it arrives and not all at once at the end.";

/// Run `editors/nvim/tests/first_contact.lua` in `mode` on a workspace with a Python file, a
/// folder whose name needs quotes, and `notes.agent.md`; returns what the script recorded.
fn run_nvim(mode: &str, endpoint: Option<&ModelEndpoint>) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    agent_tests::write_tree(
        &root,
        &[
            ("pyrightconfig.json", "{}"),
            ("app.py", "count = 1\nprint(count)\n"),
            ("docs with spaces/guide.md", "# guide\n"),
            ("docs with spaces/setup.md", "# setup\n"),
            ("notes.agent.md", "\n"),
            ("src/console.py", "x = 1\n"),
        ],
    );
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let home = tempfile::tempdir().unwrap();
    let results = home.path().join("results.json");
    let mut command = nvim_command(
        &repo().join("editors/nvim/tests/first_contact.lua"),
        home.path(),
        true,
    );
    command
        .current_dir(&root)
        .env("PATH", agent_tests::tools_path())
        .env("AGENT_LSP_STATE_DIR", state.path())
        .env("AGENT_LSP_CONFIG", &config)
        .env("AGENT_LSP_LOG", "info")
        .env_remove("DEEPSEEK_API_KEY")
        .env("AGENT_TEST_SERVER", agent_tests::workspace_bin("agent-lsp"))
        .env("AGENT_TEST_ROOT", &root)
        .env("AGENT_TEST_MODE", mode)
        .env("AGENT_TEST_RESULTS", &results)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    if let Some(endpoint) = endpoint {
        command.env("AGENT_TEST_BASE_URL", endpoint.base_url());
    }
    let mut nvim = command.spawn().unwrap();
    let status = wait_bounded(&mut nvim, Duration::from_secs(120));
    let text = std::fs::read_to_string(&results)
        .unwrap_or_else(|error| panic!("no results from nvim ({status}): {error}"));
    let results: Value = serde_json::from_str(&text).unwrap();
    assert!(results.get("error").is_none(), "{results:#}");
    assert_eq!(
        results["steps"].as_array().unwrap().last().unwrap(),
        "done",
        "{results:#}"
    );
    assert_eq!(results["attached"], true, "{results:#}");
    results
}

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

#[test]
fn in_neovim_answers_stream_without_echo_waits_or_labels_and_folders_complete_inside_quotes() {
    let endpoint = ModelEndpoint::start(EndpointConfig::default().delta_bytes(4)).unwrap();
    endpoint.push(Reply::from(
        ModelTurn::new()
            .content(ANSWER)
            .chunk_delay(Duration::from_millis(40)),
    ));
    let results = run_nvim("model", Some(&endpoint));
    let show = format!("{results:#}");

    // `cmd` is the whole command, as given.
    assert_eq!(
        strings(&results["cmd"]),
        [
            agent_tests::workspace_bin("agent-lsp").to_str().unwrap(),
            "serve"
        ],
        "{show}"
    );

    // The folder is inserted (a snippet: Neovim takes snippets) with the cursor before its
    // closing quote, inside the mention, and the next completion offers the files inside it.
    let rounds = results["completion_rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 2, "{show}");
    assert!(
        strings(&rounds[0]["words"]).contains(&"@\"docs with spaces/$0\""),
        "{show}"
    );
    assert_eq!(rounds[1]["line"], "See @\"docs with spaces/\"", "{show}");
    assert_eq!(rounds[1]["col"], "See @\"docs with spaces/".len(), "{show}");
    // The folder's closing quote is already there, after the cursor: a file closes the mention
    // with it (Neovim expands a snippet at the cursor, so a quote of the item's would be a
    // second one).
    let inside = strings(&rounds[1]["words"]);
    assert!(inside.contains(&"@\"docs with spaces/guide.md"), "{show}");
    assert!(inside.contains(&"@\"docs with spaces/setup.md"), "{show}");
    // Accepting them resolves nothing through a child and shows no error.
    let notifications = results["notifications"].to_string();
    assert!(!notifications.contains("resolve"), "{show}");

    // The answer grew while it streamed (about 2 s of chunks), not in one edit at the end.
    assert_eq!(results["turn"]["result"]["outcome"], "answered", "{show}");
    let states = results["states"].as_array().unwrap();
    assert!(states.len() >= 8, "{} states: {show}", states.len());

    // The document is exactly what the server wrote: no line breaks piled up by the edits.
    let chat = strings(&results["chat"]);
    assert_eq!(
        chat,
        ["hello", "", "## agent (turn 1)", ANSWER, "", "## you", ""],
        "{show}"
    );
    let log = results["log"].as_str().unwrap();
    assert!(!log.contains("no didChange"), "{log}");

    // Streamed edits carry no label, so Neovim prints nothing for them.
    let messages = results["messages"].as_str().unwrap();
    assert!(!messages.contains("Workspace edit"), "{messages}");

    // The server's log lines reach Neovim's LSP log with their level, not as stderr errors.
    assert!(
        log.lines()
            .any(|line| line.starts_with("[INFO]") && line.contains("language server initialized")),
        "{log}"
    );
    let from_stderr: Vec<&str> = log
        .lines()
        .filter(|line| {
            line.contains("\"stderr\"") && (line.contains(" INFO ") || line.contains(" WARN "))
        })
        .collect();
    assert!(from_stderr.is_empty(), "{from_stderr:#?}");
    endpoint.assert_no_violations();
}

#[test]
fn in_neovim_the_old_cmd_form_works_with_a_note_and_asking_without_a_model_fails_once_and_makes_nothing()
 {
    let results = run_nvim("no_model", None);
    let show = format!("{results:#}");
    assert_eq!(
        strings(&results["cmd"]),
        [
            agent_tests::workspace_bin("agent-lsp").to_str().unwrap(),
            "serve"
        ],
        "{show}"
    );
    let notifications: Vec<&str> = results["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|notification| notification["message"].as_str())
        .collect();
    assert_eq!(
        notifications
            .iter()
            .filter(|message| message.contains("`cmd` is the whole command"))
            .count(),
        1,
        "{show}"
    );
    // The error is shown once, naming the config file the server actually read.
    assert_eq!(results["ask_done"], true, "{show}");
    let shown: Vec<&&str> = notifications
        .iter()
        .filter(|message| message.contains("no model is configured"))
        .collect();
    assert_eq!(shown.len(), 1, "{show}");
    assert!(shown[0].contains("config.toml"), "{show}");
    // Nothing was made for a turn that could not run.
    assert_eq!(results["chat_file_exists"], false, "{show}");
    assert_eq!(results["chat_buffer"], -1, "{show}");
}

/// A config file that does not exist is named as such.
#[test]
fn without_a_model_serve_names_the_config_file_it_read_and_says_it_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("app.py"), "x = 1\n").unwrap();
    let state = tempfile::tempdir().unwrap();
    let missing = state.path().join("nowhere/config.toml");
    let mut command = std::process::Command::new(agent_tests::workspace_bin("agent-lsp"));
    command
        .env("PATH", agent_tests::tools_path())
        .env("AGENT_LSP_STATE_DIR", state.path())
        .env("AGENT_LSP_CONFIG", &missing)
        .env_remove("DEEPSEEK_API_KEY")
        .args(["--workspace", root.to_str().unwrap(), "serve"]);
    let mut editor = agent_tests::editor::Editor::start(command);
    editor.initialize_with(&root, Value::Null);
    let response = editor.request(
        "workspace/executeCommand",
        json!({"command": "agent.ask", "arguments": [{"prompt": "hello"}]}),
    );
    let message = response["error"]["message"].as_str().unwrap();
    assert!(message.contains("no model is configured"), "{message}");
    assert!(
        message.contains(&format!(
            "{} (named by AGENT_LSP_CONFIG; it does not exist)",
            missing.display()
        )),
        "{message}"
    );
    assert!(!message.contains("~/.config"), "{message}");
    assert!(!Path::new(&root.join(".agent-lsp/chat.agent.md")).exists());
    editor.shutdown();
}

/// The labels of the menu a round recorded.
fn labels(round: &Value) -> Vec<&str> {
    round["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| item["label"].as_str())
        .collect()
}

#[test]
fn in_neovim_at_completes_in_a_first_prompt_document_with_the_default_completeopt() {
    let results = run_nvim("prompt_first", None);
    let show = format!("{results:#}");
    // Neovim's own default, which the plugin changes for prompt documents only.
    assert_eq!(results["completeopt"], "menu,popup", "{show}");
    assert_eq!(
        results["buffer_completeopt"], "menu,menuone,noselect,popup",
        "{show}"
    );
    let rounds = results["completion_rounds"].as_array().unwrap();
    let round = |name: &str| {
        rounds
            .iter()
            .find(|round| round["name"] == name)
            .unwrap_or_else(|| panic!("no menu for {name}: {show}"))
    };

    // `@` typed in the first buffer opens the menu (the trigger characters were known when
    // completion was turned on); nothing is inserted, and the document itself is not offered.
    let at = round("@");
    assert_eq!(at["line"], "@", "{show}");
    assert!(!labels(at).is_empty(), "{show}");
    assert!(!labels(at).contains(&"notes.agent.md"), "{show}");
    // Typing on filters: the text typed stays as typed.
    assert!(labels(round("@cons")).contains(&"src/console.py"), "{show}");
    assert_eq!(results["line_after_typing"], "@cons", "{show}");

    // A quoted folder chosen: the menu opens inside it by itself, without the folder itself.
    assert!(
        labels(round("@\"docs")).contains(&"docs with spaces/"),
        "{show}"
    );
    let inside = round("inside");
    assert_eq!(inside["line"], "See @\"docs with spaces/\"", "{show}");
    assert_eq!(inside["col"], "See @\"docs with spaces/".len(), "{show}");
    assert!(
        labels(inside).contains(&"docs with spaces/guide.md"),
        "{show}"
    );
    assert!(!labels(inside).contains(&"docs with spaces/"), "{show}");
    // Typing on inside it asks again; the file chosen closes the mention with one quote.
    assert!(
        labels(round("inside g")).contains(&"docs with spaces/guide.md"),
        "{show}"
    );
    assert_eq!(
        results["line_after_folder"], "See @\"docs with spaces/guide.md\"",
        "{show}"
    );

    // :checkhealth names the config file AGENT_LSP_CONFIG points at.
    let health = strings(&results["health"]).join("\n");
    assert!(
        health.contains("elsewhere/agent-lsp.toml ($AGENT_LSP_CONFIG)"),
        "{health}"
    );
    assert!(!health.contains("~/.config"), "{health}");
}
