//! Schemas derived from argument types, reduced to the plain subset, and the one parse of a
//! call's arguments.

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{TypedTool, parameters_schema};
use crate::plugin::outcomes::ToolOutput;
use crate::plugin::tool::{Tool, ToolContext};

/// How a probe call is made.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(rename_all = "snake_case")]
enum Mode {
    /// Quickly.
    Fast,
    /// Carefully.
    Slow,
}

/// What a probe's nested object holds.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
struct Inner {
    /// The inner text.
    text: String,
}

/// The probe's arguments: this doc comment is rustdoc's, not the model's.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
struct ProbeArgs {
    /// The name, which goes
    /// over two lines.
    name: String,
    /// How many. Default 3.
    #[serde(default)]
    #[schemars(range(min = 1, max = 9))]
    count: Option<u64>,
    /// The mode.
    #[serde(default)]
    mode: Option<Mode>,
    /// Nested objects, at most 2.
    #[serde(default)]
    #[schemars(length(max = 2))]
    inner: Vec<Inner>,
    /// A switch. Default false.
    #[serde(default)]
    on: bool,
}

struct Probe;

impl TypedTool for Probe {
    type Args = ProbeArgs;

    fn name(&self) -> &str {
        "probe"
    }

    fn description(&self) -> String {
        "A probe.".to_owned()
    }

    fn read_only(&self) -> bool {
        true
    }

    fn timeout(&self, args: &ProbeArgs) -> Option<std::time::Duration> {
        args.count.map(std::time::Duration::from_secs)
    }

    fn run(&self, _ctx: ToolContext, args: ProbeArgs) -> BoxFuture<'static, ToolOutput> {
        let text = format!("{} x{}", args.name, args.count.unwrap_or(3));
        let inner: usize = args.inner.iter().map(|inner| inner.text.len()).sum();
        tracing::debug!(?args.mode, inner, args.on, "probe");
        Box::pin(async move { ToolOutput::ok(text) })
    }
}

#[test]
fn the_schema_is_plain_self_contained_and_described_by_the_doc_comments() {
    let def = Tool::def(&Probe);
    assert_eq!(def.name, "probe");
    assert_eq!(def.description, "A probe.");
    assert_eq!(
        def.parameters,
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The name, which goes over two lines."},
                "count": {"type": "integer", "minimum": 1, "maximum": 9, "description": "How many. Default 3."},
                "mode": {"type": "string", "enum": ["fast", "slow"], "description": "The mode."},
                "inner": {
                    "type": "array",
                    "maxItems": 2,
                    "description": "Nested objects, at most 2.",
                    "items": {
                        "type": "object",
                        "description": "What a probe's nested object holds.",
                        "properties": {"text": {"type": "string", "description": "The inner text."}},
                        "required": ["text"],
                        "additionalProperties": false,
                    },
                },
                "on": {"type": "boolean", "description": "A switch. Default false."},
            },
            "required": ["name"],
            "additionalProperties": false,
        })
    );
}

#[test]
fn the_schema_is_the_same_bytes_every_time() {
    let first = serde_json::to_string(&parameters_schema::<ProbeArgs>()).unwrap();
    let second = serde_json::to_string(&super::derive_schema::<ProbeArgs>()).unwrap();
    assert_eq!(first, second);
}

#[test]
fn an_empty_argument_type_lists_no_properties() {
    /// No arguments.
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct NoArgs {}
    assert_eq!(
        parameters_schema::<NoArgs>(),
        json!({"type": "object", "properties": {}, "additionalProperties": false})
    );
}

#[tokio::test]
async fn a_call_gets_its_arguments_parsed_or_the_error_naming_the_tool() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = std::sync::Arc::new(crate::workspace::Workspace::new(dir.path()).unwrap());
    let ctx = || ToolContext::outside_session(workspace.clone(), CancellationToken::new(), "c");
    let out = Tool::run(&Probe, ctx(), json!({"name": "a", "count": 2}).into()).await;
    assert_eq!((out.is_error, out.text.as_str()), (false, "a x2"));
    assert_eq!(
        Tool::timeout(&Probe, &json!({"name": "a", "count": 2}).into()),
        Some(std::time::Duration::from_secs(2))
    );
    assert_eq!(Tool::timeout(&Probe, &json!({"name": 1}).into()), None);
    let out = Tool::run(&Probe, ctx(), json!({"name": 5}).into()).await;
    assert!(out.is_error);
    assert_eq!(
        out.text,
        "error: invalid arguments for `probe`: invalid type: integer `5`, expected a string; see the tool's parameter schema"
    );
    let out = Tool::run(&Probe, ctx(), json!({"name": "a", "bogus": 1}).into()).await;
    assert!(
        out.text
            .starts_with("error: invalid arguments for `probe`: unknown field `bogus`"),
        "{}",
        out.text
    );
}

/// How many times a [`CountedArgs`] was deserialized.
static PARSES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn counted<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    PARSES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    u64::deserialize(deserializer)
}

/// Arguments that count their parses.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CountedArgs {
    /// Seconds.
    #[serde(deserialize_with = "counted")]
    #[schemars(with = "u64")]
    secs: u64,
}

/// A tool with both hooks that read arguments.
struct Hooked;

impl TypedTool for Hooked {
    type Args = CountedArgs;

    fn name(&self) -> &str {
        "hooked"
    }

    fn description(&self) -> String {
        "Hooks.".to_owned()
    }

    fn read_only(&self) -> bool {
        false
    }

    fn timeout(&self, args: &CountedArgs) -> Option<std::time::Duration> {
        Some(std::time::Duration::from_secs(args.secs))
    }

    fn approval_reason(
        &self,
        _workspace: &crate::workspace::Workspace,
        args: &CountedArgs,
    ) -> Option<String> {
        (args.secs > 5).then(|| "it takes long".to_owned())
    }

    fn run(&self, _ctx: ToolContext, args: CountedArgs) -> BoxFuture<'static, ToolOutput> {
        Box::pin(async move { ToolOutput::ok(format!("{} s", args.secs)) })
    }
}

#[tokio::test]
async fn the_hooks_and_run_share_one_parse_of_the_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = std::sync::Arc::new(crate::workspace::Workspace::new(dir.path()).unwrap());
    let args = crate::plugin::tool::CallArgs::from(json!({"secs": 7}));
    let reason = Tool::approval_reason(&Hooked, &workspace, &args);
    assert_eq!(reason.as_deref(), Some("it takes long"));
    assert_eq!(
        Tool::timeout(&Hooked, &args),
        Some(std::time::Duration::from_secs(7))
    );
    let ctx = ToolContext::outside_session(workspace, CancellationToken::new(), "c");
    let out = Tool::run(&Hooked, ctx, args).await;
    assert_eq!(out.text, "7 s");
    assert_eq!(PARSES.load(std::sync::atomic::Ordering::SeqCst), 1);
}
