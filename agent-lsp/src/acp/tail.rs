//! A session's log read as it grows, each new event sent to the client as its updates
//! ([`super::updates`]): the logs of the sub-agents it starts are followed too, from their
//! `subagent/start`, their calls nested in the call that started them.
//!
//! A running turn reads its log from where it stood when the turn began; `session/load`
//! reads it whole. The asker shows a call through the tail before asking about it
//! ([`Tail::announce`]), so a client always knows the call a permission request is about.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{SessionId, SessionUpdate};

use super::updates::{self, Nesting, Reading};
use crate::session::event::{Event, EventBody, ToolCallRef};

/// The tail of a session's running turn, if one runs: where the asker announces a call.
pub(super) type TailSlot = Arc<Mutex<Option<Arc<Mutex<Tail>>>>>;

/// Where updates go: one session of the connection.
pub(super) struct Sender {
    pub connection: ConnectionTo<Client>,
    pub session: SessionId,
}

impl Sender {
    pub(super) fn send(&self, update: SessionUpdate) {
        super::send(&self.connection, &self.session, update);
    }
}

pub(super) struct Tail {
    workspace: PathBuf,
    pub(super) sender: Sender,
    reading: Reading,
    window: u64,
    followed: Vec<Followed>,
    /// The tool calls the client was shown, by their id for the client.
    shown: HashSet<String>,
    /// The calls shown and not finished, by the id the tool runtime gave them: what a
    /// permission question about one is mapped to.
    running: HashMap<String, Vec<Running>>,
}

/// One log being read, with what was read of it.
struct Followed {
    path: PathBuf,
    /// The log, kept open once it exists (a sub-agent's may not yet when it is named).
    file: Option<std::fs::File>,
    offset: u64,
    nesting: Nesting,
}

/// A call the client was shown and whose result has not come.
struct Running {
    client_id: String,
    /// The call its log is nested in (`None`: the session's own log).
    log: Option<String>,
    name: String,
    arguments: String,
}

impl Tail {
    /// The log at `path` of a session in `workspace`, read from its end (a turn's) or its
    /// start (a load).
    pub(super) fn new(
        path: PathBuf,
        workspace: PathBuf,
        sender: Sender,
        window: u64,
        reading: Reading,
    ) -> Tail {
        let offset = match reading {
            Reading::Live => std::fs::metadata(&path).map_or(0, |metadata| metadata.len()),
            Reading::Load => 0,
        };
        Tail {
            workspace,
            sender,
            reading,
            window,
            followed: vec![Followed {
                path,
                file: None,
                offset,
                nesting: Nesting::default(),
            }],
            shown: HashSet::new(),
            running: HashMap::new(),
        }
    }

    /// Send the updates of every event appended since the last read.
    pub(super) fn pump(&mut self) {
        let mut at = 0;
        while at < self.followed.len() {
            let events = read_new(&mut self.followed[at]);
            let nesting = self.followed[at].nesting.clone();
            for event in &events {
                self.show(event, &nesting);
            }
            at += 1;
        }
    }

    /// Make sure the client was shown `call` before a question about it, and return its id
    /// for the client. A call the log already showed is found by what the runtime named it;
    /// a call a program makes (`PARENT.N`), whose record may still be on its way to the log,
    /// is shown now under the id its record will map to.
    pub(super) fn announce(&mut self, call: &ToolCallRef) -> String {
        self.pump();
        if let Some(found) = self.running.get(&call.id).and_then(|calls| {
            calls
                .iter()
                .find(|running| running.name == call.name && running.arguments == call.arguments)
        }) {
            return found.client_id.clone();
        }
        let id = match call.id.rsplit_once('.') {
            Some((parent, _)) if self.shown.contains(parent) => updates::inside(parent, &call.id),
            // Not shown and not taken: the id is its own; one the client knows for another
            // call (a sub-agent's, whose log is not followed yet) gets a prefix.
            _ if !self.shown.contains(&call.id) => call.id.clone(),
            _ => format!("asked/{}", call.id),
        };
        let shown = updates::tool_call(&id, &call.name, &call.arguments, &self.workspace, None);
        self.shown.insert(id.clone());
        self.sender.send(SessionUpdate::ToolCall(shown));
        id
    }

    fn show(&mut self, event: &Event, nesting: &Nesting) {
        for update in updates::of_event(event, &self.workspace, self.reading, nesting) {
            match &update {
                // A call the asker showed already is not shown twice.
                SessionUpdate::ToolCall(call)
                    if !self.shown.insert(call.tool_call_id.0.to_string()) =>
                {
                    continue;
                }
                _ => {}
            }
            self.sender.send(update);
        }
        match &event.body {
            EventBody::ToolCall(call) => {
                self.started(&call.call_id, &call.name, &call.arguments, nesting, None)
            }
            EventBody::SubtoolCall(call) => self.started(
                &call.call_id,
                &call.name,
                &call.arguments,
                nesting,
                Some(&call.parent_call_id),
            ),
            EventBody::ToolResult(result) => self.finished(&result.call_id, nesting),
            EventBody::SubtoolResult(result) => self.finished(&result.call_id, nesting),
            EventBody::Usage(usage) if nesting.parent.is_none() => {
                self.sender.send(updates::usage(usage, self.window));
            }
            EventBody::SubagentStart(start) => {
                let parent = Nesting {
                    parent: Some(nesting.id(&start.call_id)),
                };
                let path = self.followed[0]
                    .path
                    .with_file_name(format!("{}.jsonl", start.child));
                self.followed.push(Followed {
                    path,
                    file: None,
                    offset: 0,
                    nesting: parent,
                });
            }
            _ => {}
        }
    }

    fn started(
        &mut self,
        call_id: &str,
        name: &str,
        arguments: &str,
        nesting: &Nesting,
        parent: Option<&str>,
    ) {
        let client_id = match parent {
            Some(parent) => nesting.id(&updates::inside(parent, call_id)),
            None => nesting.id(call_id),
        };
        self.running
            .entry(call_id.to_owned())
            .or_default()
            .push(Running {
                client_id,
                log: nesting.parent.clone(),
                name: name.to_owned(),
                arguments: arguments.to_owned(),
            });
    }

    fn finished(&mut self, call_id: &str, nesting: &Nesting) {
        if let Some(calls) = self.running.get_mut(call_id) {
            if let Some(at) = calls
                .iter()
                .position(|running| running.log == nesting.parent)
            {
                calls.remove(at);
            }
            if calls.is_empty() {
                self.running.remove(call_id);
            }
        }
    }
}

/// The whole lines appended to `followed`'s log since the last read, as events; a line still
/// being written is left for the next read.
fn read_new(followed: &mut Followed) -> Vec<Event> {
    if followed.file.is_none() {
        followed.file = std::fs::File::open(&followed.path).ok();
    }
    let Some(file) = followed.file.as_mut() else {
        return Vec::new();
    };
    if file.seek(SeekFrom::Start(followed.offset)).is_err() {
        return Vec::new();
    }
    let mut bytes = Vec::new();
    if file.read_to_end(&mut bytes).is_err() {
        return Vec::new();
    }
    let Some(end) = bytes.iter().rposition(|&byte| byte == b'\n') else {
        return Vec::new();
    };
    followed.offset += end as u64 + 1;
    bytes[..end]
        .split(|&byte| byte == b'\n')
        .filter_map(|line| std::str::from_utf8(line).ok())
        .filter_map(|line| Event::from_json_line(line).ok())
        .collect()
}
