//! The MCP sessions of `agent-lsp mcp serve --http`, over raw HTTP/1.1: a client that never
//! sends `DELETE` cannot hold memory without bound (the live sessions are capped, the least
//! recently used closed first), and a `DELETE` is answered 204 and ends its session.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::mcp_serve::HttpServer;

/// `mcp serve --http`'s cap on live sessions (`agent_lsp::mcp_serve::http::MAX_SESSIONS`).
const MAX_SESSIONS: usize = agent_lsp::mcp_serve::http::MAX_SESSIONS;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// One HTTP/1.1 exchange on a connection of its own: the status and the response head.
fn exchange(port: u16, method: &str, session: Option<&str>, body: &str) -> (u16, String) {
    let session = session
        .map(|id| format!("Mcp-Session-Id: {id}\r\nMcp-Protocol-Version: 2025-06-18\r\n"))
        .unwrap_or_default();
    let request = format!(
        "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{session}Content-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    // Read the head; the body (an SSE stream for a request) is not needed.
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            other => panic!("the response ended in its head ({other:?}): {head:?}"),
        }
    }
    let head = String::from_utf8(head).unwrap();
    let status = head
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {head:?}"));
    (status, head)
}

/// Initialize a session and return its id.
fn initialize(port: u16) -> String {
    let (status, head) = exchange(port, "POST", None, INITIALIZE);
    assert_eq!(status, 200, "{head}");
    head.lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session id in {head}"))
}

/// Whether the server still knows `session`: a notification to it is accepted (202), or the
/// session is not found (404).
fn alive(port: u16, session: &str) -> bool {
    match exchange(port, "POST", Some(session), INITIALIZED) {
        (202, _) => true,
        (404, _) => false,
        (status, head) => panic!("unexpected answer {status}: {head}"),
    }
}

#[test]
fn three_thousand_sessions_never_deleted_keep_memory_bounded() {
    let workspace = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let server = HttpServer::start(workspace.path(), state.path());
    let pid = server.child.id();
    let sessions = (0..3000)
        .map(|_| initialize(server.port))
        .collect::<Vec<_>>();
    let peak = agent_tests::processes::peak_rss_kib(pid);
    eprintln!("3000 sessions never deleted: peak RSS {peak} KiB");
    // Without the cap every session was kept: 582 MB for 3,000.
    assert!(peak < 150 * 1024, "peak RSS {peak} KiB");
    // The newest MAX_SESSIONS live, every older one was closed to make room for them. (Asking
    // the newest first: asking uses a session, and must not change which ones are oldest.)
    let (closed, live) = sessions.split_at(sessions.len() - MAX_SESSIONS);
    for session in live.iter().rev() {
        assert!(alive(server.port, session), "{session} was closed");
    }
    for session in closed.iter().rev().take(10).chain(closed.iter().take(10)) {
        assert!(!alive(server.port, session), "{session} still lives");
    }
    assert!(server.stop().success());
}

#[test]
fn a_deleted_session_is_answered_no_content_and_is_gone() {
    let workspace = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let server = HttpServer::start(workspace.path(), state.path());
    let session = initialize(server.port);
    let other = initialize(server.port);
    assert!(alive(server.port, &session));
    let (status, head) = exchange(server.port, "DELETE", Some(&session), "");
    assert_eq!(status, 204, "{head}");
    assert!(!alive(server.port, &session));
    // Only that session ended.
    assert!(alive(server.port, &other));
    assert!(server.stop().success());
}
