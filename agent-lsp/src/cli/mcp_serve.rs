//! `agent-lsp mcp serve`: a host as `agent-lsp tool` makes one, with the MCP server's own
//! tools in its catalog and a session that records the calls; then MCP over stdio until the
//! client closes it, or over streamable HTTP (`--http ADDR`) until Ctrl-C or SIGTERM (see
//! [`crate::mcp_serve`]).

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;

use crate::activity::Activity;
use crate::config::Config;
use crate::file_index::{FilesConfig, LiveIndex};
use crate::host::{Host, Start, ToolHost};
use crate::mcp_serve::McpServer;
use crate::mcp_serve::tools::{FilesTool, SessionListTool, SessionShowTool};
use crate::preset::{Preset, PresetDirs};
use crate::session::store::Store;
use crate::tools::HeadlessAsker;
use crate::workspace::Workspace;

#[derive(Debug, Args)]
pub struct McpServeArgs {
    /// Also offer `write` and `edit` (under the `standard` preset's permissions instead of
    /// `readonly`'s). Without it the server only reads.
    #[arg(long)]
    pub allow_write: bool,
    /// Preset whose tools, permissions and limits apply (default: `readonly`, or `standard`
    /// with --allow-write). Calls whose permission is `ask` are refused: nobody is asked.
    #[arg(long)]
    pub preset: Option<String>,
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio (port 0 picks a free port;
    /// the URL is printed on stderr). Only loopback addresses, unless --allow-remote.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// Let --http listen on an address that is not loopback. Anyone who reaches it can call the
    /// tools (there is no authentication); requests must still name that address as `Host`.
    #[arg(long, requires = "http")]
    pub allow_remote: bool,
}

pub fn run(store: &Store, args: McpServeArgs) -> anyhow::Result<ExitCode> {
    // Refuse a forbidden address before anything starts.
    if let Some(address) = args.http {
        crate::mcp_serve::http::check_address(address, args.allow_remote)?;
    }
    let config = Config::load()?;
    let preset_name = args.preset.as_deref().unwrap_or(if args.allow_write {
        "standard"
    } else {
        "readonly"
    });
    let preset = Preset::load(preset_name, &PresetDirs::for_workspace(store.workspace()))?;
    let workspace = Workspace::new(store.workspace())?;
    let index = LiveIndex::start(&workspace, FilesConfig::from_options(&config.files), true)
        .context("failed to start the file index")?;
    let mut tools = ToolHost::owned(
        store,
        &config,
        Arc::new(HeadlessAsker { yes: false }),
        "mcp serve",
    )?;
    // The calls are another agent's, which runs hooks of its own; the user's are for theirs.
    tools.hooks = Default::default();
    tools.front_end = vec![
        Arc::new(FilesTool {
            index: Arc::new(index),
        }),
        Arc::new(SessionListTool {
            store: store.clone(),
        }),
        Arc::new(SessionShowTool {
            store: store.clone(),
        }),
    ];
    let host = Host::new(store.clone(), Arc::new(Activity::default()), tools);
    let preset_name = preset.name.clone();
    let conversation = host.open(host.choose(Start::New(preset))?, None, None)?;
    let (runtime, session) = conversation.into_tools_and_session();
    let id = session.id().to_owned();
    // stdout carries the protocol; the one line for the person who started us goes to stderr.
    eprintln!(
        "agent-lsp mcp serve: preset {preset_name}, recording calls in session {id} (agent-lsp session show {})",
        &id[id.len().saturating_sub(4)..]
    );
    let server = McpServer::new(runtime, session, args.allow_write);
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    tokio.block_on(async {
        let result = match args.http {
            Some(address) => serve_http(server, address).await,
            None => {
                crate::mcp_serve::stdio::serve(server, tokio::io::stdin(), tokio::io::stdout())
                    .await
            }
        };
        host.shutdown().await;
        result
    })?;
    // A pending stdin read cannot be cancelled (tokio reads stdin on a blocking thread); the
    // client has closed the connection, so nothing is lost by not waiting for it.
    tokio.shutdown_background();
    Ok(ExitCode::SUCCESS)
}

async fn serve_http(server: McpServer, address: SocketAddr) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("failed to listen on {address}"))?;
    let bound = listener.local_addr()?;
    eprintln!(
        "agent-lsp mcp serve: listening on http://{bound}{}",
        crate::mcp_serve::http::PATH
    );
    let cancel = tokio_util::sync::CancellationToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        if let Err(error) = crate::server::listen::stop_signal().await {
            tracing::error!(%error, "cannot watch for signals; stop the server with SIGKILL");
            return;
        }
        stop.cancel();
    });
    crate::mcp_serve::http::serve(server, listener, cancel).await
}
