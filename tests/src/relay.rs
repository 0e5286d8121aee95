//! What the relay baselines of the proxy benchmark (`benches/proxy.rs`) share: `byte-relay`,
//! `frame-relay` and `json-relay` each start the command given as their arguments and stand
//! between it and the editor, doing less than `agent-lsp serve` in different ways. The two
//! that read whole messages write each on in one piece, as `serve` does.

use std::io::{BufRead, Write};

/// Start the command named by this process's arguments with piped stdin and stdout; `usage`
/// names the relay in the error.
pub fn spawn_relayed_command(
    usage: &str,
) -> (
    std::process::Child,
    std::process::ChildStdin,
    std::process::ChildStdout,
) {
    let mut args = std::env::args().skip(1);
    let program = args
        .next()
        .unwrap_or_else(|| panic!("usage: {usage} COMMAND [ARGS...]"));
    let mut child = std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the command");
    let stdin = child.stdin.take().expect("piped");
    let stdout = child.stdout.take().expect("piped");
    (child, stdin, stdout)
}

/// This process's stdout without `std`'s line buffering, which would write a frame's header
/// (it ends in a newline) and its body in two `write`s.
pub fn raw_stdout() -> std::fs::File {
    use std::os::fd::AsFd;
    let fd = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .expect("stdout is open");
    std::fs::File::from(fd)
}

/// One frame's body, or `None` at the end of the stream.
pub fn read_frame(reader: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut length = None;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some(value) = header.strip_prefix("Content-Length:") {
            length = value.trim().parse::<usize>().ok();
        }
    }
    let mut body = vec![0; length?];
    reader.read_exact(&mut body).ok()?;
    Some(body)
}

/// Header and body in one `write`, as `agent-lsp` does.
pub fn write_frame(writer: &mut impl Write, body: &[u8]) -> std::io::Result<()> {
    let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    frame.extend_from_slice(body);
    writer.write_all(&frame)?;
    writer.flush()
}
