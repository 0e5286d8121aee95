//! What a server sends on its own: notifications (progress, diagnostics, log lines; readiness is
//! judged from them) and requests to the client, each answered exactly once: by the editor
//! proxy's handler when it takes the method, else here from the configuration, because
//! servers like pyright exit when `workspace/configuration` or `client/registerCapability` go
//! unanswered.

use std::collections::HashSet;
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
    pub(super) active_progress: HashSet<String>,
    pub(super) diagnostics_seen: bool,
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
        match params.pointer("/value/kind").and_then(Value::as_str) {
            Some("begin") => self.readiness.send_modify(|readiness| {
                readiness.progress_seen = true;
                readiness.active_progress.insert(token);
            }),
            Some("end") => {
                self.readiness
                    .send_if_modified(|readiness| readiness.active_progress.remove(&token));
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
                        readiness.active_progress.insert(token);
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
        readiness.active_progress.insert("indexing".into());
        assert!(!readiness.judge(start + Duration::from_secs(10)).0);
        readiness.active_progress.clear();
        assert!(readiness.judge(start).0);
        readiness.active_progress.insert("again".into());
        readiness.diagnostics_seen = true;
        assert!(readiness.judge(start).0);
    }
}
