//! What a hook's exit says: the contract, the same as Claude Code's where both have the event.
//!
//! - **Exit 0**: go on. Stdout is read as a JSON answer when it is one object; otherwise, for
//!   `SessionStart` and `UserPromptSubmit`, its text is context for the model, and for the other
//!   events it is only recorded.
//! - **Exit 2**: block, with stderr as the reason. What "block" means is the event's: the call
//!   is not run and the model reads why (`PreToolUse`); the prompt is not taken and the user
//!   reads why (`UserPromptSubmit`); the turn does not end and the model reads why (`Stop`,
//!   `SubagentStop`); the model reads stderr beside the result of a call that already ran
//!   (`PostToolUse`). `SessionStart` and `PreCompact` cannot block: their stderr is reported.
//! - **Any other exit**, a timeout, a kill, a command that did not start: a failure, reported
//!   and recorded, that blocks nothing.
//!
//! The JSON answer's fields honoured: `decision` (`block`, and `approve` as `allow` for
//! `PreToolUse`), `reason`, `continue: false` with `stopReason` (a block of a call or a
//! prompt), `systemMessage` (shown to the user), and in `hookSpecificOutput` (or at the top
//! level): `permissionDecision` (`allow`, `deny`, `ask`), `permissionDecisionReason`,
//! `updatedInput` and `additionalContext`. `suppressOutput` has nothing to hide here.

use serde_json::{Map, Value};

use super::HookEvent;
use super::run::Exit;

/// A `PreToolUse` hook's word on the call's permission.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Permission {
    /// Run it without asking the user (the preset's `deny` still holds).
    Allow,
    /// Refuse it, with the reason the model reads.
    Deny(String),
    /// Ask the user even where the preset allows it.
    Ask(Option<String>),
}

/// What one hook's run comes to.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Answer {
    /// Why it blocked, when it did.
    pub block: Option<String>,
    /// Why it failed, when it did (blocks nothing).
    pub failure: Option<String>,
    /// Text for the model.
    pub context: Option<String>,
    /// The call's arguments in place of the model's (`PreToolUse`).
    pub updated_input: Option<Value>,
    /// The call's permission (`PreToolUse`).
    pub permission: Option<Permission>,
    /// Text for the user (`systemMessage`, the stderr of an event that cannot block).
    pub notice: Option<String>,
}

/// What `exit` comes to for a hook of `event`.
pub fn interpret(event: HookEvent, exit: &Exit) -> Answer {
    if let Some(failure) = &exit.failure {
        return Answer {
            failure: Some(failure.clone()),
            ..Answer::default()
        };
    }
    let stderr = exit.stderr.trim();
    match exit.code {
        Some(0) => {}
        Some(2) => {
            let reason = if stderr.is_empty() {
                format!("the {} hook exited with code 2", event.name())
            } else {
                stderr.to_owned()
            };
            return match event {
                HookEvent::PostToolUse => Answer {
                    context: Some(reason),
                    ..Answer::default()
                },
                HookEvent::SessionStart | HookEvent::PreCompact => Answer {
                    notice: Some(reason),
                    ..Answer::default()
                },
                _ => Answer {
                    block: Some(reason),
                    ..Answer::default()
                },
            };
        }
        code => {
            let code = code.map_or("none".to_owned(), |code| code.to_string());
            let said = if stderr.is_empty() {
                "no stderr output".to_owned()
            } else {
                stderr.to_owned()
            };
            return Answer {
                failure: Some(format!("exit code {code}: {said}")),
                ..Answer::default()
            };
        }
    }
    let stdout = exit.stdout.trim();
    match serde_json::from_str::<Value>(stdout) {
        Ok(Value::Object(answer)) => json_answer(event, &answer),
        _ if stdout.is_empty() => Answer::default(),
        _ => match event {
            HookEvent::SessionStart | HookEvent::UserPromptSubmit => Answer {
                context: Some(stdout.to_owned()),
                ..Answer::default()
            },
            _ => Answer::default(),
        },
    }
}

/// The fields of a JSON answer, as `event` honours them.
fn json_answer(event: HookEvent, answer: &Map<String, Value>) -> Answer {
    let specific = answer.get("hookSpecificOutput").and_then(Value::as_object);
    let field = |name: &str| {
        specific
            .and_then(|specific| specific.get(name))
            .or_else(|| answer.get(name))
    };
    let text = |name: &str| {
        field(name)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|text| !text.is_empty())
            .map(str::to_owned)
    };
    let reason = text("reason");
    let decision = text("decision");
    let mut result = Answer {
        notice: text("systemMessage"),
        ..Answer::default()
    };
    let stopped = answer.get("continue") == Some(&Value::Bool(false));
    match event {
        HookEvent::PreToolUse => {
            let reason_for = text("permissionDecisionReason").or(reason.clone());
            result.permission = match text("permissionDecision").or(decision.clone()).as_deref() {
                Some("allow" | "approve") => Some(Permission::Allow),
                Some("deny" | "block") => Some(Permission::Deny(
                    reason_for.unwrap_or_else(|| "a PreToolUse hook denied it".into()),
                )),
                Some("ask") => Some(Permission::Ask(reason_for)),
                _ => None,
            };
            result.updated_input = field("updatedInput")
                .filter(|input| input.is_object())
                .cloned();
            if stopped {
                result.block = Some(
                    text("stopReason").unwrap_or_else(|| "a PreToolUse hook stopped it".into()),
                );
            }
        }
        HookEvent::UserPromptSubmit => {
            if decision.as_deref() == Some("block") || stopped {
                result.block = Some(
                    reason
                        .or_else(|| text("stopReason"))
                        .unwrap_or_else(|| "a UserPromptSubmit hook blocked the prompt".into()),
                );
            } else {
                result.context = text("additionalContext");
            }
        }
        HookEvent::Stop | HookEvent::SubagentStop => {
            if decision.as_deref() == Some("block") && !stopped {
                result.block =
                    Some(reason.unwrap_or_else(|| {
                        format!("a {} hook asked the work to go on", event.name())
                    }));
            }
        }
        HookEvent::PostToolUse => {
            let blocked = (decision.as_deref() == Some("block"))
                .then_some(reason)
                .flatten();
            let context = [blocked, text("additionalContext")]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>();
            result.context = (!context.is_empty()).then(|| context.join("\n"));
        }
        HookEvent::SessionStart => result.context = text("additionalContext"),
        HookEvent::PreCompact => {}
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit(code: i32, stdout: &str, stderr: &str) -> Exit {
        Exit {
            code: Some(code),
            stdout: stdout.into(),
            stderr: stderr.into(),
            ..Exit::default()
        }
    }

    #[test]
    fn exit_codes_follow_the_contract() {
        let blocked = interpret(
            HookEvent::PreToolUse,
            &exit(2, "{\"decision\":\"approve\"}", "no rm\n"),
        );
        assert_eq!(blocked.block.as_deref(), Some("no rm"));
        assert_eq!(blocked.permission, None, "JSON is not read on exit 2");
        let post = interpret(HookEvent::PostToolUse, &exit(2, "", "lint failed"));
        assert_eq!(
            (post.block, post.context.as_deref()),
            (None, Some("lint failed"))
        );
        let start = interpret(HookEvent::SessionStart, &exit(2, "", "oops"));
        assert_eq!((start.block, start.notice.as_deref()), (None, Some("oops")));
        let failed = interpret(HookEvent::PreToolUse, &exit(1, "", ""));
        assert_eq!(failed.block, None);
        assert_eq!(
            failed.failure.as_deref(),
            Some("exit code 1: no stderr output")
        );
        let plain = interpret(HookEvent::UserPromptSubmit, &exit(0, "It is noon.\n", ""));
        assert_eq!(plain.context.as_deref(), Some("It is noon."));
        assert_eq!(
            interpret(HookEvent::PreToolUse, &exit(0, "formatted", "")),
            Answer::default()
        );
    }

    #[test]
    fn json_answers_give_decisions_inputs_and_context() {
        let allow = interpret(
            HookEvent::PreToolUse,
            &exit(
                0,
                r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":{"command":"ls -a"}}}"#,
                "",
            ),
        );
        assert_eq!(allow.permission, Some(Permission::Allow));
        assert_eq!(
            allow.updated_input,
            Some(serde_json::json!({"command": "ls -a"}))
        );
        let legacy = interpret(
            HookEvent::PreToolUse,
            &exit(0, r#"{"decision":"block","reason":"no"}"#, ""),
        );
        assert_eq!(legacy.permission, Some(Permission::Deny("no".into())));
        let prompt = interpret(
            HookEvent::UserPromptSubmit,
            &exit(0, r#"{"decision":"block","reason":"secrets"}"#, ""),
        );
        assert_eq!(prompt.block.as_deref(), Some("secrets"));
        let stop = interpret(
            HookEvent::Stop,
            &exit(0, r#"{"decision":"block","reason":"tests fail"}"#, ""),
        );
        assert_eq!(stop.block.as_deref(), Some("tests fail"));
        let post = interpret(
            HookEvent::PostToolUse,
            &exit(
                0,
                r#"{"decision":"block","reason":"bad","hookSpecificOutput":{"additionalContext":"see docs"}}"#,
                "",
            ),
        );
        assert_eq!(post.context.as_deref(), Some("bad\nsee docs"));
    }
}
