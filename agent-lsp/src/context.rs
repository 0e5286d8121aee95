//! Context assembly: everything that decides what one model request contains.
//!
//! The chain for every model call (docs/architecture.md, "The one rule"):
//! [`system_prompt::SystemPrompt::assemble`] gives the stable system text and tool catalog;
//! [`runtime::RuntimeContextProjection`] appends volatile state to the session only when it
//! changed; the session derives the messages; [`request::build_request`] records
//! `request/header` and `request/context` and returns the provider-neutral request, which
//! [`request::replay_request`] can rebuild from the log alone. [`crate::context_editor`] shows the surface as
//! segments and edits it as recorded batches (fold, pin, delete, replace, rollback).

pub mod request;
pub mod runtime;
pub mod system_prompt;
