//! Sessions: the append-only event log, the surface over it, and the messages derived from it.
//!
//! Three layers (see docs/architecture.md, "Session log"):
//! - the **log** ([`log`]) keeps every [`Event`] forever;
//! - the **surface** (`surface`) is the ordered set of events that make up the model's history;
//! - the **messages** are derived from the surface by [`History::derive_messages`], incrementally:
//!   an append costs work proportional to that event, and only a new surface generation
//!   (replace, remove, restore) rebuilds the cache.
//!
//! [`History`] is the in-memory model shared by readers and the writer; [`Session`] is a
//! `History` plus the locked [`log::LogWriter`] that makes each append durable before it is
//! applied.

pub mod event;
pub mod log;
mod recovery;
pub mod store;
pub(crate) mod surface;

use std::path::Path;

use anyhow::{Context, bail};

use crate::llm::Message;
use event::{Event, EventBody, EventKind, SessionHeader, SurfaceOp};
use log::{Durability, LogWriter};
use surface::{Pairing, Surface};

/// An event before the log gave it a seq and a timestamp.
#[derive(Clone, Debug)]
pub struct NewEvent {
    /// The user turn the event belongs to (0 before the first prompt).
    pub turn: u32,
    /// The model step within the turn (0 outside of model steps).
    pub step: u32,
    /// What happened; the variant decides the `kind`.
    pub body: EventBody,
    /// How the event changes the surface; `None` appends content-bearing kinds and keeps the others
    /// off the surface. Checked before the event is written.
    pub surface_op: Option<SurfaceOp>,
    /// Events this one was derived from (a checkpoint names what it shadows).
    pub source_event_seqs: Vec<u64>,
}

impl NewEvent {
    /// An event for `turn` and `step` with no surface op and no sources: the common case.
    pub fn new(turn: u32, step: u32, body: EventBody) -> NewEvent {
        NewEvent {
            turn,
            step,
            body,
            surface_op: None,
            source_event_seqs: Vec::new(),
        }
    }

    /// Carry `op` instead of the kind's default (a `replace` for a checkpoint, a `remove` on a
    /// `surface/edit`).
    pub fn with_op(mut self, op: SurfaceOp) -> NewEvent {
        self.surface_op = Some(op);
        self
    }

    /// Name the events this one was derived from.
    pub fn with_sources(mut self, seqs: Vec<u64>) -> NewEvent {
        self.source_event_seqs = seqs;
        self
    }
}

/// The events of one session and everything derived from them.
#[derive(Clone, Debug)]
pub struct History {
    events: Vec<Event>,
    surface: Surface,
    messages: Vec<Message>,
    /// Generation the message cache was built for.
    messages_generation: u64,
    /// Number of `request/header` events so far.
    n_requests: u64,
    /// Seqs of `context/runtime` events, so the last visible one is found without a scan.
    runtime_context_seqs: Vec<u64>,
    /// Digests of the last request's system prompt and tool catalog.
    last_digests: Option<(String, String)>,
    /// `content_before[i]`: how many content-carrying events precede `events[i]`.
    content_before: Vec<u32>,
}

impl History {
    /// Rebuild a history from a log's events, checking every surface op as it was checked when
    /// it was appended.
    pub fn from_events(events: Vec<Event>) -> anyhow::Result<History> {
        let mut history = History::empty();
        history.events.reserve(events.len());
        for event in events {
            history.check(&event).with_context(|| {
                // Logs are read only when their seqs are 1, 2, 3, …: a seq is its line.
                format!(
                    "event {} (line {}) cannot be replayed",
                    event.seq, event.seq
                )
            })?;
            history.push_checked(event);
        }
        Ok(history)
    }

    fn empty() -> History {
        History {
            events: Vec::new(),
            surface: Surface::default(),
            messages: Vec::new(),
            messages_generation: 0,
            n_requests: 0,
            runtime_context_seqs: Vec::new(),
            last_digests: None,
            content_before: Vec::new(),
        }
    }

    /// Every event of the log, in seq order.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// The `session/header`, when the log starts with one (every log this crate writes does).
    pub fn header(&self) -> Option<&SessionHeader> {
        match self.events.first().map(|event| &event.body) {
            Some(EventBody::SessionHeader(header)) => Some(header),
            _ => None,
        }
    }

    /// The number the next user turn gets: one past the highest turn in the log.
    pub fn next_turn(&self) -> u32 {
        self.events
            .iter()
            .map(|event| event.turn)
            .max()
            .unwrap_or(0)
            + 1
    }

    /// The seq of the last event, 0 for an empty log: the next event gets one more.
    pub fn last_seq(&self) -> u64 {
        self.events.last().map_or(0, |event| event.seq)
    }

    /// The event with seq `seq`, if the log has it.
    pub fn event(&self, seq: u64) -> Option<&Event> {
        self.index_of(seq).map(|index| &self.events[index])
    }

    /// Position of `seq` in `events`: O(1) for the gap-free seqs this crate writes, a binary
    /// search for logs with gaps.
    fn index_of(&self, seq: u64) -> Option<usize> {
        let first = self.events.first()?.seq;
        let guess = seq.checked_sub(first)? as usize;
        if self.events.get(guess).is_some_and(|event| event.seq == seq) {
            return Some(guess);
        }
        self.events
            .binary_search_by_key(&seq, |event| event.seq)
            .ok()
    }

    /// Which events make up the model's history right now.
    pub fn surface(&self) -> &Surface {
        &self.surface
    }

    /// The surface's current generation: every op other than `append` starts a new one, and a
    /// message cache or a compaction candidate built for an older one is stale.
    pub fn generation(&self) -> u64 {
        self.surface.generation()
    }

    /// How many model requests the log records (`request/header` events), so the next gets the next
    /// index.
    pub fn n_requests(&self) -> u64 {
        self.n_requests
    }

    /// System prompt and tool catalog digests of the last recorded request.
    pub fn last_digests(&self) -> Option<(&str, &str)> {
        self.last_digests
            .as_ref()
            .map(|(system, tools)| (system.as_str(), tools.as_str()))
    }

    /// Seqs of all `context/runtime` events, oldest first.
    pub fn runtime_context_seqs(&self) -> &[u64] {
        &self.runtime_context_seqs
    }

    /// The surface as inclusive runs `[first, last]` of log seqs, in surface order. A run means
    /// "every content-carrying event from `first` to `last`", so an append-only stretch is one
    /// run however many log-only events are interleaved, and the record stays small.
    pub fn surface_runs(&self) -> Vec<[u64; 2]> {
        let mut runs: Vec<[u64; 2]> = Vec::new();
        for entry in self.surface.entries() {
            if let Some(run) = runs.last_mut()
                && entry.seq > run[1]
                && self.content_between(run[1], entry.seq) == 0
            {
                run[1] = entry.seq;
                continue;
            }
            runs.push([entry.seq, entry.seq]);
        }
        runs
    }

    /// Number of content-carrying events strictly between two logged seqs (`a < b`).
    fn content_between(&self, a: u64, b: u64) -> u32 {
        let index = |seq| {
            self.events
                .binary_search_by_key(&seq, |event: &Event| event.seq)
                .expect("logged seq")
        };
        let (ia, ib) = (index(a), index(b));
        let content_a = u32::from(self.events[ia].kind().carries_content());
        self.content_before[ib] - self.content_before[ia] - content_a
    }

    /// The history as it was right after event `seq` was appended.
    pub fn prefix(&self, seq: u64) -> anyhow::Result<History> {
        if seq > self.last_seq() {
            bail!(
                "event {seq} does not exist: the session ends at {}",
                self.last_seq()
            );
        }
        let end = self.events.partition_point(|event| event.seq <= seq);
        History::from_events(self.events[..end].to_vec())
    }

    /// The model history of the current surface; incremental between generations.
    pub fn derive_messages(&mut self) -> &[Message] {
        if self.messages_generation != self.surface.generation() {
            self.messages.clear();
            self.messages_generation = self.surface.generation();
        }
        let done = self.messages.len();
        for entry in &self.surface.entries()[done..] {
            let event = self
                .event(entry.seq)
                .expect("surface entries point at logged events");
            self.messages
                .push(message_of(event).expect("surface entries carry content"));
        }
        &self.messages
    }

    /// The model history exactly as it was right after event `seq` was appended.
    pub fn derive_at(&self, seq: u64) -> anyhow::Result<Vec<Message>> {
        Ok(self.prefix(seq)?.derive_messages().to_vec())
    }

    /// Check and apply `new` in memory only, exactly as [`Session::append`] would, and return
    /// the seq it got. The context editor tries a whole batch on a copy this way before it
    /// writes any of it, so a batch is applied whole or not at all.
    pub fn simulate(&mut self, new: NewEvent) -> anyhow::Result<u64> {
        let event = Event {
            seq: self.last_seq() + 1,
            turn: new.turn,
            step: new.step,
            ts: String::new(),
            body: new.body,
            surface_op: new.surface_op,
            source_event_seqs: new.source_event_seqs,
        };
        let seq = event.seq;
        self.check(&event)
            .with_context(|| format!("refused to append a `{}` event", event.kind()))?;
        self.push_checked(event);
        Ok(seq)
    }

    /// Whether `event` may follow the events so far.
    fn check(&self, event: &Event) -> anyhow::Result<()> {
        if event.seq <= self.last_seq() {
            bail!("seq {} does not follow seq {}", event.seq, self.last_seq());
        }
        let is_header = event.kind() == EventKind::SessionHeader;
        if is_header != self.events.is_empty() {
            bail!("a session starts with exactly one `session/header` event");
        }
        match (event.effective_surface_op(), &event.surface_op) {
            (Some(op), _) => self
                .surface
                .check(event.kind(), &pairing_of(&event.body), &op)?,
            (None, Some(_)) => unreachable!("an explicit op is always effective"),
            (None, None) => {}
        }
        if let EventBody::RequestHeader(header) = &event.body
            && header.index != self.n_requests + 1
        {
            bail!(
                "request/header {} does not follow request {}",
                header.index,
                self.n_requests
            );
        }
        Ok(())
    }

    fn push_checked(&mut self, event: Event) {
        let before = match self.events.last() {
            Some(last) => {
                self.content_before.last().copied().unwrap_or(0)
                    + u32::from(last.kind().carries_content())
            }
            None => 0,
        };
        self.content_before.push(before);
        if let Some(op) = event.effective_surface_op() {
            self.surface.apply(event.seq, pairing_of(&event.body), &op);
        }
        match &event.body {
            EventBody::RequestHeader(header) => {
                self.n_requests += 1;
                self.last_digests =
                    Some((header.system_digest.clone(), header.tools_digest.clone()));
            }
            EventBody::RuntimeContext(_) => self.runtime_context_seqs.push(event.seq),
            _ => {}
        }
        self.events.push(event);
    }
}

/// The message an event contributes to the model's history, if it carries content.
pub fn message_of(event: &Event) -> Option<Message> {
    Some(match &event.body {
        EventBody::UserMessage(message) => Message::User {
            text: message.text.clone(),
        },
        EventBody::RuntimeContext(context) => Message::User {
            text: context.text.clone(),
        },
        EventBody::AssistantMessage(message) => Message::Assistant {
            text: message.text.clone(),
            reasoning: message.reasoning.clone(),
            tool_calls: message.tool_calls.clone(),
        },
        EventBody::ToolResult(result) => Message::Tool {
            call_id: result.call_id.clone(),
            text: result.text.clone(),
        },
        _ => return None,
    })
}

fn pairing_of(body: &EventBody) -> Pairing {
    match body {
        EventBody::AssistantMessage(message) if !message.tool_calls.is_empty() => Pairing::Calls(
            message
                .tool_calls
                .iter()
                .map(|call| call.id.clone())
                .collect(),
        ),
        EventBody::ToolResult(result) => Pairing::Result(result.call_id.clone()),
        _ => Pairing::None,
    }
}

/// A session open for writing: its history plus the locked log file.
pub struct Session {
    id: String,
    history: History,
    log: LogWriter,
}

impl Session {
    /// Start a new session file at `path` with its header.
    pub fn create(
        path: &Path,
        header: SessionHeader,
        durability: Durability,
    ) -> anyhow::Result<Session> {
        let log = LogWriter::create(path, durability)?;
        let mut session = Session {
            id: header.session_id.clone(),
            history: History::empty(),
            log,
        };
        session.append(NewEvent::new(0, 0, EventBody::SessionHeader(header)))?;
        session.flush()?;
        Ok(session)
    }

    /// Open an existing session for appending. A torn last line from a crash is cut, and the
    /// tool calls a dead writer left without results get results saying they were
    /// interrupted (see the `recovery` module), so the session can go on.
    pub fn open(path: &Path, durability: Durability) -> anyhow::Result<Session> {
        let (log, read) = LogWriter::open(path, durability)?;
        let history = History::from_events(read.events)
            .with_context(|| format!("session log {} is inconsistent", path.display()))?;
        let id = history
            .header()
            .map(|header| header.session_id.clone())
            .with_context(|| format!("session log {} has no session/header", path.display()))?;
        let mut session = Session { id, history, log };
        if let Some(end) = recovery::interrupted_rewind(&session.history) {
            tracing::warn!(path = %path.display(), "closing a rewind left unfinished by a process that ended mid-rewind");
            session.append(end)?;
            session.flush()?;
        }
        let interrupted = recovery::interrupted_results(&session.history);
        if !interrupted.is_empty() {
            tracing::warn!(
                path = %path.display(),
                calls = interrupted.len(),
                "answering tool calls left without a result by a process that ended mid-call"
            );
            for event in interrupted {
                session.append(event)?;
            }
            session.flush()?;
        }
        Ok(session)
    }

    /// The session's id: its file name in the store and the name a resume uses.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The session's log file.
    pub fn path(&self) -> &Path {
        self.log.path()
    }

    /// Everything read or appended so far, and what is derived from it.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// The model history of the current surface; incremental between generations, so it needs `&mut
    /// self` for its cache.
    pub fn derive_messages(&mut self) -> &[Message] {
        self.history.derive_messages()
    }

    /// Check, write, then apply one event. A refused event changes nothing, on disk or in
    /// memory; an accepted one is on disk (per the durability mode) before it is visible.
    pub fn append(&mut self, new: NewEvent) -> anyhow::Result<&Event> {
        let event = Event {
            seq: self.history.last_seq() + 1,
            turn: new.turn,
            step: new.step,
            ts: now_rfc3339(),
            body: new.body,
            surface_op: new.surface_op,
            source_event_seqs: new.source_event_seqs,
        };
        self.history
            .check(&event)
            .with_context(|| format!("refused to append a `{}` event", event.kind()))?;
        self.log.append(&event)?;
        self.history.push_checked(event);
        Ok(self.history.events.last().expect("just pushed"))
    }

    /// Make every appended event durable (a no-op in [`Durability::Sync`]).
    pub fn flush(&mut self) -> anyhow::Result<()> {
        self.log.flush()
    }
}

fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use event::{AssistantMessage, ToolCallRef, ToolResult, UserMessage};

    fn header() -> SessionHeader {
        SessionHeader::for_test("s1", "standard")
    }

    fn user(text: &str) -> EventBody {
        EventBody::UserMessage(UserMessage {
            text: text.into(),
            origin: "prompt".into(),
        })
    }

    #[test]
    fn a_refused_event_changes_nothing_on_disk_or_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut session = Session::create(&path, header(), Durability::Sync).unwrap();
        session.append(NewEvent::new(1, 0, user("hi"))).unwrap();
        let before = std::fs::read(&path).unwrap();
        let orphan = EventBody::ToolResult(ToolResult {
            call_id: "nope".into(),
            name: "read".into(),
            text: String::new(),
            meta: serde_json::Value::Null,
        });
        let err = session.append(NewEvent::new(1, 1, orphan)).unwrap_err();
        assert!(
            format!("{err:#}").contains("tool result for `nope`"),
            "{err:#}"
        );
        let err = session
            .append(NewEvent::new(1, 1, user("x")).with_op(SurfaceOp::Remove { start: 2, end: 2 }))
            .unwrap_err();
        assert!(
            format!("{err:#}").contains("cannot carry a `remove` op"),
            "{err:#}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), before);
        assert_eq!(session.history().last_seq(), 2);
    }

    #[test]
    fn a_second_writer_is_refused_while_the_first_holds_the_session() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let session = Session::create(&path, header(), Durability::Sync).unwrap();
        let err = Session::open(&path, Durability::Sync)
            .err()
            .expect("second writer refused");
        assert!(
            format!("{err:#}").contains("in use by another agent-lsp process"),
            "{err:#}"
        );
        drop(session);
        Session::open(&path, Durability::Sync).unwrap();
    }

    #[test]
    fn a_torn_tail_is_cut_on_open_and_acknowledged_events_survive() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut session = Session::create(&path, header(), Durability::Sync).unwrap();
        session.append(NewEvent::new(1, 0, user("kept"))).unwrap();
        drop(session);
        let mut bytes = std::fs::read(&path).unwrap();
        let intact = bytes.len();
        bytes.extend_from_slice(br#"{"seq":3,"kind":"user/mess"#);
        std::fs::write(&path, &bytes).unwrap();

        let read = log::read_log(&path).unwrap();
        assert_eq!(
            read.torn_tail.map(|torn| torn.bytes),
            Some((bytes.len() - intact) as u64)
        );

        let mut session = Session::open(&path, Durability::Sync).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), intact as u64);
        assert_eq!(
            session.derive_messages(),
            &[Message::User {
                text: "kept".into()
            }]
        );
        assert_eq!(
            session
                .append(NewEvent::new(1, 0, user("next")))
                .unwrap()
                .seq,
            3
        );
    }

    #[test]
    fn a_corrupt_middle_line_is_an_error_with_its_line_number() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut session = Session::create(&path, header(), Durability::Sync).unwrap();
        session.append(NewEvent::new(1, 0, user("a"))).unwrap();
        drop(session);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(
            &path,
            text.replacen("\"user/message\"", "\"user/message", 1),
        )
        .unwrap();
        let err = Session::open(&path, Durability::Sync).err().unwrap();
        assert!(format!("{err:#}").contains("corrupt at line 2"), "{err:#}");
    }

    #[test]
    fn derive_is_incremental_and_derive_at_sees_the_past() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut session = Session::create(&path, header(), Durability::Batched).unwrap();
        session.append(NewEvent::new(1, 0, user("q"))).unwrap();
        let call = ToolCallRef {
            id: "c1".into(),
            name: "read".into(),
            arguments: "{}".into(),
        };
        session
            .append(NewEvent::new(
                1,
                1,
                EventBody::AssistantMessage(AssistantMessage {
                    text: String::new(),
                    reasoning: Some("think".into()),
                    tool_calls: vec![call],
                }),
            ))
            .unwrap();
        assert_eq!(session.derive_messages().len(), 2);
        session
            .append(NewEvent::new(
                1,
                1,
                EventBody::ToolResult(ToolResult {
                    call_id: "c1".into(),
                    name: "read".into(),
                    text: "file".into(),
                    meta: serde_json::Value::Null,
                }),
            ))
            .unwrap();
        session
            .append(
                NewEvent::new(1, 2, user("summary"))
                    .with_op(SurfaceOp::Replace { start: 2, end: 4 }),
            )
            .unwrap();
        let now = session.derive_messages().to_vec();
        assert_eq!(
            now,
            vec![Message::User {
                text: "summary".into()
            }]
        );
        let before = session.history().derive_at(4).unwrap();
        assert_eq!(before.len(), 3);
        session.flush().unwrap();
        let reopened = Session::open(&path, Durability::Sync);
        assert!(reopened.is_err(), "still locked by the first writer");
        drop(session);
        let mut reopened = Session::open(&path, Durability::Sync).unwrap();
        assert_eq!(reopened.derive_messages(), now.as_slice());
    }
}
