//! The proxy against real language servers, differentially: random interleavings of `didOpen`,
//! `didChange` (full and incremental), requests and `$/cancelRequest` are sent, message for
//! message, by one scripted editor through `serve` to pyright or clangd and by a second one
//! straight to another instance of the same server. Every proxied answer must equal the direct
//! one, and every request gets exactly one answer through the proxy.
//!
//! The direct client is given the `initialize` the proxy gives its child (the same root and
//! workspace folder, and the bridge's client capabilities with the editor's `textDocument` ones
//! beneath them, `lsp_bridge::child::with_editor_capabilities`), since servers shape their
//! answers by the client's capabilities. Where the bridge's win (document symbols as a tree,
//! `LocationLink`s, which the agent reads), an editor that announces less still gets what the
//! bridge asked for; this test compares what crosses the proxy.
//!
//! Run twice directly on the same messages (the `serve` editor swapped for a second direct
//! one), pyright and clangd `--sync` gave the same answers on 20 seeds each, so what differs
//! here is the proxy's doing. Only two things are set aside, each where it is done: what the
//! proxy adds to code actions on purpose, and the answers to requests that were cancelled.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use agent_tests::editor::{Editor, url};
use lsp_bridge::position::PositionEncoding;
use serde_json::{Value, json};

/// A small deterministic generator: every seed is a reproducible interleaving.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }

    fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }
}

/// A language under test: its server, its workspace, and what an edit may add to a document.
struct Language {
    /// The server's name in the built-in configuration, its program (found through
    /// `agent_tests::tools_path`, as `serve` finds it on its `PATH`) and the arguments both
    /// sides start it with.
    server: &'static str,
    command: &'static str,
    args: &'static [&'static str],
    language_id: &'static str,
    /// The workspace's files; the documents the editor opens are `documents`.
    files: &'static [(&'static str, &'static str)],
    documents: [&'static str; 2],
    /// A line of code that stays valid at the end of document `which`, numbered `n`.
    code_line: fn(which: usize, n: u64) -> String,
    /// A comment line, valid at any line boundary.
    comment_line: fn(n: u64) -> String,
    /// Text with a character outside the Basic Multilingual Plane (two UTF-16 units), and
    /// where in a document it may go in the middle of a line of code, so that later edits of
    /// the line have ranges whose UTF-16 columns are not its character columns.
    inline: (&'static str, fn(&str) -> Vec<usize>),
    /// Requests whose answers together show a whole document as the server has it.
    sweep: fn(&Document) -> Vec<(&'static str, Value)>,
}

/// Whether byte `at` of `text` is in code: not in a string or comment of its line.
fn in_code(text: &str, at: usize) -> bool {
    let line = &text[text[..at].rfind('\n').map_or(0, |start| start + 1)..at];
    !line.contains("//") && !line.contains('#') && line.matches('"').count().is_multiple_of(2)
}

const PYTHON: Language = Language {
    server: "pyright",
    command: "pyright-langserver",
    args: &["--stdio"],
    language_id: "python",
    files: &[
        (
            "a.py",
            r#""""Shapes and their areas: café 😀."""


def area(width: int, height: int) -> int:
    return width * height


class Shape:
    def __init__(self, name: str, sides: int) -> None:
        self.name = name
        self.sides = sides

    def perimeter(self, length: int) -> int:
        return self.sides * length
"#,
        ),
        (
            "b.py",
            r#"from a import Shape, area

label = "box ☕ 😀"; box = Shape(label, 4)
note = "😀"; größe = area(box.sides, 3)  # 😀 after the code
total = box.perimeter(größe) + area(2, 5)
print(box.name, total)
"#,
        ),
    ],
    documents: ["a.py", "b.py"],
    code_line: |which, n| match which {
        0 => format!("LIMIT_{n} = area({n}, 2)"),
        _ => format!("count_{n} = area({n}, total) + box.sides"),
    },
    comment_line: |n| format!("# note {n}: café 😀"),
    // A truthy string before an assignment's value leaves the value as it was.
    inline: ("\"😀\" and ", |text| {
        text.match_indices(" = ")
            .map(|(at, _)| at + 3)
            .filter(|&at| in_code(text, at))
            .collect()
    }),
    // pyright has no `selectionRange`: the occurrences of every identifier instead.
    sweep: |document| {
        let mut requests = vec![(
            "textDocument/documentSymbol",
            json!({"textDocument": {"uri": document.uri}}),
        )];
        for (start, _) in identifiers(&document.text) {
            requests.push((
                "textDocument/documentHighlight",
                json!({"textDocument": {"uri": document.uri}, "position": position(&document.text, start)}),
            ));
        }
        requests
    },
};

const C: Language = Language {
    server: "clangd",
    command: "clangd",
    // clangd handles each request on its own thread, and answers it from whatever it has by
    // then: run twice directly on the same messages, its answers differ (a cross-file
    // `references` with or without the other file's uses, as its index of that file is
    // updated or not yet; `ContentModified` or an answer, as the next change comes before the
    // request ran or after). `--sync` handles each message in order on one thread, so its
    // answers follow from the messages alone, and the direct ones are an oracle. The price: a
    // cancellation never finds a request of clangd's still running, so only the proxy's own
    // `RequestCancelled` (for a forwarded request whose answer had not come yet) is seen here.
    args: &["--sync"],
    language_id: "c",
    files: &[
        ("compile_flags.txt", "-std=c11\n-Wall\n"),
        (
            "a.h",
            r#"#ifndef A_H
#define A_H

/* Shapes and their areas: café 😀. */
struct shape {
    const char *name;
    int sides;
};

int area(int width, int height);
int perimeter(const struct shape *shape, int length);

#endif
"#,
        ),
        (
            "a.c",
            r#"#include "a.h"

int area(int width, int height) {
    return width * height;
}

int perimeter(const struct shape *shape, int length) {
    return shape->sides * length;
}
"#,
        ),
        (
            "b.c",
            r#"#include "a.h"

int total(void) {
    struct shape box = {"box ☕ 😀", 4}; int size = area(box.sides, 3);
    return perimeter(&box, size) + area(2, 5);
}

int main(void) {
    /* 😀 */ return total() > 0 ? 0 : 1;
}
"#,
        ),
    ],
    documents: ["a.c", "b.c"],
    code_line: |which, n| match which {
        0 => format!("int helper_{n}(int x) {{ return area(x, {n}); }}"),
        _ => format!("int count_{n}(void) {{ return area({n}, total()); }}"),
    },
    comment_line: |n| format!("// note {n}: café 😀"),
    // A comment before a word inside a function (on an indented line).
    inline: ("/* 😀 */ ", |text| {
        identifiers(text)
            .into_iter()
            .map(|(start, _)| start)
            .filter(|&start| {
                let line = text[..start].rfind('\n').map_or(0, |at| at + 1);
                text[line..].starts_with(' ') && in_code(text, start)
            })
            .collect()
    }),
    sweep: |document| {
        vec![
            (
                "textDocument/documentSymbol",
                json!({"textDocument": {"uri": document.uri}}),
            ),
            ("textDocument/selectionRange", at_every_token(document)),
        ]
    },
};

/// One of the two documents, as both editors have it.
struct Document {
    uri: String,
    text: String,
    version: i64,
    open: bool,
    /// Lines the edits added, which a later edit may delete again.
    added: Vec<String>,
}

/// The LSP position (UTF-16 columns) of byte `offset` of `text`.
fn position(text: &str, offset: usize) -> Value {
    let before = &text[..offset];
    let line = before.matches('\n').count();
    let start = before.rfind('\n').map_or(0, |at| at + 1);
    let character: usize = before[start..].chars().map(char::len_utf16).sum();
    json!({"line": line, "character": character})
}

fn is_identifier_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The identifiers of `text`: byte start and end of each.
fn identifiers(text: &str) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    let mut start = None;
    for (at, c) in text.char_indices().chain([(text.len(), ' ')]) {
        match (start, is_identifier_char(c)) {
            (None, true) if !c.is_ascii_digit() => start = Some(at),
            (Some(from), false) => {
                found.push((from, at));
                start = None;
            }
            _ => {}
        }
    }
    found
}

/// Where the words, numbers and punctuation of `text` start.
fn tokens(text: &str) -> Vec<usize> {
    let mut previous = ' ';
    let mut found = Vec::new();
    for (at, c) in text.char_indices() {
        let inside_a_word = is_identifier_char(c) && is_identifier_char(previous);
        if !c.is_whitespace() && !inside_a_word {
            found.push(at);
        }
        previous = c;
    }
    found
}

/// Number literals of `text` (digit runs that are not part of an identifier).
fn numbers(text: &str) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    let mut chars = text.char_indices().peekable();
    let mut previous = ' ';
    while let Some((at, c)) = chars.next() {
        if c.is_ascii_digit() && !is_identifier_char(previous) {
            let mut end = at + 1;
            while let Some(&(next, d)) = chars.peek() {
                if !d.is_ascii_digit() {
                    break;
                }
                end = next + 1;
                chars.next();
            }
            found.push((at, end));
            previous = '0';
        } else {
            previous = c;
        }
    }
    found
}

/// Byte offsets strictly inside string literals (between two quotes on one line, the
/// preprocessor's lines left alone), at character boundaries.
fn inside_strings(text: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let mut line_start = 0;
    for line in text.split_inclusive('\n') {
        if !line.trim_start().starts_with('#') {
            let quotes: Vec<usize> = line.match_indices('"').map(|(at, _)| at).collect();
            // Quotes pair up in order: `"""doc"""` is an empty string, the docstring, another.
            for pair in quotes.chunks_exact(2) {
                let inside = &line[pair[0] + 1..pair[1]];
                if inside.is_empty() {
                    continue;
                }
                let starts = inside.char_indices().map(|(at, _)| at);
                found.extend(
                    starts
                        .chain([inside.len()])
                        .map(|at| line_start + pair[0] + 1 + at),
                );
            }
        }
        line_start += line.len();
    }
    found
}

/// One of `places` (byte offsets of `text`), half the time one that follows a character
/// outside the Basic Multilingual Plane on its line: there a range's UTF-16 columns, which the
/// proxy counts when it applies a ranged change itself, are not its character columns.
fn pick_place(rng: &mut Rng, text: &str, places: &[usize]) -> Option<usize> {
    let after_wide: Vec<usize> = places
        .iter()
        .copied()
        .filter(|&at| {
            let line = &text[text[..at].rfind('\n').map_or(0, |start| start + 1)..at];
            line.chars().any(|c| c.len_utf16() == 2)
        })
        .collect();
    let from = if !after_wide.is_empty() && rng.below(2) == 0 {
        &after_wide[..]
    } else {
        places
    };
    (!from.is_empty()).then(|| from[rng.index(from.len())])
}

/// One edit: the bytes `start..end` of the text become `new_text`.
struct Edit {
    start: usize,
    end: usize,
    new_text: String,
}

/// A random edit that keeps the code about as valid as it was.
fn random_edit(
    rng: &mut Rng,
    language: &Language,
    which: usize,
    document: &mut Document,
    n: u64,
) -> Edit {
    let text = &document.text;
    match rng.below(7) {
        // A comment at any line boundary.
        0 | 1 => {
            let mut boundaries = vec![0];
            boundaries.extend(text.match_indices('\n').map(|(at, _)| at + 1));
            let at = boundaries[rng.index(boundaries.len())];
            let line = (language.comment_line)(n);
            document.added.push(line.clone());
            return Edit {
                start: at,
                end: at,
                new_text: line + "\n",
            };
        }
        // Delete a line an edit added, if one is still there as it was.
        2 => {
            let present: Vec<(usize, usize)> = document
                .added
                .iter()
                .enumerate()
                .filter_map(|(index, line)| {
                    let whole = format!("{line}\n");
                    let at = text
                        .match_indices(&whole)
                        .map(|(at, _)| at)
                        .find(|&at| at == 0 || text.as_bytes()[at - 1] == b'\n')?;
                    Some((index, at))
                })
                .collect();
            if !present.is_empty() {
                let (index, at) = present[rng.index(present.len())];
                let line = document.added.remove(index);
                return Edit {
                    start: at,
                    end: at + line.len() + 1,
                    new_text: String::new(),
                };
            }
        }
        // Another number, or a sum.
        3 => {
            let numbers = numbers(text);
            let starts: Vec<usize> = numbers.iter().map(|&(start, _)| start).collect();
            if let Some(start) = pick_place(rng, text, &starts) {
                let end = numbers[starts.iter().position(|&at| at == start).unwrap()].1;
                let new_text = match rng.below(2) {
                    0 => n.to_string(),
                    _ => format!("{} + {n}", &text[start..end]),
                };
                return Edit {
                    start,
                    end,
                    new_text,
                };
            }
        }
        // Something outside the Basic Multilingual Plane in the middle of a line of code.
        5 => {
            let (inline, places) = language.inline;
            if let Some(at) = pick_place(rng, text, &places(text)) {
                return Edit {
                    start: at,
                    end: at,
                    new_text: inline.to_owned(),
                };
            }
        }
        // A character inside a string, outside the Basic Multilingual Plane or not.
        4 => {
            if let Some(at) = pick_place(rng, text, &inside_strings(text)) {
                let new_text = ["😀", "é", "x"][rng.index(3)].to_owned();
                return Edit {
                    start: at,
                    end: at,
                    new_text,
                };
            }
        }
        _ => {}
    }
    // A line of code at the end.
    let line = (language.code_line)(which, n);
    document.added.push(line.clone());
    let end = text.len();
    Edit {
        start: end,
        end,
        new_text: line + "\n",
    }
}

/// The two editors: one through `serve`, one straight to the server. Both send the same
/// messages, so their request ids are the same too.
struct Pair {
    proxied: Editor,
    direct: Editor,
}

impl Pair {
    fn notify(&mut self, method: &str, params: Value) {
        self.proxied.notify(method, params.clone());
        self.direct.notify(method, params);
    }

    fn request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.proxied.request_async(method, params.clone());
        assert_eq!(self.direct.request_async(method, params), id);
        id
    }

    /// The answers to request `id`: through the proxy, and direct.
    fn answers(&mut self, id: i64) -> (Value, Value) {
        (self.proxied.response(id), self.direct.response(id))
    }

    /// Wait on both sides for `uri`'s diagnostics (answering the servers' requests meanwhile).
    fn diagnostics_of(&mut self, uri: &str) {
        for editor in [&mut self.proxied, &mut self.direct] {
            editor.wait_for(&format!("the diagnostics of {uri}"), |message| {
                message["method"] == "textDocument/publishDiagnostics"
                    && message["params"]["uri"] == uri
            });
        }
    }
}

/// A program found on `agent_tests::tools_path`, as the bridge finds it on serve's `PATH`.
fn tool(name: &str) -> std::path::PathBuf {
    std::env::split_paths(&agent_tests::tools_path())
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
        .unwrap_or_else(|| panic!("{name} is not installed: run `bash .ci/tools.sh`"))
}

/// The `initialize` params `lsp_bridge::child` sends a child serving `root` for an editor with
/// `editor_text_document` capabilities.
fn child_initialize_params(root: &Path, editor_text_document: &Value) -> Value {
    let root_uri = lsp_bridge::lsp_types::Url::from_directory_path(root)
        .unwrap()
        .to_string();
    let name = root.file_name().unwrap().to_string_lossy();
    json!({
        "processId": std::process::id(),
        "clientInfo": {"name": "agent-lsp", "version": env!("CARGO_PKG_VERSION")},
        "locale": "en",
        "rootPath": root.to_string_lossy(),
        "rootUri": root_uri,
        "workspaceFolders": [{"uri": root_uri, "name": name}],
        "capabilities": lsp_bridge::child::with_editor_capabilities(
            lsp_bridge::child::client_capabilities(&[PositionEncoding::Utf16]),
            Some(editor_text_document),
        ),
        "trace": "off",
    })
}

fn start(language: &Language, root: &Path, state: &Path) -> Pair {
    let config = format!("[server.{}]\nargs = {:?}\n", language.server, language.args);
    let mut proxied = Editor::start(agent_tests::serve_command(root, state, &config));
    proxied.initialize(root);
    let mut command = Command::new(tool(language.command));
    command.args(language.args).current_dir(root);
    let mut direct = Editor::start(command);
    let editor_text_document =
        proxied.initialize_params(root, Value::Null)["capabilities"]["textDocument"].clone();
    let answer = direct.request(
        "initialize",
        child_initialize_params(root, &editor_text_document),
    );
    assert!(answer.get("result").is_some(), "{answer}");
    direct.notify("initialized", json!({}));
    Pair { proxied, direct }
}

/// A request sent to both, and what is compared of its answers.
struct Sent {
    id: i64,
    method: &'static str,
    params: Value,
    /// Whether `$/cancelRequest` was sent for it.
    cancelled: bool,
}

/// `selectionRange` params for every word, number and punctuation of `document`: the syntax
/// tree around each, which differs wherever the server's text does.
fn at_every_token(document: &Document) -> Value {
    let positions: Vec<Value> = tokens(&document.text)
        .into_iter()
        .map(|start| position(&document.text, start))
        .collect();
    json!({"textDocument": {"uri": document.uri}, "positions": positions})
}

/// A random request about `document` (open), at an identifier's position where it takes one.
fn random_request(rng: &mut Rng, document: &Document) -> (&'static str, Value) {
    let text = &document.text;
    let at_identifier = |rng: &mut Rng, at_end: bool| {
        let identifiers = identifiers(text);
        let (start, end) = identifiers[rng.index(identifiers.len())];
        let offset = if at_end {
            end
        } else {
            let chars: Vec<usize> = text[start..end]
                .char_indices()
                .map(|(at, _)| start + at)
                .collect();
            chars[rng.index(chars.len())]
        };
        json!({"textDocument": {"uri": document.uri}, "position": position(text, offset)})
    };
    match rng.below(9) {
        0 => ("textDocument/hover", at_identifier(rng, false)),
        1 => ("textDocument/definition", at_identifier(rng, false)),
        2 => {
            let mut params = at_identifier(rng, false);
            params["context"] = json!({"includeDeclaration": rng.below(2) == 0});
            ("textDocument/references", params)
        }
        3 => (
            "textDocument/documentSymbol",
            json!({"textDocument": {"uri": document.uri}}),
        ),
        4 => {
            // After a member access's dot, or at the end of a word being typed.
            let dots: Vec<usize> = text
                .match_indices('.')
                .map(|(at, _)| at + 1)
                .filter(|&at| text[at..].starts_with(|c: char| c.is_alphabetic()))
                .collect();
            if !dots.is_empty() && rng.below(2) == 0 {
                let at = dots[rng.index(dots.len())];
                let params = json!({"textDocument": {"uri": document.uri}, "position": position(text, at),
                                    "context": {"triggerKind": 2, "triggerCharacter": "."}});
                ("textDocument/completion", params)
            } else {
                let mut params = at_identifier(rng, true);
                params["context"] = json!({"triggerKind": 1});
                ("textDocument/completion", params)
            }
        }
        5 => ("textDocument/documentHighlight", at_identifier(rng, false)),
        // pyright answers `MethodNotFound`, which must pass as it is.
        6 => ("textDocument/selectionRange", at_every_token(document)),
        _ => {
            // A line, or an empty range at a word; sometimes with a diagnostic in the context
            // (the proxy adds "Fix with agent" for each).
            let lines: Vec<(usize, &str)> = text
                .split_inclusive('\n')
                .scan(0, |start, line| {
                    let at = *start;
                    *start += line.len();
                    Some((at, line.trim_end_matches('\n')))
                })
                .collect();
            let (start, line) = lines[rng.index(lines.len())];
            let range =
                json!({"start": position(text, start), "end": position(text, start + line.len())});
            let range = if rng.below(3) == 0 {
                let word = at_identifier(rng, false);
                json!({"start": word["position"], "end": word["position"]})
            } else {
                range
            };
            let diagnostics = if rng.below(3) == 0 {
                json!([{"range": range, "severity": 2, "message": "a diagnostic of the editor's"}])
            } else {
                json!([])
            };
            let params = json!({"textDocument": {"uri": document.uri}, "range": range,
                                "context": {"diagnostics": diagnostics}});
            ("textDocument/codeAction", params)
        }
    }
}

/// Of a proxied answer, what the proxy adds on purpose: the agent's own code actions ("Fix with
/// agent", "Explain with agent", "Ask agent about selection"; agent-lsp/src/server/code_actions.rs),
/// which come after the child's and run an `agent.*` command. Nothing else is taken away: the
/// `agentLsp.origin` tag on items is only added while two children resolve the same kind of
/// item (routing::tag_items), and only one runs here, so a tagged item is a difference.
fn without_the_agents_actions(method: &str, mut answer: Value) -> Value {
    if method == "textDocument/codeAction"
        && let Some(actions) = answer["result"].as_array_mut()
    {
        actions.retain(|action| {
            let own_kind = ["quickfix.agent", "agent.explain", "agent.send"]
                .contains(&action["kind"].as_str().unwrap_or_default());
            let own_command = action["command"]["command"]
                .as_str()
                .is_some_and(|command| command.starts_with("agent."));
            !(own_kind && own_command)
        });
    }
    answer
}

/// What is compared of an answer: its result, or its error's code and message.
fn outcome(answer: &Value) -> Value {
    match answer.get("error") {
        Some(error) => json!({"error": {"code": error["code"], "message": error["message"]}}),
        None => json!({"result": answer["result"]}),
    }
}

fn is_cancelled(outcome: &Value) -> bool {
    outcome["error"]["code"] == -32800
}

/// Why the two answers to `sent` differ, if they do in a way the protocol does not allow.
fn difference(sent: &Sent, proxied: &Value, direct: &Value) -> Option<String> {
    let proxied = outcome(&without_the_agents_actions(sent.method, proxied.clone()));
    let mut direct = outcome(direct);
    // The proxy answers code actions with an array (it appends the agent's), where the server
    // may say `null`: both mean "no actions".
    if sent.method == "textDocument/codeAction"
        && direct.get("error").is_none()
        && direct["result"].is_null()
    {
        direct["result"] = json!([]);
    }
    if proxied == direct {
        return None;
    }
    // A cancelled request may be answered either way on either side: the server decides
    // whether it had finished, and the proxy answers a forwarded request `RequestCancelled`
    // itself at once (transport::cancel_forwarded). A cancelled code action's child part is
    // dropped by the proxy (requests.rs: the child's error leaves only the agent's actions).
    if sent.cancelled
        && (is_cancelled(&proxied)
            || is_cancelled(&direct)
            || (sent.method == "textDocument/codeAction" && proxied["result"] == json!([])))
    {
        return None;
    }
    Some(format!(
        "request {} {} {}\n proxied: {proxied}\n  direct: {direct}",
        sent.id, sent.method, sent.params
    ))
}

/// Messages per interleaving (document changes, requests, cancellations and pauses).
const STEPS: u64 = 40;

fn one_interleaving(language: &Language, seed: u64) {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    agent_tests::write_tree(&root, language.files);
    let mut documents: Vec<Document> = language
        .documents
        .iter()
        .map(|name| Document {
            uri: url(&root.join(name)),
            text: std::fs::read_to_string(root.join(name)).unwrap(),
            version: 1,
            open: false,
            added: Vec::new(),
        })
        .collect();
    let mut pair = start(language, &root, state.path());
    let mut transcript = Vec::new();
    let open = |pair: &mut Pair, document: &mut Document, transcript: &mut Vec<String>| {
        document.open = true;
        pair.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": document.uri, "languageId": language.language_id,
                                    "version": document.version, "text": document.text}}),
        );
        transcript.push(format!("didOpen {} v{}", document.uri, document.version));
    };
    // The first document is open and its server has settled in (it asked for its
    // configuration and published diagnostics) on both sides; the second opens on the way.
    open(&mut pair, &mut documents[0], &mut transcript);
    pair.diagnostics_of(&documents[0].uri.clone());

    let mut rng = Rng::new(seed);
    let mut sent: Vec<Sent> = Vec::new();
    for step in 1..=STEPS {
        let which = rng.index(2);
        let document = &mut documents[which];
        if !document.open {
            open(&mut pair, document, &mut transcript);
            continue;
        }
        match rng.below(20) {
            // A change: one or two edits, as full text or as ranged changes.
            0..=6 => {
                let edits = 1 + rng.below(2);
                let incremental = rng.below(3) != 0;
                let mut changes = Vec::new();
                for part in 0..edits {
                    let edit = random_edit(&mut rng, language, which, document, step * 10 + part);
                    let range = json!({"start": position(&document.text, edit.start),
                                       "end": position(&document.text, edit.end)});
                    document
                        .text
                        .replace_range(edit.start..edit.end, &edit.new_text);
                    changes.push(json!({"range": range, "text": edit.new_text}));
                }
                if !incremental {
                    changes = vec![json!({"text": document.text})];
                }
                document.version += 1;
                transcript.push(format!(
                    "didChange {} v{} {}",
                    document.uri,
                    document.version,
                    Value::Array(changes.clone())
                ));
                pair.notify(
                    "textDocument/didChange",
                    json!({"textDocument": {"uri": document.uri, "version": document.version},
                           "contentChanges": changes}),
                );
            }
            // Closed and opened again, with the buffer as it is.
            7 => {
                pair.notify(
                    "textDocument/didClose",
                    json!({"textDocument": {"uri": document.uri}}),
                );
                transcript.push(format!("didClose {}", document.uri));
                document.version += 1;
                open(&mut pair, document, &mut transcript);
            }
            8..=15 => {
                let (method, params) = random_request(&mut rng, document);
                let id = pair.request(method, params.clone());
                transcript.push(format!("request {id} {method} {params}"));
                sent.push(Sent {
                    id,
                    method,
                    params,
                    cancelled: false,
                });
            }
            16 | 17 if !sent.is_empty() => {
                // Mostly one of the last few requests, which may still be running.
                let from = sent.len().saturating_sub(3);
                let at = from + rng.index(sent.len() - from);
                let id = sent[at].id;
                sent[at].cancelled = true;
                pair.notify("$/cancelRequest", json!({"id": id}));
                transcript.push(format!("$/cancelRequest {id}"));
            }
            _ => {
                let pause = Duration::from_millis(rng.below(30));
                std::thread::sleep(pause);
                transcript.push(format!("pause {pause:?}"));
            }
        }
    }

    // The documents as each server has them now: every symbol, and the syntax around every
    // token, which differ if a change was applied otherwise or overtaken.
    for document in documents.iter().filter(|document| document.open) {
        for (method, params) in (language.sweep)(document) {
            let id = pair.request(method, params.clone());
            transcript.push(format!("request {id} {method} {params}"));
            sent.push(Sent {
                id,
                method,
                params,
                cancelled: false,
            });
        }
    }

    let mut differences = Vec::new();
    let mut proxied_ids = Vec::new();
    let (mut cancelled_proxied, mut cancelled_direct) = (0, 0);
    for request in &sent {
        let (proxied, direct) = pair.answers(request.id);
        proxied_ids.push(request.id);
        cancelled_proxied += usize::from(is_cancelled(&outcome(&proxied)));
        cancelled_direct += usize::from(is_cancelled(&outcome(&direct)));
        differences.extend(difference(request, &proxied, &direct));
    }
    eprintln!(
        "{} seed {seed}: {} requests, {} cancelled ({cancelled_proxied} answered RequestCancelled through the proxy, {cancelled_direct} directly)",
        language.command,
        sent.len(),
        sent.iter().filter(|request| request.cancelled).count(),
    );
    // A last request and its answer: any second answer to an earlier one has arrived by now.
    let last = pair.proxied.request(
        "textDocument/documentSymbol",
        json!({"textDocument": {"uri": documents[0].uri}}),
    );
    assert!(last.get("result").is_some(), "{last}");
    let extra: Vec<&Value> = pair
        .proxied
        .backlog
        .iter()
        .filter(|message| message.get("method").is_none())
        .filter(|message| {
            message["id"]
                .as_i64()
                .is_some_and(|id| proxied_ids.contains(&id))
        })
        .collect();
    assert!(
        extra.is_empty(),
        "{} seed {seed}: second answers through the proxy {extra:?}",
        language.command
    );
    if !differences.is_empty() {
        panic!(
            "{} seed {seed}: {} of {} proxied answers differ from the direct ones:\n{}\n\nthe messages sent:\n{}",
            language.command,
            differences.len(),
            sent.len(),
            differences.join("\n"),
            transcript.join("\n")
        );
    }
    pair.proxied.shutdown();
    pair.direct.shutdown();
}

#[test]
fn proxied_answers_equal_pyrights_direct_answers_on_random_interleavings() {
    for seed in 1..=3 {
        one_interleaving(&PYTHON, seed);
    }
}

#[test]
fn proxied_answers_equal_clangds_direct_answers_on_random_interleavings() {
    for seed in 1..=3 {
        one_interleaving(&C, seed);
    }
}
