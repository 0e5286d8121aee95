//! A real Helix for the editor tests: `hx` from `.ci/tools/helix` (copied there by
//! `.ci/tools.sh`) in a tmux server of its own, with the repository's
//! `editors/helix/languages.toml` as its configuration and `agent-lsp` on its `PATH`. What the
//! user sees is read with `capture-pane`, what Helix and agent-lsp said to each other from
//! Helix's own log of every LSP message (`hx -vv --log`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long any one thing may take to appear (pyright's first start included).
const PATIENCE: Duration = Duration::from_secs(90);

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lies in the repository")
        .to_path_buf()
}

/// `hx` and its runtime from `.ci/tools/helix`: there is no fallback, CI must not skip.
fn helix_dir() -> PathBuf {
    let dir = repo().join(".ci/tools/helix");
    assert!(
        dir.join("bin/hx").is_file(),
        "{} is missing: run `bash .ci/tools.sh` (it copies Helix from the shared tools folder)",
        dir.join("bin/hx").display()
    );
    dir
}

/// One Helix in a tmux server of its own, on a project in a temporary folder.
pub struct Helix {
    dir: tempfile::TempDir,
    socket: PathBuf,
    log: PathBuf,
}

impl Helix {
    /// Helix opening `file` in a project made of `files`, `agent-lsp` on `PATH` and the
    /// project's `languages.toml` as its configuration, with `model_url` as the model's base
    /// URL (set where the file's comment shows it) when given.
    pub fn start(files: &[(&str, &str)], file: &str, model_url: Option<&str>) -> Helix {
        Helix::start_configured(files, file, model_url, "")
    }

    /// [`Helix::start`] with `agent_config` as the text of agent-lsp's config file.
    pub fn start_configured(
        files: &[(&str, &str)],
        file: &str,
        model_url: Option<&str>,
        agent_config: &str,
    ) -> Helix {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        let root = home.join("project");
        crate::write_tree(&root, files);
        std::fs::create_dir_all(root.join(".git")).unwrap();
        let mut languages = std::fs::read_to_string(repo().join("editors/helix/languages.toml"))
            .expect("editors/helix/languages.toml");
        if let Some(url) = model_url {
            for (example, setting) in [
                ("# model = ", "model = \"deepseek-v4-flash\"".to_owned()),
                ("# baseUrl = ", format!("baseUrl = \"{url}\"")),
            ] {
                let line = languages
                    .lines()
                    .find(|line| line.starts_with(example))
                    .unwrap_or_else(|| panic!("languages.toml shows no `{example}`"))
                    .to_owned();
                languages = languages.replace(&line, &setting);
            }
        }
        crate::write_tree(&home, &[("config/helix/languages.toml", &languages)]);
        std::fs::create_dir_all(home.join("bin")).unwrap();
        std::os::unix::fs::symlink(
            crate::workspace_bin("agent-lsp"),
            home.join("bin/agent-lsp"),
        )
        .unwrap();
        std::fs::create_dir_all(home.join("state")).unwrap();
        std::fs::write(home.join("agent-lsp.toml"), agent_config).unwrap();
        let helix = helix_dir();
        let path = {
            let mut paths = vec![home.join("bin")];
            paths.extend(std::env::split_paths(&crate::tools_path()));
            std::env::join_paths(paths).unwrap()
        };
        let log = home.join("helix.log");
        let quote = |path: &Path| format!("'{}'", path.display());
        let script = format!(
            "#!/bin/sh\n\
             export PATH={path}\n\
             export HELIX_RUNTIME={runtime}\n\
             export XDG_CONFIG_HOME={config} XDG_CACHE_HOME={cache} XDG_DATA_HOME={data} XDG_STATE_HOME={xstate}\n\
             export AGENT_LSP_STATE_DIR={state} AGENT_LSP_CONFIG={agent_config}\n\
             unset DEEPSEEK_API_KEY\n\
             cd {root} && exec {hx} -vv --log {log} {file}\n",
            path = quote(Path::new(&path)),
            runtime = quote(&helix.join("runtime")),
            config = quote(&home.join("config")),
            cache = quote(&home.join("cache")),
            data = quote(&home.join("data")),
            xstate = quote(&home.join("xdg-state")),
            state = quote(&home.join("state")),
            agent_config = quote(&home.join("agent-lsp.toml")),
            root = quote(&root),
            hx = quote(&helix.join("bin/hx")),
            log = quote(&log),
        );
        let launcher = home.join("hx.sh");
        std::fs::write(&launcher, script).unwrap();
        let socket = home.join("tmux.sock");
        let helix = Helix { dir, socket, log };
        helix.tmux(&[
            "new-session",
            "-d",
            "-x",
            "160",
            "-y",
            "40",
            "sh",
            launcher.to_str().unwrap(),
        ]);
        helix
    }

    /// agent-lsp's state folder (`AGENT_LSP_STATE_DIR`).
    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap().join("state")
    }

    pub fn root(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap().join("project")
    }

    fn tmux(&self, args: &[&str]) -> String {
        let output = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs");
        assert!(output.status.success(), "tmux {args:?}: {output:?}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Type `keys` (tmux key names: `Enter`, `Escape`, `Space`, or literal text).
    pub fn keys(&self, keys: &[&str]) {
        for key in keys {
            self.tmux(&["send-keys", key]);
            // Helix reads a burst of input as one; keys sent one by one are read one by one.
            std::thread::sleep(Duration::from_millis(150));
        }
    }

    pub fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p"])
    }

    /// Wait until the screen shows what `done` looks for.
    pub fn wait_screen(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "waited {PATIENCE:?} for {what}; the screen:\n{screen}\nHelix's log ends:\n{}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The LSP messages of Helix's log: those it sent (`true`) and received (`false`).
    pub fn messages(&self) -> Vec<(bool, Value)> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .filter_map(|line| {
                let (_, rest) = line.split_once("helix_lsp::transport [INFO] agent-lsp ")?;
                let sent = rest.starts_with("->");
                let json = rest.get(3..)?;
                Some((sent, serde_json::from_str(json).ok()?))
            })
            .collect()
    }

    /// Wait until Helix has sent a `method` request matching `sent` and received its answer;
    /// returns both.
    pub fn wait_exchange(&self, method: &str, sent: impl Fn(&Value) -> bool) -> (Value, Value) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let messages = self.messages();
            let request = messages.iter().rev().find(|(out, message)| {
                *out && message["method"] == method && message.get("id").is_some() && sent(message)
            });
            if let Some((_, request)) = request
                && let Some((_, answer)) = messages.iter().find(|(out, message)| {
                    !*out && message.get("method").is_none() && message["id"] == request["id"]
                })
            {
                return (request.clone(), answer.clone());
            }
            assert!(
                Instant::now() < deadline,
                "waited {PATIENCE:?} for Helix to send `{method}` and get its answer; Helix's log ends:\n{}\nthe screen:\n{}",
                self.log_tail(),
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Wait for a notification Helix received.
    pub fn wait_notification(&self, method: &str, matches: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some((_, message)) = self
                .messages()
                .into_iter()
                .find(|(out, message)| !*out && message["method"] == method && matches(message))
            {
                return message;
            }
            assert!(
                Instant::now() < deadline,
                "waited {PATIENCE:?} for `{method}`; Helix's log ends:\n{}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(30)..];
        tail.iter()
            .map(|line| line.chars().take(600).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The status line: the screen's second line from the bottom.
    pub fn status_line(screen: &str) -> &str {
        let lines: Vec<&str> = screen.lines().collect();
        lines[lines.len().saturating_sub(2)]
    }

    /// Whether the status line ends with the cursor position `at` (`line:column`).
    pub fn cursor_at(screen: &str, at: &str) -> bool {
        Self::status_line(screen).trim_end().ends_with(at)
    }

    /// Move the cursor to a 1-based line and column.
    pub fn goto(&self, line: u32, column: u32) {
        self.keys(&["Escape", &format!(":{line}"), "Enter", "Home"]);
        if column > 1 {
            self.keys(&[&format!("{}l", column - 1)]);
        }
        let at = format!("{line}:{column}");
        self.wait_screen(&format!("the cursor at {at}"), |screen| {
            Self::cursor_at(screen, &at)
        });
    }
}

impl Drop for Helix {
    fn drop(&mut self) {
        // Ending the tmux server ends Helix, whose closed pipe ends agent-lsp and its children.
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

/// The `file:` URI of `path` as Helix and agent-lsp spell it.
pub fn uri_of(path: &Path) -> String {
    lsp_bridge::lsp_types::Url::from_file_path(path)
        .unwrap()
        .to_string()
}
