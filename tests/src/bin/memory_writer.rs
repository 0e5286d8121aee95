//! A process that changes a memory file until it is killed, for the memory crash test.
//!
//! Usage: `memory-writer WORKSPACE_FILE USER_FILE SEED`. It remembers workspace memories in a
//! loop and forgets the oldest once there are 20, printing `remember ID` or `forget ID` on
//! stdout after each change returned (an acknowledged change, which must survive the SIGKILL
//! that ends the process). Now and then it writes the first half of a record by hand and waits
//! to be killed, as a kill in the middle of a write would leave the file.

use std::io::Write;
use std::path::PathBuf;

use agent_lsp::memory::{Caps, Memories, Provenance, Scope};

/// Room for 20 long memories (the default byte cap would refuse them before the count does).
const CAPS: Caps = Caps {
    max_per_scope: 100,
    max_chars: 1000,
    max_scope_bytes: 1 << 20,
};

fn main() -> anyhow::Result<()> {
    let args = std::env::args().collect::<Vec<_>>();
    let (workspace_file, user_file) = (PathBuf::from(&args[1]), PathBuf::from(&args[2]));
    let mut rng = args[3].parse::<u64>()?.wrapping_mul(6364136223846793005) | 1;
    let mut next = move |bound: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % bound
    };
    let memories = Memories::new(workspace_file.clone(), user_file).with_caps(CAPS);
    let mut out = std::io::stdout().lock();
    for step in 0u64.. {
        if next(30) == 0 {
            let line = format!(
                "{{\"op\":\"remember\",\"id\":\"w999999\",\"scope\":\"workspace\",\"text\":\"{}\"",
                "never acknowledged ".repeat(20)
            );
            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .open(&workspace_file)?;
            file.write_all(&line.as_bytes()[..line.len() / 2])?;
            file.sync_data()?;
            loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        }
        let provenance = Provenance::now("crash", Some(step));
        let listed = memories.list()?;
        if listed.len() >= 20 {
            let forgotten = memories.forget(&listed[0].id, provenance)?;
            writeln!(out, "forget {}", forgotten.id)?;
        } else {
            // Long texts widen the window in which a kill lands inside a write.
            let text = format!("note {step}: {}", "x".repeat(next(900) as usize));
            let memory = memories.remember(Scope::Workspace, &text, provenance)?;
            writeln!(out, "remember {}", memory.id)?;
        }
        out.flush()?;
    }
    Ok(())
}
