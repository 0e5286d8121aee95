//! The `skill` tool: `skill {name}` returns a skill's instructions, its folder and its files,
//! and grants the folder to the session for reading (`Workspace::grant_read`).
//!
//! It loads from the skills the session recorded when it started (the section's), and looks
//! through the folders itself only for a call outside a session the plugin saw (`agent-lsp tool
//! skill`, or a session resumed by a process that has not run a turn of it yet).
//!
//! It is not marked read-only although it changes no file: it changes what `read` may open, so
//! the calls after it in a step must run after it, as they would after a write.

use futures_util::future::BoxFuture;
use serde::Deserialize;

use super::plugin::Known;
use super::{Roots, Skill, body_of, files_of, shown};
use crate::plugin::outcomes::ToolOutput;
use crate::plugin::tool::ToolContext;
use crate::plugin::typed::TypedTool;
use crate::tools::blocking;

/// The tool over the skills of one host's sessions.
pub struct SkillTool {
    roots: Roots,
    known: Known,
    max_body_bytes: usize,
}

impl SkillTool {
    pub fn new(roots: Roots, known: Known, max_body_bytes: usize) -> SkillTool {
        SkillTool {
            roots,
            known,
            max_body_bytes,
        }
    }
}

/// The skills a call of `session` may load: the session's record, else what is there now.
fn skills_of(known: &Known, roots: &Roots, session: Option<&str>) -> Vec<Skill> {
    session
        .and_then(|session| known.get(session))
        .unwrap_or_else(|| super::discover(roots).skills)
}

/// The arguments of `skill`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillArgs {
    /// The skill's name, as the Skills section lists it.
    name: String,
}

impl TypedTool for SkillTool {
    type Args = SkillArgs;

    fn name(&self) -> &str {
        "skill"
    }

    fn description(&self) -> String {
        "Load a skill of the system prompt's Skills section: its instructions, its folder and the files that come with it. \
                 For the rest of the session `read` opens those files by the absolute paths given (they cannot be changed)."
                .into()
    }

    fn read_only(&self) -> bool {
        false
    }

    fn run(&self, ctx: ToolContext, args: SkillArgs) -> BoxFuture<'static, ToolOutput> {
        let (known, roots) = (self.known.clone(), self.roots.clone());
        let max_body_bytes = self.max_body_bytes;
        Box::pin(blocking(move || {
            let skills = skills_of(&known, &roots, ctx.session_id.as_deref());
            load(&ctx, &skills, &args.name, max_body_bytes)
        }))
    }
}

/// The result of loading `name`.
fn load(ctx: &ToolContext, skills: &[Skill], name: &str, max_body_bytes: usize) -> ToolOutput {
    let Some(skill) = skills.iter().find(|skill| skill.name == name) else {
        let names = skills
            .iter()
            .map(|skill| format!("`{}`", skill.name))
            .collect::<Vec<_>>();
        let known = if names.is_empty() {
            "this session has no skills".to_owned()
        } else {
            format!("the skills of this session are {}", names.join(", "))
        };
        return ToolOutput::error(format!("no skill is named `{name}`; {known}"));
    };
    let body = match body_of(skill, max_body_bytes) {
        Ok(body) => body,
        Err(reason) => {
            return ToolOutput::error(format!("the skill `{name}` cannot be loaded: {reason}"));
        }
    };
    let folder = match ctx
        .workspace
        .grant_read(ctx.session_id.as_deref(), &skill.folder)
    {
        Ok(folder) => folder,
        Err(error) => {
            return ToolOutput::error(format!(
                "the skill `{name}` cannot be loaded: its folder {}: {error:#}",
                shown(&skill.folder)
            ));
        }
    };
    let (files, more) = files_of(&folder);
    let mut text = format!(
        "<skill name=\"{name}\" folder=\"{}\">\n{body}\n</skill>\n",
        shown(&folder)
    );
    if files.is_empty() {
        text.push_str("\nThe skill has no other files.");
    } else {
        text.push_str(
            "\nThe skill's files (`read` them by these absolute paths for the rest of this session; they cannot be changed):",
        );
        for file in &files {
            text.push_str(&format!("\n- {}", shown(file)));
        }
        if more {
            text.push_str(
                "\n- … (more files than are listed; `read` takes any file of the folder)",
            );
        }
    }
    ToolOutput::ok(text)
        .with_meta("skill", name)
        .with_meta("folder", shown(&folder))
        .with_meta("files", files.len())
}
