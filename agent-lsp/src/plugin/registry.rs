//! The plugin registry: plugin names → constructors, and the strict reading of a preset's
//! `[plugins.NAME]` tables.
//!
//! A preset is an assembly of plugins. Each registry entry names a plugin, the settings type its
//! table is read into (unknown keys are errors, so a typo never silently changes behaviour), and
//! a constructor that turns the settings and what the host offers (workspace, window, provider)
//! into the plugin and the tools it brings. The loop builds no plugin itself: it runs what the
//! registry built, in the registry's order (not the preset's), so the order of events between
//! plugins does not depend on how a preset file is written.
//!
//! Errors name the preset, the line and the key (`preset x.toml, line 12: [plugins.compaction]
//! soft_ratio: …`), because a preset is hand-written and the line is what the writer needs.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::bail;
use serde::de::DeserializeOwned;

use super::Plugin;
use super::tool::Tool;
use crate::activity::Activity;
use crate::llm::provider::Provider;

/// A `[plugins.NAME]` table of a preset, with the lines its keys are on.
#[derive(Clone, Debug, PartialEq)]
pub struct PluginTable {
    /// The plugin the table configures: the `NAME` of `[plugins.NAME]`.
    pub name: String,
    /// The 1-based line the table starts on.
    pub line: usize,
    /// The 1-based line of each key.
    pub key_lines: BTreeMap<String, usize>,
    /// The keys and values, read strictly by the plugin's settings type.
    pub table: toml::Table,
}

impl PluginTable {
    /// This table read as `S`, strictly; errors name the preset (`origin`), the line and the
    /// key.
    pub fn settings<S: PluginSettings>(&self, origin: &str) -> anyhow::Result<S> {
        settings(self, origin)
    }
}

/// A setting a plugin refuses, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidSetting {
    /// The key refused, so the error can give its line in the preset.
    pub key: &'static str,
    /// What is wrong with its value ("must be between 1 and 600").
    pub message: String,
}

impl InvalidSetting {
    /// `key`'s `value` must lie in `range` ("must be between 1 and 600").
    pub fn within<T>(
        key: &'static str,
        value: T,
        range: std::ops::RangeInclusive<T>,
    ) -> Result<(), InvalidSetting>
    where
        T: PartialOrd + std::fmt::Display,
    {
        if range.contains(&value) {
            return Ok(());
        }
        Err(InvalidSetting {
            key,
            message: format!("must be between {} and {}", range.start(), range.end()),
        })
    }

    /// `key`'s `value` must be `min` or more ("must be at least 1").
    pub fn at_least<T>(key: &'static str, value: T, min: T) -> Result<(), InvalidSetting>
    where
        T: PartialOrd + std::fmt::Display,
    {
        if value >= min {
            return Ok(());
        }
        Err(InvalidSetting {
            key,
            message: format!("must be at least {min}"),
        })
    }
}

/// The settings of one plugin, read from its table.
pub trait PluginSettings: DeserializeOwned + 'static {
    /// Whether the table turns the plugin on (`enabled = false` keeps the table but builds
    /// nothing).
    fn enabled(&self) -> bool;

    /// Checks serde cannot express (ranges, names of engines).
    fn validate(&self) -> Result<(), InvalidSetting> {
        Ok(())
    }
}

/// What the host offers a plugin's constructor.
#[derive(Clone, Debug)]
pub struct PluginHost {
    /// The workspace root.
    pub workspace: PathBuf,
    /// The workspace's state directory (beside its sessions), when there is a store.
    pub state_dir: Option<PathBuf>,
    /// The preset's name.
    pub preset: String,
    /// What the preset lets a session do (`preset_write` compares the presets it saves with
    /// it); `None` where the preset is not known (a preset check, a test).
    pub rights: Option<crate::permissions::Rights>,
    /// The preset's `model.context_window`.
    pub context_window: u64,
    /// The model, when one is configured (a summarizer calls it); without one no turn runs,
    /// but the tools are still listed and can be run by hand.
    pub provider: Option<Provider>,
    /// The live board of the host's running jobs and sub-agents (the editor shows it).
    pub activity: Arc<Activity>,
    /// What starts sub-agents for the `task` tool; `None` where none can start (a preset
    /// check, a sub-agent at the preset's `max_depth`).
    pub subagents: Option<Arc<dyn super::spawn::Spawner>>,
}

impl PluginHost {
    /// A host with nothing beside the workspace: no state directory, no model, a board of its
    /// own and no sub-agents (a preset check, a test); set the fields that differ after it.
    pub fn detached(
        workspace: impl Into<PathBuf>,
        preset: impl Into<String>,
        context_window: u64,
    ) -> PluginHost {
        PluginHost {
            workspace: workspace.into(),
            state_dir: None,
            preset: preset.into(),
            rights: None,
            context_window,
            provider: None,
            activity: Default::default(),
            subagents: None,
        }
    }
}

/// What one registry entry contributes: a plugin, the tools it brings, or both.
#[derive(Default)]
pub struct Parts {
    /// The plugin that joins the loop, when the entry has one (a tool-only entry has none).
    pub plugin: Option<Box<dyn Plugin>>,
    /// The tools the entry adds to the catalog.
    pub tools: Vec<Arc<dyn Tool>>,
    /// A `shell` that takes the place of the built-in one: the jobs plugin's, whose foreground
    /// calls are the plain shell's and which can also start background jobs. At most one
    /// entry of a preset offers one.
    pub shell: Option<Arc<dyn Tool>>,
}

/// Everything the registry built for a preset, in registry order.
#[derive(Default)]
pub struct Assembly {
    /// The plugins, in registry order: the order they see events and contribute sections in.
    pub plugins: Vec<Box<dyn Plugin>>,
    /// Every entry's tools, in registry order.
    pub tools: Vec<Arc<dyn Tool>>,
    /// The `shell` a plugin offers in place of the built-in one ([`Parts::shell`]).
    pub shell: Option<Arc<dyn Tool>>,
}

type Check = Box<dyn Fn(&PluginTable, &str) -> anyhow::Result<()> + Send + Sync>;
type Build =
    Box<dyn Fn(&PluginTable, &str, &PluginHost) -> anyhow::Result<Option<Parts>> + Send + Sync>;

struct Entry {
    name: &'static str,
    check: Check,
    build: Build,
}

/// Plugin names → how to read their tables and build them.
#[derive(Default)]
pub struct PluginRegistry {
    entries: Vec<Entry>,
}

impl PluginRegistry {
    /// A registry with no entries; `host::assembly` registers the built-in ones.
    pub fn new() -> PluginRegistry {
        PluginRegistry::default()
    }

    /// Register the plugin `name`, whose table is read as `S` and built by `build` when enabled.
    /// A second registration of the same name replaces the first.
    pub fn register<S: PluginSettings>(
        &mut self,
        name: &'static str,
        build: fn(S, &PluginHost) -> anyhow::Result<Parts>,
    ) -> &mut Self {
        self.entries.retain(|entry| entry.name != name);
        self.entries.push(Entry {
            name,
            check: Box::new(|table, origin| settings::<S>(table, origin).map(drop)),
            build: Box::new(move |table, origin, host| {
                let settings = settings::<S>(table, origin)?;
                if !settings.enabled() {
                    return Ok(None);
                }
                build(settings, host).map(Some)
            }),
        });
        self
    }

    /// The registered names, in registry order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.entries.iter().map(|entry| entry.name)
    }

    /// Check every table of a preset (`origin` names it in errors) without building anything.
    pub fn check(&self, origin: &str, tables: &[PluginTable]) -> anyhow::Result<()> {
        for table in tables {
            (self.entry(origin, table)?.check)(table, origin)?;
        }
        Ok(())
    }

    /// Build the enabled plugins of a preset and collect the tools they bring.
    pub fn build(
        &self,
        origin: &str,
        tables: &[PluginTable],
        host: &PluginHost,
    ) -> anyhow::Result<Assembly> {
        for table in tables {
            self.entry(origin, table)?;
        }
        let mut assembly = Assembly::default();
        for entry in &self.entries {
            let Some(table) = tables.iter().find(|table| table.name == entry.name) else {
                continue;
            };
            if let Some(parts) = (entry.build)(table, origin, host)? {
                assembly.plugins.extend(parts.plugin);
                assembly.tools.extend(parts.tools);
                if let Some(shell) = parts.shell {
                    if assembly.shell.is_some() {
                        bail!(
                            "preset {origin}: two plugins offer a `shell`; `[plugins.{}]` is the second",
                            entry.name
                        );
                    }
                    assembly.shell = Some(shell);
                }
            }
        }
        Ok(assembly)
    }

    fn entry(&self, origin: &str, table: &PluginTable) -> anyhow::Result<&Entry> {
        match self.entries.iter().find(|entry| entry.name == table.name) {
            Some(entry) => Ok(entry),
            None => bail!(
                "preset {origin}, line {}: there is no plugin named `{}` ([plugins.{}]); the plugins are {}",
                table.line,
                table.name,
                table.name,
                self.names().collect::<Vec<_>>().join(", ")
            ),
        }
    }
}

/// Read `table` as `S`, or the error naming the preset, the line and the key.
fn settings<S: PluginSettings>(table: &PluginTable, origin: &str) -> anyhow::Result<S> {
    let at = |key: &str| {
        let line = table.key_lines.get(key).copied().unwrap_or(table.line);
        format!("preset {origin}, line {line}: [plugins.{}]", table.name)
    };
    let value = toml::Value::Table(table.table.clone());
    let settings: S = serde_path_to_error::deserialize(value).map_err(|error| {
        let key = error.path().to_string();
        // TOML's own message may add a second line naming the key again; the key is named.
        let inner = error.into_inner().to_string();
        let inner = inner.lines().next().unwrap_or_default();
        if key == "." {
            anyhow::anyhow!("{} {inner}", at(""))
        } else {
            anyhow::anyhow!(
                "{} `{key}`: {inner}",
                at(key.split('.').next().unwrap_or(""))
            )
        }
    })?;
    settings.validate().map_err(|invalid| {
        anyhow::anyhow!("{} `{}`: {}", at(invalid.key), invalid.key, invalid.message)
    })?;
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Demo {
        enabled: bool,
        #[serde(default)]
        ratio: f64,
    }

    impl PluginSettings for Demo {
        fn enabled(&self) -> bool {
            self.enabled
        }
        fn validate(&self) -> Result<(), InvalidSetting> {
            if self.ratio > 1.0 {
                return Err(InvalidSetting {
                    key: "ratio",
                    message: "must be at most 1".into(),
                });
            }
            Ok(())
        }
    }

    struct Named;
    impl Plugin for Named {
        fn name(&self) -> &'static str {
            "demo"
        }
    }

    fn table(text: &str) -> PluginTable {
        let table: toml::Table = toml::from_str(text).unwrap();
        let key_lines = table
            .keys()
            .map(|key| {
                let line = text
                    .lines()
                    .position(|line| line.trim_start().starts_with(key.as_str()))
                    .unwrap();
                (key.clone(), line + 10)
            })
            .collect();
        PluginTable {
            name: "demo".into(),
            line: 9,
            key_lines,
            table,
        }
    }

    fn registry() -> PluginRegistry {
        let mut registry = PluginRegistry::new();
        registry.register::<Demo>("demo", |_, _| {
            Ok(Parts {
                plugin: Some(Box::new(Named)),
                tools: Vec::new(),
                shell: None,
            })
        });
        registry
    }

    fn host() -> PluginHost {
        PluginHost::detached("/w", "p", 1000)
    }

    #[test]
    fn errors_name_the_file_the_line_and_the_key() {
        let registry = registry();
        let check = |text: &str| {
            registry
                .check("p.toml", &[table(text)])
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            check("enabled = true\nratoi = 0.5"),
            "preset p.toml, line 11: [plugins.demo] `ratoi`: unknown field `ratoi`, expected `enabled` or `ratio`"
        );
        assert_eq!(
            check("enabled = true\nratio = \"half\""),
            "preset p.toml, line 11: [plugins.demo] `ratio`: invalid type: string \"half\", expected f64"
        );
        assert_eq!(
            check("enabled = true\nratio = 2.0"),
            "preset p.toml, line 11: [plugins.demo] `ratio`: must be at most 1"
        );
        assert_eq!(
            check("ratio = 0.5"),
            "preset p.toml, line 9: [plugins.demo] missing field `enabled`"
        );
        let mut unknown = table("enabled = true");
        unknown.name = "demo2".into();
        assert_eq!(
            registry
                .check("p.toml", &[unknown])
                .unwrap_err()
                .to_string(),
            "preset p.toml, line 9: there is no plugin named `demo2` ([plugins.demo2]); the plugins are demo"
        );
    }

    #[test]
    fn builds_enabled_plugins_only() {
        let registry = registry();
        let built = registry
            .build("p.toml", &[table("enabled = true")], &host())
            .unwrap();
        assert_eq!(
            built.plugins.iter().map(|p| p.name()).collect::<Vec<_>>(),
            ["demo"]
        );
        let built = registry
            .build("p.toml", &[table("enabled = false")], &host())
            .unwrap();
        assert!(built.plugins.is_empty());
        assert!(
            registry
                .build("p.toml", &[], &host())
                .unwrap()
                .plugins
                .is_empty()
        );
    }
}
