//! Malformed params for every message `serve` reads itself rather than forwards: a request is
//! answered with `InvalidParams` (-32602) whose message names what is wrong, a notification is
//! not applied, nothing happens as a side effect (no model request, no file or session written,
//! no `window/showMessage` beyond what the table expects), and the server goes on serving.
//!
//! One table covers them all: `initialize`; `workspace/executeCommand` (its envelope and every
//! `agent.*` command of `COMMANDS`); the requests the server answers itself (`@path` completion
//! in prompt documents, the agent's code actions and their resolve, the resolve of its own
//! completion items, the routing of a document request by `textDocument.uri`); and the
//! notifications it reads (document sync, `$/cancelRequest`, `window/workDoneProgress/cancel`,
//! `workspace/didChangeWatchedFiles`). Every case runs, and the test fails once with the list of
//! the cases that failed and how, so the list is the state of the requirement.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};

use agent_tests::editor::{Editor, url};
use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, Reply};
use serde_json::{Value, json};

/// What a case must get.
enum Expect {
    /// A request: an `InvalidParams` error whose message contains each of these names.
    InvalidParams(&'static [&'static str]),
    /// A notification: not applied (the open buffer keeps its text) and, with `Some`, shown to
    /// the person at the editor as an error (`window/showMessage` type 1) naming the method and
    /// each of these; with `None`, nothing is shown (which is what the server does for the
    /// notifications outside document sync: LSP lets a server drop one it cannot read).
    NotApplied(Option<&'static [&'static str]>),
}

struct Case {
    method: &'static str,
    /// What is malformed, for the failure message.
    what: &'static str,
    params: Value,
    expect: Expect,
}

fn request(
    method: &'static str,
    what: &'static str,
    params: Value,
    names: &'static [&'static str],
) -> Case {
    Case {
        method,
        what,
        params,
        expect: Expect::InvalidParams(names),
    }
}

/// `workspace/executeCommand` of `command` with `arguments` as its argument list.
fn command(
    command: &'static str,
    what: &'static str,
    arguments: Value,
    names: &'static [&'static str],
) -> Case {
    request(
        "workspace/executeCommand",
        what,
        json!({"command": command, "arguments": arguments}),
        names,
    )
}

fn notification(
    method: &'static str,
    what: &'static str,
    params: Value,
    shown: Option<&'static [&'static str]>,
) -> Case {
    Case {
        method,
        what,
        params,
        expect: Expect::NotApplied(shown),
    }
}

/// The unsaved text of the open `notes.txt`, which no malformed notification may change.
const UNSAVED: &str = "unsaved text\n";
/// What the malformed notifications would put in the buffer if they were applied.
const MALFORMED: &str = "MALFORMED";
/// Stands for the id of a segment of the server's session as it is when the case runs.
const SEGMENT: &str = "$segment";

/// `serve` with the loopback model as its model (so a turn that should not run would be seen),
/// on a workspace with a plain text file and a prompt document (no language server serves
/// either, so every answer is the server's own).
struct Served {
    editor: Editor,
    endpoint: ModelEndpoint,
    root: PathBuf,
    state: PathBuf,
    initialized: bool,
    _dirs: [tempfile::TempDir; 2],
}

impl Served {
    fn start() -> Served {
        let workspace = tempfile::tempdir().unwrap();
        let root = workspace.path().canonicalize().unwrap();
        let state = tempfile::tempdir().unwrap();
        agent_tests::write_tree(
            &root,
            &[
                ("notes.txt", "on disk\n"),
                ("chat.agent.md", "What is in @notes.txt?\n"),
            ],
        );
        let mut command = agent_tests::serve_command(&root, state.path(), "");
        command.env_remove("DEEPSEEK_API_KEY");
        let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
        // A turn that runs although it should not ends at once, and is counted.
        endpoint.push_all((0..20).map(|_| Reply::text("this turn should not have run")));
        Served {
            editor: Editor::start(command),
            endpoint,
            root,
            state: state.path().to_owned(),
            initialized: false,
            _dirs: [workspace, state],
        }
    }

    fn notes(&self) -> PathBuf {
        self.root.join("notes.txt")
    }

    fn chat(&self) -> PathBuf {
        self.root.join("chat.agent.md")
    }

    fn options(&self) -> Value {
        json!({"baseUrl": self.endpoint.base_url(), "apiKey": "sk-test",
               "model": "deepseek-v4-flash", "preset": "standard"})
    }

    /// Initialize, open the documents and make the server's session (with a segment for the
    /// context editor's cases).
    fn initialize(&mut self) {
        let options = self.options();
        self.editor.initialize_with(&self.root, options);
        self.initialized = true;
        let (notes, chat) = (self.notes(), self.chat());
        self.editor.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": url(&notes), "languageId": "plaintext", "version": 1, "text": UNSAVED}}),
        );
        self.editor.open(&chat, "markdown");
        let text = self.read_notes();
        assert!(text.contains(UNSAVED.trim()), "{text}");
    }

    /// The id of the last segment of the server's current session (an earlier case that
    /// failed may have started another session), made by a read if it has none.
    fn segment(&mut self) -> u64 {
        for _ in 0..2 {
            let shown = self.editor.request(
                "workspace/executeCommand",
                json!({"command": "agent.context.show", "arguments": [{}]}),
            );
            let last = shown["result"]["segments"]
                .as_array()
                .and_then(|segments| segments.last())
                .and_then(|segment| segment["id"].as_u64());
            if let Some(id) = last {
                return id;
            }
            self.read_notes();
        }
        panic!("a read makes a segment of the session")
    }

    /// `params` with every [`SEGMENT`] replaced by a segment of the session as it is now.
    fn resolve(&mut self, params: &Value) -> Value {
        match params {
            Value::String(text) if text == SEGMENT => json!(self.segment()),
            Value::Array(items) => {
                Value::Array(items.iter().map(|item| self.resolve(item)).collect())
            }
            Value::Object(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(key, value)| (key.clone(), self.resolve(value)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// `notes.txt` as the agent's tools see it (the editor's buffer); records a tool call in
    /// the server's session.
    fn read_notes(&mut self) -> String {
        let answer = self.editor.request(
            "workspace/executeCommand",
            json!({"command": "agent.tool", "arguments": [{"name": "read", "arguments": {"path": self.notes()}}]}),
        );
        answer["result"]["text"]
            .as_str()
            .map_or_else(|| answer.to_string(), str::to_owned)
    }

    /// Every file of the workspace and of the state folder (sessions), with its bytes.
    fn footprint(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut files = BTreeMap::new();
        for dir in [&self.root, &self.state] {
            collect_files(dir, &mut files);
        }
        files
    }

    /// Run `case` with `params`; what went wrong, if anything.
    fn check(&mut self, case: &Case, params: &Value) -> Vec<String> {
        let before = self.footprint();
        let asked_before = self.endpoint.chat_requests().len();
        self.editor.backlog.clear();
        let mut problems = Vec::new();
        match &case.expect {
            Expect::InvalidParams(names) => {
                let answer = self.editor.request(case.method, params.clone());
                problems.extend(refusal_problems(&answer, names));
            }
            Expect::NotApplied(_) => self.editor.notify(case.method, params.clone()),
        }

        // The server still serves (before `initialize`, by saying it is not initialized). Its
        // answer comes after everything the case made the server send.
        let status = self.editor.request(
            "workspace/executeCommand",
            json!({"command": "agent.status"}),
        );
        let alive = if self.initialized {
            status["result"]["running"] == false
        } else {
            status["error"]["code"] == -32002
        };
        if !alive {
            problems.push(format!(
                "the next request was not answered as usual: {}",
                brief(&status)
            ));
        }

        let shown: Vec<String> = self
            .editor
            .backlog
            .iter()
            .filter(|message| message["method"] == "window/showMessage")
            .map(|message| message["params"].to_string())
            .collect();
        match &case.expect {
            // A failed request's error is the answer; editors show it, the server does not
            // show it a second time.
            Expect::InvalidParams(_) | Expect::NotApplied(None) => {
                for message in &shown {
                    problems.push(format!("shown with window/showMessage: {message}"));
                }
            }
            Expect::NotApplied(Some(names)) => {
                let told = shown.iter().any(|message| {
                    message.contains("\"type\":1")
                        && message.contains(case.method)
                        && names.iter().all(|name| message.contains(name))
                });
                if !told {
                    problems.push(format!(
                        "no window/showMessage error naming `{}` and {names:?}; shown: {shown:?}",
                        case.method
                    ));
                }
            }
        }

        let asked = self.endpoint.chat_requests().len() - asked_before;
        if asked > 0 {
            problems.push(format!(
                "the model was asked {asked} time(s): a turn ran on the malformed params"
            ));
        }
        let changed = changes(&before, &self.footprint());
        if !changed.is_empty() {
            problems.push(format!("files were written: {}", changed.join(", ")));
        }

        if self.initialized && matches!(case.expect, Expect::NotApplied(_)) {
            let text = self.read_notes();
            if !text.contains(UNSAVED.trim()) || text.contains(MALFORMED) {
                problems.push(format!(
                    "the buffer of notes.txt was changed or closed: {}",
                    text.chars().take(300).collect::<String>()
                ));
            }
        }
        problems
    }
}

fn collect_files(dir: &Path, files: &mut BTreeMap<PathBuf, Vec<u8>>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => collect_files(&path, files),
            Ok(kind) if kind.is_file() => {
                files.insert(path.clone(), std::fs::read(&path).unwrap_or_default());
            }
            _ => {}
        }
    }
}

fn changes(before: &BTreeMap<PathBuf, Vec<u8>>, after: &BTreeMap<PathBuf, Vec<u8>>) -> Vec<String> {
    let mut changed = Vec::new();
    for (path, bytes) in after {
        match before.get(path) {
            None => changed.push(format!("{} (new)", path.display())),
            Some(old) if old != bytes => changed.push(format!("{} (changed)", path.display())),
            Some(_) => {}
        }
    }
    for path in before.keys().filter(|path| !after.contains_key(*path)) {
        changed.push(format!("{} (removed)", path.display()));
    }
    changed
}

/// What is wrong with `answer` as the refusal of malformed params naming `names`.
fn refusal_problems(answer: &Value, names: &[&str]) -> Vec<String> {
    let error = &answer["error"];
    if error.is_null() {
        return vec![format!(
            "answered with a result, the malformed params were read with defaults: {}",
            brief(&answer["result"])
        )];
    }
    let message = error["message"].as_str().unwrap_or_default();
    let mut problems = Vec::new();
    if error["code"] != -32602 {
        problems.push(format!(
            "error {} instead of -32602 (InvalidParams): {message}",
            error["code"]
        ));
    }
    for name in names {
        if !message.contains(name) {
            problems.push(format!("the message does not name `{name}`: {message}"));
        }
    }
    problems
}

fn brief(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(300) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// `initialize`, sent before a good one.
fn initialize_cases(root: &Path) -> Vec<Case> {
    let root = url(root);
    vec![
        request(
            "initialize",
            "processId is a string",
            json!({"processId": "x", "rootUri": root, "capabilities": {}}),
            &["processId"],
        ),
        request(
            "initialize",
            "rootUri is a number",
            json!({"processId": null, "rootUri": 5, "capabilities": {}}),
            &["rootUri"],
        ),
        request(
            "initialize",
            "rootUri is not a URI",
            json!({"processId": null, "rootUri": "not a uri", "capabilities": {}}),
            &["rootUri"],
        ),
        request(
            "initialize",
            "workspaceFolders holds strings, not folders",
            json!({"processId": null, "workspaceFolders": [root], "capabilities": {}}),
            &["workspaceFolders"],
        ),
        request(
            "initialize",
            "capabilities is an array",
            json!({"processId": null, "rootUri": root, "capabilities": []}),
            &["capabilities"],
        ),
        request(
            "initialize",
            "params are an array",
            json!(["not", "an", "object"]),
            &["params"],
        ),
    ]
}

/// Everything else, after `initialize`.
fn cases(notes: &Path, chat: &Path) -> Vec<Case> {
    let (notes, chat) = (url(notes), url(chat));
    let range = json!({"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 5}});
    let diagnostic = json!({"message": "unused name", "range": range});
    let position = json!({"line": 0, "character": 0});
    vec![
        // `textDocument/inlineCompletion`: the server's own, read even when it is off.
        request(
            "textDocument/inlineCompletion",
            "position is a string",
            json!({"textDocument": {"uri": notes}, "position": "0:0"}),
            &["position"],
        ),
        request(
            "textDocument/inlineCompletion",
            "no textDocument",
            json!({"position": position}),
            &["textDocument"],
        ),
        // The envelope of `workspace/executeCommand`.
        request(
            "workspace/executeCommand",
            "params are a string",
            json!("agent.status"),
            &["command"],
        ),
        request(
            "workspace/executeCommand",
            "command is a number",
            json!({"command": 5}),
            &["command"],
        ),
        request(
            "workspace/executeCommand",
            "arguments is an object, not an array",
            json!({"command": "agent.status", "arguments": {"session": "x"}}),
            &["arguments"],
        ),
        request(
            "workspace/executeCommand",
            "arguments is a string, not an array",
            json!({"command": "agent.session.new", "arguments": "please"}),
            &["arguments"],
        ),
        command(
            "agent.cancel",
            "two arguments (a command takes at most one)",
            json!([{}, {}]),
            &["argument"],
        ),
        // agent.ask {prompt} | {uri, range}
        command(
            "agent.ask",
            "the argument is a number",
            json!([5]),
            &["object"],
        ),
        command(
            "agent.ask",
            "prompt is a number",
            json!([{"prompt": 5}]),
            &["prompt"],
        ),
        command(
            "agent.ask",
            "neither prompt nor uri",
            json!([{}]),
            &["prompt"],
        ),
        command(
            "agent.ask",
            "uri is a number",
            json!([{"uri": 5, "range": range}]),
            &["uri"],
        ),
        command(
            "agent.ask",
            "range.start.line is a string",
            json!([{"uri": notes, "range": {"start": {"line": "0", "character": 0}, "end": range["end"]}}]),
            &["line"],
        ),
        // agent.explain {uri, range}
        command(
            "agent.explain",
            "no range",
            json!([{"uri": notes}]),
            &["range"],
        ),
        command(
            "agent.explain",
            "range is a string",
            json!([{"uri": notes, "range": "0:0-0:5"}]),
            &["range"],
        ),
        command(
            "agent.explain",
            "uri is a relative path, not a URI",
            json!([{"uri": "notes.txt", "range": range}]),
            &["notes.txt"],
        ),
        // agent.send {uri, position?}
        command(
            "agent.send",
            "no uri",
            json!([{"position": position}]),
            &["uri"],
        ),
        command(
            "agent.send",
            "position.line is a string",
            json!([{"uri": chat, "position": {"line": "last"}}]),
            &["position"],
        ),
        command(
            "agent.send",
            "position is an array",
            json!([{"uri": chat, "position": [0, 0]}]),
            &["position"],
        ),
        // agent.fix {uri, diagnostic}
        command(
            "agent.fix",
            "no uri",
            json!([{"diagnostic": diagnostic}]),
            &["uri"],
        ),
        command(
            "agent.fix",
            "diagnostic is a string",
            json!([{"uri": notes, "diagnostic": "unused name"}]),
            &["diagnostic"],
        ),
        command(
            "agent.fix",
            "diagnostic.message is a number",
            json!([{"uri": notes, "diagnostic": {"message": 7, "range": range}}]),
            &["message"],
        ),
        command(
            "agent.fix",
            "diagnostic.range.start has no character",
            json!([{"uri": notes, "diagnostic": {"message": "m", "range": {"start": {"line": 0}, "end": range["end"]}}}]),
            &["character"],
        ),
        command(
            "agent.fix",
            "diagnostic.severity is a string",
            json!([{"uri": notes, "diagnostic": {"message": "m", "range": range, "severity": "error"}}]),
            &["severity"],
        ),
        // The commands without arguments.
        command(
            "agent.cancel",
            "the argument is a number",
            json!([5]),
            &["object"],
        ),
        command(
            "agent.compact",
            "the argument is a string",
            json!(["now"]),
            &["object"],
        ),
        command(
            "agent.session.new",
            "the argument is a number",
            json!([5]),
            &["object"],
        ),
        command(
            "agent.session.list",
            "the argument is an array",
            json!([[]]),
            &["object"],
        ),
        command(
            "agent.status",
            "the argument is a boolean",
            json!([true]),
            &["object"],
        ),
        // agent.goal.set {goal}
        command("agent.goal.set", "no goal", json!([{}]), &["goal"]),
        command(
            "agent.goal.set",
            "goal is a number",
            json!([{"goal": 5}]),
            &["goal"],
        ),
        command(
            "agent.goal.set",
            "goal is empty",
            json!([{"goal": "  "}]),
            &["goal", "empty"],
        ),
        // agent.tool {name, arguments}
        command(
            "agent.tool",
            "name is a number",
            json!([{"name": 5}]),
            &["name"],
        ),
        command(
            "agent.tool",
            "no name",
            json!([{"arguments": {"path": "notes.txt"}}]),
            &["name"],
        ),
        command(
            "agent.tool",
            "arguments is a number",
            json!([{"name": "read", "arguments": 5}]),
            &["arguments"],
        ),
        command(
            "agent.tool",
            "arguments is JSON text that does not parse",
            json!([{"name": "read", "arguments": "{\"path\": "}]),
            &["arguments"],
        ),
        // agent.context.show {session?, query?, role?, sort?, preview?}
        command(
            "agent.context.show",
            "session is a number",
            json!([{"session": 5}]),
            &["session"],
        ),
        command(
            "agent.context.show",
            "query is an array",
            json!([{"query": ["notes"]}]),
            &["query"],
        ),
        command(
            "agent.context.show",
            "role is a number",
            json!([{"role": 5}]),
            &["role"],
        ),
        command(
            "agent.context.show",
            "role is not a role",
            json!([{"role": "robot"}]),
            &["robot"],
        ),
        command(
            "agent.context.show",
            "sort is not `tokens`",
            json!([{"sort": "size"}]),
            &["sort"],
        ),
        command(
            "agent.context.show",
            "preview is a string",
            json!([{"preview": "short"}]),
            &["preview"],
        ),
        // agent.context.edit {session?, ops, force?}
        command("agent.context.edit", "no ops", json!([{}]), &["ops"]),
        command(
            "agent.context.edit",
            "ops is an object, not an array",
            json!([{"ops": {"op": "pin", "id": SEGMENT}}]),
            &["ops"],
        ),
        command(
            "agent.context.edit",
            "an op's id is a string",
            json!([{"ops": [{"op": "pin", "id": "seven"}]}]),
            &["ops"],
        ),
        command(
            "agent.context.edit",
            "an op is not an op",
            json!([{"ops": [{"op": "shred", "id": SEGMENT}]}]),
            &["shred"],
        ),
        command(
            "agent.context.edit",
            "force is a string",
            json!([{"ops": [{"op": "pin", "id": SEGMENT}], "force": "yes"}]),
            &["force"],
        ),
        command(
            "agent.context.edit",
            "session is a number",
            json!([{"ops": [{"op": "pin", "id": SEGMENT}], "session": 5}]),
            &["session"],
        ),
        // agent.context.rollback {session?, snapshot}
        command(
            "agent.context.rollback",
            "snapshot is a string",
            json!([{"snapshot": "1"}]),
            &["snapshot"],
        ),
        command(
            "agent.context.rollback",
            "no snapshot",
            json!([{}]),
            &["snapshot"],
        ),
        command(
            "agent.context.rollback",
            "session is a boolean",
            json!([{"snapshot": 0, "session": true}]),
            &["session"],
        ),
        // agent.memory.list {scope?}, remember {text, scope?}, forget {id}, edit {id, text}
        command(
            "agent.memory.list",
            "scope is not a scope",
            json!([{"scope": "team"}]),
            &["team"],
        ),
        command(
            "agent.memory.remember",
            "no text",
            json!([{"scope": "user"}]),
            &["text"],
        ),
        command(
            "agent.memory.remember",
            "text is a number",
            json!([{"text": 5}]),
            &["text"],
        ),
        command(
            "agent.memory.forget",
            "id is a number",
            json!([{"id": 1}]),
            &["id"],
        ),
        command(
            "agent.memory.edit",
            "no text",
            json!([{"id": "w1"}]),
            &["text"],
        ),
        // agent.rewind.turns {session?}, agent.rewind {session?, turn?, scope?, dryRun?,
        // force?}, agent.rewind.undo {session?, dryRun?}
        command(
            "agent.rewind.turns",
            "session is a boolean",
            json!([{"session": true}]),
            &["session"],
        ),
        command(
            "agent.rewind",
            "turn is a string",
            json!([{"turn": "2"}]),
            &["turn"],
        ),
        command(
            "agent.rewind",
            "scope is not a scope",
            json!([{"scope": "everything"}]),
            &["everything"],
        ),
        command(
            "agent.rewind",
            "an unknown field",
            json!([{"turn": 1, "hard": true}]),
            &["hard"],
        ),
        command(
            "agent.rewind.undo",
            "dryRun is a string",
            json!([{"dryRun": "yes"}]),
            &["dryRun"],
        ),
        // `@path` completion in a prompt document.
        request(
            "textDocument/completion",
            "no position (prompt document)",
            json!({"textDocument": {"uri": chat}}),
            &["position"],
        ),
        request(
            "textDocument/completion",
            "position.line is a string (prompt document)",
            json!({"textDocument": {"uri": chat}, "position": {"line": "0", "character": 12}}),
            &["line"],
        ),
        // The agent's code actions.
        request(
            "textDocument/codeAction",
            "no textDocument",
            json!({"range": range, "context": {"diagnostics": []}}),
            &["textDocument"],
        ),
        request(
            "textDocument/codeAction",
            "no range",
            json!({"textDocument": {"uri": notes}, "context": {"diagnostics": []}}),
            &["range"],
        ),
        request(
            "textDocument/codeAction",
            "no context",
            json!({"textDocument": {"uri": notes}, "range": range}),
            &["context"],
        ),
        request(
            "textDocument/codeAction",
            "context.diagnostics is a string",
            json!({"textDocument": {"uri": notes}, "range": range, "context": {"diagnostics": "all of them"}}),
            &["diagnostics"],
        ),
        request(
            "textDocument/codeAction",
            "range.start is a number (prompt document)",
            json!({"textDocument": {"uri": chat}, "range": {"start": 0, "end": 0}, "context": {"diagnostics": []}}),
            &["range"],
        ),
        request(
            "codeAction/resolve",
            "an agent action without a title",
            json!({"command": {"title": "Fix with agent", "command": "agent.fix", "arguments": []}}),
            &["title"],
        ),
        request(
            "completionItem/resolve",
            "an `@path` item without a label",
            json!({"data": {"agentLsp": "mention"}, "insertText": "@notes.txt"}),
            &["label"],
        ),
        // A document request is routed by its `textDocument.uri`.
        request(
            "textDocument/hover",
            "textDocument.uri is a number",
            json!({"textDocument": {"uri": 5}, "position": position}),
            &["textDocument.uri"],
        ),
        request(
            "textDocument/definition",
            "textDocument is a string",
            json!({"textDocument": "notes.txt", "position": position}),
            &["textDocument.uri"],
        ),
        // Document sync: refused whole, and shown (the buffers may now differ).
        notification(
            "textDocument/didOpen",
            "no text",
            json!({"textDocument": {"uri": notes, "languageId": "plaintext", "version": 2}}),
            Some(&["text"]),
        ),
        notification(
            "textDocument/didOpen",
            "version is a string",
            json!({"textDocument": {"uri": notes, "languageId": "plaintext", "version": "2", "text": MALFORMED}}),
            Some(&["version"]),
        ),
        notification(
            "textDocument/didChange",
            "version is a string",
            json!({"textDocument": {"uri": notes, "version": "three"}, "contentChanges": [{"text": MALFORMED}]}),
            Some(&["version"]),
        ),
        notification(
            "textDocument/didChange",
            "contentChanges is a string",
            json!({"textDocument": {"uri": notes, "version": 3}, "contentChanges": MALFORMED}),
            Some(&["contentChanges"]),
        ),
        notification(
            "textDocument/didChange",
            "a change's range.start is a string",
            json!({"textDocument": {"uri": notes, "version": 3},
                   "contentChanges": [{"range": {"start": "0:0", "end": position}, "text": MALFORMED}]}),
            Some(&["range"]),
        ),
        notification(
            "textDocument/didClose",
            "no textDocument",
            json!({"uri": notes}),
            Some(&["textDocument"]),
        ),
        notification(
            "textDocument/didSave",
            "textDocument.uri is a number",
            json!({"textDocument": {"uri": 5}}),
            Some(&["uri"]),
        ),
        // The other notifications the server reads: nothing to apply, nothing shown.
        notification(
            "$/cancelRequest",
            "id is an object",
            json!({"id": {"request": 1}}),
            None,
        ),
        notification("$/cancelRequest", "no id", json!({}), None),
        notification(
            "window/workDoneProgress/cancel",
            "token is an array",
            json!({"token": ["x"]}),
            None,
        ),
        notification(
            "workspace/didChangeWatchedFiles",
            "changes is a string",
            json!({"changes": "everything"}),
            None,
        ),
        notification(
            "workspace/didChangeWatchedFiles",
            "a change's uri is a number and its type a string",
            json!({"changes": [{"uri": 5, "type": "created"}]}),
            None,
        ),
    ]
}

/// Run `cases` on `served`, adding the failures to `failures`; `false` when the server stopped
/// answering (the cases after it would say nothing).
fn run_cases(served: &mut Served, cases: &[Case], failures: &mut Vec<String>) -> bool {
    for case in cases {
        let checked = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let params = served.resolve(&case.params);
            let problems = served.check(case, &params);
            (params, problems)
        }));
        let (params, problems) = match checked {
            Ok(checked) => checked,
            Err(_) => {
                failures.push(format!(
                    "`{}` ({}) {}:\n    - no answer: the server died or hung (the panic is above)",
                    case.method, case.what, case.params
                ));
                return false;
            }
        };
        if !problems.is_empty() {
            failures.push(format!(
                "`{}` ({}) {}:\n    - {}",
                case.method,
                case.what,
                params,
                problems.join("\n    - ")
            ));
        }
    }
    true
}

#[test]
fn malformed_params_are_refused_with_invalid_params_and_the_server_stays() {
    let mut served = Served::start();
    let mut failures = Vec::new();
    let before = initialize_cases(&served.root);
    let mut total = before.len();
    if run_cases(&mut served, &before, &mut failures) {
        // Nothing was taken from them: a good `initialize` is the first one.
        served.initialize();
        let after = cases(&served.notes(), &served.chat());
        total += after.len();
        run_cases(&mut served, &after, &mut failures);
    }
    let violations = served.endpoint.violations();
    assert!(
        failures.is_empty() && violations.is_empty(),
        "{} of {total} malformed-params cases failed:\n{}\nmodel endpoint violations: {violations:?}",
        failures.len(),
        failures.join("\n")
    );
    served.editor.shutdown();
}

/// `initializationOptions` the server cannot read are ignored whole (docs/lsp-extensions.md: an
/// editor whose `initialize` failed would get no language features at all) and shown with
/// `window/showMessage`; nothing is taken from them, so no model is configured.
#[test]
fn malformed_initialization_options_are_ignored_whole_and_shown() {
    let mut failures = Vec::new();
    for what in ["model is a number", "the options are a string"] {
        let mut served = Served::start();
        let options = match what {
            // The endpoint's URL and key are in them: read in part, they would make a model.
            "model is a number" => {
                let mut options = served.options();
                options["model"] = json!(5);
                options
            }
            _ => json!("sk-not-an-object"),
        };
        let params = served
            .editor
            .initialize_params(&served.root, options.clone());
        let answer = served.editor.request("initialize", params);
        if !answer["result"]["capabilities"].is_object() {
            failures.push(format!(
                "{what} {options}: initialize failed: {}",
                brief(&answer)
            ));
            continue;
        }
        served.editor.notify("initialized", json!({}));
        served.initialized = true;
        let ask = served.editor.request(
            "workspace/executeCommand",
            json!({"command": "agent.ask", "arguments": [{"prompt": "hello"}]}),
        );
        let shown = served.editor.backlog.iter().any(|message| {
            message["method"] == "window/showMessage"
                && message["params"]["type"] == 1
                && message["params"]["message"]
                    .as_str()
                    .is_some_and(|text| text.contains("initializationOptions ignored"))
        });
        if !shown {
            failures.push(format!(
                "{what} {options}: not shown as ignored; backlog: {:?}",
                served.editor.backlog
            ));
        }
        let message = ask["error"]["message"].as_str().unwrap_or_default();
        if ask["error"]["code"] != -32803 || !message.contains("no model is configured") {
            failures.push(format!(
                "{what} {options}: something was taken from them, `agent.ask` got {}",
                brief(&ask)
            ));
        }
        if !served.endpoint.chat_requests().is_empty() {
            failures.push(format!("{what} {options}: the model was asked"));
        }
        let violations = served.endpoint.violations();
        assert!(violations.is_empty(), "{violations:?}");
        served.editor.shutdown();
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
