//! A scripted editor: drives `agent-lsp serve` (or any language server) over stdio, or over a
//! socket to `serve --listen`, the way VS Code or Neovim would, with a bound on every wait.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long any single wait may take before the test fails.
pub const WAIT: Duration = Duration::from_secs(60);

pub struct Editor {
    /// The server process, when this editor started it (over stdio); `None` for an editor
    /// attached to a listening server.
    process: Option<Child>,
    /// Where messages to the server go: its stdin, or the socket.
    to_server: Box<dyn Write + Send>,
    messages: mpsc::Receiver<Value>,
    next_id: i64,
    /// Notifications (and server requests) received while waiting for something else.
    pub backlog: VecDeque<Value>,
    /// Every server→editor request seen, in order.
    pub server_requests: Vec<Value>,
    /// Open buffers by URI: text and version, changed by `change` and by the server's
    /// `workspace/applyEdit`, as an editor's would be (never saved to disk).
    pub buffers: HashMap<String, (String, i64)>,
    /// What the editor answers to `window/showMessageRequest` (the title of the action).
    pub message_answer: Option<String>,
    /// `clientInfo.name` sent in `initialize`, if any.
    pub client_name: Option<String>,
}

impl Editor {
    /// The server process's id.
    pub fn pid(&self) -> u32 {
        self.process
            .as_ref()
            .expect("a server this editor started")
            .id()
    }

    /// Start `command` with stdio piped; stderr goes to the test's output.
    pub fn start(mut command: Command) -> Editor {
        let mut process = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start server");
        let stdin = process.stdin.take().unwrap();
        let stdout = process.stdout.take().unwrap();
        let mut editor = Editor::over(stdout, stdin);
        editor.process = Some(process);
        editor
    }

    /// An editor talking to a server through `from_server` and `to_server` (the halves of a
    /// socket to a listening server).
    pub fn over(
        from_server: impl Read + Send + 'static,
        to_server: impl Write + Send + 'static,
    ) -> Editor {
        let (sender, messages) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(from_server);
            loop {
                let mut length = None;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let line = line.trim_end();
                    if line.is_empty() {
                        break;
                    }
                    if let Some(value) = line.strip_prefix("Content-Length: ") {
                        length = value.parse::<usize>().ok();
                    }
                }
                let Some(length) = length else { return };
                let mut body = vec![0; length];
                if reader.read_exact(&mut body).is_err() {
                    return;
                }
                let Ok(message) = serde_json::from_slice(&body) else {
                    return;
                };
                if sender.send(message).is_err() {
                    return;
                }
            }
        });
        Editor {
            process: None,
            to_server: Box::new(to_server),
            messages,
            next_id: 0,
            backlog: VecDeque::new(),
            server_requests: Vec::new(),
            buffers: HashMap::new(),
            message_answer: None,
            client_name: None,
        }
    }

    /// Whether the server has closed the connection (its output ended) within `within`;
    /// messages that arrive meanwhile go to the backlog, and server requests are answered.
    pub fn closed_within(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.messages.recv_timeout(left) {
                Ok(message) => {
                    if message.get("method").is_some() && message.get("id").is_some() {
                        self.answer_server_request(&message);
                    }
                    self.backlog.push_back(message);
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return true,
                Err(mpsc::RecvTimeoutError::Timeout) => return false,
            }
        }
    }

    pub fn send(&mut self, message: &Value) {
        let body = serde_json::to_vec(message).unwrap();
        self.send_raw(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
        self.send_raw(&body);
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.to_server.write_all(bytes).unwrap();
        self.to_server.flush().unwrap();
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Send a request without waiting; returns its id.
    pub fn request_async(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Send a request and wait for its response message (with `result` or `error`).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.request_async(method, params);
        self.response(id)
    }

    /// The response to request `id`, answering server requests meanwhile.
    pub fn response(&mut self, id: i64) -> Value {
        self.wait_for(&format!("the response to request {id}"), |message| {
            message["id"] == id && message.get("method").is_none()
        })
    }

    /// The next message matching `predicate` (from the backlog first), answering server
    /// requests as a plain editor would.
    pub fn wait_for(&mut self, what: &str, predicate: impl Fn(&Value) -> bool) -> Value {
        if let Some(index) = self.backlog.iter().position(&predicate) {
            return self.backlog.remove(index).unwrap();
        }
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self
                .messages
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
            if message.get("method").is_some() && message.get("id").is_some() {
                self.answer_server_request(&message);
            }
            if predicate(&message) {
                return message;
            }
            self.backlog.push_back(message);
        }
    }

    /// Read the server for `duration`, as an editor's event loop does between keystrokes:
    /// its requests (`workspace/configuration`, …) are answered, everything else kept for
    /// [`Editor::wait_for`].
    pub fn pump(&mut self, duration: Duration) {
        let deadline = Instant::now() + duration;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let Ok(message) = self.messages.recv_timeout(left) else {
                return;
            };
            if message.get("method").is_some() && message.get("id").is_some() {
                self.answer_server_request(&message);
            }
            self.backlog.push_back(message);
        }
    }

    fn answer_server_request(&mut self, request: &Value) {
        self.server_requests.push(request.clone());
        let result = match request["method"].as_str().unwrap_or_default() {
            "workspace/configuration" => Value::Array(vec![
                Value::Null;
                request["params"]["items"]
                    .as_array()
                    .map_or(0, Vec::len)
            ]),
            "workspace/applyEdit" => self.apply_workspace_edit(&request["params"]["edit"]),
            "window/showDocument" => {
                let uri = request["params"]["uri"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                if !self.buffers.contains_key(&uri) {
                    let path = lsp_bridge::lsp_types::Url::parse(&uri)
                        .unwrap()
                        .to_file_path()
                        .unwrap();
                    self.open(&path, "markdown");
                }
                json!({"success": true})
            }
            "window/showMessageRequest" => match &self.message_answer {
                Some(title) => json!({"title": title}),
                None => Value::Null,
            },
            _ => Value::Null,
        };
        let response = json!({"jsonrpc": "2.0", "id": request["id"], "result": result});
        self.send(&response);
    }

    /// `initialize` + `initialized` for `root`; returns the initialize result.
    pub fn initialize(&mut self, root: &std::path::Path) -> Value {
        self.initialize_with(root, Value::Null)
    }

    /// `initialize` with `initializationOptions` (as editor plugins pass settings).
    pub fn initialize_with(&mut self, root: &std::path::Path, options: Value) -> Value {
        let params = self.initialize_params(root, options);
        let response = self.request("initialize", params);
        assert!(
            response.get("error").is_none(),
            "initialize failed: {response}"
        );
        self.notify("initialized", json!({}));
        response["result"].clone()
    }

    /// The `initialize` params this editor sends for `root`, with `initializationOptions`.
    pub fn initialize_params(&self, root: &std::path::Path, options: Value) -> Value {
        let uri = url(root);
        let mut params = json!({
                "processId": std::process::id(),
                "rootUri": uri,
                "workspaceFolders": [{"uri": uri, "name": "test"}],
                "initializationOptions": options,
                "capabilities": {
                    "general": {"positionEncodings": ["utf-16"]},
                    "window": {"workDoneProgress": true, "showDocument": {"support": true}},
                    "workspace": {"configuration": true, "applyEdit": true, "workspaceFolders": true,
                                  "workspaceEdit": {"documentChanges": true},
                                  "executeCommand": {"dynamicRegistration": true}},
                    "textDocument": {"publishDiagnostics": {"versionSupport": true}, "hover": {"contentFormat": ["markdown", "plaintext"]},
                                     "formatting": {"dynamicRegistration": true}, "rangeFormatting": {"dynamicRegistration": true}},
                },
        });
        if let Some(name) = &self.client_name {
            params["clientInfo"] = json!({"name": name});
        }
        params
    }

    pub fn open(&mut self, path: &std::path::Path, language: &str) {
        let text = std::fs::read_to_string(path).unwrap();
        self.buffers.insert(url(path), (text.clone(), 1));
        self.notify("textDocument/didOpen", json!({"textDocument": {"uri": url(path), "languageId": language, "version": 1, "text": text}}));
    }

    /// The buffer of an open document.
    pub fn buffer(&self, path: &std::path::Path) -> String {
        self.buffers[&url(path)].0.clone()
    }

    /// Replace an open buffer's text (typing, unsaved) and send the full-text `didChange`.
    pub fn change(&mut self, path: &std::path::Path, text: &str) {
        let uri = url(path);
        let version = self.buffers.get(&uri).map_or(1, |(_, version)| version + 1);
        self.buffers.insert(uri.clone(), (text.to_owned(), version));
        self.notify("textDocument/didChange", json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]}));
    }

    /// Apply a `WorkspaceEdit` to the open buffers the way an editor does: versioned document
    /// changes are refused when the version is stale; each changed buffer sends `didChange`.
    fn apply_workspace_edit(&mut self, edit: &Value) -> Value {
        let mut per_document: Vec<(String, Option<i64>, Vec<Value>)> = Vec::new();
        if let Some(changes) = edit["changes"].as_object() {
            for (uri, edits) in changes {
                per_document.push((
                    uri.clone(),
                    None,
                    edits.as_array().cloned().unwrap_or_default(),
                ));
            }
        }
        for change in edit["documentChanges"].as_array().into_iter().flatten() {
            let uri = change["textDocument"]["uri"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let version = change["textDocument"]["version"].as_i64();
            per_document.push((
                uri,
                version,
                change["edits"].as_array().cloned().unwrap_or_default(),
            ));
        }
        for (uri, version, _) in &per_document {
            let Some((_, current)) = self.buffers.get(uri) else {
                return json!({"applied": false, "failureReason": format!("{uri} is not open in this test editor")});
            };
            if version.is_some_and(|version| version != *current) {
                return json!({"applied": false, "failureReason": "the document changed"});
            }
        }
        for (uri, _, edits) in per_document {
            let (text, _) = &self.buffers[&uri];
            let updated = lsp_bridge::queries::apply_text_edits(
                text,
                &edits,
                lsp_bridge::position::PositionEncoding::Utf16,
            );
            let path = lsp_bridge::lsp_types::Url::parse(&uri)
                .unwrap()
                .to_file_path()
                .unwrap();
            self.change(&path, &updated);
        }
        json!({"applied": true})
    }

    /// `shutdown` + `exit`, and the process must end on its own (an attached editor's
    /// connection must close).
    pub fn shutdown(mut self) {
        let response = self.request("shutdown", Value::Null);
        assert!(response.get("error").is_none(), "{response}");
        self.notify("exit", Value::Null);
        let Some(process) = self.process.as_mut() else {
            assert!(
                self.closed_within(Duration::from_secs(10)),
                "the connection stayed open after `exit`"
            );
            return;
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = process.try_wait().unwrap() {
                assert!(status.success(), "server exited with {status}");
                return;
            }
            assert!(
                Instant::now() < deadline,
                "server did not exit after `exit`"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Editor {
    fn drop(&mut self) {
        if let Some(process) = self.process.as_mut() {
            let _ = process.kill();
            let _ = process.wait();
        }
    }
}

pub fn url(path: &std::path::Path) -> String {
    lsp_bridge::lsp_types::Url::from_file_path(path)
        .unwrap()
        .to_string()
}
