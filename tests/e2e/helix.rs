//! The Helix integration in a real Helix 25.07.1 (`.ci/tools/helix`, copied there by
//! `.ci/tools.sh`) driven through tmux, with `editors/helix/languages.toml` as its only
//! configuration and pyright behind `agent-lsp serve`. Helix reads a server's capabilities from
//! its `initialize` answer only, so everything here depends on `serve` announcing the features
//! of children that have not started yet (`server/capabilities/up_front.rs`).
//!
//! Every step is checked twice: on the screen the user sees (`tmux capture-pane`) and in
//! Helix's own log of every LSP message (`hx -vv --log`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, ModelTurn, Reply};
use serde_json::Value;

use crate::editors::repo;

/// How long any one thing may take to appear (pyright's first start included).
const PATIENCE: Duration = Duration::from_secs(90);

const SHAPES: &str = r#"class Square:
    def __init__(self, side: int) -> None:
        self.side = side

    def area(self) -> int:
        """The area of the square."""
        return self.side * self.side


def describe(shape: Square) -> str:
    return f"area {shape.area()}"


square = Square(3)
print(describe(square))
"#;

/// A file with one error pyright reports.
const BROKEN: &str = "from shapes import Square\n\nprint(Square(2).perimeter)\n";

/// `hx` and its runtime from `.ci/tools/helix`: there is no fallback, CI must not skip.
fn helix_dir() -> PathBuf {
    let dir = repo().join(".ci/tools/helix");
    assert!(
        dir.join("bin/hx").is_file(),
        "{} is missing: run `bash .ci/tools.sh` (it copies Helix from the shared tools folder)",
        dir.join("bin/hx").display()
    );
    dir
}

/// One Helix in a tmux server of its own, on a project in a temporary folder.
struct Helix {
    dir: tempfile::TempDir,
    socket: PathBuf,
    log: PathBuf,
}

impl Helix {
    /// Helix opening `file` in a project made of `files`, `agent-lsp` on `PATH` and the
    /// project's `languages.toml` as its configuration, with `model_url` as the model's base
    /// URL (set where the file's comment shows it) when given.
    fn start(files: &[(&str, &str)], file: &str, model_url: Option<&str>) -> Helix {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        let root = home.join("project");
        agent_tests::write_tree(&root, files);
        std::fs::create_dir_all(root.join(".git")).unwrap();
        let mut languages = std::fs::read_to_string(repo().join("editors/helix/languages.toml"))
            .expect("editors/helix/languages.toml");
        if let Some(url) = model_url {
            for (example, setting) in [
                ("# model = ", "model = \"deepseek-v4-flash\"".to_owned()),
                ("# baseUrl = ", format!("baseUrl = \"{url}\"")),
            ] {
                let line = languages
                    .lines()
                    .find(|line| line.starts_with(example))
                    .unwrap_or_else(|| panic!("languages.toml shows no `{example}`"))
                    .to_owned();
                languages = languages.replace(&line, &setting);
            }
        }
        agent_tests::write_tree(&home, &[("config/helix/languages.toml", &languages)]);
        std::fs::create_dir_all(home.join("bin")).unwrap();
        std::os::unix::fs::symlink(
            agent_tests::workspace_bin("agent-lsp"),
            home.join("bin/agent-lsp"),
        )
        .unwrap();
        std::fs::create_dir_all(home.join("state")).unwrap();
        std::fs::write(home.join("agent-lsp.toml"), "").unwrap();
        let helix = helix_dir();
        let path = {
            let mut paths = vec![home.join("bin")];
            paths.extend(std::env::split_paths(&agent_tests::tools_path()));
            std::env::join_paths(paths).unwrap()
        };
        let log = home.join("helix.log");
        let quote = |path: &Path| format!("'{}'", path.display());
        let script = format!(
            "#!/bin/sh\n\
             export PATH={path}\n\
             export HELIX_RUNTIME={runtime}\n\
             export XDG_CONFIG_HOME={config} XDG_CACHE_HOME={cache} XDG_DATA_HOME={data} XDG_STATE_HOME={xstate}\n\
             export AGENT_LSP_STATE_DIR={state} AGENT_LSP_CONFIG={agent_config}\n\
             unset DEEPSEEK_API_KEY\n\
             cd {root} && exec {hx} -vv --log {log} {file}\n",
            path = quote(Path::new(&path)),
            runtime = quote(&helix.join("runtime")),
            config = quote(&home.join("config")),
            cache = quote(&home.join("cache")),
            data = quote(&home.join("data")),
            xstate = quote(&home.join("xdg-state")),
            state = quote(&home.join("state")),
            agent_config = quote(&home.join("agent-lsp.toml")),
            root = quote(&root),
            hx = quote(&helix.join("bin/hx")),
            log = quote(&log),
        );
        let launcher = home.join("hx.sh");
        std::fs::write(&launcher, script).unwrap();
        let socket = home.join("tmux.sock");
        let helix = Helix { dir, socket, log };
        helix.tmux(&[
            "new-session",
            "-d",
            "-x",
            "160",
            "-y",
            "40",
            "sh",
            launcher.to_str().unwrap(),
        ]);
        helix
    }

    fn root(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap().join("project")
    }

    fn tmux(&self, args: &[&str]) -> String {
        let output = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs");
        assert!(output.status.success(), "tmux {args:?}: {output:?}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Type `keys` (tmux key names: `Enter`, `Escape`, `Space`, or literal text).
    fn keys(&self, keys: &[&str]) {
        for key in keys {
            self.tmux(&["send-keys", key]);
            // Helix reads a burst of input as one; keys sent one by one are read one by one.
            std::thread::sleep(Duration::from_millis(150));
        }
    }

    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p"])
    }

    /// Wait until the screen shows what `done` looks for.
    fn wait_screen(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "waited {PATIENCE:?} for {what}; the screen:\n{screen}\nHelix's log ends:\n{}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The LSP messages of Helix's log: those it sent (`true`) and received (`false`).
    fn messages(&self) -> Vec<(bool, Value)> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .filter_map(|line| {
                let (_, rest) = line.split_once("helix_lsp::transport [INFO] agent-lsp ")?;
                let sent = rest.starts_with("->");
                let json = rest.get(3..)?;
                Some((sent, serde_json::from_str(json).ok()?))
            })
            .collect()
    }

    /// Wait until Helix has sent a `method` request matching `sent` and received its answer;
    /// returns both.
    fn wait_exchange(&self, method: &str, sent: impl Fn(&Value) -> bool) -> (Value, Value) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let messages = self.messages();
            let request = messages.iter().rev().find(|(out, message)| {
                *out && message["method"] == method && message.get("id").is_some() && sent(message)
            });
            if let Some((_, request)) = request
                && let Some((_, answer)) = messages.iter().find(|(out, message)| {
                    !*out && message.get("method").is_none() && message["id"] == request["id"]
                })
            {
                return (request.clone(), answer.clone());
            }
            assert!(
                Instant::now() < deadline,
                "waited {PATIENCE:?} for Helix to send `{method}` and get its answer; Helix's log ends:\n{}\nthe screen:\n{}",
                self.log_tail(),
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Wait for a notification Helix received.
    fn wait_notification(&self, method: &str, matches: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some((_, message)) = self
                .messages()
                .into_iter()
                .find(|(out, message)| !*out && message["method"] == method && matches(message))
            {
                return message;
            }
            assert!(
                Instant::now() < deadline,
                "waited {PATIENCE:?} for `{method}`; Helix's log ends:\n{}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(30)..];
        tail.iter()
            .map(|line| line.chars().take(600).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The status line: the screen's second line from the bottom.
    fn status_line(screen: &str) -> &str {
        let lines: Vec<&str> = screen.lines().collect();
        lines[lines.len().saturating_sub(2)]
    }

    /// Whether the status line ends with the cursor position `at` (`line:column`).
    fn cursor_at(screen: &str, at: &str) -> bool {
        Self::status_line(screen).trim_end().ends_with(at)
    }

    /// Move the cursor to a 1-based line and column.
    fn goto(&self, line: u32, column: u32) {
        self.keys(&["Escape", &format!(":{line}"), "Enter", "Home"]);
        if column > 1 {
            self.keys(&[&format!("{}l", column - 1)]);
        }
        let at = format!("{line}:{column}");
        self.wait_screen(&format!("the cursor at {at}"), |screen| {
            Self::cursor_at(screen, &at)
        });
    }
}

impl Drop for Helix {
    fn drop(&mut self) {
        // Ending the tmux server ends Helix, whose closed pipe ends agent-lsp and its children.
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

fn uri_of(path: &Path) -> String {
    lsp_bridge::lsp_types::Url::from_file_path(path)
        .unwrap()
        .to_string()
}

#[test]
fn helix_navigates_completes_and_shows_diagnostics_through_agent_lsp() {
    let helix = Helix::start(
        &[
            ("pyproject.toml", ""),
            ("shapes.py", SHAPES),
            ("broken.py", BROKEN),
        ],
        "shapes.py",
        None,
    );
    let shapes = uri_of(&helix.root().join("shapes.py"));

    // `initialize` announces what pyright will provide, though no child runs yet.
    let (_, init) = helix.wait_exchange("initialize", |_| true);
    let capabilities = &init["result"]["capabilities"];
    for provider in [
        "definitionProvider",
        "hoverProvider",
        "referencesProvider",
        "renameProvider",
        "signatureHelpProvider",
    ] {
        assert!(
            capabilities.get(provider).is_some(),
            "{provider}: {capabilities}"
        );
    }
    assert!(
        capabilities.get("semanticTokensProvider").is_none(),
        "{capabilities}"
    );
    // pyright is up once it published diagnostics for the file.
    helix.wait_notification("textDocument/publishDiagnostics", |message| {
        message["params"]["uri"] == shapes
    });

    // `gd` on `describe` in `print(describe(square))` jumps to `def describe` (10:5).
    helix.goto(15, 7);
    helix.keys(&["g", "d"]);
    let (request, answer) = helix.wait_exchange("textDocument/definition", |_| true);
    assert_eq!(
        request["params"]["position"],
        serde_json::json!({"line": 14, "character": 6})
    );
    let target = &answer["result"][0];
    assert!(
        target["targetUri"] == shapes || target["uri"] == shapes,
        "{answer}"
    );
    let range = target
        .get("targetSelectionRange")
        .unwrap_or(&target["range"]);
    assert_eq!(range["start"]["line"], 9, "{answer}");
    let screen = helix.wait_screen("the cursor on `def describe`", |screen| {
        Helix::cursor_at(screen, "10:5")
    });
    assert!(
        !screen.contains("No definition found"),
        "{screen}"
    );

    // `Space k` on `area` in `shape.area()` shows pyright's hover with the docstring.
    helix.goto(11, 27);
    helix.keys(&["Space", "k"]);
    let (_, answer) = helix.wait_exchange("textDocument/hover", |_| true);
    assert!(
        answer["result"]["contents"]["value"]
            .as_str()
            .is_some_and(|text| text.contains("def area() -> int")),
        "{answer}"
    );
    helix.wait_screen("the hover popup", |screen| {
        screen.contains("def area() -> int") && screen.contains("The area of the square.")
    });
    helix.keys(&["Escape"]);

    // `gr` on `Square` lists its three uses in a picker.
    helix.goto(1, 7);
    helix.keys(&["g", "r"]);
    let (_, answer) = helix.wait_exchange("textDocument/references", |_| true);
    let lines: Vec<u64> = answer["result"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
        .iter()
        .map(|location| location["range"]["start"]["line"].as_u64().unwrap())
        .collect();
    for line in [0, 9, 13] {
        assert!(lines.contains(&line), "{answer}");
    }
    let screen = helix.wait_screen("the references picker", |screen| {
        screen.contains("square = Square(3)") && screen.contains("def describe(shape: Square)")
    });
    assert!(screen.contains("shapes.py"), "{screen}");
    helix.keys(&["Escape"]);

    // Typing `square.` on a new line: the trigger character opens the completion menu.
    helix.goto(15, 1);
    helix.keys(&["o", "square."]);
    let (request, answer) = helix.wait_exchange("textDocument/completion", |message| {
        message["params"]["context"]["triggerCharacter"] == "."
    });
    assert_eq!(request["params"]["context"]["triggerKind"], 2, "{request}");
    let labels: Vec<&str> = answer["result"]["items"]
        .as_array()
        .or_else(|| answer["result"].as_array())
        .unwrap_or_else(|| panic!("{answer}"))
        .iter()
        .filter_map(|item| item["label"].as_str())
        .collect();
    assert!(labels.contains(&"area") && labels.contains(&"side"), "{labels:?}");
    helix.wait_screen("the completion menu", |screen| {
        screen.contains("area") && screen.contains("side")
    });

    // Signature help as `describe(` is typed.
    helix.keys(&["Escape", "Escape", "o", "describe("]);
    let (_, answer) = helix.wait_exchange("textDocument/signatureHelp", |_| true);
    assert!(
        answer["result"]["signatures"][0]["label"]
            .as_str()
            .is_some_and(|label| label.contains("shape: Square")),
        "{answer}"
    );
    helix.wait_screen("the signature help popup", |screen| {
        screen.contains("(shape: Square) -> str")
    });
    helix.keys(&["Escape", "Escape", "u", "u"]);

    // `Space r` renames `square` in both its places.
    helix.goto(14, 1);
    helix.keys(&["Space", "r"]);
    helix.wait_screen("the rename prompt", |screen| screen.contains("rename-to:"));
    helix.keys(&["C-u", "box", "Enter"]);
    let (_, answer) = helix.wait_exchange("textDocument/rename", |message| {
        message["params"]["newName"] == "box"
    });
    assert!(answer.get("error").is_none(), "{answer}");
    let screen = helix.wait_screen("the renamed variable", |screen| {
        screen.contains("box = Square(3)") && screen.contains("print(describe(box))")
    });
    assert!(!screen.contains("square = "), "{screen}");

    // `gi`: announced for the workspace's other servers (clangd, typescript-language-server
    // implement it), which pyright does not; the request gets `null`, not pyright's error.
    helix.goto(1, 7);
    helix.keys(&["g", "i"]);
    let (_, answer) = helix.wait_exchange("textDocument/implementation", |_| true);
    assert_eq!(answer["result"], Value::Null, "{answer}");
    assert!(answer.get("error").is_none(), "{answer}");
    helix.wait_screen("Helix saying there is no implementation", |screen| {
        screen.contains("No implementation found.")
    });

    // Diagnostics of another file: pyright's error in the diagnostics picker.
    helix.keys(&[":open broken.py", "Enter"]);
    let broken = uri_of(&helix.root().join("broken.py"));
    helix.wait_notification("textDocument/publishDiagnostics", |message| {
        message["params"]["uri"] == broken
            && message["params"]["diagnostics"]
                .as_array()
                .is_some_and(|diagnostics| !diagnostics.is_empty())
    });
    helix.keys(&["Space", "d"]);
    helix.wait_screen("the diagnostics picker", |screen| {
        // The picker's column is narrower than the message.
        screen.contains("ERROR") && screen.contains("Cannot access attribute \"perime")
    });
    helix.keys(&["Escape"]);
}

#[test]
fn helix_fixes_with_the_agent_and_streams_a_chat_answer() {
    let endpoint = ModelEndpoint::start(EndpointConfig::default().delta_bytes(6)).unwrap();
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
                .tool_call(
                    "edit",
                    r#"{"path":"app.py","old_string":"print(cuont)","new_string":"print(count)"}"#,
                )
                .into()
        }),
        Reply::text("Fixed the typo."),
        // The chat prompt, streamed in small pieces.
        ModelTurn::new()
            .content("shapes.py defines Square, whose area is side times side.")
            .chunk_delay(Duration::from_millis(40))
            .into(),
    ]);
    let helix = Helix::start(
        &[
            ("pyproject.toml", ""),
            ("shapes.py", SHAPES),
            ("app.py", "count = 3\nprint(cuont)\n"),
            ("notes.agent.md", "What does "),
        ],
        "app.py",
        Some(&endpoint.base_url()),
    );
    let (request, _) = helix.wait_exchange("initialize", |_| true);
    assert_eq!(
        request["params"]["initializationOptions"]["baseUrl"],
        endpoint.base_url()
    );
    let app = uri_of(&helix.root().join("app.py"));
    helix.wait_notification("textDocument/publishDiagnostics", |message| {
        message["params"]["uri"] == app
            && message["params"]["diagnostics"]
                .as_array()
                .is_some_and(|diagnostics| !diagnostics.is_empty())
    });

    // `Space a` on the error: the agent's fix comes first in the menu; Enter runs it, and its
    // edit reaches the buffer through `workspace/applyEdit`.
    helix.goto(2, 8);
    helix.keys(&["Space", "a"]);
    helix.wait_screen("the code action menu", |screen| {
        screen.contains("Fix with agent: \"cuont\" is not defined")
            && screen.contains("Explain with agent")
    });
    helix.keys(&["Enter"]);
    let (request, answer) = helix.wait_exchange("workspace/executeCommand", |message| {
        message["params"]["command"] == "agent.fix"
    });
    assert!(answer.get("error").is_none(), "{request}\n{answer}");
    let screen = helix.wait_screen("the fixed line and the turn's message", |screen| {
        screen.contains("print(count)") && screen.contains("fixed")
    });
    assert!(!screen.contains("print(cuont)"), "{screen}");

    // In a prompt document, `@` completes workspace paths; Tab takes the first.
    helix.keys(&[":open notes.agent.md", "Enter"]);
    helix.wait_screen("the prompt document", |screen| {
        screen.contains("What does")
    });
    helix.keys(&["A", "@", "sha"]);
    let (_, answer) = helix.wait_exchange("textDocument/completion", |message| {
        message["params"]["textDocument"]["uri"]
            .as_str()
            .is_some_and(|uri| uri.ends_with("notes.agent.md"))
    });
    assert!(answer.to_string().contains("shapes.py"), "{answer}");
    helix.wait_screen("the `@path` menu", |screen| {
        screen.contains("shapes.py file")
    });
    helix.keys(&["Tab", " define?", "Escape"]);
    helix.wait_screen("the completed prompt", |screen| {
        screen.contains("What does @shapes.py define?")
    });

    // `Space a` → Send to agent: the answer streams in below the prompt.
    helix.keys(&["Space", "a"]);
    helix.wait_screen("Send to agent", |screen| screen.contains("Send to agent"));
    helix.keys(&["Enter"]);
    let screen = helix.wait_screen("the streamed answer", |screen| {
        screen.contains("## agent (turn 2)")
            && screen.contains("shapes.py defines Square, whose area is side times side.")
            && screen.contains("## you")
    });
    assert!(screen.contains("What does @shapes.py define?"), "{screen}");
    let notes = uri_of(&helix.root().join("notes.agent.md"));
    let edits = helix
        .messages()
        .into_iter()
        .filter(|(out, message)| {
            !*out
                && message["method"] == "workspace/applyEdit"
                && message.to_string().contains(&notes)
        })
        .count();
    // The answer arrives in pieces, not as one edit at the end.
    assert!(edits >= 3, "{edits} edits of the prompt document");
    let prompt = String::from_utf8_lossy(&endpoint.chat_requests().last().unwrap().raw).into_owned();
    assert!(prompt.contains("@shapes.py"), "{prompt}");
}
