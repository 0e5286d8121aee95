//! Connecting to an MCP server: a stdio child with a cleared environment and its stdout passed
//! through a JSON line filter, or a streamable HTTP endpoint with the configured headers.
//!
//! Apart from the connection's life in `client.rs` (start on need, restart, status) because
//! this is where a server's process and its environment are made, and where a server that
//! writes something other than JSON on stdout is caught.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use rmcp::ServiceExt;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use super::super::config::Transport;
use super::super::lines::{self, Line};
use super::{Connection, Server};

/// The variables a stdio MCP server gets from agent-lsp's environment, besides its config's
/// `env`: those a program needs to run (the MCP TypeScript SDK passes the same on POSIX, plus
/// the locale and the temporary folder).
const INHERITED_ENV: [&str; 9] = [
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR",
];

/// The longest line a server may send on stdout (one JSON-RPC message).
const MAX_LINE_BYTES: usize = 32 << 20;

impl Server {
    pub(super) async fn connect(&self) -> Result<Connection, String> {
        match &self.transport {
            Transport::Stdio { command, args, env } => self.connect_stdio(command, args, env).await,
            Transport::Http { url, headers } => {
                let mut custom = HashMap::new();
                for (name, value) in headers {
                    let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                        .map_err(|error| format!("header `{name}`: {error}"))?;
                    let value = reqwest::header::HeaderValue::from_str(value)
                        .map_err(|error| format!("header `{name}`: {error}"))?;
                    custom.insert(name, value);
                }
                let config = rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(custom);
                let transport = rmcp::transport::StreamableHttpClientTransport::from_config(config);
                let service = ().serve(transport).await.map_err(|error| error.to_string())?;
                Ok(Connection {
                    service,
                    problem: Default::default(),
                    stderr_tail: Default::default(),
                    child: None,
                    stderr_reader: None,
                })
            }
        }
    }

    async fn connect_stdio(
        &self,
        command: &str,
        args: &[String],
        env: &BTreeMap<String, String>,
    ) -> Result<Connection, String> {
        let mut program = match &self.sandbox {
            Some(sandbox) => sandbox.command(&self.workspace, command, args),
            None => crate::sandbox::unconfined(&self.workspace, command, args),
        };
        // Only what a program needs to run, and what the server's config names: not the
        // model's API key, nor any other secret of the user's environment (a workspace's
        // `.mcp.json` names programs the repository brings).
        program
            .env_clear()
            .envs(
                INHERITED_ENV
                    .iter()
                    .filter_map(|name| Some((*name, std::env::var_os(name)?))),
            )
            .envs(env);
        if let Some(sandbox) = &self.sandbox {
            program.envs(sandbox.private_env());
        }
        let mut child = tokio::process::Command::from(program)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| format!("failed to run `{command}`: {error}"))?;
        let (stdin, stdout, stderr) = (
            child.stdin.take().expect("piped"),
            child.stdout.take().expect("piped"),
            child.stderr.take().expect("piped"),
        );
        let stderr_tail: Arc<Mutex<Option<String>>> = Default::default();
        let tail = stderr_tail.clone();
        let name = self.name.clone();
        let stderr_reader = tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::info!(server = %name, "mcp stderr: {line}");
                *tail.lock().expect("never poisoned") = Some(line);
            }
        });
        let problem: Arc<Mutex<Option<String>>> = Default::default();
        let (reader, writer) = tokio::io::duplex(1 << 16);
        tokio::spawn(filter_lines(stdout, writer, problem.clone()));
        let handshake = ().serve((reader, stdin)).await;
        let service = handshake.map_err(|error| {
            problem
                .lock()
                .expect("never poisoned")
                .clone()
                .unwrap_or_else(|| {
                    let tail = stderr_tail.lock().expect("never poisoned").clone();
                    match tail {
                        Some(line) => format!("{error}; its last stderr line: {line}"),
                        None => error.to_string(),
                    }
                })
        })?;
        Ok(Connection {
            service,
            problem,
            stderr_tail,
            child: Some(child),
            stderr_reader: Some(stderr_reader),
        })
    }
}

/// Pass the child's stdout on line by line while each line is JSON; the first that is not (or
/// one over [`MAX_LINE_BYTES`]) is recorded in `problem` and ends the stream.
async fn filter_lines(
    stdout: tokio::process::ChildStdout,
    mut writer: tokio::io::DuplexStream,
    problem: Arc<Mutex<Option<String>>>,
) {
    let mut reader = tokio::io::BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        let fault = match lines::read_line(&mut reader, &mut line, MAX_LINE_BYTES).await {
            Ok(None) | Err(_) => return,
            Ok(Some(Line::Blank)) => continue,
            Ok(Some(Line::Json)) => None,
            Ok(Some(Line::TooLong)) => Some(format!(
                "the server sent a line over {MAX_LINE_BYTES} bytes"
            )),
            Ok(Some(Line::NotUtf8 | Line::NotJson(_))) => Some(format!(
                "the server sent a line that is not JSON: `{}`",
                lines::shown(&line)
            )),
        };
        if let Some(fault) = fault {
            tracing::warn!("{fault}");
            *problem.lock().expect("never poisoned") = Some(fault);
            return;
        }
        if writer.write_all(&line).await.is_err() {
            return;
        }
        if !line.ends_with(b"\n") && writer.write_all(b"\n").await.is_err() {
            return;
        }
    }
}
