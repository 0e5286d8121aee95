//! The Helix integration in a real Helix 25.07.1 driven through tmux
//! ([`agent_tests::helix`]), with `editors/helix/languages.toml` as its only configuration and
//! pyright behind `agent-lsp serve`: navigation, completion, signature help, rename and
//! diagnostics, then Fix with agent, `@path` completion and a streamed chat answer against the
//! loopback model endpoint, and a server that fails to start, reported once. Helix reads a
//! server's capabilities from its `initialize` answer only, so all of it depends on `serve`
//! announcing the features of children that have not started yet
//! (`server/capabilities/up_front.rs`).
//!
//! Every step is checked twice: on the screen the user sees (`tmux capture-pane`) and in
//! Helix's own log of every LSP message (`hx -vv --log`).

use std::time::Duration;

use agent_tests::helix::{Helix, uri_of};
use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, ModelTurn, Reply};
use serde_json::Value;

/// The project both the Helix and the eglot tests edit.
pub(crate) const SHAPES: &str = r#"class Square:
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

    // pyright's capabilities are kept for the next `initialize` (it sends no version).
    let recorded = helix.state_dir().join("servers/pyright/unknown.json");
    let recorded: Value = serde_json::from_slice(&std::fs::read(&recorded).unwrap()).unwrap();
    assert!(
        recorded["capabilities"]["definitionProvider"].is_object(),
        "{recorded}"
    );

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
    assert!(!screen.contains("No definition found"), "{screen}");

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
    assert!(
        labels.contains(&"area") && labels.contains(&"side"),
        "{labels:?}"
    );
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
    helix.wait_screen("the prompt document", |screen| screen.contains("What does"));
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
    let prompt =
        String::from_utf8_lossy(&endpoint.chat_requests().last().unwrap().raw).into_owned();
    assert!(prompt.contains("@shapes.py"), "{prompt}");
}

#[test]
fn helix_hears_once_of_a_server_that_fails_and_shows_no_error_per_request() {
    let helix = Helix::start_configured(
        &[("pyproject.toml", ""), ("shapes.py", SHAPES)],
        "shapes.py",
        None,
        "[server.pyright]\ncommand = \"/bin/false\"\n",
    );
    helix.wait_screen("the failure on the status line", |screen| {
        screen.contains("failed to start: language server `pyright` exited")
    });
    helix.goto(15, 7);
    helix.keys(&["g", "d"]);
    // The request fails (the server is gone), which Helix logs and does not show.
    let (_, answer) = helix.wait_exchange("textDocument/definition", |_| true);
    assert!(answer.get("error").is_some(), "{answer}");
    helix.wait_screen("Helix's own word for no answer", |screen| {
        screen.contains("No definition found.")
    });
    helix.keys(&["Space", "k"]);
    helix.wait_exchange("textDocument/hover", |_| true);
    helix.wait_screen("Helix's own word for no answer", |screen| {
        screen.contains("No hover results available.")
    });
    // Three attempts at starting pyright (the open, `gd`, `Space k`), one message.
    let shown: Vec<Value> = helix
        .messages()
        .into_iter()
        .filter(|(out, message)| !*out && message["method"] == "window/showMessage")
        .map(|(_, message)| message)
        .collect();
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(
        shown[0]["params"]["message"]
            .as_str()
            .is_some_and(|text| text.contains("pyright")),
        "{shown:?}"
    );
}
