//! `agent-lsp mcp serve --http ADDR`: the same MCP server over streamable HTTP (rmcp's
//! server transport behind axum), at `http://ADDR/mcp`.
//!
//! The tools read the workspace with this user's rights, so who may reach them matters more
//! than over stdio, where only the process that started us can talk:
//!
//! - **Loopback only, unless asked.** An address that is not loopback is refused without
//!   `--allow-remote`; an unspecified one (`0.0.0.0`, `::`) is always refused, because it also
//!   listens on loopback, where the `Host` check below could not tell a rebound name from ours.
//! - **DNS rebinding.** A web page can make a browser send requests to `127.0.0.1:PORT` under a
//!   name of its own. Every request's `Host` must name the bound address (for loopback also
//!   `localhost`) with the bound port, and a request that carries an `Origin` (every browser's
//!   cross-origin request does) must come from that same authority over `http`; anything else
//!   is answered 403 by rmcp before it reaches a tool. Clients that are not browsers send no
//!   `Origin` and pass.
//! - **One server, one session log.** Each MCP session of each client gets a clone of the same
//!   [`McpServer`], so every call, from whichever client, is recorded one at a time in the
//!   server's one session, as over stdio.
//! - **Sessions are reclaimed.** At most [`MAX_SESSIONS`] live at once and a session unused for
//!   [`IDLE_TIMEOUT`] is closed (`sessions.rs`), so clients that never send `DELETE` cannot
//!   hold memory without bound; a `DELETE` ends its session at once and is answered 204 No
//!   Content (rmcp answers 202, which the MCP SDKs do not expect).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use anyhow::Context;
use axum::body::Body;
use axum::http::{Method, Request, Response, StatusCode};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::McpServer;
use super::sessions::BoundedSessions;
pub use super::sessions::{IDLE_TIMEOUT, MAX_SESSIONS};

/// The path the MCP endpoint is served at (the one clients assume).
pub const PATH: &str = "/mcp";

/// Refuse an address the server must not listen on: unspecified ones always, others that are
/// not loopback unless `allow_remote`.
pub fn check_address(address: SocketAddr, allow_remote: bool) -> anyhow::Result<()> {
    let ip = address.ip();
    if ip.is_unspecified() {
        anyhow::bail!(
            "refusing to listen on {address}: an unspecified address also listens on loopback, \
             where DNS rebinding cannot be told apart; name one address (127.0.0.1:PORT, or with \
             --allow-remote one of this machine's addresses)"
        );
    }
    if !ip.is_loopback() && !allow_remote {
        anyhow::bail!(
            "refusing to listen on {address}: it is not a loopback address, and anyone who can \
             reach it could read this workspace through the tools; use 127.0.0.1:PORT, or pass \
             --allow-remote if that is what you want"
        );
    }
    Ok(())
}

/// The `Host` authorities a request may name: the bound address with its port, and for a
/// loopback address `localhost` with the port too.
pub fn allowed_hosts(bound: SocketAddr) -> Vec<String> {
    let mut hosts = vec![authority(bound.ip(), bound.port())];
    if bound.ip().is_loopback() {
        hosts.push(format!("localhost:{}", bound.port()));
    }
    hosts
}

/// The origins a browser's request may come from: the server's own, over `http`.
pub fn allowed_origins(bound: SocketAddr) -> Vec<String> {
    allowed_hosts(bound)
        .into_iter()
        .map(|host| format!("http://{host}"))
        .collect()
}

fn authority(ip: IpAddr, port: u16) -> String {
    match ip {
        IpAddr::V4(ip) => format!("{ip}:{port}"),
        IpAddr::V6(ip) => format!("[{ip}]:{port}"),
    }
}

/// Serve `server` on `listener` until `cancel` fires; every MCP session is a clone of it.
pub async fn serve(
    server: McpServer,
    listener: tokio::net::TcpListener,
    cancel: CancellationToken,
) -> anyhow::Result<()> {
    let bound = listener
        .local_addr()
        .context("failed to read the bound address")?;
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(allowed_hosts(bound))
        .with_allowed_origins(allowed_origins(bound))
        .with_cancellation_token(cancel.child_token());
    let sessions = Arc::new(BoundedSessions::new(MAX_SESSIONS, IDLE_TIMEOUT));
    tokio::spawn(sweep_idle(sessions.clone(), cancel.child_token()));
    let service = StreamableHttpService::new(move || Ok(server.clone()), sessions, config);
    // `route_service`, not `nest_service`: nesting can drop the `Host` header the rebinding
    // check reads (rmcp's note in `parse_host_header`).
    let router = axum::Router::new()
        .route_service(PATH, service)
        .layer(axum::middleware::from_fn(deleted_is_no_content));
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { cancel.cancelled().await })
        .await
        .context("the MCP HTTP server failed")
}

/// Close idle sessions every so often until `cancel` fires.
async fn sweep_idle(sessions: Arc<BoundedSessions>, cancel: CancellationToken) {
    let mut every = tokio::time::interval(sessions.sweep_interval());
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = every.tick() => sessions.reclaim_idle().await,
        }
    }
}

/// A `DELETE` rmcp accepted (202) is answered 204 No Content: the session is gone by then, and
/// the MCP SDKs take 200 or 204 as success.
async fn deleted_is_no_content(
    request: Request<Body>,
    next: axum::middleware::Next,
) -> Response<Body> {
    let delete = request.method() == Method::DELETE;
    let response = next.run(request).await;
    if delete && response.status() == StatusCode::ACCEPTED {
        let (mut parts, _) = response.into_parts();
        parts.status = StatusCode::NO_CONTENT;
        return Response::from_parts(parts, Body::empty());
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn only_loopback_listens_without_allow_remote() {
        assert!(check_address(address("127.0.0.1:8080"), false).is_ok());
        assert!(check_address(address("[::1]:8080"), false).is_ok());
        let refused = check_address(address("192.168.1.4:8080"), false).unwrap_err();
        assert!(refused.to_string().contains("--allow-remote"), "{refused}");
        assert!(check_address(address("192.168.1.4:8080"), true).is_ok());
        for unspecified in ["0.0.0.0:8080", "[::]:8080"] {
            assert!(check_address(address(unspecified), true).is_err());
        }
    }

    #[test]
    fn hosts_and_origins_name_the_bound_authority() {
        assert_eq!(
            allowed_hosts(address("127.0.0.1:4100")),
            ["127.0.0.1:4100", "localhost:4100"]
        );
        assert_eq!(
            allowed_origins(address("[::1]:4100")),
            ["http://[::1]:4100", "http://localhost:4100"]
        );
        assert_eq!(allowed_hosts(address("10.0.0.2:4100")), ["10.0.0.2:4100"]);
    }
}
