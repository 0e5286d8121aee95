//! What a hook's run leaves in the log (`hook/run`, `crate::session::event::HookRun`): the
//! outcome, the reason, what it added, rewrote, decided or changed, and the head of its output;
//! and the reads of the file a `PostToolUse` hook may change, which its record names.

use std::path::Path;

use serde_json::Value;

use super::answer::{Answer, Permission};
use super::{Hook, Occasion, run};
use crate::session::event::HookRun;

/// The largest watched file whose changes a hook's record carries (and the model is shown).
const MAX_WATCHED_BYTES: u64 = 4 * 1024 * 1024;

pub(super) fn read_watched(path: &Path) -> Option<Vec<u8>> {
    let metadata = std::fs::metadata(path).ok()?;
    (metadata.is_file() && metadata.len() <= MAX_WATCHED_BYTES)
        .then(|| std::fs::read(path).ok())
        .flatten()
}

/// The most of a stream a `hook/run` record keeps.
const RECORDED_OUTPUT_BYTES: usize = 4096;

fn head(text: &str) -> String {
    if text.len() <= RECORDED_OUTPUT_BYTES {
        return text.to_owned();
    }
    let mut end = RECORDED_OUTPUT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n[… {} more bytes]", &text[..end], text.len() - end)
}

pub(super) fn run_record(
    hook: &Hook,
    occasion: &Occasion<'_>,
    exit: &run::Exit,
    answer: &Answer,
    updated_input: Option<Value>,
    changed: Option<String>,
) -> HookRun {
    let outcome =
        if answer.block.is_some() || matches!(answer.permission, Some(Permission::Deny(_))) {
            "blocked"
        } else if answer.failure.is_some() {
            "failed"
        } else {
            "continued"
        };
    let reason = answer
        .block
        .clone()
        .or_else(|| match &answer.permission {
            Some(Permission::Deny(reason)) => Some(reason.clone()),
            Some(Permission::Ask(reason)) => reason.clone(),
            _ => None,
        })
        .or_else(|| answer.failure.clone());
    HookRun {
        event: occasion.event.name().into(),
        source: hook.source.name.clone(),
        command: hook.command.clone(),
        matcher: hook.matcher.clone(),
        call_id: occasion.tool.as_ref().map(|tool| tool.id.to_owned()),
        exit_code: exit.code,
        duration_ms: exit.duration.as_millis() as u64,
        outcome: outcome.into(),
        reason,
        context: answer.context.clone(),
        message: answer.notice.clone(),
        updated_input,
        permission: answer.permission.as_ref().map(|permission| {
            match permission {
                Permission::Allow => "allow",
                Permission::Deny(_) => "deny",
                Permission::Ask(_) => "ask",
            }
            .to_owned()
        }),
        changed: changed.into_iter().collect(),
        stdout: head(&exit.stdout),
        stderr: head(&exit.stderr),
    }
}
