//! The Claude Code dialect: hooks read from a Claude Code `settings.json` see the tools by the
//! names and with the input fields Claude Code gives them (`Bash` with `command`, `Edit` and
//! `Write` with an absolute `file_path`), so the scripts written for it (`jq -r
//! '.tool_input.file_path'`, `if tool_name != "Bash"`) and matchers such as `Edit|Write` work
//! unchanged. An `updatedInput` such a hook answers is taken back into our names. A tool with no
//! counterpart (`lsp_*`, `mcp__SERVER__TOOL`, which Claude Code names alike) keeps its name and
//! its arguments.

use std::path::Path;

use serde_json::{Map, Value, json};

/// Our tool names and Claude Code's, for the tools both have.
const NAMES: [(&str, &str); 11] = [
    ("shell", "Bash"),
    ("edit", "Edit"),
    ("write", "Write"),
    ("read", "Read"),
    ("glob", "Glob"),
    ("grep", "Grep"),
    ("list", "LS"),
    ("web_fetch", "WebFetch"),
    ("web_search", "WebSearch"),
    ("task", "Task"),
    ("todo", "TodoWrite"),
];

/// The tools whose `path` argument Claude Code calls `file_path`, absolute.
const FILE_TOOLS: [&str; 3] = ["edit", "write", "read"];

/// Claude Code's name of our tool `name`.
pub fn tool_name(name: &str) -> &str {
    NAMES
        .iter()
        .find(|(ours, _)| *ours == name)
        .map_or(name, |(_, theirs)| theirs)
}

/// The input a Claude Code hook sees for our tool `name` called with `input`.
pub fn tool_input(name: &str, input: &Value, root: &Path) -> Value {
    let Some(fields) = input.as_object() else {
        return input.clone();
    };
    let mut fields = fields.clone();
    if FILE_TOOLS.contains(&name)
        && let Some(Value::String(path)) = fields.remove("path")
    {
        fields.insert(
            "file_path".into(),
            json!(root.join(path).display().to_string()),
        );
    }
    if name == "shell"
        && let Some(Value::Number(secs)) = fields.remove("timeout_secs")
    {
        let millis = secs.as_u64().unwrap_or_default().saturating_mul(1000);
        fields.insert("timeout".into(), json!(millis));
    }
    Value::Object(fields)
}

/// Our arguments for tool `name` from a Claude Code hook's `updatedInput`: the inverse of
/// [`tool_input`]. A `file_path` inside the workspace becomes its relative path; one outside
/// stays absolute, which the tool then refuses as any path outside the workspace.
pub fn from_tool_input(name: &str, input: &Value, root: &Path) -> Value {
    let Some(fields) = input.as_object() else {
        return input.clone();
    };
    let mut fields: Map<String, Value> = fields.clone();
    if FILE_TOOLS.contains(&name)
        && let Some(Value::String(path)) = fields.remove("file_path")
    {
        let relative = Path::new(&path)
            .strip_prefix(root)
            .map_or(path.clone(), |relative| relative.display().to_string());
        fields.insert("path".into(), json!(relative));
    }
    if name == "shell" {
        if let Some(Value::Number(millis)) = fields.remove("timeout") {
            let secs = millis.as_u64().unwrap_or_default().div_ceil(1000).max(1);
            fields.insert("timeout_secs".into(), json!(secs));
        }
        // Claude Code's own fields, which our `shell` does not take.
        fields.remove("description");
        fields.remove("run_in_background");
    }
    Value::Object(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_go_to_claude_code_and_back() {
        let root = Path::new("/w");
        let edit = json!({"path": "src/a.ts", "old_string": "a", "new_string": "b"});
        let theirs = tool_input("edit", &edit, root);
        assert_eq!(theirs["file_path"], "/w/src/a.ts");
        assert_eq!(theirs.get("path"), None);
        assert_eq!(from_tool_input("edit", &theirs, root), edit);
        let shell = json!({"command": "ls", "timeout_secs": 5});
        let theirs = tool_input("shell", &shell, root);
        assert_eq!(theirs, json!({"command": "ls", "timeout": 5000}));
        let mut echoed = theirs.clone();
        echoed["description"] = json!("list");
        assert_eq!(from_tool_input("shell", &echoed, root), shell);
        assert_eq!(tool_name("shell"), "Bash");
        assert_eq!(tool_name("lsp_hover"), "lsp_hover");
    }
}
