//! The least a proxy process can do: start the command given as arguments and copy bytes
//! between our stdio and its stdio, one blocking thread per direction, no parsing.
//!
//! The proxy benchmark (`benches/proxy.rs`) puts it between the editor and pyright, to show
//! what one more process hop costs on this machine by itself (two more wake-ups per request),
//! separately from what `agent-lsp serve` adds on top.

use std::io::{Read, Write};

fn pump(mut from: impl Read, mut to: impl Write) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if to
                    .write_all(&buffer[..n])
                    .and_then(|()| to.flush())
                    .is_err()
                {
                    return;
                }
            }
        }
    }
}

fn main() {
    let (mut child, child_in, child_out) = agent_tests::relay::spawn_relayed_command("byte-relay");
    let upstream = std::thread::spawn(move || pump(std::io::stdin().lock(), child_in));
    pump(child_out, std::io::stdout().lock());
    let _ = upstream.join();
    let _ = child.wait();
}
