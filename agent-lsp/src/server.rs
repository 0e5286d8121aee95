//! `agent-lsp serve`: the language server editors start. It brokers the workspace's child
//! servers (so the editor keeps their features through one configured server) and shares their
//! warm state and the editor's unsaved buffers with the agent's tools.
//!
//! The editor side speaks raw JSON-RPC over `lsp_bridge::framing`, like the child side: a proxy
//! must pass through methods it does not know, map ids in both directions and forward
//! `$/cancelRequest` for the right id, and owning the loop makes all three plain code (see
//! docs/decisions/0001-raw-json-rpc-proxy.md).
//!
//! The modules, by role (docs/architecture.md has the request-lifecycle table):
//! - the editor connection: `connection` (its state, writing to the editor), `intake`
//!   (reading it; forwards a request whose route is known at once), `listen` (`--listen`);
//! - the router: `router` decides who answers every message; `items` knows which child made
//!   the items `*/resolve` requests carry; `lanes` holds each child's messages in order and
//!   delivers them (starting the child), so no child holds up another; `children` forwards and
//!   wires a started child to the editor; `relay` makes the replies the server reshapes where
//!   the child's answer is read;
//! - the loop: `dispatch` is its table, `requests` a request's life on it (handed to its lane,
//!   or answered by a task), `documents` document sync, `capabilities` `initialize`;
//! - the agent host: `agent` (sessions, turns, what the editor sees of them, the editor's
//!   buffers as the tools see them);
//! - prompt documents: `prompts` (the chat format, `@path` completion), `code_actions`;
//! - inline completion: `inline`, the edge of `crate::completion`;
//! - commands: `commands`, split by family, each with typed arguments.
//!
//! Positions pass unconverted: the editor is offered UTF-16 (which every client supports), and
//! every child is asked for UTF-16 only, which every server supports, so editor and children
//! count the same units.

mod agent;
mod attach;
mod capabilities;
mod children;
mod code_actions;
mod commands;
mod connection;
mod dispatch;
mod documents;
mod inline;
mod intake;
mod items;
mod lanes;
pub(crate) mod listen;
mod prompts;
mod relay;
mod requests;
mod router;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context;
use lsp_bridge::framing::FrameWriter;
use lsp_bridge::jsonrpc;
use lsp_bridge::lsp_types::Url;
use lsp_bridge::position::PositionEncoding;
use serde_json::Value;

use crate::config::Config;
pub use connection::Shared;
use dispatch::{Flow, Server};
pub use intake::EditorInput;
pub use listen::run as run_listen;

/// JSON-RPC error codes, by their names.
pub use lsp_bridge::jsonrpc::code as codes;

/// How long an editor waits at most for a forwarded child request.
const CHILD_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the server, on its way out, waits for the editor to read what is left to send.
const WRITER_DRAIN: Duration = Duration::from_secs(5);

pub use lsp_bridge::jsonrpc::{Reply, ResponseError};

/// A failure of ours while handling a request that was fine, with its whole cause chain.
fn internal(error: anyhow::Error) -> ResponseError {
    ResponseError::internal(format!("{error:#}"))
}

/// Run the server on stdin/stdout until the editor says `exit` or closes the pipe.
pub fn run_stdio(workspace: Option<PathBuf>) -> anyhow::Result<Ending> {
    let runtime = server_runtime()?;
    runtime.block_on(async {
        let config = Config::load()?;
        // Standard input is read on a thread of its own; standard output, when it is a pipe,
        // is written directly by whichever thread has an answer (see `intake`).
        let output = match stdio_pipe_out() {
            Some(pipe) => FrameWriter::direct("editor", pipe).context("cannot write to stdout")?,
            None => FrameWriter::queued("editor", tokio::io::stdout()),
        };
        let stdin = {
            use std::os::fd::AsFd;
            std::io::stdin()
                .as_fd()
                .try_clone_to_owned()
                .context("cannot read stdin")?
        };
        let input = EditorInput::Blocking(Box::new(intake::Patient(std::fs::File::from(stdin))));
        serve(input, output, config, workspace).await
    })
}

/// The server's loop runs on one thread: a request that is not forwarded by the intake crosses
/// several tasks (request, child writer, editor writer), and on one thread each hand-off is a
/// queue push instead of waking another thread. Blocking and CPU-heavy work (file tools, the
/// file index walk and queries) runs on the blocking pool.
fn server_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// Standard output, when it is a pipe or a socket and not also standard error (logs written to
/// a non-blocking descriptor could fail with `EAGAIN`).
fn stdio_pipe_out() -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::AsFd;
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let fd = std::io::stdout().as_fd().try_clone_to_owned().ok()?;
    let err = std::io::stderr().as_fd().try_clone_to_owned().ok()?;
    let (out, err) = (
        std::fs::File::from(fd.try_clone().ok()?).metadata().ok()?,
        std::fs::File::from(err).metadata().ok()?,
    );
    let kind = out.file_type();
    if (out.dev(), out.ino()) == (err.dev(), err.ino()) || !(kind.is_fifo() || kind.is_socket()) {
        return None;
    }
    Some(fd)
}

/// Serve one editor connection: messages from `input`, to `output` (a writer and the task
/// that flushes it).
pub async fn serve(
    input: EditorInput,
    (out, writer): (Arc<FrameWriter>, tokio::task::JoinHandle<()>),
    config: Config,
    default_workspace: Option<PathBuf>,
) -> anyhow::Result<Ending> {
    let prompt_documents = prompts::PromptDocuments::new(&config.editor.prompt_documents)?;
    let agent_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("agent")
        .enable_all()
        .build()
        .context("cannot start the agent's runtime")?;
    let shared = Arc::new(Shared::new(
        out,
        config,
        default_workspace,
        prompt_documents,
        agent_runtime.handle().clone(),
    ));
    let mut server = Server {
        shared: shared.clone(),
        shutdown_requested: false,
        editor_log: None,
    };
    let (mut from_intake, queued) = intake::Intake::start(shared.clone(), input)
        .context("cannot start reading from the editor")?;
    let mut ended = Ok(Ending::InputClosed);
    while let Some(input) = from_intake.recv().await {
        let flow = match input {
            intake::Input::Message(body) => {
                let flow = match jsonrpc::decode(&body) {
                    Ok(message) => server.handle(message).await,
                    Err(refusal) => {
                        server.unreadable(refusal);
                        Flow::Continue
                    }
                };
                // Handled: a request read after it may now be forwarded directly.
                queued.fetch_sub(1, Ordering::AcqRel);
                flow
            }
            intake::Input::Failed(error) => {
                ended = Err(error).context("failed to read from the editor");
                Flow::Exit
            }
        };
        if flow == Flow::Exit {
            if ended.is_ok() {
                ended = Ok(Ending::Exit {
                    after_shutdown: server.shutdown_requested,
                });
            }
            break;
        }
    }
    // Clients attached to this bridge find it gone and take over.
    if let Some(published) = shared.shared_bridge.get() {
        published.close().await;
    }
    if let Some(bridge) = shared.bridge.get() {
        bridge.shutdown_all().await;
    }
    // What is logged from here on has no editor to go to.
    server.editor_log = None;
    shared.out.close();
    drop(server);
    drop(shared);
    // A turn still running is cut off here; its log is consistent at every append.
    agent_runtime.shutdown_background();
    // The last answers go out, unless the editor stopped reading without closing its end.
    if tokio::time::timeout(WRITER_DRAIN, writer).await.is_err() {
        tracing::warn!("the editor stopped reading: unsent answers are dropped");
    }
    ended
}

/// How an editor connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// The editor said `exit`: the process then exits with 0 if `shutdown` came first and
    /// with 1 if not, as the protocol says.
    Exit { after_shutdown: bool },
    /// The editor closed its end.
    InputClosed,
}

/// Ask every child for UTF-16 only, so positions need no conversion between editor and child;
/// read its output on a thread, where the editor's requests are answered; and offer it the
/// editor's `textDocument` capabilities (under the bridge's), so it answers the editor as it
/// would answer the editor directly.
pub(crate) fn editor_bridge_config(
    config: &Config,
    editor_capabilities: &serde_json::Value,
) -> anyhow::Result<lsp_bridge::BridgeConfig> {
    let mut bridge = config.bridge_config()?;
    let text_document = editor_capabilities
        .get("textDocument")
        .filter(|value| value.is_object());
    for server in &mut bridge.servers {
        server.position_encodings = vec![PositionEncoding::Utf16];
        // The editor's requests are forwarded and answered on the child's output thread.
        server.output_thread = true;
        server.editor_text_document = text_document.cloned();
    }
    Ok(bridge)
}

/// The URI of the document a message is about, if its params name one.
pub(crate) fn document_uri(params: &Value) -> Option<&str> {
    params["textDocument"]["uri"]
        .as_str()
        .or_else(|| params["item"]["uri"].as_str())
        .or_else(|| params["uri"].as_str())
}

/// The document a request or notification is about, if its params name one.
pub(crate) fn document_path(params: &Value) -> Option<PathBuf> {
    Url::parse(document_uri(params)?).ok()?.to_file_path().ok()
}
