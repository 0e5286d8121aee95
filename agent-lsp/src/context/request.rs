//! Building model requests from the session, and rebuilding them from the log alone.
//!
//! [`build_request`] is the only way a request is made: it derives the messages, records a
//! `request/header` (model, parameters, digests, and the full system prompt and tool catalog
//! whenever their digest changed) and a `request/context` (surface generation, the last seq the
//! request saw, the surface seqs that went in, the token estimate), then returns the request.
//! [`replay_request`] inverts it: from those two events it finds the system text and tools,
//! derives the surface as it was, checks it against what was recorded, and returns the same
//! request, which the wire module serializes to the same bytes.

use anyhow::{Context, bail};

use super::system_prompt::AssembledPrompt;
use crate::llm::{ModelParams, ModelRequest, ToolDef, wire};
use crate::session::event::{EventBody, RequestContext, RequestHeader};
use crate::session::{History, NewEvent, Session};
use crate::tokens::estimate_request;

/// Record and return the next model request of `session`.
pub fn build_request(
    session: &mut Session,
    prompt: &AssembledPrompt,
    model: &str,
    params: &ModelParams,
    turn: u32,
    step: u32,
) -> anyhow::Result<ModelRequest> {
    let through_seq = session.history().last_seq();
    let generation = session.history().generation();
    let index = session.history().n_requests() + 1;
    let changed = session.history().last_digests()
        != Some((prompt.system_digest.as_str(), prompt.tools_digest.as_str()));
    let messages = session.derive_messages().to_vec();
    let event_seqs = session.history().surface_runs();
    let request = ModelRequest {
        index,
        model: model.to_owned(),
        params: params.clone(),
        system: prompt.system.clone(),
        tools: prompt.tools.clone(),
        messages,
    };

    let header = RequestHeader {
        index,
        wire: wire::WIRE_FORMAT.to_owned(),
        model: model.to_owned(),
        params: serde_json::to_value(params)?,
        system_digest: prompt.system_digest.clone(),
        tools_digest: prompt.tools_digest.clone(),
        system: changed.then(|| prompt.system.clone()),
        tools: changed.then(|| prompt.tools.clone()),
        sections: prompt.sections.clone(),
    };
    session.append(NewEvent::new(turn, step, EventBody::RequestHeader(header)))?;
    let context = RequestContext {
        index,
        generation,
        through_seq,
        event_seqs,
        estimated_tokens: estimate_request(&request),
    };
    session.append(NewEvent::new(
        turn,
        step,
        EventBody::RequestContext(context),
    ))?;
    Ok(request)
}

/// Rebuild the `index`-th request (1-based) of a recorded session from its log.
pub fn replay_request(history: &History, index: u64) -> anyhow::Result<ModelRequest> {
    let n_requests = history.n_requests();
    if index == 0 || index > n_requests {
        bail!(
            "request {index} does not exist: the session made {n_requests} requests (numbered from 1)"
        );
    }
    let events = history.events();
    let header_at = events
        .iter()
        .position(|event| matches!(&event.body, EventBody::RequestHeader(h) if h.index == index))
        .context("request header not found")?;
    let EventBody::RequestHeader(header) = &events[header_at].body else {
        unreachable!()
    };
    let context = events[header_at..]
        .iter()
        .find_map(|event| match &event.body {
            EventBody::RequestContext(context) if context.index == index => Some(context),
            _ => None,
        })
        .with_context(|| {
            format!(
                "request {index} has no request/context event: the log was cut while it was built"
            )
        })?;
    if header.wire != wire::WIRE_FORMAT {
        bail!(
            "request {index} was sent in wire format `{}`, which this agent-lsp cannot rebuild",
            header.wire
        );
    }

    let earlier = events[..=header_at]
        .iter()
        .rev()
        .filter_map(|event| match &event.body {
            EventBody::RequestHeader(header) => Some(header),
            _ => None,
        });
    let system = earlier
        .clone()
        .find_map(|h| {
            h.system
                .as_ref()
                .filter(|_| h.system_digest == header.system_digest)
        })
        .with_context(|| {
            format!(
                "no recorded system prompt has digest {}",
                header.system_digest
            )
        })?;
    let tools: &Vec<ToolDef> = earlier
        .clone()
        .find_map(|h| {
            h.tools
                .as_ref()
                .filter(|_| h.tools_digest == header.tools_digest)
        })
        .with_context(|| {
            format!(
                "no recorded tool catalog has digest {}",
                header.tools_digest
            )
        })?;

    let mut past = history.prefix(context.through_seq)?;
    if past.generation() != context.generation {
        bail!(
            "request {index} was built from surface generation {}, but the log rebuilds generation {}",
            context.generation,
            past.generation()
        );
    }
    if past.surface_runs() != context.event_seqs {
        bail!("request {index}: the surface rebuilt from the log differs from the one recorded");
    }
    let params: ModelParams = serde_json::from_value(header.params.clone())
        .with_context(|| format!("request {index} has unreadable parameters"))?;
    Ok(ModelRequest {
        index,
        model: header.model.clone(),
        params,
        system: system.clone(),
        tools: tools.clone(),
        messages: past.derive_messages().to_vec(),
    })
}
