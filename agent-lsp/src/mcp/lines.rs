//! MCP's stdio framing, one JSON-RPC message a line, read with a bound on the line's length and
//! a verdict on whether the line is a JSON text: the one reader behind both line filters in
//! front of rmcp's stdio transports, the client's ([`super::client`]: a server's line that is
//! not JSON ends the connection) and `agent-lsp mcp serve`'s ([`crate::mcp_serve`]: a client's
//! gets a `-32700` answer). rmcp itself skips such a line without a word.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt};

/// One line read by [`read_line`].
#[derive(Debug, PartialEq)]
pub enum Line {
    /// A JSON text; the buffer holds the line as it was read, its newline included when it had
    /// one.
    Json,
    /// Nothing but white space.
    Blank,
    /// Longer than the bound; only the bound's worth (and a byte) was read, the rest of the line
    /// is still in the reader ([`skip_line`] passes over it).
    TooLong,
    /// Not UTF-8.
    NotUtf8,
    /// UTF-8, but not a JSON text; the reason is serde_json's.
    NotJson(String),
}

/// Read one line into `line` (cleared first), of at most `max_bytes` bytes before its newline;
/// `None` at the end of the stream.
pub async fn read_line(
    reader: &mut (impl AsyncBufRead + Unpin),
    line: &mut Vec<u8>,
    max_bytes: usize,
) -> std::io::Result<Option<Line>> {
    line.clear();
    if reader
        .take(max_bytes as u64 + 1)
        .read_until(b'\n', line)
        .await?
        == 0
    {
        return Ok(None);
    }
    let content = line.strip_suffix(b"\n").unwrap_or(line);
    if content.len() > max_bytes {
        return Ok(Some(Line::TooLong));
    }
    let text = content.trim_ascii();
    if text.is_empty() {
        return Ok(Some(Line::Blank));
    }
    // serde_json does not check the UTF-8 of strings it ignores, and rmcp refuses it.
    if std::str::from_utf8(text).is_err() {
        return Ok(Some(Line::NotUtf8));
    }
    Ok(Some(
        match serde_json::from_slice::<serde::de::IgnoredAny>(text) {
            Ok(_) => Line::Json,
            Err(error) => Line::NotJson(error.to_string()),
        },
    ))
}

/// Pass over the rest of the current line, its newline included, without keeping it.
pub async fn skip_line(reader: &mut (impl AsyncBufRead + Unpin)) -> std::io::Result<()> {
    loop {
        let buffer = reader.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(());
        }
        match buffer.iter().position(|&byte| byte == b'\n') {
            Some(newline) => {
                reader.consume(newline + 1);
                return Ok(());
            }
            None => {
                let all = buffer.len();
                reader.consume(all);
            }
        }
    }
}

/// A few characters of a line, to name it in a message.
pub fn shown(line: &[u8]) -> String {
    String::from_utf8_lossy(line.trim_ascii())
        .chars()
        .take(200)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max_bytes: usize) -> Vec<(Line, String)> {
        let mut reader = tokio::io::BufReader::with_capacity(4, input);
        let mut line = Vec::new();
        let mut seen = Vec::new();
        while let Some(verdict) = read_line(&mut reader, &mut line, max_bytes).await.unwrap() {
            if verdict == Line::TooLong {
                skip_line(&mut reader).await.unwrap();
            }
            seen.push((verdict, String::from_utf8_lossy(&line).into_owned()));
        }
        seen
    }

    #[tokio::test]
    async fn verdicts_line_by_line() {
        let seen = lines(
            b"{\"a\":1}\n\n  \nnot json\n\"\xff\"\n[1,2,3,4,5,6,7,8,9]\n{}\n[1]",
            10,
        )
        .await;
        let verdicts: Vec<_> = seen.iter().map(|(verdict, _)| verdict).collect();
        assert!(matches!(
            verdicts.as_slice(),
            [
                Line::Json,
                Line::Blank,
                Line::Blank,
                Line::NotJson(_),
                Line::NotUtf8,
                Line::TooLong,
                Line::Json,
                Line::Json,
            ]
        ));
        assert_eq!(seen[0].1, "{\"a\":1}\n");
        assert_eq!(seen[6].1, "{}\n");
        assert_eq!(seen[7].1, "[1]");
    }

    #[tokio::test]
    async fn a_line_of_exactly_the_bound_is_taken() {
        let seen = lines(b"[1,2,3,45]\n[1,2,3,456]\n[]\n", 10).await;
        let verdicts: Vec<_> = seen.iter().map(|(verdict, _)| verdict).collect();
        assert_eq!(verdicts, [&Line::Json, &Line::TooLong, &Line::Json]);
    }
}
