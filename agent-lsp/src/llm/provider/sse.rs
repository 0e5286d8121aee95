//! A Server-Sent Events decoder with bounded lines and events, linear in the bytes it reads.
//!
//! The endpoint is not trusted to frame its stream sensibly. `eventsource-stream` keeps an
//! unterminated line in a buffer without limit and parses that buffer again from its start for
//! every piece of body that arrives, so one endless line cost a whole core (12 MB in 5 s, then
//! slower and slower) and as much memory as the endpoint sent. This decoder scans each byte
//! once, and refuses a line longer than [`MAX_LINE_BYTES`] or an event whose data passes
//! [`MAX_EVENT_BYTES`] as soon as it gets there. A chat-completions chunk is a few hundred
//! bytes; the limits leave room for endpoints that send a whole answer as one event.
//!
//! It follows the HTML Living Standard's event-stream interpretation for what the agent uses:
//! lines end in LF, CRLF or CR; a line starting with `:` is a comment (keep-alive); `data` lines
//! accumulate with LF between them; `event` names the type; a blank line dispatches an event
//! that has data; `id`, `retry` and unknown fields are ignored; a leading BOM is skipped; an
//! event left unterminated at the end of the stream is dropped.

use std::collections::VecDeque;

/// Longest line accepted, in bytes, without its terminator.
pub(crate) const MAX_LINE_BYTES: usize = 8 << 20;
/// Most data one event may carry, in bytes.
pub(crate) const MAX_EVENT_BYTES: usize = 8 << 20;

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// `message` unless an `event` field named another type.
    pub event: String,
    pub data: String,
}

/// Why the stream cannot be decoded; the reader stops at the first one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SseError {
    #[error("a line of the event stream is longer than {} MiB", MAX_LINE_BYTES >> 20)]
    LineTooLong,
    #[error("an event of the stream carries more than {} MiB of data", MAX_EVENT_BYTES >> 20)]
    EventTooLarge,
    #[error("line {line} of the event stream is not UTF-8")]
    NotUtf8 { line: u64 },
}

/// Incremental decoder: feed it the body's pieces, take the events it completed.
#[derive(Debug, Default)]
pub(crate) struct SseDecoder {
    /// The line being read, without its terminator.
    line: Vec<u8>,
    event: String,
    data: String,
    has_data: bool,
    /// The last piece ended in CR: an LF that starts the next one belongs to that CRLF.
    after_cr: bool,
    started: bool,
    lines: u64,
}

impl SseDecoder {
    /// Decode `bytes`, appending every event they complete to `out`.
    pub(crate) fn push(
        &mut self,
        mut bytes: &[u8],
        out: &mut VecDeque<SseEvent>,
    ) -> Result<(), SseError> {
        if !self.started && !bytes.is_empty() {
            self.started = true;
            bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
        }
        while !bytes.is_empty() {
            if std::mem::take(&mut self.after_cr) && bytes[0] == b'\n' {
                bytes = &bytes[1..];
                continue;
            }
            let Some(end) = bytes
                .iter()
                .position(|&byte| byte == b'\n' || byte == b'\r')
            else {
                if self.line.len() + bytes.len() > MAX_LINE_BYTES {
                    return Err(SseError::LineTooLong);
                }
                self.line.extend_from_slice(bytes);
                return Ok(());
            };
            if self.line.len() + end > MAX_LINE_BYTES {
                return Err(SseError::LineTooLong);
            }
            self.after_cr = bytes[end] == b'\r';
            let line = if self.line.is_empty() {
                self.take_line(&bytes[..end], out)
            } else {
                self.line.extend_from_slice(&bytes[..end]);
                let line = std::mem::take(&mut self.line);
                let taken = self.take_line(&line, out);
                self.line = line;
                self.line.clear();
                taken
            };
            line?;
            bytes = &bytes[end + 1..];
        }
        Ok(())
    }

    fn take_line(&mut self, line: &[u8], out: &mut VecDeque<SseEvent>) -> Result<(), SseError> {
        self.lines += 1;
        if line.is_empty() {
            if std::mem::take(&mut self.has_data) {
                let mut data = std::mem::take(&mut self.data);
                data.pop(); // the LF after the last data line
                let event = match std::mem::take(&mut self.event) {
                    event if event.is_empty() => "message".to_owned(),
                    event => event,
                };
                out.push_back(SseEvent { event, data });
            } else {
                self.event.clear();
            }
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match line.iter().position(|&byte| byte == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        let number = self.lines;
        let text =
            |value| std::str::from_utf8(value).map_err(|_| SseError::NotUtf8 { line: number });
        match field {
            b"data" => {
                if self.data.len() + value.len() + 1 > MAX_EVENT_BYTES {
                    return Err(SseError::EventTooLarge);
                }
                self.data.push_str(text(value)?);
                self.data.push('\n');
                self.has_data = true;
            }
            b"event" => self.event = text(value)?.to_owned(),
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The events of `stream` fed in pieces of `piece` bytes.
    fn decode(stream: &[u8], piece: usize) -> Result<Vec<SseEvent>, SseError> {
        let mut decoder = SseDecoder::default();
        let mut out = VecDeque::new();
        for chunk in stream.chunks(piece) {
            decoder.push(chunk, &mut out)?;
        }
        Ok(out.into())
    }

    fn event(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
        }
    }

    #[test]
    fn decodes_the_same_events_whatever_the_pieces_and_line_ends() {
        let stream = b"\xef\xbb\xbf: keep-alive\n\ndata: {\"a\":1}\n\nevent: error\ndata:x\r\ndata:  y\r\n\r\nid: 7\nretry: 10\ndata\n\rdata: cut";
        let expected = vec![
            event("message", "{\"a\":1}"),
            event("error", "x\n y"),
            event("message", ""),
        ];
        for piece in [1, 2, 3, 7, stream.len()] {
            assert_eq!(
                decode(stream, piece).unwrap(),
                expected,
                "pieces of {piece}"
            );
        }
    }

    #[test]
    fn a_line_or_an_event_over_the_limit_is_refused_at_the_limit() {
        let mut decoder = SseDecoder::default();
        let mut out = VecDeque::new();
        decoder.push(b"data: ", &mut out).unwrap();
        let block = vec![b'x'; 1 << 20];
        let mut fed = 6;
        let error = loop {
            match decoder.push(&block, &mut out) {
                Ok(()) => fed += block.len(),
                Err(error) => break error,
            }
        };
        assert_eq!(error, SseError::LineTooLong);
        assert!(fed <= MAX_LINE_BYTES, "{fed}");
        assert!(decoder.line.capacity() <= 2 * MAX_LINE_BYTES);

        let line = format!("data: {}\n", "y".repeat(1 << 20));
        let many = line.repeat(MAX_EVENT_BYTES / (1 << 20) + 1);
        assert_eq!(
            decode(many.as_bytes(), 4096).unwrap_err(),
            SseError::EventTooLarge
        );
    }

    #[test]
    fn invalid_utf8_names_its_line() {
        assert_eq!(
            decode(b"data: a\n\ndata: \xff\n\n", 5).unwrap_err(),
            SseError::NotUtf8 { line: 3 }
        );
    }
}
