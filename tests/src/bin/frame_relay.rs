//! A store-and-forward relay: start the command given as arguments and pass each side's
//! messages to the other whole, one blocking thread per direction. It reads every frame to its
//! end before writing it on, as any broker must (it cannot route a message it has not read),
//! as `agent-lsp serve` does, but parses no JSON.
//!
//! The proxy benchmark (`benches/proxy.rs`) puts it between `byte-relay`, which passes bytes
//! on as they come, and `json-relay`: it tells what waiting for whole messages costs by itself.

use std::io::{BufReader, Read, Write};

use agent_tests::relay::{raw_stdout, read_frame, spawn_relayed_command, write_frame};

fn relay(from: impl Read, mut to: impl Write) {
    let mut from = BufReader::with_capacity(64 * 1024, from);
    loop {
        let Some(body) = read_frame(&mut from) else {
            return;
        };
        if write_frame(&mut to, &body).is_err() {
            return;
        }
    }
}

fn main() {
    let (mut child, child_in, child_out) = spawn_relayed_command("frame-relay");
    let upstream = std::thread::spawn(move || relay(std::io::stdin().lock(), child_in));
    relay(child_out, raw_stdout());
    let _ = upstream.join();
    let _ = child.wait();
}
