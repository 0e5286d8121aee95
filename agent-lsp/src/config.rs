//! User configuration: the model endpoint and the default preset.
//!
//! Read from `$AGENT_LSP_CONFIG` when set, else `agent-lsp/config.toml` under the user's config
//! directory (`~/.config` on Linux). The folder the file is in is the user's agent-lsp folder
//! ([`Config::user_dir`]), which also holds the user's presets (`presets/NAME.toml`). Every key
//! is optional; command-line flags win over the file, and the file wins over the preset. The API
//! key itself never goes into this file, only the name of the environment variable that holds it:
//!
//! ```toml
//! preset = "standard"
//!
//! [provider]
//! base_url = "https://api.deepseek.com"
//! model = "deepseek-v4-flash"
//! api_key_env = "DEEPSEEK_API_KEY"
//!
//! # Language servers: override a built-in one (pyright, typescript-language-server, clangd,
//! # rust-analyzer, gopls, pylsp) or add your own.
//! [server.pyright]
//! args = ["--stdio"]
//! settings = { python = { analysis = { typeCheckingMode = "strict" } } }
//!
//! # A language server in a sandbox of its own (the keys of a preset's `[sandbox]`).
//! [server_sandbox.pyright]
//! mode = "workspace-write"
//!
//! # `@path` completion and `agent-lsp files`: paths left out on top of the ignore files,
//! # and the caps (see `file_index/config.rs`).
//! [files]
//! exclude = ["*.min.js", "vendor/**"]
//! max_entries = 200000
//! max_candidates = 200
//!
//! # `agent-lsp serve`: which files are prompt documents, and where "Ask" and "Explain"
//! # write (relative to the workspace root).
//! [editor]
//! prompt_documents = "*.agent.md"
//! chat_file = ".agent-lsp/chat.agent.md"
//! # allow_broad_workspace = true   # let `/` or the home directory be the workspace
//!
//! # `web_search` and `web_fetch` (see `web.rs`): the search provider and the fetch limits.
//! [web]
//! timeout_secs = 20
//! [web.searxng]
//! url = "http://127.0.0.1:8888"
//!
//! # The file checkpoints `agent-lsp rewind` restores from (docs/decisions/0009-rewind.md).
//! [checkpoints]
//! max_file_bytes = 5242880
//! exclude = ["*.sqlite", "data/"]
//!
//! # Inline completion in the editor (see `completion.rs`): off without a model.
//! [completion]
//! model = "deepseek-v4-flash"
//! base_url = "https://api.deepseek.com/beta"   # POST {base_url}/completions
//!
//! # Hooks (see `hooks.rs`): commands on the agent's events, in Claude Code's format.
//! [hooks]
//! claude_settings = ["~/.claude/settings.json"]
//! [[hooks.PostToolUse]]
//! matcher = "edit|write"
//! command = "jq -r '.tool_input.path' | xargs ruff format"
//!
//! # MCP servers (see `mcp.rs`): their tools join the catalog as `mcp__NAME__TOOL`.
//! [mcp.servers.fs]
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/notes"]
//! [mcp.servers.docs]
//! url = "https://example.com/mcp"
//! headers = { Authorization = "Bearer ..." }
//! ```

use std::path::PathBuf;

use anyhow::Context;
use serde::Deserialize;

use lsp_bridge::BridgeConfig;
use lsp_bridge::config::ServerOptions;

use crate::file_index::FilesOptions;
use crate::llm::provider::{ProviderConfig, ProviderOptions};

pub const CONFIG_ENV: &str = "AGENT_LSP_CONFIG";

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Preset for new sessions (default `standard`).
    pub preset: Option<String>,
    #[serde(default)]
    pub provider: ProviderOptions,
    /// `[server.NAME]` tables: language servers overriding or extending the built-in ones.
    #[serde(default)]
    pub server: std::collections::BTreeMap<String, ServerOptions>,
    /// `[server_sandbox.NAME]`: language servers that run in a sandbox, with its policy
    /// (`crate::sandbox::Policy`). One set of servers serves the editor and every agent of the
    /// workspace, so they are held here rather than by a preset; by default they run with the
    /// user's rights, as the user's own tools.
    #[serde(default)]
    pub server_sandbox: std::collections::BTreeMap<String, crate::sandbox::Policy>,
    /// `[files]`: what `@path` completion indexes (exclude globs, caps).
    #[serde(default)]
    pub files: FilesOptions,
    /// `[editor]`: prompt documents under `agent-lsp serve`.
    #[serde(default)]
    pub editor: EditorOptions,
    /// `[web]`: the `web_search` provider and the `web_fetch` limits.
    #[serde(default)]
    pub web: crate::web::WebOptions,
    /// `[mcp.servers.NAME]`: the user's MCP servers (`crate::mcp`).
    #[serde(default)]
    pub mcp: crate::mcp::config::McpOptions,
    /// `[checkpoints]`: the file checkpoints a rewind restores from (`crate::snapshots`): on
    /// by default, files over `max_file_bytes` left out, and `exclude` globs beside the ignore
    /// files.
    #[serde(default)]
    pub checkpoints: crate::snapshots::Options,
    /// `[completion]`: inline completion in the editor (`crate::completion`); off without a
    /// model.
    #[serde(default)]
    pub completion: crate::completion::CompletionOptions,
    /// `[hooks]`: the user's commands on the agent's events (`crate::hooks`), and the Claude
    /// Code settings files whose hooks run too.
    #[serde(default)]
    pub hooks: crate::hooks::config::HooksOptions,
    /// `[restart]`: how often a language server that keeps failing is restarted before it is
    /// given up on (`max_restarts` within `window_secs`, `backoff_ms` doubling).
    pub restart: Option<lsp_bridge::config::RestartOptions>,
}

impl Config {
    /// What to tell someone who has not configured a model yet.
    pub fn not_configured_message() -> String {
        let path = Config::path_for_messages();
        format!(
            "no model is configured.\n\
             To use DeepSeek: export DEEPSEEK_API_KEY=sk-... (then `agent-lsp models` lists the models).\n\
             For another OpenAI-compatible endpoint: pass --base-url URL [--model NAME], or write\n\
             \n  [provider]\n  base_url = \"http://127.0.0.1:8080/v1\"\n  model = \"my-model\"\n  api_key_env = \"MY_KEY_VAR\"\n\n\
             into {path}.\n\
             Everything that needs no model works without one: `agent-lsp tool`, `agent-lsp session`."
        )
    }

    /// Where the configuration is read from.
    pub fn path() -> Option<PathBuf> {
        match std::env::var_os(CONFIG_ENV) {
            Some(path) if !path.is_empty() => Some(PathBuf::from(path)),
            _ => dirs::config_dir().map(|dir| dir.join("agent-lsp").join("config.toml")),
        }
    }

    /// The user's agent-lsp folder, where the config file is (`~/.config/agent-lsp`, or the
    /// folder of `$AGENT_LSP_CONFIG`): the user's own `AGENTS.md` lives beside it, and the
    /// user's presets in its `presets/` folder (so a test's or a second setup's presets stay
    /// beside its config file).
    pub fn user_dir() -> Option<PathBuf> {
        Config::path().and_then(|path| path.parent().map(std::path::Path::to_owned))
    }

    /// The config file as messages name it: its path, where the path came from when
    /// `$AGENT_LSP_CONFIG` set it, and whether the file is missing (a message that says "write
    /// this into the file" should not send anyone looking for a file that is not there).
    pub fn path_for_messages() -> String {
        let Some(path) = Config::path() else {
            return format!("the config file (no config folder is known; set {CONFIG_ENV})");
        };
        let from_env = std::env::var_os(CONFIG_ENV).is_some_and(|value| !value.is_empty());
        let missing = !path.exists();
        match (from_env, missing) {
            (true, true) => format!(
                "{} (named by {CONFIG_ENV}; it does not exist)",
                path.display()
            ),
            (true, false) => format!("{} (named by {CONFIG_ENV})", path.display()),
            (false, true) => format!("{} (it does not exist yet)", path.display()),
            (false, false) => path.display().to_string(),
        }
    }

    /// The built-in language servers with this file's `[server.*]` tables applied.
    pub fn bridge_config(&self) -> anyhow::Result<BridgeConfig> {
        let mut config = BridgeConfig::builtin();
        config.apply(self.server.clone()).map_err(|error| {
            anyhow::anyhow!(
                "config file {}: {error}",
                Config::path()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            )
        })?;
        if let Some(restart) = self.restart.clone() {
            config.restart = restart.resolve(config.restart);
        }
        for (name, policy) in &self.server_sandbox {
            let names = server_names(&config);
            let server = config
                .servers
                .iter_mut()
                .find(|server| &server.name == name)
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "config file: [server_sandbox.{name}] names no language server (the servers are {names})"
                    )
                })?;
            server.launcher = Some(crate::sandbox::launcher(policy.clone()));
        }
        Ok(config)
    }

    /// The model endpoint, from what was chosen for this run (the command line's flags, the
    /// editor's `initializationOptions`), this file and the preset's model, in that order of
    /// priority. `None` when nothing says where a model is.
    pub fn provider_config(
        &self,
        base_url: Option<String>,
        model: Option<String>,
        preset_model: Option<&str>,
    ) -> anyhow::Result<Option<ProviderConfig>> {
        let file = &self.provider;
        let options = ProviderOptions {
            base_url: base_url.or_else(|| file.base_url.clone()),
            model: model
                .or_else(|| file.model.clone())
                .or_else(|| preset_model.map(str::to_owned)),
            ..file.clone()
        };
        let resolved = ProviderConfig::from_env(&options)?;
        // A key, or an explicitly chosen endpoint (local servers need no key), means
        // "configured".
        Ok((resolved.api_key.is_some() || options.base_url.is_some()).then_some(resolved))
    }

    /// The configuration, or the defaults when there is no file.
    pub fn load() -> anyhow::Result<Config> {
        let Some(path) = Config::path() else {
            return Ok(Config::default());
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let config: Config = toml::from_str(&text)
                    .map_err(|error| anyhow::anyhow!("config file {}: {error}", path.display()))?;
                config
                    .completion
                    .check()
                    .map_err(|error| anyhow::anyhow!("config file {}: {error}", path.display()))?;
                Ok(config)
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Config::default()),
            Err(error) => {
                Err(error).with_context(|| format!("failed to read config file {}", path.display()))
            }
        }
    }
}

/// `[editor]`: how the editor-facing server treats prompt documents.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EditorOptions {
    /// Glob of prompt documents (matched against the file name, or the path if it has a `/`).
    pub prompt_documents: String,
    /// The workspace's chat document, relative to its root: where `agent.ask` and "Explain
    /// with agent" write.
    pub chat_file: String,
    /// Whether the file system root or the home directory may be the workspace. Off: the
    /// agent's file tools are confined to the workspace, and either of those confines them to
    /// nothing (every key, every dotfile), so an editor that names one is refused.
    pub allow_broad_workspace: bool,
}

impl Default for EditorOptions {
    fn default() -> EditorOptions {
        EditorOptions {
            prompt_documents: "*.agent.md".into(),
            chat_file: ".agent-lsp/chat.agent.md".into(),
            allow_broad_workspace: false,
        }
    }
}

/// The names of `config`'s servers, for a message.
fn server_names(config: &BridgeConfig) -> String {
    let names: Vec<&str> = config
        .servers
        .iter()
        .map(|server| server.name.as_str())
        .collect();
    names.join(", ")
}
