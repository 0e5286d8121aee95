//! The system prompt and tool catalog, assembled deterministically.
//!
//! Byte-stable output is what keeps the provider's prefix cache hot: sections are ordered by
//! `(order, id)`, not by registration order; tools are sorted by name and digested as canonical
//! JSON; variables are substituted from a sorted map. Nothing volatile belongs here: time, cwd,
//! open files and the like go through [`super::runtime::RuntimeContextProjection`].

use std::collections::BTreeMap;

use anyhow::bail;

use crate::canonical::{canonical_json, sha256_hex};
use crate::llm::ToolDef;
use crate::session::event::SectionRecord;

/// One named block of system text.
#[derive(Clone, Debug, PartialEq)]
pub struct Section {
    /// The section's name (`instructions`, `memory`, …); a second section of the same id
    /// replaces the first.
    pub id: String,
    /// Lower orders come first; ties are broken by `id`.
    pub order: i32,
    /// Text with `{{variable}}` placeholders.
    pub text: String,
    /// Where the text was read from (a file path, `memory`), for sections that are not the
    /// agent's own; recorded with the section's digest in every `request/header`.
    pub source: Option<String>,
}

/// Contributions to the system prompt from the loop and its plugins.
#[derive(Clone, Debug, Default)]
pub struct SystemPrompt {
    sections: Vec<Section>,
    tools: Vec<ToolDef>,
    variables: BTreeMap<String, String>,
}

/// The result of [`SystemPrompt::assemble`].
#[derive(Clone, Debug, PartialEq)]
pub struct AssembledPrompt {
    /// The system text, sections in order with their variables filled in.
    pub system: String,
    /// The tool catalog, sorted by name so the bytes do not depend on registration order.
    pub tools: Vec<ToolDef>,
    /// sha256 of `system`: a request header repeats the text only when this changes.
    pub system_digest: String,
    /// sha256 of the catalog's canonical JSON: a request header repeats the catalog only when
    /// this changes.
    pub tools_digest: String,
    /// The sourced sections, in prompt order, with the digest of their rendered text.
    pub sections: Vec<SectionRecord>,
}

impl AssembledPrompt {
    /// A prompt from a system text and catalog recorded in the log, with the digests
    /// [`SystemPrompt::assemble`] would give them (compaction outside a turn replays the last
    /// request's prefix this way).
    pub fn from_parts(system: String, tools: Vec<ToolDef>) -> anyhow::Result<AssembledPrompt> {
        let catalog = serde_json::to_value(&tools)?;
        Ok(AssembledPrompt {
            system_digest: sha256_hex(&system),
            tools_digest: sha256_hex(&canonical_json(&catalog)),
            system,
            tools,
            sections: Vec::new(),
        })
    }
}

impl SystemPrompt {
    /// Add a section, or replace the one with the same id.
    pub fn section(&mut self, id: &str, order: i32, text: &str) -> &mut Self {
        self.push(Section {
            id: id.to_owned(),
            order,
            text: text.to_owned(),
            source: None,
        })
    }

    /// Add a section read from `source` (a file, the memories), or replace the one with the
    /// same id. Its text is taken literally: `{{` in a project's `AGENTS.md` is not a variable.
    pub fn sourced_section(&mut self, id: &str, order: i32, text: &str, source: &str) -> &mut Self {
        self.push(Section {
            id: id.to_owned(),
            order,
            text: text.to_owned(),
            source: Some(source.to_owned()),
        })
    }

    fn push(&mut self, section: Section) -> &mut Self {
        self.sections.retain(|existing| existing.id != section.id);
        self.sections.push(section);
        self
    }

    /// The tools added so far, in the order they were added (the catalog is sorted when the
    /// prompt is assembled).
    pub fn tools(&self) -> &[ToolDef] {
        &self.tools
    }

    /// Add a tool, or replace the one with the same name.
    pub fn tool(&mut self, tool: ToolDef) -> &mut Self {
        self.tools.retain(|existing| existing.name != tool.name);
        self.tools.push(tool);
        self
    }

    /// Set the value `{{name}}` is replaced with in every section's text.
    pub fn variable(&mut self, name: &str, value: &str) -> &mut Self {
        self.variables.insert(name.to_owned(), value.to_owned());
        self
    }

    /// The system text and tool catalog; identical inputs give byte-identical output.
    pub fn assemble(&self) -> anyhow::Result<AssembledPrompt> {
        let mut sections = self.sections.iter().collect::<Vec<_>>();
        sections.sort_by(|a, b| (a.order, &a.id).cmp(&(b.order, &b.id)));
        let mut parts = Vec::with_capacity(sections.len());
        let mut records = Vec::new();
        for section in sections {
            let text = match &section.source {
                Some(_) => section.text.clone(),
                None => self.render(section)?,
            };
            if let Some(source) = &section.source {
                records.push(SectionRecord {
                    id: section.id.clone(),
                    source: source.clone(),
                    digest: sha256_hex(&text),
                });
            }
            parts.push(text);
        }
        let system = parts.join("\n\n");

        let mut tools = self.tools.clone();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        let catalog = serde_json::to_value(&tools)?;
        Ok(AssembledPrompt {
            system_digest: sha256_hex(&system),
            tools_digest: sha256_hex(&canonical_json(&catalog)),
            system,
            tools,
            sections: records,
        })
    }

    fn render(&self, section: &Section) -> anyhow::Result<String> {
        let mut out = String::with_capacity(section.text.len());
        let mut rest = section.text.as_str();
        while let Some(start) = rest.find("{{") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find("}}") else {
                bail!("section `{}` has an unclosed `{{{{`", section.id);
            };
            let name = after[..end].trim();
            match self.variables.get(name) {
                Some(value) => out.push_str(value),
                None => bail!(
                    "section `{}` uses the unknown variable `{name}`",
                    section.id
                ),
            }
            rest = &after[end + 2..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

// The catalog's bytes are the model's type's (the token meter, below this module, counts them).
pub use crate::llm::catalog_json;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn tool(name: &str, parameters: Value) -> ToolDef {
        ToolDef {
            name: name.into(),
            description: format!("{name} tool"),
            parameters,
        }
    }

    #[test]
    fn output_does_not_depend_on_registration_order() {
        let mut a = SystemPrompt::default();
        a.section("rules", 10, "Work in {{workspace}}.")
            .section("role", 0, "You are a coding agent.")
            .variable("workspace", "demo")
            .tool(tool(
                "read",
                json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            ))
            .tool(tool("grep", json!({"properties": {}, "type": "object"})));
        let mut b = SystemPrompt::default();
        b.tool(tool("grep", json!({"type": "object", "properties": {}})))
            .variable("workspace", "demo")
            .tool(tool(
                "read",
                json!({"properties": {"path": {"type": "string"}}, "type": "object"}),
            ))
            .section("role", 0, "You are a coding agent.")
            .section("rules", 10, "Work in {{workspace}}.");
        let (a, b) = (a.assemble().unwrap(), b.assemble().unwrap());
        assert_eq!(a, b);
        assert_eq!(a.system, "You are a coding agent.\n\nWork in demo.");
        assert_eq!(
            a.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["grep", "read"]
        );
        assert_eq!(catalog_json(&a.tools), catalog_json(&b.tools));
    }

    #[test]
    fn unknown_variables_are_errors_naming_the_section() {
        let mut prompt = SystemPrompt::default();
        prompt.section("rules", 0, "Use {{ missing }}.");
        let err = prompt.assemble().unwrap_err().to_string();
        assert_eq!(err, "section `rules` uses the unknown variable `missing`");
    }
}
