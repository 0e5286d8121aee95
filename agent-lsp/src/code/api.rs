//! The `code_mode` plugin's system-prompt section: the `tools` API of `run_code`, generated
//! from the catalog the turn's prompt holds, so a program calls each tool with the parameters
//! its schema names. The catalog is the same for the whole session, so the section is too.

use serde_json::Value;

use super::TOOL;
use crate::context::system_prompt::SystemPrompt;
use crate::llm::ToolDef;
use crate::plugin::Plugin;
use crate::session::Session;

/// Where the section goes: after the base prompt and the role sections.
const SECTION_ORDER: i32 = 30;

/// Adds the section documenting `tools` for `run_code`.
pub struct CodeModePlugin;

impl Plugin for CodeModePlugin {
    fn name(&self) -> &'static str {
        super::PLUGIN
    }

    fn contribute(
        &mut self,
        prompt: &mut SystemPrompt,
        _session: &mut Session,
        _turn: u32,
    ) -> anyhow::Result<()> {
        let section = section(prompt.tools());
        prompt.section(super::PLUGIN, SECTION_ORDER, &section);
        Ok(())
    }
}

/// The section for `catalog`.
pub fn section(catalog: &[ToolDef]) -> String {
    let mut tools = catalog
        .iter()
        .filter(|def| def.name != TOOL)
        .collect::<Vec<_>>();
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    let mut text = String::from(
        "Code mode: for work of many lookups, write one `run_code` program instead of many tool calls. The program is the body of an async function; `await tools.NAME({...})` runs a tool and gives its result text (what you would see from that tool), and throws an Error with the tool's message when the call fails. Parse the text in the program (split lines, match with RegExp), print only what answers the question with `console.log`, or `return` a value. Every call is checked and recorded like your own calls.\nThe `tools` object:",
    );
    for def in tools {
        text.push_str(&format!(
            "\n- `await tools.{}({})`: {}",
            def.name,
            signature(&def.parameters),
            first_sentence(&def.description)
        ));
    }
    text
}

/// `{path: string, limit?: integer}` from a JSON schema's properties.
fn signature(schema: &Value) -> String {
    let required = schema["required"]
        .as_array()
        .map(|names| {
            names
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let Some(properties) = schema["properties"].as_object() else {
        return "{}".into();
    };
    // By name, whatever order the map keeps (serde_json's `preserve_order`, which a dependency
    // turns on, keeps the schema's): the section is part of the cached prompt prefix.
    let mut properties = properties.iter().collect::<Vec<_>>();
    properties.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let fields = properties
        .into_iter()
        .map(|(name, property)| {
            let optional = if required.contains(name) { "" } else { "?" };
            format!("{name}{optional}: {}", type_of(property))
        })
        .collect::<Vec<_>>();
    format!("{{{}}}", fields.join(", "))
}

fn type_of(property: &Value) -> String {
    if let Some(values) = property["enum"].as_array() {
        return values
            .iter()
            .map(|value| value.to_string())
            .collect::<Vec<_>>()
            .join(" | ");
    }
    match property["type"].as_str() {
        Some("array") => format!("{}[]", type_of(&property["items"])),
        Some("integer") => "integer".into(),
        Some(kind) => kind.into(),
        None => match property["type"].as_array() {
            Some(kinds) => kinds
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" | "),
            None => "any".into(),
        },
    }
}

/// A description's first sentence, for a line of the section.
fn first_sentence(description: &str) -> &str {
    let end = description
        .char_indices()
        .find(|&(at, c)| {
            // A full stop ends the sentence before a capital letter or at the end ("e.g." in
            // the middle of a sentence does not).
            let mut rest = description[at + 1..].chars();
            c == '.'
                && match rest.next() {
                    None => true,
                    Some(next) if next.is_whitespace() => {
                        rest.next().is_none_or(|word| word.is_uppercase())
                    }
                    Some(_) => false,
                }
        })
        .map_or(description.len(), |(at, _)| at + 1);
    description[..end].trim()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_section_lists_every_tool_but_run_code_with_its_parameters() {
        let catalog = vec![
            ToolDef {
                name: "read".into(),
                description: "Read a file. Long files are cut.".into(),
                parameters: json!({"type": "object", "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["path"]}),
            },
            ToolDef {
                name: TOOL.into(),
                description: "Run code.".into(),
                parameters: json!({}),
            },
            ToolDef {
                name: "grep".into(),
                description: "Search e.g. for text".into(),
                parameters: json!({"type": "object", "properties": {"mode": {"enum": ["a", "b"]}, "paths": {"type": "array", "items": {"type": "string"}}}}),
            },
        ];
        let text = section(&catalog);
        let lines = text.lines().skip(2).collect::<Vec<_>>();
        assert_eq!(
            lines,
            [
                "- `await tools.grep({mode?: \"a\" | \"b\", paths?: string[]})`: Search e.g. for text",
                "- `await tools.read({limit?: integer, path: string})`: Read a file.",
            ]
        );
        assert!(!text.contains("tools.run_code"));
    }
}
