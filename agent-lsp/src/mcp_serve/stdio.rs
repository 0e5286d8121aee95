//! `agent-lsp mcp serve` over stdio, with a line filter in front of rmcp's transport: rmcp skips
//! a line that is not JSON without a word, where JSON-RPC 2.0 asks for a parse error with a
//! null id.
//!
//! stdin is read line by line (`crate::mcp::lines`, the reader the MCP client's filter uses
//! too): a JSON line goes on to rmcp unchanged and in order; a line that is not UTF-8, not
//! JSON, or over [`MAX_LINE_BYTES`] (the rest of it is passed over up to its newline) is
//! answered with `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,…}}` and rmcp never sees it;
//! JSON that is no JSON-RPC 2.0 message (`42`, `{"jsonrpc":"1.0",…}`) gets -32600 likewise.
//! stdout has one writer, a task that writes whole lines from one channel: rmcp writes into a
//! pipe whose lines are relayed to that channel, and the filter sends its answers there too, so
//! the two never interleave within a line.

use anyhow::Context;
use lsp_bridge::jsonrpc::{self, ResponseError, code};
use rmcp::ServiceExt;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;

use super::McpServer;
use crate::mcp::lines::{self, Line};

/// The longest line a client may send (one JSON-RPC message).
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// Serve `server` on `input` and `output` until the client closes `input` (or rmcp stops).
pub async fn serve(
    server: McpServer,
    input: impl AsyncRead + Unpin + Send + 'static,
    output: impl AsyncWrite + Unpin + Send + 'static,
) -> anyhow::Result<()> {
    let (sender, receiver) = mpsc::channel(64);
    let writer = tokio::spawn(write_lines(output, receiver));
    let (to_rmcp, rmcp_input) = tokio::io::duplex(1 << 16);
    let (rmcp_output, from_rmcp) = tokio::io::duplex(1 << 16);
    let filter = tokio::spawn(filter_input(input, to_rmcp, sender.clone()));
    let relay = tokio::spawn(relay_lines(from_rmcp, sender));
    let result = async {
        let service = server
            .serve((rmcp_input, rmcp_output))
            .await
            .context("the MCP handshake failed")?;
        service
            .waiting()
            .await
            .map(drop)
            .context("the MCP service failed")
    }
    .await;
    // rmcp has dropped its end of the pipe, so the relay has all it wrote. The filter may still
    // wait on stdin when rmcp stopped by itself; its answers are of no use then.
    let _ = relay.await;
    filter.abort();
    let _ = filter.await;
    let _ = writer.await;
    result
}

/// Pass `input` on to rmcp line by line while each line is JSON; answer every other line with
/// a parse error through `answers`.
async fn filter_input(
    input: impl AsyncRead + Unpin,
    mut to_rmcp: DuplexStream,
    answers: mpsc::Sender<Vec<u8>>,
) {
    let mut reader = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        let problem = match lines::read_line(&mut reader, &mut line, MAX_LINE_BYTES).await {
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(%error, "failed to read stdin");
                return;
            }
            Ok(Some(Line::Blank)) => continue,
            Ok(Some(Line::Json)) => {
                if let Some((id, problem)) = not_a_message(&line) {
                    let answer = jsonrpc::error_response(
                        &id,
                        &ResponseError::new(
                            code::INVALID_REQUEST,
                            format!("Invalid Request: {problem}"),
                        ),
                    );
                    tracing::warn!(line = %lines::shown(&line), "refused a line from the client: {problem}");
                    let mut bytes = answer.to_string().into_bytes();
                    bytes.push(b'\n');
                    if answers.send(bytes).await.is_err() {
                        return;
                    }
                    continue;
                }
                if to_rmcp.write_all(&line).await.is_err()
                    || (!line.ends_with(b"\n") && to_rmcp.write_all(b"\n").await.is_err())
                {
                    return;
                }
                continue;
            }
            Ok(Some(Line::TooLong)) => {
                if lines::skip_line(&mut reader).await.is_err() {
                    return;
                }
                format!("the line is over {MAX_LINE_BYTES} bytes")
            }
            Ok(Some(Line::NotUtf8)) => "the line is not UTF-8".to_owned(),
            Ok(Some(Line::NotJson(reason))) => format!("the line is not JSON ({reason})"),
        };
        tracing::warn!(line = %lines::shown(&line), "refused a line from the client: {problem}");
        let answer = jsonrpc::error_response(
            &Value::Null,
            &ResponseError::new(code::PARSE_ERROR, format!("Parse error: {problem}")),
        );
        let mut bytes = answer.to_string().into_bytes();
        bytes.push(b'\n');
        if answers.send(bytes).await.is_err() {
            return;
        }
    }
}

/// Why a JSON line is no JSON-RPC 2.0 message (rmcp would skip it without a word), with the
/// id to answer: not an object (`42`, a batch, which MCP does not have), or an object whose
/// `jsonrpc` is not `"2.0"`. Everything else goes to rmcp, which answers what it cannot read.
fn not_a_message(line: &[u8]) -> Option<(Value, String)> {
    let value: Value = serde_json::from_slice(line).ok()?;
    let Value::Object(message) = value else {
        return Some((Value::Null, "a message is a JSON object".to_owned()));
    };
    let id = match message.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        _ => Value::Null,
    };
    (message.get("jsonrpc") != Some(&Value::from("2.0")))
        .then(|| (id, "`jsonrpc` must be \"2.0\"".to_owned()))
}

/// Send what rmcp writes on to the writer, a whole line at a time.
async fn relay_lines(from_rmcp: DuplexStream, lines: mpsc::Sender<Vec<u8>>) {
    let mut reader = BufReader::new(from_rmcp);
    loop {
        let mut line = Vec::new();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if !line.ends_with(b"\n") {
            line.push(b'\n');
        }
        if lines.send(line).await.is_err() {
            return;
        }
    }
}

/// The one writer of `output`: each line whole, flushed as it comes.
async fn write_lines(mut output: impl AsyncWrite + Unpin, mut lines: mpsc::Receiver<Vec<u8>>) {
    while let Some(line) = lines.recv().await {
        if let Err(error) = async {
            output.write_all(&line).await?;
            output.flush().await
        }
        .await
        {
            tracing::warn!(%error, "failed to write stdout");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines in, the lines the filter passes on to rmcp and the answers it sends.
    async fn check(input: &[u8]) -> (String, Vec<Value>) {
        let (to_rmcp, mut rmcp_input) = tokio::io::duplex(1 << 16);
        let (sender, mut receiver) = mpsc::channel(64);
        filter_input(input, to_rmcp, sender).await;
        let mut passed = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut rmcp_input, &mut passed)
            .await
            .unwrap();
        let mut answers = Vec::new();
        while let Some(line) = receiver.recv().await {
            answers.push(serde_json::from_slice(&line).unwrap());
        }
        (passed, answers)
    }

    #[tokio::test]
    async fn json_rpc_passes_and_the_rest_is_answered() {
        let (passed, answers) = check(
            b"{\"jsonrpc\":\"2.0\",\"id\":1}\nnot json\n\n\"\xff\"\n{\"jsonrpc\":\"2.0\",\"id\":2}\n[3]\n{\"id\":4}",
        )
        .await;
        assert_eq!(
            passed,
            "{\"jsonrpc\":\"2.0\",\"id\":1}\n{\"jsonrpc\":\"2.0\",\"id\":2}\n"
        );
        let codes: Vec<_> = answers
            .iter()
            .map(|answer| (answer["id"].clone(), answer["error"]["code"].clone()))
            .collect();
        assert_eq!(
            codes,
            [
                (Value::Null, Value::from(-32700)),
                (Value::Null, Value::from(-32700)),
                (Value::Null, Value::from(-32600)),
                (Value::from(4), Value::from(-32600)),
            ],
            "{answers:?}"
        );
        assert!(answers.iter().all(|answer| answer["jsonrpc"] == "2.0"));
        let message = answers[0]["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("Parse error: the line is not JSON (expected"),
            "{message}"
        );
        assert_eq!(
            answers[1]["error"]["message"],
            "Parse error: the line is not UTF-8"
        );
        assert_eq!(
            answers[2]["error"]["message"],
            "Invalid Request: a message is a JSON object"
        );
    }

    #[tokio::test]
    async fn a_long_line_is_answered_and_passed_over_to_its_newline() {
        let mut input = vec![b'['];
        input.resize(MAX_LINE_BYTES + 10, b'1');
        input.extend_from_slice(b"]\n{\"jsonrpc\":\"2.0\",\"id\":2}\n");
        let (passed, answers) = check(&input).await;
        assert_eq!(passed, "{\"jsonrpc\":\"2.0\",\"id\":2}\n");
        assert_eq!(answers.len(), 1, "{answers:?}");
        assert_eq!(
            answers[0]["error"]["message"],
            format!("Parse error: the line is over {MAX_LINE_BYTES} bytes")
        );
    }
}
