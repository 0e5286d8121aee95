//! A process that appends to a session log until it is killed, for the crash test.
//!
//! Usage: `log-writer PATH SEED`. It creates the session if PATH does not exist, otherwise opens
//! it (which cuts a torn tail), answers any tool call a previous crash left waiting, then appends
//! a mix of events forever. After each append returns it prints the event's seq on stdout: a
//! printed seq is an acknowledged event, which must survive the SIGKILL that ends the process.

use std::io::Write;
use std::path::Path;

use agent_lsp::session::event::{
    AssistantMessage, EventBody, RuntimeContext, SCHEMA_VERSION, SessionHeader, SurfaceOp,
    ToolCallRef, ToolResult, UserMessage,
};
use agent_lsp::session::log::Durability;
use agent_lsp::session::{NewEvent, Session};

fn main() -> anyhow::Result<()> {
    let args = std::env::args().collect::<Vec<_>>();
    let path = Path::new(&args[1]);
    let mut rng = args[2].parse::<u64>()?.wrapping_mul(6364136223846793005) | 1;
    let mut next = move |bound: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % bound
    };

    let mut session = if path.exists() {
        Session::open(path, Durability::Sync)?
    } else {
        let header = SessionHeader {
            schema: SCHEMA_VERSION,
            session_id: "crash".into(),
            workspace: "/crash".into(),
            preset: "standard".into(),
            preset_text: None,
            agent_version: "test".into(),
            parent: None,
        };
        Session::create(path, header, Durability::Sync)?
    };
    let mut out = std::io::stdout().lock();
    let turn = session
        .history()
        .events()
        .last()
        .map_or(0, |event| event.turn)
        + 1;

    // What the agent does on resume: a call interrupted by the crash gets a result saying so.
    let mut pending = session
        .history()
        .surface()
        .pending_calls()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    pending.sort();
    for call_id in pending {
        let seq = session
            .append(NewEvent::new(
                turn,
                0,
                result(&call_id, "cancelled: the process was killed"),
            ))?
            .seq;
        writeln!(out, "{seq}")?;
        out.flush()?;
    }

    for step in 1.. {
        if next(25) == 0 {
            tear_next_line(&session, path)?;
        }
        let events = match next(6) {
            0 => vec![NewEvent::new(
                turn,
                step,
                user(&format!("prompt {step}"), 0),
            )],
            1 => {
                // A large payload widens the window in which a kill tears a line.
                let size = 1 << (16 + next(5));
                vec![NewEvent::new(turn, step, user("big", size as usize))]
            }
            2 => {
                let id = format!("c{turn}-{step}");
                let call = ToolCallRef {
                    id: id.clone(),
                    name: "read".into(),
                    arguments: r#"{"path":"a"}"#.into(),
                };
                let message = AssistantMessage {
                    text: String::new(),
                    reasoning: Some("why".into()),
                    tool_calls: vec![call],
                };
                vec![
                    NewEvent::new(turn, step, EventBody::AssistantMessage(message)),
                    NewEvent::new(turn, step, result(&id, "contents")),
                ]
            }
            3 => {
                let snapshot = [("step".to_owned(), step.to_string())]
                    .into_iter()
                    .collect();
                let body = EventBody::RuntimeContext(RuntimeContext {
                    source: None,
                    snapshot,
                    text: format!("step {step}"),
                });
                vec![NewEvent::new(turn, step, body)]
            }
            4 => {
                // Compaction-like: replace the oldest half of the surface, if that keeps pairs whole.
                let entries = session.history().surface().entries();
                if entries.len() < 4 {
                    continue;
                }
                let (start, end) = (entries[0].seq, entries[entries.len() / 2].seq);
                let event = NewEvent::new(turn, step, user("<compacted-summary>", 0))
                    .with_op(SurfaceOp::Replace { start, end });
                vec![event]
            }
            _ => {
                let message = AssistantMessage {
                    text: format!("answer {step}"),
                    reasoning: None,
                    tool_calls: vec![],
                };
                vec![NewEvent::new(
                    turn,
                    step,
                    EventBody::AssistantMessage(message),
                )]
            }
        };
        for event in events {
            match session.append(event) {
                Ok(event) => {
                    writeln!(out, "{}", event.seq)?;
                    out.flush()?;
                }
                // A range that would split a pair is refused; that is the surface doing its job.
                Err(error) if format!("{error:#}").contains("separate tool call") => {}
                Err(error) => return Err(error),
            }
        }
    }
    Ok(())
}

/// Simulate being killed in the middle of writing a line: write the first half of what the next
/// event's line would be, then wait for the SIGKILL. (The kernel seldom tears a single `write`
/// on demand, so the test makes the torn tail it must survive.)
fn tear_next_line(session: &Session, path: &Path) -> anyhow::Result<()> {
    let event = agent_lsp::session::event::Event {
        seq: session.history().last_seq() + 1,
        turn: 0,
        step: 0,
        ts: "2026-11-29T00:00:00.000Z".into(),
        body: user("never acknowledged", 4096),
        surface_op: None,
        source_event_seqs: Vec::new(),
    };
    let line = event.to_json_line()?;
    let mut file = std::fs::OpenOptions::new().append(true).open(path)?;
    file.write_all(&line.as_bytes()[..line.len() / 2])?;
    file.sync_data()?;
    loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

fn user(text: &str, padding: usize) -> EventBody {
    let mut text = text.to_owned();
    text.extend(std::iter::repeat_n('x', padding));
    EventBody::UserMessage(UserMessage {
        text,
        origin: "prompt".into(),
    })
}

fn result(call_id: &str, text: &str) -> EventBody {
    EventBody::ToolResult(ToolResult {
        call_id: call_id.into(),
        name: "read".into(),
        text: text.into(),
        meta: serde_json::Value::Null,
    })
}
