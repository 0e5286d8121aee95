//! One inline completion request's life, from the buffer and cursor to a suggestion:
//!
//! 1. the cache: a suggestion made here, or a few typed characters ago, answers at once;
//! 2. the document's earlier request, if one is still running, is cancelled (superseded: at
//!    most one request per document is in flight, and the newest is the one that matters);
//! 3. a short debounce, so a burst of keystrokes asks the model once, at its end;
//! 4. grounding, during the debounce: the identifiers near the cursor are looked up on the
//!    warm child servers (hover, in parallel, each bounded by `grounding_timeout`, and not
//!    waited for at all on a server that is starting or indexing; an answer is reused for
//!    `signature_ttl`) and their signatures put in front of the prompt;
//! 5. the FIM request, streamed, read only as long as the text can still change the
//!    suggestion; cancelling (the editor's `$/cancelRequest`, or the next request for the
//!    document) drops the connection;
//! 6. the text shaped into an edit ([`super::edit`]), cached, and every request recorded in the
//!    completion log with where its time went.
//!
//! A failing endpoint (an error status, a malformed stream, a stall past the timeout) gives no
//! suggestion and a warning in the log, never an error the editor would show: a person typing
//! is not to be interrupted by a pop-up per keystroke.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lsp_bridge::queries::{Queries, SymbolPosition};
use tokio_util::sync::CancellationToken;

use super::CompletionConfig;
use super::cache::Cache;
use super::context::{self, Grounding, Windows};
use super::edit::{self, Shaped};
use super::log::{CompletionLog, Record};
use crate::llm::provider::{FimRequest, Provider, ProviderError};

/// The most identifiers looked up for one request.
const MAX_LOOKUPS: usize = 8;
/// The most signatures kept for reuse; past it the table starts again.
const MAX_SIGNATURES: usize = 1024;

/// What a server answered for an identifier of a document, and when.
/// (document, identifier) → when its signature was asked and what came (`None`: it has none),
/// and the lookups still running, so a slow server is asked once per identifier, not once per
/// keystroke.
#[derive(Default)]
struct Signatures {
    known: HashMap<(String, String), (Instant, Option<Grounding>)>,
    asking: std::collections::HashSet<(String, String)>,
}

/// What the edge asks about.
#[derive(Clone, Debug)]
pub struct Request {
    /// The document as the editor names it (its URI): the cache's and the in-flight table's key.
    pub document: String,
    pub path: PathBuf,
    /// The document as the log names it (relative to the workspace).
    pub label: String,
    /// The editor's buffer, unsaved edits included.
    pub text: String,
    /// The cursor, as a byte offset into `text`.
    pub cursor: usize,
}

/// A suggestion: `insert` replaces the cursor and the first `replaced` bytes after it.
pub type Suggestion = Shaped;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Suggested(Suggestion),
    /// Nothing to suggest (the model's text held nothing new, or the endpoint failed).
    Nothing,
    /// Cancelled by the editor or superseded by the document's next request.
    Cancelled,
}

/// Inline completion for one connection: its endpoint, its cache, its requests in flight.
pub struct Engine {
    config: CompletionConfig,
    provider: Provider,
    /// The warm child servers, for grounding; `None` asks the model with the buffer alone.
    queries: Option<Queries>,
    log: Option<CompletionLog>,
    cache: Mutex<Cache>,
    /// Document → (generation, cancellation) of its request in flight.
    in_flight: Mutex<HashMap<String, (u64, CancellationToken)>>,
    generation: AtomicU64,
    /// (document, identifier) → its signature (or that it has none), reused for
    /// `signature_ttl`.
    signatures: Arc<Mutex<Signatures>>,
}

impl Engine {
    pub fn new(
        config: CompletionConfig,
        queries: Option<Queries>,
        log: Option<CompletionLog>,
    ) -> anyhow::Result<Engine> {
        let provider = Provider::new(config.provider.clone())?;
        Ok(Engine {
            config,
            provider,
            queries,
            log,
            cache: Mutex::new(Cache::default()),
            in_flight: Mutex::new(HashMap::new()),
            generation: AtomicU64::new(0),
            signatures: Arc::default(),
        })
    }

    /// Answer `request`; `cancel` is the editor's cancellation of it.
    pub async fn complete(&self, request: &Request, cancel: &CancellationToken) -> Outcome {
        let started = Instant::now();
        let windows = context::windows(
            &request.text,
            request.cursor,
            self.config.prefix_chars,
            self.config.suffix_chars,
        );
        let mut record = Record {
            document: request.label.clone(),
            sources: vec!["buffer".into()],
            ..Record::default()
        };
        let cached = self.cache.lock().expect("completion cache").get(
            &request.document,
            &windows.before,
            &windows.after,
        );
        let outcome = if let Some(shaped) = cached {
            // Whatever the document asked before is older than this answer.
            self.supersede(&request.document);
            record.cache_hit = true;
            Ok(Outcome::Suggested(shaped))
        } else {
            let (generation, token) = self.begin(&request.document, cancel);
            let outcome = self.ask(request, &windows, &token, &mut record).await;
            self.end(&request.document, generation);
            outcome
        };
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(error) => {
                tracing::warn!(document = %request.label, "inline completion failed: {error}");
                record.error = Some(error);
                record.result = "failed".into();
                Outcome::Nothing
            }
        };
        if record.result.is_empty() {
            record.result = match &outcome {
                Outcome::Suggested(_) => "suggested",
                Outcome::Nothing => "empty",
                Outcome::Cancelled => "cancelled",
            }
            .into();
        }
        if let Outcome::Suggested(shaped) = &outcome {
            record.suggestion_chars = shaped.insert.chars().count();
            if !record.cache_hit {
                self.cache.lock().expect("completion cache").put(
                    &request.document,
                    &windows.before,
                    &windows.after,
                    shaped,
                );
            }
        }
        record.cancelled = outcome == Outcome::Cancelled;
        record.latency_ms = millis(started.elapsed());
        record.overhead_ms = (record.latency_ms - record.model_ms - record.debounce_ms).max(0.0);
        record.ts = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        if let Some(log) = &self.log
            && let Err(error) = log.append(&record)
        {
            tracing::warn!("inline completion not logged: {error:#}");
        }
        outcome
    }

    /// Make this the document's request in flight, cancelling the one before it.
    fn begin(&self, document: &str, cancel: &CancellationToken) -> (u64, CancellationToken) {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed);
        let token = cancel.child_token();
        let previous = self
            .in_flight
            .lock()
            .expect("completions in flight")
            .insert(document.to_owned(), (generation, token.clone()));
        if let Some((_, previous)) = previous {
            previous.cancel();
        }
        (generation, token)
    }

    /// Cancel the document's request in flight, if any.
    fn supersede(&self, document: &str) {
        let previous = self
            .in_flight
            .lock()
            .expect("completions in flight")
            .remove(document);
        if let Some((_, previous)) = previous {
            previous.cancel();
        }
    }

    fn end(&self, document: &str, generation: u64) {
        let mut in_flight = self.in_flight.lock().expect("completions in flight");
        if in_flight
            .get(document)
            .is_some_and(|(current, _)| *current == generation)
        {
            in_flight.remove(document);
        }
    }

    async fn ask(
        &self,
        request: &Request,
        windows: &Windows,
        cancel: &CancellationToken,
        record: &mut Record,
    ) -> Result<Outcome, String> {
        // The lookups run during the debounce, not after it: what the person waits for is the
        // longer of the two, not their sum. A request superseded meanwhile leaves its lookups
        // to fill the signature cache for the next one.
        let started = Instant::now();
        let debounce = async {
            tokio::time::sleep(self.config.debounce).await;
            started.elapsed()
        };
        let grounding = async {
            let found = self.ground(request, &windows.before).await;
            (found, started.elapsed())
        };
        let (debounced, (found, grounded)) = tokio::select! {
            biased;
            () = cancel.cancelled() => return Ok(Outcome::Cancelled),
            both = async { tokio::join!(debounce, grounding) } => both,
        };
        record.debounce_ms = millis(debounced);
        // The wait the lookups added beyond the debounce.
        record.grounding_ms = millis(grounded.saturating_sub(debounced));
        let comment = context::comment_prefix(&request.path);
        let (block, kept) = context::grounding_block(found, comment, self.config.context_tokens);
        record.sources.extend(
            kept.iter()
                .map(|grounding| format!("{} hover {}", grounding.server, grounding.symbol)),
        );
        let fim = FimRequest {
            model: self.config.model.clone(),
            prompt: format!("{block}{}", windows.prefix),
            suffix: windows.suffix.clone(),
            max_tokens: self.config.max_tokens,
            stream: true,
        };
        record.grounding_chars = block.chars().count();
        record.prompt_chars = fim.prompt.chars().count();
        record.suffix_chars = fim.suffix.chars().count();
        record.digest = crate::canonical::sha256_hex(&format!("{}\u{0}{}", fim.prompt, fim.suffix))
            [..16]
            .to_owned();

        let model_started = Instant::now();
        let mut text = String::new();
        let answer = self
            .provider
            .fim(&fim, cancel, |piece| {
                text.push_str(piece);
                edit::wants_more(&text, &windows.before, &windows.after)
            })
            .await;
        record.model_ms = millis(model_started.elapsed());
        match answer {
            Ok(_) => {}
            Err(ProviderError::Cancelled) => return Ok(Outcome::Cancelled),
            // The provider's message names the agent's settings; this deadline is ours.
            Err(ProviderError::Timeout { after, .. }) => {
                return Err(format!(
                    "the FIM endpoint did not finish within {} ms ([completion] timeout_ms)",
                    after.as_millis()
                ));
            }
            Err(error) => return Err(error.to_string()),
        }
        Ok(match edit::shape(&text, &windows.before, &windows.after) {
            Some(shaped) => Outcome::Suggested(shaped),
            None => Outcome::Nothing,
        })
    }

    /// The signatures of the identifiers near the cursor, from the document's server. Those
    /// not answered within `grounding_timeout` are left out of this request, but their lookups
    /// go on and fill the cache for the next keystroke: the first request after a file opens
    /// finds the server still analysing it, and would otherwise leave every later one
    /// ungrounded too. A server that is starting or reports work in progress (indexing) is not
    /// waited for at all: it would hold the answer to its limit, keystroke after keystroke,
    /// so the request goes with the signatures already known.
    async fn ground(&self, request: &Request, before: &str) -> Vec<Grounding> {
        let Some(queries) = &self.queries else {
            return Vec::new();
        };
        if self.config.context_tokens == 0 {
            return Vec::new();
        }
        let identifiers = context::identifiers_near(before, self.config.context_lines, MAX_LOOKUPS);
        let ttl = self.config.signature_ttl;
        let mut found = Vec::new();
        let mut lookups = Vec::new();
        // (A block, not a `drop`: the guard must be gone before the first await.)
        {
            let mut signatures = self.signatures.lock().expect("signatures");
            if signatures.known.len() > MAX_SIGNATURES {
                signatures.known.clear();
            }
            for identifier in identifiers {
                let key = (request.document.clone(), identifier.name.clone());
                match signatures.known.get(&key) {
                    Some((at, known)) if at.elapsed() < ttl => found.extend(known.clone()),
                    // Asked by an earlier request and not answered yet: this one goes without.
                    _ if signatures.asking.contains(&key) => {}
                    _ => {
                        signatures.asking.insert(key.clone());
                        let position = SymbolPosition {
                            path: request.path.clone(),
                            line: identifier.line + 1,
                            symbol: identifier.name.clone(),
                            column: Some(identifier.column + 1),
                        };
                        lookups.push(tokio::spawn(look_up(
                            queries.clone(),
                            self.signatures.clone(),
                            key,
                            position,
                        )));
                    }
                }
            }
        }
        let wait = if queries.bridge.warm_for(&request.path) {
            self.config.grounding_timeout
        } else {
            Duration::ZERO
        };
        let deadline = tokio::time::Instant::now() + wait;
        for lookup in lookups {
            match tokio::time::timeout_at(deadline, lookup).await {
                Ok(Ok(grounding)) => found.extend(grounding),
                Ok(Err(error)) => tracing::debug!("a grounding lookup failed: {error}"),
                Err(_) => tracing::debug!(
                    "a grounding lookup is still running; left for the next request"
                ),
            }
        }
        found
    }
}

fn millis(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1000.0 * 100.0).round() / 100.0
}

/// Ask the server for one identifier's hover and remember its signature (or that it has
/// none); a failure is not remembered, so the next request asks again.
async fn look_up(
    queries: Queries,
    signatures: Arc<Mutex<Signatures>>,
    key: (String, String),
    position: SymbolPosition,
) -> Option<Grounding> {
    let answer = queries.hover(&position).await;
    let mut signatures = signatures.lock().expect("signatures");
    signatures.asking.remove(&key);
    match answer {
        Ok(answer) => {
            let grounding = context::signature_of(&answer.value).map(|text| Grounding {
                symbol: key.1.clone(),
                server: answer.server,
                text,
            });
            signatures
                .known
                .insert(key, (Instant::now(), grounding.clone()));
            grounding
        }
        Err(error) => {
            tracing::debug!(symbol = %key.1, "no hover for grounding: {error}");
            None
        }
    }
}
