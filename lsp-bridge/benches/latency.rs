//! Bridge latency against real servers, side by side with a minimal direct client.
//!
//! For clangd, pyright and typescript-language-server on the fixture projects of `tests/`:
//! - spawn → first answered definition through the bridge;
//! - `textDocument/definition` and `textDocument/references` latency through the bridge
//!   (`Child::request`) and through a minimal direct client (blocking stdio, written here, no
//!   bridge code), on the same requests, in alternating rounds so that machine noise hits both.
//!
//! Run: `bash .ci/tools.sh && cargo bench -p lsp-bridge --bench latency`. Prints a Markdown table.

#![allow(clippy::print_stdout)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child as Process, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use lsp_bridge::{Bridge, BridgeConfig};
use serde_json::{Value, json};

const ROUNDS: usize = 10;
const PER_ROUND: usize = 20;

struct Case {
    server: &'static str,
    fixture: &'static str,
    file: &'static str,
    language: &'static str,
    /// 0-based line and UTF-16 column of a symbol to ask about (the direct client does no
    /// conversion; these columns hold in every encoding because the prefix is ASCII).
    line: u32,
    character: u32,
}

const CASES: [Case; 3] = [
    Case {
        server: "clangd",
        fixture: "c",
        file: "shapes.c",
        language: "c",
        line: 2,
        character: 20,
    },
    Case {
        server: "pyright",
        fixture: "python",
        file: "pkg/geometry.py",
        language: "python",
        line: 10,
        character: 15,
    },
    Case {
        server: "typescript-language-server",
        fixture: "ts",
        file: "src/shapes.ts",
        language: "typescript",
        line: 12,
        character: 14,
    },
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn find_program(name: &str) -> PathBuf {
    let tools = repo().join(".ci/tools/node_modules/.bin");
    std::iter::once(tools)
        .chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ))
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
        .unwrap_or_else(|| panic!("{name} is not installed: run `bash .ci/tools.sh`"))
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(duration: Duration) -> String {
    format!("{:.2}", duration.as_secs_f64() * 1e3)
}

/// A minimal direct LSP client: blocking writes, a reader thread, requests answered in order.
struct Direct {
    process: Process,
    stdin: ChildStdin,
    messages: mpsc::Receiver<Value>,
    next_id: i64,
}

impl Direct {
    fn start(program: &Path, args: &[String], root: &Path) -> Direct {
        let mut process = Command::new(program)
            .args(args)
            .current_dir(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = process.stdin.take().unwrap();
        let stdout = process.stdout.take().unwrap();
        let (sender, messages) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let line = line.trim();
                    if line.is_empty() {
                        break;
                    }
                    if let Some(value) = line.strip_prefix("Content-Length: ") {
                        length = value.parse().unwrap();
                    }
                }
                let mut body = vec![0; length];
                if reader.read_exact(&mut body).is_err() {
                    return;
                }
                if sender.send(serde_json::from_slice(&body).unwrap()).is_err() {
                    return;
                }
            }
        });
        let mut client = Direct {
            process,
            stdin,
            messages,
            next_id: 0,
        };
        let uri = url(root);
        client.request(
            "initialize",
            json!({
                "processId": std::process::id(),
                "rootUri": uri,
                "workspaceFolders": [{"uri": uri, "name": "bench"}],
                "capabilities": {
                    "workspace": {"configuration": true, "workspaceFolders": true},
                    "window": {"workDoneProgress": true},
                    "textDocument": {"publishDiagnostics": {"versionSupport": true}},
                },
            }),
        );
        client.notify("initialized", json!({}));
        client
    }

    fn send(&mut self, message: Value) {
        let body = serde_json::to_vec(&message).unwrap();
        write!(self.stdin, "Content-Length: {}\r\n\r\n", body.len()).unwrap();
        self.stdin.write_all(&body).unwrap();
        self.stdin.flush().unwrap();
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Handle one incoming message: answer server requests; return notifications/responses.
    fn receive(&mut self) -> Value {
        loop {
            let message = self
                .messages
                .recv_timeout(Duration::from_secs(60))
                .expect("server answers");
            if message.get("method").is_some() && message.get("id").is_some() {
                let result = match message["method"].as_str().unwrap() {
                    "workspace/configuration" => Value::Array(vec![
                        Value::Null;
                        message["params"]["items"]
                            .as_array()
                            .map_or(0, Vec::len)
                    ]),
                    _ => Value::Null,
                };
                self.send(json!({"jsonrpc": "2.0", "id": message["id"], "result": result}));
                continue;
            }
            return message;
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let message = self.receive();
            if message["id"] == id {
                return message["result"].clone();
            }
        }
    }

    fn open_and_wait(&mut self, path: &Path, language: &str) {
        let text = std::fs::read_to_string(path).unwrap();
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": url(path), "languageId": language, "version": 1, "text": text}}),
        );
        loop {
            let message = self.receive();
            if message["method"] == "textDocument/publishDiagnostics"
                && message["params"]["uri"] == url(path)
            {
                return;
            }
        }
    }
}

impl Drop for Direct {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

fn url(path: &Path) -> String {
    lsp_bridge::lsp_types::Url::from_file_path(path)
        .unwrap()
        .to_string()
}

fn params(path: &Path, case: &Case, method: &str) -> Value {
    let mut params = json!({
        "textDocument": {"uri": url(path)},
        "position": {"line": case.line, "character": case.character},
    });
    if method == "textDocument/references" {
        params["context"] = json!({"includeDeclaration": true});
    }
    params
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "| server | spawn → first definition (bridge) | method | bridge p50 / p95 ms | direct p50 / p95 ms | ratio p50 | ratio p95 |"
    );
    println!("|---|---|---|---|---|---|---|");
    for case in &CASES {
        let workspace = tempfile::tempdir().unwrap();
        copy_tree(
            &repo().join("tests/fixtures").join(case.fixture),
            workspace.path(),
        );
        let root = workspace.path().canonicalize().unwrap();
        let file = root.join(case.file);
        let mut config = BridgeConfig::builtin();
        config.servers.retain(|server| server.name == case.server);
        let program = find_program(&config.servers[0].command);
        config.servers[0].command = program.display().to_string();
        let args = config.servers[0].args.clone();
        let bridge = Bridge::new(config, vec![root.clone()]);

        // Spawn → first answered definition, through the bridge.
        let started = Instant::now();
        let child = runtime.block_on(async {
            let child = bridge.child_for(&file).await.unwrap();
            let text = std::fs::read_to_string(&file).unwrap();
            child
                .notify(
                    "textDocument/didOpen",
                    json!({"textDocument": {"uri": url(&file), "languageId": case.language, "version": 1, "text": text}}),
                )
                .await
                .unwrap();
            loop {
                let answer = child.request("textDocument/definition", params(&file, case, "textDocument/definition")).await;
                if answer.as_ref().is_ok_and(|value| !value.is_null() && value.as_array().is_none_or(|items| !items.is_empty())) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            child
        });
        let first_definition = started.elapsed();
        // Let the server settle (first diagnostics) before timing steady-state requests.
        runtime.block_on(async {
            let uri = lsp_bridge::lsp_types::Url::from_file_path(&file).unwrap();
            let mut changes = child.diagnostics().subscribe();
            let _ = tokio::time::timeout(Duration::from_secs(30), async {
                while child.diagnostics().get(&uri).is_none() {
                    let _ = changes.changed().await;
                }
            })
            .await;
        });

        let mut direct = Direct::start(&program, &args, &root);
        direct.open_and_wait(&file, case.language);

        for method in ["textDocument/definition", "textDocument/references"] {
            let mut bridged = Vec::new();
            let mut plain = Vec::new();
            for _ in 0..ROUNDS {
                for _ in 0..PER_ROUND {
                    let start = Instant::now();
                    let answer = runtime
                        .block_on(child.request(method, params(&file, case, method)))
                        .unwrap();
                    bridged.push(start.elapsed());
                    assert!(
                        !answer.is_null(),
                        "{method} through the bridge answered null"
                    );
                }
                for _ in 0..PER_ROUND {
                    let start = Instant::now();
                    let answer = direct.request(method, params(&file, case, method));
                    plain.push(start.elapsed());
                    assert!(!answer.is_null(), "{method} direct answered null");
                }
            }
            let (b50, b95) = (
                percentile(&mut bridged, 0.5),
                percentile(&mut bridged, 0.95),
            );
            let (d50, d95) = (percentile(&mut plain, 0.5), percentile(&mut plain, 0.95));
            println!(
                "| {} | {} ms | {} | {} / {} | {} / {} | {:.2} | {:.2} |",
                case.server,
                ms(first_definition),
                method.trim_start_matches("textDocument/"),
                ms(b50),
                ms(b95),
                ms(d50),
                ms(d95),
                b50.as_secs_f64() / d50.as_secs_f64(),
                b95.as_secs_f64() / d95.as_secs_f64(),
            );
        }
        drop(direct);
        runtime.block_on(bridge.shutdown_all());
    }
}
