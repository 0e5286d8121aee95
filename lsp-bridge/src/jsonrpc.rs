//! JSON-RPC 2.0 as the Language Server Protocol uses it, for both sides of the proxy: the error
//! codes (defined here once), reading a message's envelope, and building responses.
//!
//! [`decode`] never leaves a sender waiting: a message it cannot take is a [`Refusal`] that
//! carries the answer to send, addressed to the request's id whenever the id can still be read
//! (a body that is not valid UTF-8, or whose JSON breaks inside `params`, usually still has a
//! readable id). JSON texts with a lone UTF-16 surrogate escape (`"\ud800"`), which JavaScript
//! clients write for a document holding half a surrogate pair, are taken with the surrogate
//! read as U+FFFD: that is also one UTF-16 unit, so every position in the document still
//! counts the same.

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};

/// The error codes of JSON-RPC and LSP.
pub mod code {
    /// The body is not JSON (or not UTF-8).
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON is not a request, notification or response.
    pub const INVALID_REQUEST: i64 = -32600;
    /// No handler for the method: what a server that does not implement a request answers, and
    /// what a caller may treat as "not supported" rather than a failure.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The params are not what the method takes (a missing field, a position past the end).
    pub const INVALID_PARAMS: i64 = -32602;
    /// The request was well formed and handling it failed (a panic, an I/O error).
    pub const INTERNAL_ERROR: i64 = -32603;
    /// LSP: a request before `initialize`.
    pub const SERVER_NOT_INITIALIZED: i64 = -32002;
    /// LSP: the server gave up on a request that was cancelled.
    pub const REQUEST_CANCELLED: i64 = -32800;
    /// LSP: the answer was invalidated by an edit; ask again.
    pub const CONTENT_MODIFIED: i64 = -32801;
    /// LSP: the request was valid and failed (a command that ran and could not do its work).
    pub const REQUEST_FAILED: i64 = -32803;
}

/// An error as a response carries it.
#[derive(Clone, Debug, PartialEq)]
pub struct ResponseError {
    /// One of [`code`]'s codes, or a server's own.
    pub code: i64,
    /// The text the other side shows or logs.
    pub message: String,
}

impl ResponseError {
    /// An error with any code; the helpers below name the common ones.
    pub fn new(code: i64, message: impl Into<String>) -> ResponseError {
        ResponseError {
            code,
            message: message.into(),
        }
    }

    /// `InvalidParams`: the params are not what the method takes.
    pub fn invalid_params(message: impl Into<String>) -> ResponseError {
        ResponseError::new(code::INVALID_PARAMS, message)
    }

    /// `InternalError`: the request was fine and handling it failed.
    pub fn internal(message: impl Into<String>) -> ResponseError {
        ResponseError::new(code::INTERNAL_ERROR, message)
    }
}

impl std::fmt::Display for ResponseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

/// One message, by its envelope.
#[derive(Debug, PartialEq)]
pub enum Message {
    /// `id` is a number or a string.
    Request {
        /// The id the answer must carry back, kept as sent (number or string).
        id: Value,
        /// The LSP method, which picks the handler.
        method: String,
        /// The params; `null` when the message had none.
        params: Value,
    },
    /// A message that takes no answer (`textDocument/didChange`, `$/cancelRequest`).
    Notification {
        /// The LSP method.
        method: String,
        /// The params; `null` when the message had none.
        params: Value,
    },
    /// An answer to one of our requests; `id` may be `null` (an answer to a message the other
    /// side could not read).
    Response {
        /// The id of the request this answers.
        id: Value,
        /// The `result`, or the `error` the other side answered with.
        outcome: Result<Value, ResponseError>,
    },
}

/// A message that is not taken, why, and what to answer: the responses to send, each in a
/// frame of its own (several for a batch, none when nothing may be answered).
#[derive(Debug)]
pub struct Refusal {
    /// What was wrong with the message, for the log.
    pub problem: String,
    /// The error responses to write back, so no sender waits for an answer that never comes.
    pub answers: Vec<Value>,
}

/// Read a message body into its envelope.
pub fn decode(body: &[u8]) -> Result<Message, Refusal> {
    let value = match serde_json::from_slice::<Value>(body) {
        Ok(value) => value,
        Err(error) => match repair_lone_surrogates(body)
            .and_then(|repaired| serde_json::from_slice::<Value>(&repaired).ok())
        {
            Some(value) => value,
            None => return Err(unparsable(body, &error)),
        },
    };
    match value {
        Value::Object(mut object) => {
            let id = object.remove("id");
            let method = object.remove("method");
            let params = object.remove("params").unwrap_or(Value::Null);
            let valid_id = |id: &Value| id.is_i64() || id.is_u64() || id.is_string();
            match (method, id) {
                (Some(Value::String(method)), Some(id)) if valid_id(&id) => {
                    Ok(Message::Request { id, method, params })
                }
                (Some(Value::String(_)), Some(id)) => Err(invalid(
                    Value::Null,
                    format!("a request id must be a number or a string, not {id}"),
                )),
                (Some(Value::String(method)), None) => Ok(Message::Notification { method, params }),
                (Some(method), id) => Err(invalid(
                    id.filter(valid_id).unwrap_or(Value::Null),
                    format!("`method` must be a string, not {method}"),
                )),
                (None, Some(id)) if valid_id(&id) || id.is_null() => {
                    let outcome = match (object.remove("result"), object.remove("error")) {
                        (_, Some(error)) => Err(ResponseError::new(
                            error["code"].as_i64().unwrap_or(code::INTERNAL_ERROR),
                            error["message"].as_str().unwrap_or_default(),
                        )),
                        (result, None) => Ok(result.unwrap_or(Value::Null)),
                    };
                    Ok(Message::Response { id, outcome })
                }
                (None, Some(id)) => Err(Refusal {
                    // A response cannot be answered.
                    problem: format!("a response id must be a number, a string or null, not {id}"),
                    answers: Vec::new(),
                }),
                (None, None) => Err(invalid(
                    Value::Null,
                    "a message needs a `method` or an `id`".into(),
                )),
            }
        }
        Value::Array(batch) => Err(refuse_batch(&batch)),
        other => Err(invalid(
            Value::Null,
            format!(
                "a message must be a JSON object, not {}",
                preview(&other.to_string())
            ),
        )),
    }
}

/// A response with a result.
pub fn response(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// A response with an error.
pub fn error_response(id: &Value, error: &ResponseError) -> Value {
    json!({"jsonrpc": "2.0", "id": id,
           "error": {"code": error.code, "message": error.message}})
}

/// Decode the params of `method` into the type it takes. The refusal is `InvalidParams` and
/// names the field that is wrong (`textDocument.version: invalid type: string "2", expected
/// i32`), so the sender can tell what to fix.
pub fn decode_params<T: serde::de::DeserializeOwned>(
    method: &str,
    params: Value,
) -> Result<T, ResponseError> {
    serde_path_to_error::deserialize(params).map_err(|error| {
        let path = error.path().to_string();
        let at = if path == "." {
            String::new()
        } else {
            format!("`{path}`: ")
        };
        ResponseError::new(
            code::INVALID_PARAMS,
            format!(
                "`{method}` refused, its params are malformed: {at}{}",
                error.inner()
            ),
        )
    })
}

/// Deserialize a `T` only from a JSON object, for a field's `deserialize_with`: serde's derive
/// also takes an array of the fields in order, which no LSP message means.
pub fn object<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    let object = serde_json::Map::deserialize(deserializer)?;
    from_object(object)
}

/// The object as a `T`, failing with the path inside it (`start.line: …`), which a custom error
/// would otherwise lose.
fn from_object<T: serde::de::DeserializeOwned, E: serde::de::Error>(
    object: serde_json::Map<String, Value>,
) -> Result<T, E> {
    serde_path_to_error::deserialize(Value::Object(object))
        .map_err(|error| E::custom(format!("`{}`: {}", error.path(), error.inner())))
}

/// [`object`] for an optional field (with `#[serde(default)]`).
pub fn optional_object<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    match Option::<serde_json::Map<String, Value>>::deserialize(deserializer)? {
        Some(object) => from_object(object).map(Some),
        None => Ok(None),
    }
}

/// What a request handler answers: a result, or an error.
pub type Reply = Result<Value, ResponseError>;

/// The response that carries `reply`.
pub fn reply(id: &Value, reply: &Reply) -> Value {
    match reply {
        Ok(result) => response(id, result.clone()),
        Err(error) => error_response(id, error),
    }
}

fn invalid(id: Value, problem: String) -> Refusal {
    let answer = error_response(&id, &ResponseError::new(code::INVALID_REQUEST, &problem));
    Refusal {
        problem,
        answers: vec![answer],
    }
}

/// LSP has no batches. Each request in one gets its error as a response of its own, addressed
/// to its id, not in an array as JSON-RPC answers a batch: an LSP client reads one message per
/// frame and would never find its ids inside an array, so its requests would wait forever. A
/// batch holding no request gets a single error, so the sender still hears why. Nothing in a
/// batch is run.
fn refuse_batch(batch: &[Value]) -> Refusal {
    let problem = "batch requests are not supported: a batch (a JSON array of messages) is not \
                   part of the Language Server Protocol; send each message in a frame of its own";
    let error = ResponseError::new(code::INVALID_REQUEST, problem);
    let answers: Vec<Value> = batch
        .iter()
        .filter(|message| message.get("method").is_some_and(Value::is_string))
        .filter_map(|message| message.get("id"))
        .filter(|id| id.is_i64() || id.is_u64() || id.is_string())
        .map(|id| error_response(id, &error))
        .collect();
    let answers = if answers.is_empty() {
        vec![error_response(&Value::Null, &error)]
    } else {
        answers
    };
    Refusal {
        problem: format!("{problem} ({} messages)", batch.len()),
        answers,
    }
}

/// What to answer a body that does not parse: a parse error addressed to its request's id when
/// the id can still be read.
fn unparsable(body: &[u8], error: &serde_json::Error) -> Refusal {
    #[derive(Deserialize)]
    struct Envelope {
        #[serde(default)]
        id: Option<Value>,
        #[serde(default)]
        method: Option<IgnoredAny>,
    }
    let problem = match std::str::from_utf8(body) {
        Err(utf8) => format!(
            "the message is not valid UTF-8 (byte {} of {})",
            utf8.valid_up_to(),
            body.len()
        ),
        Ok(text) => format!("the message is not valid JSON ({error}): {}", preview(text)),
    };
    // Reading the envelope skips the values it does not keep without checking their strings,
    // so an id survives a bad byte in the params.
    let id = match serde_json::from_slice::<Envelope>(body) {
        Ok(Envelope {
            id: Some(id),
            method: Some(_),
        }) if id.is_i64() || id.is_u64() || id.is_string() => Some(id),
        // A notification gets no answer, and neither does a response.
        Ok(Envelope { id: None, .. }) | Ok(Envelope { method: None, .. }) => None,
        _ => Some(Value::Null),
    };
    let answers = id
        .map(|id| error_response(&id, &ResponseError::new(code::PARSE_ERROR, &problem)))
        .into_iter()
        .collect();
    Refusal { problem, answers }
}

/// `body` with every lone surrogate escape replaced by `\uFFFD`, or `None` when it has none.
fn repair_lone_surrogates(body: &[u8]) -> Option<Vec<u8>> {
    let escape_at = |at: usize| -> Option<u16> {
        let digits = body.get(at..at + 6)?;
        if digits[0] != b'\\' || digits[1] != b'u' {
            return None;
        }
        u16::from_str_radix(std::str::from_utf8(&digits[2..]).ok()?, 16).ok()
    };
    let mut repaired = Vec::with_capacity(body.len());
    let mut changed = false;
    let mut at = 0;
    while at < body.len() {
        if body[at] != b'\\' {
            repaired.push(body[at]);
            at += 1;
            continue;
        }
        match escape_at(at) {
            Some(0xD800..=0xDBFF) => {
                if let Some(0xDC00..=0xDFFF) = escape_at(at + 6) {
                    repaired.extend_from_slice(&body[at..at + 12]);
                    at += 12;
                } else {
                    repaired.extend_from_slice(br"\uFFFD");
                    changed = true;
                    at += 6;
                }
            }
            Some(0xDC00..=0xDFFF) => {
                repaired.extend_from_slice(br"\uFFFD");
                changed = true;
                at += 6;
            }
            // Any other escape (`\\`, `\"`, `\n`, a plain `\u` code) is copied whole, so an
            // escaped backslash is never read as the start of another escape.
            _ => {
                let end = (at + 2).min(body.len());
                repaired.extend_from_slice(&body[at..end]);
                at = end;
            }
        }
    }
    changed.then_some(repaired)
}

/// The first characters of a text, for an error message.
fn preview(text: &str) -> String {
    const SHOWN: usize = 80;
    match text.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests;
