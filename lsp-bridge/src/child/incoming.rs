//! What a server sends on its own: notifications (progress, diagnostics, log lines; readiness is
//! judged from them) and requests to the client, each answered exactly once: by the editor
//! proxy's handler when it takes the method, else here from the configuration, because
//! servers like pyright exit when `workspace/configuration` or `client/registerCapability` go
//! unanswered.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::{Child, QUIET_AFTER_INITIALIZED};
use crate::error::METHOD_NOT_FOUND;
use crate::jsonrpc::ResponseError;

/// What readiness is judged on.
#[derive(Debug, Default)]
pub(super) struct Readiness {
    pub(super) initialized_at: Option<Instant>,
    /// Any work-done progress created or begun since start.
    pub(super) progress_seen: bool,
    /// The work-done progress created or begun and not yet ended, by token.
    pub(super) active_progress: BTreeMap<String, Work>,
    pub(super) diagnostics_seen: bool,
    /// Counts progress begins, so the newest work can be told.
    begun: u64,
}

/// One work-done progress of the server, as its last `begin` or `report` described it.
#[derive(Debug, Default)]
pub(super) struct Work {
    title: String,
    message: Option<String>,
    percentage: Option<u64>,
    /// When it began, in begins counted (0: created and not begun yet).
    begun: u64,
}

impl Readiness {
    /// The newest work the server reported and has not ended: `Indexing: 12/40 (30%)`.
    pub(super) fn work(&self) -> Option<String> {
        let work = self
            .active_progress
            .values()
            .filter(|work| work.begun > 0)
            .max_by_key(|work| work.begun)?;
        let mut line = work.title.clone();
        if let Some(message) = work.message.as_deref().filter(|text| !text.is_empty()) {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(message);
        }
        if let Some(percentage) = work.percentage {
            line.push_str(&format!(" ({percentage}%)"));
        }
        Some(if line.is_empty() {
            "working".to_owned()
        } else {
            line
        })
    }

    fn begin(&mut self, token: String, value: &Value) {
        self.progress_seen = true;
        self.begun += 1;
        self.active_progress.insert(
            token,
            Work {
                title: text(value, "title").unwrap_or_default(),
                message: text(value, "message"),
                percentage: value.get("percentage").and_then(Value::as_u64),
                begun: self.begun,
            },
        );
    }

    /// A report changes what a begun work says; `false` when it changed nothing.
    fn report(&mut self, token: &str, value: &Value) -> bool {
        let Some(work) = self.active_progress.get_mut(token) else {
            return false;
        };
        let (message, percentage) = (
            text(value, "message"),
            value.get("percentage").and_then(Value::as_u64),
        );
        let changed = (message.is_some() && message != work.message)
            || (percentage.is_some() && percentage != work.percentage);
        if message.is_some() {
            work.message = message;
        }
        if percentage.is_some() {
            work.percentage = percentage;
        }
        changed
    }
}

fn text(value: &Value, field: &str) -> Option<String> {
    value.get(field).and_then(Value::as_str).map(str::to_owned)
}

impl Readiness {
    /// Ready now, or not yet and when to look again without a change.
    pub(super) fn judge(&self, now: Instant) -> (bool, Option<Instant>) {
        if self.diagnostics_seen {
            return (true, None);
        }
        if !self.active_progress.is_empty() {
            return (false, None);
        }
        if self.progress_seen {
            return (true, None);
        }
        match self.initialized_at {
            Some(at) if now >= at + QUIET_AFTER_INITIALIZED => (true, None),
            Some(at) => (false, Some(at + QUIET_AFTER_INITIALIZED)),
            None => (false, None),
        }
    }
}

impl Child {
    pub(super) fn on_notification(&self, method: String, params: Value) {
        match method.as_str() {
            "$/progress" => self.on_progress(&params),
            "textDocument/publishDiagnostics" => {
                match serde_json::from_value::<lsp_types::PublishDiagnosticsParams>(params.clone())
                {
                    Ok(published) => {
                        self.diagnostics.publish(published);
                        self.readiness.send_if_modified(|readiness| {
                            !std::mem::replace(&mut readiness.diagnostics_seen, true)
                        });
                    }
                    Err(error) => {
                        tracing::warn!(server = %self.config.name, "unreadable publishDiagnostics: {error}")
                    }
                }
            }
            "window/logMessage" | "window/showMessage" => {
                let text = params
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let server = &self.config.name;
                match params.get("type").and_then(Value::as_i64) {
                    Some(1) | Some(2) => {
                        tracing::warn!(target: "lsp_bridge::server_log", %server, "{text}")
                    }
                    Some(3) => tracing::info!(target: "lsp_bridge::server_log", %server, "{text}"),
                    _ => tracing::debug!(target: "lsp_bridge::server_log", %server, "{text}"),
                }
            }
            _ => {}
        }
        // Nobody listening is the normal case until the editor proxy subscribes.
        let _ = self.notifications.send((method, params));
    }

    fn on_progress(&self, params: &Value) {
        let Some(token) = params.get("token").map(token_key) else {
            return;
        };
        let value = params.get("value").unwrap_or(&Value::Null);
        match value.get("kind").and_then(Value::as_str) {
            Some("begin") => self
                .readiness
                .send_modify(|readiness| readiness.begin(token, value)),
            Some("report") => {
                self.readiness
                    .send_if_modified(|readiness| readiness.report(&token, value));
            }
            Some("end") => {
                self.readiness.send_if_modified(|readiness| {
                    readiness.active_progress.remove(&token).is_some()
                });
            }
            _ => {}
        }
    }

    /// A request the request handler declined (or there is none): answered here.
    pub(super) fn on_request(self: &Arc<Self>, id: Value, method: String, params: Value) {
        let outcome = self.builtin_answer(&method, &params);
        if let Err(ResponseError { message, .. }) = &outcome {
            tracing::debug!(server = %self.config.name, %method, "refused server request: {message}");
        }
        self.transport.respond(id, outcome);
    }

    /// The answers this crate gives on its own (see the module doc).
    fn builtin_answer(&self, method: &str, params: &Value) -> crate::jsonrpc::Reply {
        match method {
            "workspace/configuration" => {
                let items = params
                    .get("items")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                Ok(Value::Array(
                    items
                        .iter()
                        .map(|item| {
                            setting(
                                &self.config.settings,
                                item.get("section").and_then(Value::as_str),
                            )
                        })
                        .collect(),
                ))
            }
            "client/registerCapability" => {
                let params =
                    serde_json::from_value::<lsp_types::RegistrationParams>(params.clone())
                        .map_err(|error| ResponseError::invalid_params(error.to_string()))?;
                for registration in &params.registrations {
                    tracing::debug!(server = %self.config.name, method = %registration.method, "capability registered");
                }
                self.registrations
                    .lock()
                    .unwrap()
                    .extend(params.registrations);
                Ok(Value::Null)
            }
            "client/unregisterCapability" => {
                // The protocol spells the field `unregisterations`; accept the fixed spelling too.
                let ids: HashSet<&str> = ["unregisterations", "unregistrations"]
                    .iter()
                    .filter_map(|field| params.get(field).and_then(Value::as_array))
                    .flatten()
                    .filter_map(|entry| entry.get("id").and_then(Value::as_str))
                    .collect();
                self.registrations
                    .lock()
                    .unwrap()
                    .retain(|registration| !ids.contains(registration.id.as_str()));
                Ok(Value::Null)
            }
            "window/workDoneProgress/create" => {
                if let Some(token) = params.get("token").map(token_key) {
                    self.readiness.send_modify(|readiness| {
                        readiness.progress_seen = true;
                        readiness.active_progress.entry(token).or_default();
                    });
                }
                Ok(Value::Null)
            }
            "workspace/workspaceFolders" => Ok(self.workspace_folders_json()),
            "window/showMessageRequest" => {
                let text = params
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                tracing::info!(target: "lsp_bridge::server_log", server = %self.config.name, "asks (no answer given): {text}");
                Ok(Value::Null)
            }
            "window/showDocument" => Ok(json!({"success": false})),
            "workspace/applyEdit" => Ok(json!({
                "applied": false,
                "failureReason": "agent-lsp does not apply server-initiated edits without an editor",
            })),
            // `workspace/semanticTokens/refresh`, `.../inlayHint/refresh` and the like: nothing
            // cached here to refresh.
            method if method.starts_with("workspace/") && method.ends_with("/refresh") => {
                Ok(Value::Null)
            }
            method => Err(ResponseError::new(
                METHOD_NOT_FOUND,
                format!("agent-lsp does not handle `{method}`"),
            )),
        }
    }
}

/// Progress tokens are integers or strings; one key space for both.
pub(super) fn token_key(token: &Value) -> String {
    match token {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The value of a dotted `section` in `settings` (`python.analysis` → `settings.python.analysis`,
/// or a literal `"python.analysis"` key), the whole settings for no section, `null` when absent.
fn setting(settings: &Value, section: Option<&str>) -> Value {
    let Some(section) = section.filter(|section| !section.is_empty()) else {
        return settings.clone();
    };
    if let Some(value) = settings.get(section) {
        return value.clone();
    }
    section
        .split('.')
        .try_fold(settings, |value, key| value.get(key))
        .cloned()
        .unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn settings_are_found_by_dotted_section() {
        let settings = json!({
            "python": {"analysis": {"typeCheckingMode": "strict"}},
            "flat.key": 1,
        });
        assert_eq!(
            setting(&settings, Some("python.analysis")),
            json!({"typeCheckingMode": "strict"})
        );
        assert_eq!(
            setting(&settings, Some("python.analysis.typeCheckingMode")),
            json!("strict")
        );
        assert_eq!(setting(&settings, Some("flat.key")), json!(1));
        assert_eq!(setting(&settings, Some("pyright")), Value::Null);
        assert_eq!(setting(&settings, None), settings);
    }

    #[test]
    fn the_newest_work_is_what_the_server_says_it_does() {
        let mut readiness = Readiness::default();
        assert_eq!(readiness.work(), None);
        readiness
            .active_progress
            .entry("created".into())
            .or_default();
        assert_eq!(readiness.work(), None, "created, not begun");
        readiness.begin("a".into(), &json!({"kind": "begin", "title": "Loading"}));
        assert_eq!(readiness.work().as_deref(), Some("Loading"));
        readiness.begin(
            "b".into(),
            &json!({"kind": "begin", "title": "Indexing", "percentage": 0}),
        );
        assert!(readiness.report("b", &json!({"message": "12/40", "percentage": 30})));
        assert!(
            !readiness.report("b", &json!({"message": "12/40"})),
            "no change"
        );
        assert!(!readiness.report("unknown", &json!({"message": "x"})));
        assert_eq!(readiness.work().as_deref(), Some("Indexing: 12/40 (30%)"));
        readiness.active_progress.remove("b");
        assert_eq!(readiness.work().as_deref(), Some("Loading"));
        readiness.begin("c".into(), &json!({"kind": "begin"}));
        assert_eq!(readiness.work().as_deref(), Some("working"));
    }

    #[test]
    fn readiness_follows_progress_diagnostics_and_quiet() {
        let start = Instant::now();
        let mut readiness = Readiness::default();
        assert_eq!(readiness.judge(start), (false, None));
        readiness.initialized_at = Some(start);
        assert_eq!(
            readiness.judge(start),
            (false, Some(start + QUIET_AFTER_INITIALIZED))
        );
        assert!(readiness.judge(start + QUIET_AFTER_INITIALIZED).0);
        readiness.progress_seen = true;
        readiness
            .active_progress
            .insert("indexing".into(), Work::default());
        assert!(!readiness.judge(start + Duration::from_secs(10)).0);
        readiness.active_progress.clear();
        assert!(readiness.judge(start).0);
        readiness
            .active_progress
            .insert("again".into(), Work::default());
        readiness.diagnostics_seen = true;
        assert!(readiness.judge(start).0);
    }
}
