//! The tools of a session by name: the catalog as the model sees it (sorted, with canonical
//! schemas, so it is byte-stable) and the one lookup a call goes through. Filled once per
//! session by `host::catalog`, which refuses a second tool of a name.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{edit, fs, search, shell};
use crate::canonical::canonical_json;
use crate::llm::ToolDef;
use crate::plugin::tool::Tool;

#[derive(Clone)]
struct Registered {
    tool: Arc<dyn Tool>,
    def: ToolDef,
}

/// The tools of a session, by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Registered>,
}

/// Names of the standard tools, sorted.
pub const STANDARD_TOOLS: [&str; 7] = ["edit", "glob", "grep", "list", "read", "shell", "write"];

impl ToolRegistry {
    /// A registry without tools; `host::catalog` fills a session's.
    pub fn new() -> ToolRegistry {
        ToolRegistry::default()
    }

    /// The workspace file tools and the shell ([`STANDARD_TOOLS`]).
    pub fn standard() -> ToolRegistry {
        let mut registry = ToolRegistry::new();
        registry
            .register(fs::Read)
            .register(fs::List)
            .register(fs::Write)
            .register(search::Glob)
            .register(search::Grep)
            .register(edit::Edit)
            .register(shell::Shell);
        registry
    }

    /// Only the named tools, e.g. a preset's `tools.enabled`; naming an unknown tool is an error
    /// rather than a silently shorter catalog.
    pub fn only(mut self, names: &[impl AsRef<str>]) -> anyhow::Result<ToolRegistry> {
        for name in names {
            let name = name.as_ref();
            if !self.tools.contains_key(name) {
                anyhow::bail!(
                    "no tool named `{name}`; the tools are {} (a tool that comes with a plugin, like `recall_history` with `compaction`, needs the plugin's [plugins.NAME] table enabled)",
                    self.names().collect::<Vec<_>>().join(", ")
                );
            }
        }
        self.tools
            .retain(|name, _| names.iter().any(|wanted| wanted.as_ref() == name));
        Ok(self)
    }

    /// Add a tool. Its schema is normalized to canonical JSON (sorted keys) so the catalog is
    /// byte-stable whatever the map type.
    ///
    /// # Panics
    /// When a tool of that name is registered already: nothing replaces a tool. A session's
    /// catalog is built by `host::catalog`, which names the two sources of a clash instead.
    pub fn register(&mut self, tool: impl Tool) -> &mut Self {
        self.register_shared(Arc::new(tool))
    }

    /// [`ToolRegistry::register`] for a tool a plugin brought.
    pub fn register_shared(&mut self, tool: Arc<dyn Tool>) -> &mut Self {
        let mut def = tool.def();
        def.parameters = serde_json::from_str(&canonical_json(&def.parameters))
            .expect("canonical JSON parses back");
        let name = def.name.clone();
        let earlier = self.tools.insert(name.clone(), Registered { tool, def });
        assert!(earlier.is_none(), "two tools are named `{name}`");
        self
    }

    /// The tool named `name`, if the catalog has it.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name).map(|registered| &registered.tool)
    }

    /// Tool names in catalog order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// The catalog: every registered tool, sorted by name, whatever the permissions.
    pub fn catalog(&self) -> Vec<ToolDef> {
        self.tools
            .values()
            .map(|registered| registered.def.clone())
            .collect()
    }
}
