//! The tool catalog as `agent-lsp tool --list --json` prints it: every built-in tool's
//! parameters are a plain, self-contained JSON Schema object with a description for every
//! property, derived from the tools' argument types, and the same bytes on every run.

use serde_json::Value;

type Fixture = agent_tests::cli::CliFixture;

/// What is wrong with one schema node and its subschemas, as `path: problem` lines.
fn problems(path: &str, schema: &Value, out: &mut Vec<String>) {
    let Some(object) = schema.as_object() else {
        out.push(format!("{path}: not an object"));
        return;
    };
    for key in [
        "$schema",
        "title",
        "$ref",
        "$defs",
        "definitions",
        "oneOf",
        "anyOf",
        "default",
    ] {
        if object.contains_key(key) {
            out.push(format!("{path}: has `{key}`"));
        }
    }
    if let Some(Value::Array(types)) = object.get("type") {
        out.push(format!("{path}: several types {types:?}"));
    }
    if let Some(Value::String(format)) = object.get("format") {
        out.push(format!("{path}: format `{format}`"));
    }
    if let Some(Value::Object(properties)) = object.get("properties") {
        for (name, property) in properties {
            let at = format!("{path}.{name}");
            if !property.get("description").is_some_and(Value::is_string) {
                out.push(format!("{at}: no description"));
            }
            problems(&at, property, out);
        }
    }
    if let Some(items) = object.get("items") {
        problems(&format!("{path}[]"), items, out);
    }
}

#[test]
fn every_builtin_tool_schema_is_plain_described_and_byte_stable() {
    let fixture = Fixture::new("").with_files(&[("README.md", "# demo\n")]);
    let mut names = Vec::new();
    let mut found = Vec::new();
    for preset in [
        "standard", "code", "creative", "explore", "minimal", "readonly",
    ] {
        let args = ["tool", "--list", "--json", "--preset", preset];
        let first = fixture.ok(&args);
        assert_eq!(first, fixture.ok(&args), "{preset}: two listings differ");
        let catalog: Value = serde_json::from_str(&first).unwrap();
        for tool in catalog.as_array().unwrap() {
            let name = tool["name"].as_str().unwrap().to_owned();
            let schema = &tool["parameters"];
            assert_eq!(schema["type"], "object", "{name}: {schema}");
            assert!(schema["properties"].is_object(), "{name}: {schema}");
            assert!(schema.get("description").is_none(), "{name}: {schema}");
            problems(&name, schema, &mut found);
            names.push(name);
        }
    }
    assert!(found.is_empty(), "{found:#?}");
    // The presets between them list every kind of built-in tool.
    for name in [
        "read",
        "write",
        "edit",
        "glob",
        "grep",
        "shell",
        "lsp_hover",
        "lsp_call_hierarchy",
        "web_fetch",
        "job_output",
        "memory",
        "todo",
        "skill",
        "task",
        "run_code",
        "preset_write",
        "recall_history",
    ] {
        assert!(names.iter().any(|listed| listed == name), "{name} missing");
    }
}

#[test]
fn a_wrong_typed_argument_is_refused_with_the_tool_and_the_reason() {
    let fixture = Fixture::new("").with_files(&[("README.md", "# demo\n")]);
    let output = fixture.run(&["tool", "read", "--args", r#"{"path": 5}"#, "--json"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let result: Value = serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("{stdout}"));
    assert_eq!(
        result["text"],
        "error: invalid arguments for `read`: invalid type: integer `5`, expected a string; see the tool's parameter schema",
        "{result}"
    );
}
