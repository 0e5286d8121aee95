//! The terminal commands of the real binary, run in a world of their own: a workspace, a state
//! directory and a config file that belong to the test, no API key from the environment, and no
//! config folder of the machine (`XDG_CONFIG_HOME` points into the state directory), so the
//! user's presets and `AGENTS.md` are the test's too (they live beside the config file).

use std::path::PathBuf;
use std::process::{Command, Output};

use agent_lsp::session::store::Store;

pub struct CliFixture {
    pub workspace: tempfile::TempDir,
    pub state: tempfile::TempDir,
    /// The config file, `<state>/config.toml`.
    pub config: PathBuf,
}

impl CliFixture {
    /// An empty workspace and a config file holding `config`.
    pub fn new(config: &str) -> CliFixture {
        let workspace = tempfile::tempdir().expect("workspace");
        let state = tempfile::tempdir().expect("state");
        let path = state.path().join("config.toml");
        std::fs::write(&path, config).expect("config file");
        CliFixture {
            workspace,
            state,
            config: path,
        }
    }

    /// Add files to the workspace (see [`crate::write_tree`]).
    pub fn with_files(self, files: &[(&str, &str)]) -> CliFixture {
        crate::write_tree(self.workspace.path(), files);
        self
    }

    /// `agent-lsp --workspace … ARGS`, not started.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command =
            crate::agent_lsp_command(self.state.path(), &self.config, self.workspace.path(), args);
        command.env("XDG_CONFIG_HOME", self.state.path().join("xdg"));
        command
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run agent-lsp")
    }

    /// `agent-lsp session trajectory SESSION --format json`, which must succeed, parsed.
    pub fn trajectory(&self, session: &str) -> serde_json::Value {
        serde_json::from_str(&self.ok(&["session", "trajectory", session, "--format", "json"]))
            .expect("the trajectory is JSON")
    }

    /// stdout of a command that must succeed.
    pub fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(
            output.status.success(),
            "agent-lsp {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("UTF-8 stdout")
    }

    /// stderr of a command that must fail.
    pub fn fails(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(!output.status.success(), "agent-lsp {args:?} succeeded");
        String::from_utf8(output.stderr).expect("UTF-8 stderr")
    }

    /// The workspace's sessions.
    pub fn store(&self) -> Store {
        Store::for_workspace_in(self.state.path(), self.workspace.path()).expect("store")
    }
}
