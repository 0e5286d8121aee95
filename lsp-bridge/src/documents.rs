//! The document mirror: which text each child server sees for each document, at which version.
//!
//! Two kinds of owners open documents:
//! - the **editor** (through the editor-facing server): its buffers, unsaved edits included, are
//!   the truth; the agent's queries see exactly them;
//! - the **agent**: a file the agent asks about that no editor has open is opened *transiently*
//!   from disk for the length of one query (or one edit-and-check) and closed after, so servers
//!   do not accumulate open documents the programmer never opened.
//!
//! Versions only ever grow per document, and every answer built on a document can be stamped
//! with the version it was computed on.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use lsp_types::Url;
use serde_json::json;

use crate::child::Child;
use crate::error::{Error, Result};

/// Who keeps a document open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    /// The editor: its buffer is the truth until it closes the document.
    Editor,
    /// Opened by the agent for the length of some queries; closed when the count drops to 0.
    Agent { users: u32 },
}

#[derive(Clone, Debug)]
struct Document {
    text: String,
    version: i32,
    language_id: String,
    owner: Owner,
    /// Children that were sent `didOpen` for this document (by instance: a restarted server
    /// has nothing open).
    opened_in: Vec<ChildKey>,
}

type ChildKey = u64;

impl Document {
    /// Record that `child` is sent `didOpen` for this document, if it was not yet: what to
    /// send (text, version, language id), or `None` when it has it open already.
    fn open_in(&mut self, child: &Child) -> Option<(String, i32, String)> {
        if self.opened_in.contains(&key(child)) {
            return None;
        }
        self.opened_in.push(key(child));
        Some((self.text.clone(), self.version, self.language_id.clone()))
    }
}

fn key(child: &Child) -> ChildKey {
    child.instance()
}

/// A document as a query sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The document's URI, as the child knows it.
    pub uri: Url,
    /// The same document as a path, for tools and messages (empty if the URI is not a file).
    pub path: PathBuf,
    /// The text the child has, unsaved edits included: positions in its answers refer to this.
    pub text: String,
    /// The version the child has, to stamp answers with what they were computed on.
    pub version: i32,
}

impl Snapshot {
    /// The text of 0-based line `line`, without its line break ("" past the end).
    pub fn line(&self, line: u32) -> &str {
        self.text.lines().nth(line as usize).unwrap_or("")
    }
}

/// The mirror of open documents, shared by the editor side and the agent side.
#[derive(Default)]
pub struct DocumentMirror {
    documents: Mutex<HashMap<Url, Document>>,
    /// The last version each document had, kept after it closes, so a reopened document
    /// continues its version sequence instead of starting again at 1.
    last_versions: Mutex<HashMap<Url, i32>>,
}

/// A transient open by the agent; give it back with [`DocumentMirror::release`].
#[derive(Debug)]
#[must_use = "release the document when the query is done"]
pub struct Lease {
    /// The document as the child was given it, for resolving positions and stamping answers.
    pub snapshot: Snapshot,
    child: Arc<Child>,
}

impl Lease {
    /// The child the document is open in: the query must go to this instance, the one that
    /// has the document.
    pub fn child(&self) -> &Arc<Child> {
        &self.child
    }
}

/// The `file://` URI of an absolute path; a relative path is [`Error::NoServer`], since no
/// server could be asked about it.
pub fn uri_of(path: &Path) -> Result<Url> {
    Url::from_file_path(path).map_err(|()| Error::NoServer {
        path: path.to_owned(),
        reason: "the path is not absolute".into(),
    })
}

impl DocumentMirror {
    /// An empty mirror; one per editor connection (or per agent without an editor), shared by
    /// the editor side and the agent's queries through an `Arc`.
    pub fn new() -> DocumentMirror {
        DocumentMirror::default()
    }

    /// The text and version a child sees for `uri`, if it is open.
    pub fn snapshot(&self, uri: &Url) -> Option<Snapshot> {
        let documents = self.documents.lock().expect("document mirror lock");
        documents.get(uri).map(|document| Snapshot {
            uri: uri.clone(),
            path: uri.to_file_path().unwrap_or_default(),
            text: document.text.clone(),
            version: document.version,
        })
    }

    /// Whether the editor has this document open.
    pub fn is_editor_open(&self, uri: &Url) -> bool {
        let documents = self.documents.lock().expect("document mirror lock");
        documents
            .get(uri)
            .is_some_and(|document| document.owner == Owner::Editor)
    }

    /// The paths of the documents the editor has open.
    pub fn editor_open_paths(&self) -> Vec<PathBuf> {
        let documents = self.documents.lock().expect("document mirror lock");
        documents
            .iter()
            .filter(|(_, document)| document.owner == Owner::Editor)
            .filter_map(|(uri, _)| uri.to_file_path().ok())
            .collect()
    }

    /// The editor opened a document; the caller forwards it to `child` (the server for the
    /// document, if any). Returns whether that child already had it open (leased by the agent),
    /// in which case the caller sends the editor's text as a change rather than a second open.
    pub fn editor_opened(
        &self,
        child: Option<&Child>,
        uri: Url,
        language_id: &str,
        version: i32,
        text: String,
    ) -> bool {
        let mut documents = self.documents.lock().expect("document mirror lock");
        let document = documents.entry(uri).or_insert_with(|| Document {
            text: String::new(),
            version,
            language_id: language_id.to_owned(),
            owner: Owner::Editor,
            opened_in: Vec::new(),
        });
        document.text = text;
        // The editor numbers its own versions from here on.
        document.version = version;
        document.owner = Owner::Editor;
        let Some(child) = child else { return false };
        let already_open = document.opened_in.contains(&key(child));
        if !already_open {
            document.opened_in.push(key(child));
        }
        already_open
    }

    /// The editor proxy delivered the editor's `didOpen` of `uri` to `child` (later than the
    /// mirror learnt of it: each child's messages wait in that child's lane). Whether `child`
    /// had the document open already (leased by the agent), in which case the proxy sent the
    /// editor's text as a change rather than a second open.
    pub fn delivered_open(&self, child: &Child, uri: &Url) -> bool {
        let mut documents = self.documents.lock().expect("document mirror lock");
        let Some(document) = documents.get_mut(uri) else {
            // Closed by the editor since: the close follows in the same lane.
            return false;
        };
        let already_open = document.opened_in.contains(&key(child));
        if !already_open {
            document.opened_in.push(key(child));
        }
        already_open
    }

    /// The editor proxy delivered the editor's `didClose` of `uri` to `child`: a document the
    /// editor opens again (or the agent leases) is opened in it anew.
    pub fn delivered_close(&self, child: &Child, uri: &Url) {
        let mut documents = self.documents.lock().expect("document mirror lock");
        if let Some(document) = documents.get_mut(uri) {
            document.opened_in.retain(|opened| *opened != key(child));
        }
    }

    /// The editor changed a document: the new full text and version.
    pub fn editor_changed(&self, uri: &Url, version: i32, text: String) {
        let mut documents = self.documents.lock().expect("document mirror lock");
        if let Some(document) = documents.get_mut(uri) {
            document.text = text;
            document.version = version;
        }
    }

    /// The editor closed a document.
    pub fn editor_closed(&self, uri: &Url) {
        if let Some(document) = self
            .documents
            .lock()
            .expect("document mirror lock")
            .remove(uri)
        {
            self.last_versions
                .lock()
                .expect("version lock")
                .insert(uri.clone(), document.version);
        }
    }

    /// If the editor has `path` open and `child` was never sent it, send `didOpen` with the
    /// editor's current text and version. A restarted server starts with nothing open, and
    /// the editor does not open its buffers again, so the proxy calls this whenever it routes
    /// to a child it had not routed that document to.
    pub async fn reopen_for_editor(&self, child: &Child, path: &Path) -> Result<()> {
        let uri = uri_of(path)?;
        let open = {
            let mut documents = self.documents.lock().expect("document mirror lock");
            match documents.get_mut(&uri) {
                Some(document) if matches!(document.owner, Owner::Editor) => {
                    document.open_in(child)
                }
                _ => None,
            }
        };
        if let Some((text, version, language_id)) = open {
            tracing::info!(server = child.name(), uri = %uri, version, "reopening the editor's document in a restarted server");
            send_open(child, &uri, &language_id, version, &text).await?;
        }
        Ok(())
    }

    /// Make sure `child` has `path` open and return what it sees. A document nobody has open is
    /// read from disk and opened transiently (version 1, or one past the last version it had).
    pub async fn lease(&self, child: &Arc<Child>, path: &Path, language_id: &str) -> Result<Lease> {
        let uri = uri_of(path)?;
        let open = {
            let mut documents = self.documents.lock().expect("document mirror lock");
            match documents.get_mut(&uri) {
                Some(document) => {
                    if let Owner::Agent { users } = &mut document.owner {
                        *users += 1;
                    }
                    document.open_in(child)
                }
                None => None,
            }
        };
        let known = self.snapshot(&uri);
        let (text, version) = match (open, known) {
            (Some((text, version, language_id)), _) => {
                send_open(child, &uri, &language_id, version, &text).await?;
                (text, version)
            }
            (None, Some(snapshot)) => (snapshot.text, snapshot.version),
            (None, None) => {
                let text = std::fs::read_to_string(path).map_err(|error| Error::NoServer {
                    path: path.to_owned(),
                    reason: format!("cannot read the file: {error}"),
                })?;
                let version = self
                    .last_versions
                    .lock()
                    .expect("version lock")
                    .get(&uri)
                    .map_or(1, |last| last + 1);
                self.documents.lock().expect("document mirror lock").insert(
                    uri.clone(),
                    Document {
                        text: text.clone(),
                        version,
                        language_id: language_id.to_owned(),
                        owner: Owner::Agent { users: 1 },
                        opened_in: vec![key(child)],
                    },
                );
                send_open(child, &uri, language_id, version, &text).await?;
                (text, version)
            }
        };
        Ok(Lease {
            snapshot: Snapshot {
                uri,
                path: path.to_owned(),
                text,
                version,
            },
            child: child.clone(),
        })
    }

    /// Give a lease back; the last agent user of a transient document closes it.
    pub async fn release(&self, lease: Lease) -> Result<()> {
        let close = {
            let mut documents = self.documents.lock().expect("document mirror lock");
            match documents.get_mut(&lease.snapshot.uri) {
                Some(document) => match &mut document.owner {
                    Owner::Agent { users } if *users <= 1 => {
                        let opened_in = document.opened_in.clone();
                        self.last_versions
                            .lock()
                            .expect("version lock")
                            .insert(lease.snapshot.uri.clone(), document.version);
                        documents.remove(&lease.snapshot.uri);
                        Some(opened_in)
                    }
                    Owner::Agent { users } => {
                        *users -= 1;
                        None
                    }
                    Owner::Editor => None,
                },
                None => None,
            }
        };
        if let Some(opened_in) = close
            && opened_in.contains(&key(&lease.child))
        {
            let params = json!({ "textDocument": { "uri": lease.snapshot.uri } });
            lease.child.notify("textDocument/didClose", params).await?;
        }
        Ok(())
    }

    /// The agent wrote `path` on disk: every child that has it open gets the new full text as a
    /// new version (`didChange`) and a `didSave`. Returns the new version, if it was open.
    ///
    /// An editor-owned document is left alone: its buffer, not the disk, is what the children
    /// must see (the agent changes it through `workspace/applyEdit`, and the editor sends the
    /// change), and a version of ours would collide with the editor's numbering.
    pub async fn changed_on_disk(
        &self,
        children: &[Arc<Child>],
        path: &Path,
    ) -> Result<Option<i32>> {
        let uri = uri_of(path)?;
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(_) => return Ok(None),
        };
        let (version, opened_in) = {
            let mut documents = self.documents.lock().expect("document mirror lock");
            let Some(document) = documents.get_mut(&uri) else {
                return Ok(None);
            };
            // The editor's buffer is the truth for a document it has open: the disk may be
            // behind it, and the editor sends its own changes.
            if document.owner == Owner::Editor {
                return Ok(Some(document.version));
            }
            document.version += 1;
            document.text = text.clone();
            (document.version, document.opened_in.clone())
        };
        for child in children
            .iter()
            .filter(|child| opened_in.contains(&key(child)))
        {
            let change = json!({
                "textDocument": { "uri": uri, "version": version },
                "contentChanges": [ { "text": text } ],
            });
            child.notify("textDocument/didChange", change).await?;
            child
                .notify(
                    "textDocument/didSave",
                    json!({ "textDocument": { "uri": uri } }),
                )
                .await?;
        }
        Ok(Some(version))
    }
}

async fn send_open(
    child: &Child,
    uri: &Url,
    language_id: &str,
    version: i32,
    text: &str,
) -> Result<()> {
    let params = json!({
        "textDocument": { "uri": uri, "languageId": language_id, "version": version, "text": text }
    });
    child.notify("textDocument/didOpen", params).await
}
