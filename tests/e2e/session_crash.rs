//! Crash test: a child process appending to a session is killed with SIGKILL at random moments,
//! many times over the same file. Reopening must never lose an acknowledged event (one whose seq
//! the child printed after `append` returned) and never yield an inconsistent surface.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use agent_lsp::session::Session;
use agent_lsp::session::log::{Durability, read_log};
use agent_tests::assert_tool_pairing;

const KILLS: u64 = 60;

#[test]
fn sigkill_at_random_moments_loses_no_acknowledged_event() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.jsonl");
    let writer = agent_tests::workspace_bin("log-writer");
    let mut acknowledged = Vec::new();
    let mut torn_tails = 0;
    let mut seed = 0x9e37_79b9_u64;

    for round in 0..KILLS {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut child = Command::new(&writer)
            .arg(&path)
            .arg(seed.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn log-writer");
        let stdout = child.stdout.take().unwrap();
        let (sender, receiver) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line.parse::<u64>().expect("seq")).is_err() {
                    break;
                }
            }
        });
        // Wait for a random number of acknowledgements (or a random time), then kill.
        let target = 1 + seed % 40;
        let deadline = Instant::now() + Duration::from_millis(20 + seed % 200);
        let mut seen = 0;
        while seen < target && Instant::now() < deadline {
            if let Ok(seq) = receiver.recv_timeout(Duration::from_millis(5)) {
                acknowledged.push(seq);
                seen += 1;
            }
        }
        child.kill().expect("SIGKILL");
        let status = child.wait().unwrap();
        reader.join().unwrap();
        acknowledged.extend(receiver.try_iter());
        if status.success() {
            let mut stderr = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
            panic!("round {round}: log-writer exited on its own: {stderr}");
        }

        if read_log(&path)
            .map(|log| log.torn_tail.is_some())
            .unwrap_or(false)
        {
            torn_tails += 1;
        }
        let mut session = Session::open(&path, Durability::Sync)
            .unwrap_or_else(|error| panic!("round {round}: reopening failed: {error:#}"));
        let history = session.history();
        for seq in &acknowledged {
            assert!(
                history.event(*seq).is_some(),
                "round {round}: acknowledged event {seq} was lost"
            );
        }
        // The file holds nothing torn any more, and the surface is consistent.
        assert!(read_log(&path).unwrap().torn_tail.is_none());
        assert_tool_pairing(session.derive_messages());
    }
    assert!(
        acknowledged.len() as u64 > KILLS,
        "the writer acknowledged too few events to test anything"
    );
    eprintln!(
        "{} acknowledged events over {KILLS} kills; {torn_tails} torn tails cut",
        acknowledged.len()
    );
}
