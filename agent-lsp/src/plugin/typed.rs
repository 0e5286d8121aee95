//! Tools with typed arguments: a [`TypedTool`] names a Rust type for its arguments, its JSON
//! schema is derived from that type (with `schemars`, field doc comments becoming the
//! properties' descriptions, so rustdoc and the model read one text), and the arguments are
//! deserialized into it once per call by the seam ([`CallArgs`]), with one error wording for
//! every tool. Every `TypedTool` is a [`Tool`] through the blanket impl below.
//!
//! The schema a model sees is plain and self-contained: an object schema without `$schema`,
//! `title`, `$defs` or `$ref`, optional fields typed as what they hold (not "or null"), unit
//! enums as `enum` lists, no `default`s (the descriptions say them), descriptions on one line. Providers differ in how much of JSON
//! Schema they accept, and this subset is what every one of them takes.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use schemars::generate::SchemaSettings;
use schemars::transform::RecursiveTransform;
use schemars::{JsonSchema, Schema};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::outcomes::ToolOutput;
use super::tool::{CallArgs, Tool, ToolContext};
use crate::llm::ToolDef;
use crate::sandbox::Confinement;
use crate::workspace::Workspace;

/// A tool whose arguments are a fixed Rust type: every built-in tool. Its catalog schema is
/// derived from [`TypedTool::Args`] and its calls get the arguments already deserialized.
///
/// Tools whose schema is only known at run time implement [`Tool`] directly: an MCP server's
/// tools (`crate::mcp::tool`), whose schemas come from the server.
pub trait TypedTool: Send + Sync + 'static {
    /// The arguments of one call. Doc comments on its fields are the properties'
    /// descriptions; `#[serde(deny_unknown_fields)]` makes the schema say
    /// `additionalProperties: false`; `#[schemars(range(..))]` gives `minimum` and `maximum`.
    type Args: DeserializeOwned + JsonSchema + Send + Sync + 'static;

    /// The tool's name in the catalog and in calls.
    fn name(&self) -> &str;

    /// What the model reads about the tool in the catalog.
    fn description(&self) -> String;

    /// See [`Tool::read_only`].
    fn read_only(&self) -> bool;

    /// See [`Tool::runs_beside_itself`].
    fn runs_beside_itself(&self) -> bool {
        false
    }

    /// See [`Tool::calls_tools`].
    fn calls_tools(&self) -> bool {
        false
    }

    /// See [`Tool::timeout`]; not asked when the arguments do not parse (the call then fails
    /// at once).
    fn timeout(&self, _args: &Self::Args) -> Option<Duration> {
        None
    }

    /// See [`Tool::approval_reason`]; not asked when the arguments do not parse.
    fn approval_reason(&self, _workspace: &Workspace, _args: &Self::Args) -> Option<String> {
        None
    }

    /// See [`Tool::confinement`]; a call whose arguments do not parse runs nothing.
    fn confinement(&self, _args: &Self::Args) -> Confinement {
        Confinement::NotACommand
    }

    /// See [`Tool::writes_unnamed`].
    fn writes_unnamed(&self) -> bool {
        !TypedTool::read_only(self)
    }

    /// Run one call with its arguments. Failures are outputs with `is_error`, never panics.
    fn run(&self, ctx: ToolContext, args: Self::Args) -> BoxFuture<'static, ToolOutput>;
}

impl<T: TypedTool> Tool for T {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: TypedTool::name(self).to_owned(),
            description: TypedTool::description(self),
            parameters: parameters_schema::<T::Args>(),
        }
    }

    fn read_only(&self) -> bool {
        TypedTool::read_only(self)
    }

    fn runs_beside_itself(&self) -> bool {
        TypedTool::runs_beside_itself(self)
    }

    fn calls_tools(&self) -> bool {
        TypedTool::calls_tools(self)
    }

    fn writes_unnamed(&self) -> bool {
        TypedTool::writes_unnamed(self)
    }

    fn timeout(&self, args: &CallArgs) -> Option<Duration> {
        let args = args.parsed::<T::Args>(TypedTool::name(self)).ok()?;
        TypedTool::timeout(self, args)
    }

    fn approval_reason(&self, workspace: &Workspace, args: &CallArgs) -> Option<String> {
        let args = args.parsed::<T::Args>(TypedTool::name(self)).ok()?;
        TypedTool::approval_reason(self, workspace, args)
    }

    fn confinement(&self, args: &CallArgs) -> Confinement {
        match args.parsed::<T::Args>(TypedTool::name(self)) {
            Ok(args) => TypedTool::confinement(self, args),
            Err(_) => Confinement::NotACommand,
        }
    }

    fn run(&self, ctx: ToolContext, args: CallArgs) -> BoxFuture<'static, ToolOutput> {
        match args.into_parsed::<T::Args>(TypedTool::name(self)) {
            Ok(args) => TypedTool::run(self, ctx, args),
            Err(output) => Box::pin(async move { output }),
        }
    }
}

/// The parameters schema of `A` as the catalog lists it, derived once per type and then
/// cloned: a catalog is built for every session and every `tool --list`.
pub fn parameters_schema<A: JsonSchema + 'static>() -> Value {
    static CACHE: LazyLock<Mutex<HashMap<TypeId, Value>>> = LazyLock::new(Default::default);
    let mut cache = CACHE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    cache
        .entry(TypeId::of::<A>())
        .or_insert_with(derive_schema::<A>)
        .clone()
}

/// Derive `A`'s schema and reduce it to the plain subset (see the module docs).
fn derive_schema<A: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.meta_schema = None;
            settings.inline_subschemas = true;
        })
        .with_transform(RecursiveTransform(plain))
        .into_generator();
    let mut schema = generator.into_root_schema_for::<A>().to_value();
    if let Some(root) = schema.as_object_mut() {
        // The type's own doc comment is for rustdoc; the tool's description is the model's.
        root.remove("description");
        root.remove("title");
        root.remove("$schema");
        // `{}` arguments: schemars leaves out what an empty struct has none of.
        root.entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
    }
    schema
}

/// One schema node reduced to the plain subset; [`RecursiveTransform`] applies it to every
/// subschema too.
fn plain(schema: &mut Schema) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    object.remove("title");
    // `#[serde(default)]` fields get the default's JSON (`null` for an `Option`); the
    // descriptions say the defaults in words, as the model reads them best.
    object.remove("default");
    // `Option<T>` says "T or null"; an absent field is how the tools take "not given".
    if let Some(Value::Array(types)) = object.get_mut("type") {
        types.retain(|ty| ty != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            object.insert("type".to_owned(), only);
        }
    }
    if let Some(Value::Array(values)) = object.get_mut("enum") {
        values.retain(|value| !value.is_null());
    }
    if let Some(Value::Array(variants)) = object.get_mut("anyOf") {
        variants.retain(|variant| variant.get("type") != Some(&Value::from("null")));
        if variants.len() == 1 {
            let only = variants.remove(0);
            object.remove("anyOf");
            if let Value::Object(only) = only {
                for (key, value) in only {
                    object.entry(key).or_insert(value);
                }
            }
        }
    }
    // Unit variants with doc comments come out as `oneOf` of `const`s; a plain `enum` list
    // says the same to every provider.
    let consts = object
        .get("oneOf")
        .and_then(Value::as_array)
        .and_then(|variants| {
            variants
                .iter()
                .map(|variant| {
                    variant
                        .get("const")
                        .filter(|value| value.is_string())
                        .cloned()
                })
                .collect::<Option<Vec<Value>>>()
        });
    if let Some(consts) = consts {
        object.remove("oneOf");
        object.insert("type".to_owned(), Value::from("string"));
        object.insert("enum".to_owned(), Value::Array(consts));
    }
    // `uint64` and the like are Rust's widths, not JSON Schema formats; `minimum` says the
    // part that matters.
    let numeric = matches!(
        object.get("type").and_then(Value::as_str),
        Some("integer" | "number")
    );
    if numeric {
        object.remove("format");
    }
    // Doc comments come one source line per line; the model reads paragraphs.
    if let Some(Value::String(description)) = object.get_mut("description") {
        *description = one_line_paragraphs(description);
    }
}

/// `text` with the line breaks inside each paragraph turned into spaces, paragraphs kept apart
/// by a blank line.
fn one_line_paragraphs(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            paragraph
                .lines()
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests;
