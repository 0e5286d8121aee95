//! The ACP client as the agent's tools meet it: who answers a call whose permission is `ask`
//! (`session/request_permission`), and the editor's view of the files (`fs/read_text_file`,
//! `fs/write_text_file`), so the file tools read unsaved text and write through the editor.
//!
//! Both are asked from a running turn, a task outside the connection's dispatch loop, so
//! waiting for the client's answer holds nothing else up.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, ReadTextFileRequest, RequestPermissionOutcome,
    RequestPermissionRequest, SessionId, ToolCallUpdate, ToolCallUpdateFields,
    WriteTextFileRequest,
};
use futures_util::future::BoxFuture;

use super::lock;
use super::tail::TailSlot;
use crate::session::event::ToolCallRef;
use crate::tools::Asker;
use crate::tools::buffers::Buffers;

const ALLOW_ONCE: &str = "allow-once";
const ALLOW_ALWAYS: &str = "allow-always";
const REJECT: &str = "reject-once";

/// Asks the client's user about each call whose permission is `ask`: allow once, always (for
/// this tool and this reason, for the rest of this session), or reject. "Always" is kept per
/// reason, so allowing one protected path (or leaving the sandbox for the network) allows no
/// other. The runtime records the answer in the call's result (`meta.asked`), as it does the
/// editor's and the terminal's.
pub(super) struct ClientAsker {
    pub connection: ConnectionTo<Client>,
    pub session: SessionId,
    pub workspace: PathBuf,
    /// The (tool, reason) pairs the user allowed for the rest of the session.
    pub always: Arc<Mutex<BTreeSet<(String, String)>>>,
    /// The running turn's tail, which shows the call before the question about it.
    pub tail: TailSlot,
}

impl Asker for ClientAsker {
    fn ask(&self, call: &ToolCallRef) -> BoxFuture<'static, bool> {
        self.ask_because(call, "its permission is `ask`")
    }

    fn ask_because(&self, call: &ToolCallRef, reason: &str) -> BoxFuture<'static, bool> {
        let always = self.always.clone();
        let key = (call.name.clone(), reason.to_owned());
        if lock(&always).contains(&key) {
            return Box::pin(std::future::ready(true));
        }
        // The client is shown the call first, and asked about it by the id it knows it by
        // (a call inside a program or a sub-agent has one of its own).
        let tail = lock(&self.tail).clone();
        let id = match tail {
            Some(tail) => lock(&tail).announce(call),
            None => call.id.clone(),
        };
        let shown =
            super::updates::tool_call(&id, &call.name, &call.arguments, &self.workspace, None);
        let fields = ToolCallUpdateFields::new()
            .title(format!("{} ({reason})", shown.title))
            .kind(shown.kind)
            .locations(shown.locations)
            .content(shown.content)
            .raw_input(shown.raw_input);
        let request = RequestPermissionRequest::new(
            self.session.clone(),
            ToolCallUpdate::new(id, fields),
            vec![
                PermissionOption::new(ALLOW_ONCE, "Allow", PermissionOptionKind::AllowOnce),
                PermissionOption::new(
                    ALLOW_ALWAYS,
                    format!("Always allow `{}` for this in this session", call.name),
                    PermissionOptionKind::AllowAlways,
                ),
                PermissionOption::new(REJECT, "Reject", PermissionOptionKind::RejectOnce),
            ],
        );
        let sent = self.connection.send_request(request);
        Box::pin(async move {
            let answer = match sent.block_task().await {
                Ok(answer) => answer,
                Err(error) => {
                    tracing::warn!(%error, "the client did not answer a permission request; the call is refused");
                    return false;
                }
            };
            match answer.outcome {
                RequestPermissionOutcome::Selected(selected) => match &*selected.option_id.0 {
                    ALLOW_ONCE => true,
                    ALLOW_ALWAYS => {
                        lock(&always).insert(key);
                        true
                    }
                    _ => false,
                },
                // The turn was cancelled while the question was open.
                _ => false,
            }
        })
    }

    fn refusal(&self, call: &ToolCallRef) -> String {
        format!(
            "the call to `{}` was refused: its permission is `ask` and the user did not allow it in the editor (rejected, or the question went unanswered); do not retry the same call, ask the user or take another way",
            call.name
        )
    }
}

/// The editor's view of the files through an ACP client that offers both `fs` methods.
pub(super) struct ClientFiles {
    pub connection: ConnectionTo<Client>,
    pub session: SessionId,
}

impl std::fmt::Debug for ClientFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientFiles")
    }
}

/// Files larger than this are read from the disk, in the `read` tool's pieces, rather than
/// sent whole by the client.
const LARGEST_ASKED: u64 = 4 * 1024 * 1024;

impl Buffers for ClientFiles {
    fn text(&self, path: &Path) -> BoxFuture<'static, Option<String>> {
        // The client is asked about regular files only: a folder, a FIFO, a device or a link
        // (which a rewind puts back as a link) is the disk's; so is a file too large to send.
        match std::fs::symlink_metadata(path) {
            Ok(metadata) if !metadata.is_file() || metadata.len() > LARGEST_ASKED => {
                return Box::pin(std::future::ready(None));
            }
            _ => {}
        }
        let read = self.read(path);
        Box::pin(async move { read.await.ok() })
    }

    fn lands(&self) -> &'static str {
        "through the editor"
    }

    fn replace(
        &self,
        path: &Path,
        before: &str,
        after: &str,
    ) -> BoxFuture<'static, Result<(), String>> {
        let read = self.read(path);
        let (connection, session, path) = (
            self.connection.clone(),
            self.session.clone(),
            path.to_owned(),
        );
        let (before, after) = (before.to_owned(), after.to_owned());
        Box::pin(async move {
            // What the change was made against must still be there: the user may have typed
            // since the tool read it.
            if read.await? != before {
                return Err(
                    "the file changed in the editor meanwhile; read it again and redo the change"
                        .to_owned(),
                );
            }
            connection
                .send_request(WriteTextFileRequest::new(session, path, after))
                .block_task()
                .await
                .map(drop)
                .map_err(|error| error.message.clone())
        })
    }
}

impl ClientFiles {
    /// The client's text of `path`, or why it has none.
    fn read(&self, path: &Path) -> BoxFuture<'static, Result<String, String>> {
        let sent = self
            .connection
            .send_request(ReadTextFileRequest::new(self.session.clone(), path));
        let path = path.to_owned();
        Box::pin(async move {
            sent.block_task()
                .await
                .map(|read| read.content)
                .map_err(|error| {
                    tracing::debug!(path = %path.display(), %error, "fs/read_text_file failed");
                    error.message.clone()
                })
        })
    }
}
