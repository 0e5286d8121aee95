//! Which language servers exist, how to start them and which files they serve.
//!
//! Built-in configurations cover the servers this project supports out of the box; the user's
//! config file overrides or extends them helix-style, with `[server.NAME]` tables whose keys
//! replace the built-in values one by one. A server is only *used* when its command is found,
//! so listing servers that are not installed costs nothing.
//!
//! ```toml
//! [server.pyright]
//! settings = { python = { analysis = { typeCheckingMode = "strict" } } }
//!
//! [server.my-ls]
//! command = "my-ls"
//! args = ["--stdio"]
//! file_patterns = ["*.foo"]
//! root_markers = ["foo.project"]
//!
//! [restart]
//! max_restarts = 5
//! window_secs = 180
//! backoff_ms = 200
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

mod matcher;
mod probe;

pub use matcher::FileMatcher;
pub use probe::ProbeFailure;
pub(crate) use probe::probe;

/// How to run one language server and what it serves.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerConfig {
    /// The name the user and the logs know it by (the key of its `[server.NAME]` table).
    pub name: String,
    /// Program to run: a name looked up on PATH, or a path.
    pub command: String,
    /// Arguments after the command, usually what selects the stdio transport (`--stdio`).
    pub args: Vec<String>,
    /// Extra environment variables for the server process.
    pub env: BTreeMap<String, String>,
    /// LSP languageIds this server handles (`python`, `typescriptreact`, ...).
    pub languages: Vec<String>,
    /// File-name globs it handles (`*.py`); a glob with a `/` is matched against the whole path.
    pub file_patterns: Vec<String>,
    /// Names of files or folders that mark a project root (`pyproject.toml`, `Cargo.toml`).
    pub root_markers: Vec<String>,
    /// Sent as `initializationOptions` in `initialize`.
    pub initialization_options: Option<Value>,
    /// Answered to `workspace/configuration`, looked up by the requested section's dotted path.
    pub settings: Value,
    /// Bound on one request (including `ContentModified` retries).
    pub request_timeout: Duration,
    /// Bound on spawn + `initialize`.
    pub startup_timeout: Duration,
    /// After a request was cancelled, how long the server has to acknowledge it (answer the id,
    /// usually with `RequestCancelled`) before it is suspected of hanging.
    pub cancel_grace: Duration,
    /// How long a suspected server must then show no sign of life (no message, no stderr line,
    /// no CPU time) to be taken as hung and restarted: a server busy with its first analysis
    /// ignores cancellations but is alive.
    pub hung_timeout: Duration,
    /// Position encodings offered to the server, preferred first. The agent alone prefers
    /// UTF-8; the editor-facing server offers only the editor's encoding, so positions pass
    /// between editor and child unconverted.
    pub position_encodings: Vec<crate::position::PositionEncoding>,
    /// Read the server's output on a thread of its own instead of a task: requests forwarded
    /// for an editor ([`Child::forward`](crate::Child::forward)) are then answered by that
    /// thread without waking the runtime, while the bridge's own callers pay a wake-up from
    /// another thread per answer. Set by the editor-facing server; the agent alone keeps the
    /// task.
    pub output_thread: bool,
    /// The editor's `textDocument` client capabilities, when an editor uses the server through
    /// the bridge: offered to the server under the bridge's own, which win where both speak (the
    /// agent reads the answers too), so the server shapes what only the editor reads (snippets,
    /// code action literals, semantic tokens, folding, inlay hints) for the editor.
    pub editor_text_document: Option<Value>,
    /// Arguments that make the server print its version and exit (`--version`): run once
    /// before the server is used, so a command that exists but cannot run (rustup's shim
    /// without the component) is reported and not used. `None`: not probed (pyright's
    /// language server has no such flag; a server of unknown arguments); a failed start
    /// reports such a server instead.
    pub probe_args: Option<Vec<String>>,
    /// What makes the server's process, when the host runs it some way of its own (in a
    /// sandbox); `None`: the command as it is. The bridge adds its pipes, environment and
    /// process group to what it returns.
    pub launcher: Option<Launcher>,
}

/// Makes the process of a server from its program (found on PATH), its arguments and the
/// folder it runs in. The host's own: the bridge knows nothing of sandboxes, it only asks.
#[derive(Clone)]
pub struct Launcher(Arc<LaunchFn>);

/// The function behind a [`Launcher`].
type LaunchFn = dyn Fn(&Path, &[String], &Path) -> std::process::Command + Send + Sync;

impl Launcher {
    /// A launcher that makes each process with `launch`.
    pub fn new(
        launch: impl Fn(&Path, &[String], &Path) -> std::process::Command + Send + Sync + 'static,
    ) -> Launcher {
        Launcher(Arc::new(launch))
    }

    /// The process for `program args…` in `root`, not yet started.
    pub fn command(&self, program: &Path, args: &[String], root: &Path) -> std::process::Command {
        (self.0)(program, args, root)
    }
}

impl PartialEq for Launcher {
    /// The same launcher, not one that would make the same processes: closures do not compare.
    fn eq(&self, other: &Launcher) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::fmt::Debug for Launcher {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Launcher")
    }
}

impl ServerConfig {
    /// A configuration with the default timeouts and nothing else: fill in the rest with
    /// struct update syntax.
    pub fn new(name: impl Into<String>, command: impl Into<String>) -> ServerConfig {
        ServerConfig {
            name: name.into(),
            command: command.into(),
            args: Vec::new(),
            env: BTreeMap::new(),
            languages: Vec::new(),
            file_patterns: Vec::new(),
            root_markers: Vec::new(),
            initialization_options: None,
            settings: Value::Object(Default::default()),
            request_timeout: Duration::from_secs(30),
            startup_timeout: Duration::from_secs(60),
            cancel_grace: Duration::from_secs(2),
            hung_timeout: Duration::from_secs(60),
            position_encodings: vec![
                crate::position::PositionEncoding::Utf8,
                crate::position::PositionEncoding::Utf16,
            ],
            output_thread: false,
            editor_text_document: None,
            probe_args: None,
            launcher: None,
        }
    }

    /// Whether this server handles `path`, by file pattern or by its languageId. Compiles the
    /// patterns each time: for one-off questions; the [`Bridge`](crate::Bridge) keeps a
    /// [`FileMatcher`] per server.
    pub fn matches(&self, path: &Path) -> bool {
        FileMatcher::new(self).is_match(path)
    }

    /// Whether the command is found: an existing path, or a name found on PATH. Whether it can
    /// also run is the probe's question ([`Bridge::probe_failure`](crate::Bridge::probe_failure)).
    pub fn is_available(&self) -> bool {
        find_program(&self.command).is_some()
    }
}

/// How often a crashing server is restarted before the registry gives up on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Restarts allowed within `window`; one more failure is reported as `ServerFailed`.
    pub max_restarts: u32,
    /// The sliding window the restarts are counted in: a server that crashes once a day is
    /// restarted forever, one that crashes in a loop is given up on.
    pub window: Duration,
    /// Delay before the first restart in the window; it doubles with each further restart.
    pub backoff: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            max_restarts: 5,
            window: Duration::from_secs(180),
            backoff: Duration::from_millis(200),
        }
    }
}

/// Every known server, in order of preference (the first available match serves a file).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BridgeConfig {
    /// The servers, built-in and the user's merged; order decides which serves a file two match.
    pub servers: Vec<ServerConfig>,
    /// How crashes are answered, the same for every server.
    pub restart: RestartPolicy,
}

impl BridgeConfig {
    /// The built-in servers: pyright before pylsp for Python, so the stronger checker wins when
    /// both are installed.
    pub fn builtin() -> Self {
        let strings = |items: &[&str]| {
            items
                .iter()
                .map(|item| item.to_string())
                .collect::<Vec<_>>()
        };
        let version = Some(strings(&["--version"]));
        let python_markers = strings(&[
            "pyproject.toml",
            "setup.py",
            "setup.cfg",
            "pyrightconfig.json",
            "requirements.txt",
        ]);
        let servers = vec![
            ServerConfig {
                args: strings(&["--stdio"]),
                languages: strings(&["python"]),
                file_patterns: strings(&["*.py", "*.pyi"]),
                root_markers: python_markers.clone(),
                // `vscode-jsonrpc` reads any header lines in any order (so do the readers of
                // typescript-language-server, clangd, rust-analyzer's `lsp-server` and gopls'
                // `jsonrpc2`, below).
                ..ServerConfig::new("pyright", "pyright-langserver")
            },
            ServerConfig {
                args: strings(&["--stdio"]),
                languages: strings(&[
                    "typescript",
                    "typescriptreact",
                    "javascript",
                    "javascriptreact",
                ]),
                file_patterns: strings(&[
                    "*.ts", "*.tsx", "*.js", "*.jsx", "*.mts", "*.cts", "*.mjs", "*.cjs",
                ]),
                root_markers: strings(&["tsconfig.json", "jsconfig.json", "package.json"]),
                probe_args: version.clone(),
                ..ServerConfig::new("typescript-language-server", "typescript-language-server")
            },
            ServerConfig {
                languages: strings(&["c", "cpp", "objective-c", "objective-cpp"]),
                file_patterns: strings(&[
                    "*.c", "*.h", "*.cc", "*.cpp", "*.cxx", "*.c++", "*.hh", "*.hpp", "*.hxx",
                    "*.h++", "*.m", "*.mm",
                ]),
                root_markers: strings(&["compile_commands.json", "compile_flags.txt", ".clangd"]),
                probe_args: version.clone(),
                ..ServerConfig::new("clangd", "clangd")
            },
            ServerConfig {
                languages: strings(&["rust"]),
                file_patterns: strings(&["*.rs"]),
                root_markers: strings(&["Cargo.toml", "rust-project.json"]),
                // rust-analyzer answers ContentModified or nothing useful until it has indexed.
                startup_timeout: Duration::from_secs(120),
                probe_args: version.clone(),
                ..ServerConfig::new("rust-analyzer", "rust-analyzer")
            },
            ServerConfig {
                languages: strings(&["go"]),
                file_patterns: strings(&["*.go"]),
                root_markers: strings(&["go.work", "go.mod"]),
                probe_args: Some(strings(&["version"])),
                ..ServerConfig::new("gopls", "gopls")
            },
            ServerConfig {
                languages: strings(&["python"]),
                file_patterns: strings(&["*.py", "*.pyi"]),
                root_markers: python_markers,
                probe_args: version,
                ..ServerConfig::new("pylsp", "pylsp")
            },
        ];
        BridgeConfig {
            servers,
            restart: RestartPolicy::default(),
        }
    }

    /// The built-ins with the overrides of a config file applied (see the module doc).
    pub fn from_toml(text: &str) -> Result<Self, String> {
        let file: ConfigFile = toml::from_str(text).map_err(|error| error.to_string())?;
        let mut config = BridgeConfig::builtin();
        config.apply(file.server)?;
        if let Some(restart) = file.restart {
            config.restart = restart.resolve(config.restart);
        }
        Ok(config)
    }

    /// Apply `[server.NAME]` overrides: an existing server gets the given keys replaced, a new
    /// name is appended (and then needs at least `command`). Lets a caller that parses a larger
    /// config file embed [`ServerOptions`] in its own structure.
    pub fn apply(&mut self, overrides: BTreeMap<String, ServerOptions>) -> Result<(), String> {
        for (name, options) in overrides {
            match self.servers.iter_mut().find(|server| server.name == name) {
                Some(server) => options.apply_to(server),
                None => {
                    let Some(command) = options.command.clone() else {
                        return Err(format!(
                            "[server.{name}]: `command` is required for a server that is not built in"
                        ));
                    };
                    let mut server = ServerConfig::new(name, command);
                    options.apply_to(&mut server);
                    self.servers.push(server);
                }
            }
        }
        Ok(())
    }

    /// The servers whose command is installed.
    pub fn available(&self) -> Vec<&ServerConfig> {
        self.servers
            .iter()
            .filter(|server| server.is_available())
            .collect()
    }
}

/// The raw `[server.NAME]` table: every key optional, unknown keys rejected by name.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerOptions {
    /// Replaces [`ServerConfig::command`].
    pub command: Option<String>,
    /// Replaces [`ServerConfig::args`] as a whole (not appended).
    pub args: Option<Vec<String>>,
    /// Replaces [`ServerConfig::env`] as a whole.
    pub env: Option<BTreeMap<String, String>>,
    /// Replaces [`ServerConfig::languages`].
    pub languages: Option<Vec<String>>,
    /// Replaces [`ServerConfig::file_patterns`].
    pub file_patterns: Option<Vec<String>>,
    /// Replaces [`ServerConfig::root_markers`].
    pub root_markers: Option<Vec<String>>,
    /// Replaces [`ServerConfig::initialization_options`].
    pub initialization_options: Option<Value>,
    /// Replaces [`ServerConfig::settings`] as a whole (no deep merge, so a user's table says
    /// everything the server gets).
    pub settings: Option<Value>,
    /// [`ServerConfig::request_timeout`] in seconds (fractions allowed; negative counts as 0).
    pub request_timeout_secs: Option<f64>,
    /// [`ServerConfig::startup_timeout`] in seconds.
    pub startup_timeout_secs: Option<f64>,
    /// [`ServerConfig::cancel_grace`] in seconds.
    pub cancel_grace_secs: Option<f64>,
    /// [`ServerConfig::hung_timeout`] in seconds.
    pub hung_timeout_secs: Option<f64>,
    /// [`ServerConfig::probe_args`]; an empty list turns the probe off.
    pub probe_args: Option<Vec<String>>,
}

impl ServerOptions {
    fn apply_to(self, server: &mut ServerConfig) {
        let seconds = |secs: f64| Duration::from_secs_f64(secs.max(0.0));
        if let Some(command) = self.command {
            server.command = command;
        }
        if let Some(args) = self.args {
            server.args = args;
        }
        if let Some(env) = self.env {
            server.env = env;
        }
        if let Some(languages) = self.languages {
            server.languages = languages;
        }
        if let Some(patterns) = self.file_patterns {
            server.file_patterns = patterns;
        }
        if let Some(markers) = self.root_markers {
            server.root_markers = markers;
        }
        if let Some(options) = self.initialization_options {
            server.initialization_options = Some(options);
        }
        if let Some(settings) = self.settings {
            server.settings = settings;
        }
        if let Some(secs) = self.request_timeout_secs {
            server.request_timeout = seconds(secs);
        }
        if let Some(secs) = self.startup_timeout_secs {
            server.startup_timeout = seconds(secs);
        }
        if let Some(secs) = self.cancel_grace_secs {
            server.cancel_grace = seconds(secs);
        }
        if let Some(secs) = self.hung_timeout_secs {
            server.hung_timeout = seconds(secs);
        }
        if let Some(args) = self.probe_args {
            // `probe_args = []` turns the probe off.
            server.probe_args = (!args.is_empty()).then_some(args);
        }
    }
}

/// The raw `[restart]` table.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestartOptions {
    /// [`RestartPolicy::max_restarts`].
    pub max_restarts: Option<u32>,
    /// [`RestartPolicy::window`] in seconds.
    pub window_secs: Option<f64>,
    /// [`RestartPolicy::backoff`] in milliseconds.
    pub backoff_ms: Option<u64>,
}

impl RestartOptions {
    /// `base` with the keys this table sets replaced; the layering of user and workspace
    /// configuration calls it once per layer.
    pub fn resolve(self, base: RestartPolicy) -> RestartPolicy {
        RestartPolicy {
            max_restarts: self.max_restarts.unwrap_or(base.max_restarts),
            window: self
                .window_secs
                .map_or(base.window, |secs| Duration::from_secs_f64(secs.max(0.0))),
            backoff: self.backoff_ms.map_or(base.backoff, Duration::from_millis),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    server: BTreeMap<String, ServerOptions>,
    restart: Option<RestartOptions>,
}

/// The LSP languageId of a file, by extension (or name, for a few extension-less files).
pub fn language_id(path: &Path) -> Option<&'static str> {
    let name = path.file_name()?.to_str()?;
    match name {
        "Makefile" | "makefile" | "GNUmakefile" => return Some("makefile"),
        "Dockerfile" => return Some("dockerfile"),
        _ => {}
    }
    let extension = path.extension()?.to_str()?.to_ascii_lowercase();
    Some(match extension.as_str() {
        "py" | "pyi" => "python",
        "ts" | "mts" | "cts" => "typescript",
        "tsx" => "typescriptreact",
        "js" | "mjs" | "cjs" => "javascript",
        "jsx" => "javascriptreact",
        "c" | "h" => "c",
        "cc" | "cpp" | "cxx" | "c++" | "hh" | "hpp" | "hxx" | "h++" | "ipp" | "inl" => "cpp",
        "m" => "objective-c",
        "mm" => "objective-cpp",
        "rs" => "rust",
        "go" => "go",
        "java" => "java",
        "kt" | "kts" => "kotlin",
        "cs" => "csharp",
        "swift" => "swift",
        "rb" => "ruby",
        "php" => "php",
        "lua" => "lua",
        "zig" => "zig",
        "hs" => "haskell",
        "ml" | "mli" => "ocaml",
        "ex" | "exs" => "elixir",
        "scala" => "scala",
        "sh" | "bash" | "zsh" => "shellscript",
        "json" => "json",
        "jsonc" => "jsonc",
        "yaml" | "yml" => "yaml",
        "toml" => "toml",
        "md" | "markdown" => "markdown",
        "html" | "htm" => "html",
        "css" => "css",
        "scss" => "scss",
        "vue" => "vue",
        "svelte" => "svelte",
        "sql" => "sql",
        _ => return None,
    })
}

/// Resolve a command the way `exec` would: a name with a `/` is a path, anything else is looked
/// up in PATH (executable regular files only).
pub fn find_program(command: &str) -> Option<PathBuf> {
    let is_executable = |path: &Path| {
        use std::os::unix::fs::PermissionsExt;
        path.metadata()
            .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
    };
    if command.contains('/') {
        let path = PathBuf::from(command);
        return is_executable(&path).then_some(path);
    }
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(command))
        .find(|path| is_executable(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_cover_the_supported_servers_and_languages() {
        let config = BridgeConfig::builtin();
        let names: Vec<_> = config
            .servers
            .iter()
            .map(|server| server.name.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "pyright",
                "typescript-language-server",
                "clangd",
                "rust-analyzer",
                "gopls",
                "pylsp"
            ]
        );
        let find = |name: &str| {
            config
                .servers
                .iter()
                .find(|server| server.name == name)
                .unwrap()
        };
        assert!(find("pyright").matches(Path::new("/w/a/grüße.py")));
        assert!(find("typescript-language-server").matches(Path::new("x.tsx")));
        assert!(find("clangd").matches(Path::new("src/x.hpp")));
        assert!(!find("clangd").matches(Path::new("src/x.py")));
        assert_eq!(
            find("clangd").root_markers,
            ["compile_commands.json", "compile_flags.txt", ".clangd"]
        );
    }

    #[test]
    fn overrides_replace_keys_and_new_servers_are_appended() {
        let config = BridgeConfig::from_toml(
            r#"
            [server.pyright]
            args = ["--stdio", "--verbose"]
            settings = { python = { analysis = { typeCheckingMode = "strict" } } }
            request_timeout_secs = 5

            [server.foo-ls]
            command = "/opt/foo-ls"
            file_patterns = ["*.foo"]

            [restart]
            max_restarts = 2
            "#,
        )
        .unwrap();
        let pyright = &config.servers[0];
        assert_eq!(pyright.args, ["--stdio", "--verbose"]);
        assert_eq!(pyright.command, "pyright-langserver");
        assert_eq!(
            pyright.settings["python"]["analysis"]["typeCheckingMode"],
            "strict"
        );
        assert_eq!(pyright.request_timeout, Duration::from_secs(5));
        let foo = config.servers.last().unwrap();
        assert_eq!(
            (foo.name.as_str(), foo.command.as_str()),
            ("foo-ls", "/opt/foo-ls")
        );
        assert!(foo.matches(Path::new("a/b.foo")));
        assert_eq!(config.restart.max_restarts, 2);
        assert_eq!(config.restart.window, Duration::from_secs(180));
    }

    #[test]
    fn unknown_keys_and_missing_commands_are_errors_that_name_them() {
        let error = BridgeConfig::from_toml("[server.pyright]\ncomand = \"x\"\n").unwrap_err();
        assert!(error.contains("comand"), "{error}");
        let error = BridgeConfig::from_toml("[server.new-ls]\nargs = []\n").unwrap_err();
        assert!(
            error.contains("new-ls") && error.contains("command"),
            "{error}"
        );
        let error = BridgeConfig::from_toml("[servers.x]\n").unwrap_err();
        assert!(error.contains("servers"), "{error}");
    }

    #[test]
    fn language_ids_by_extension() {
        for (path, id) in [
            ("a.py", "python"),
            ("a.tsx", "typescriptreact"),
            ("a.mjs", "javascript"),
            ("a.jsx", "javascriptreact"),
            ("a.h", "c"),
            ("a.CPP", "cpp"),
            ("a.rs", "rust"),
            ("a.go", "go"),
        ] {
            assert_eq!(language_id(Path::new(path)), Some(id), "{path}");
        }
        assert_eq!(language_id(Path::new("README")), None);
    }

    #[test]
    fn programs_are_found_on_path_or_by_path() {
        assert!(find_program("sh").is_some());
        assert!(find_program("/bin/sh").is_some());
        assert!(find_program("surely-not-a-program-here").is_none());
        assert!(find_program("./surely/not/here").is_none());
    }
}
