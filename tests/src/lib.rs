//! Test support for agent-lsp end-to-end tests: locating the built binaries, building sessions
//! through the real library API, and checking the invariants every test shares.

pub mod cli;
pub mod compaction_harness;
pub mod editor;
pub mod helix;
pub mod model_endpoint;
pub mod processes;
pub mod relay;
pub mod session_log;

use std::path::{Path, PathBuf};

use agent_lsp::llm::Message;

/// Path of a binary built by this workspace (`agent-lsp`, `log-writer`, …).
///
/// `cargo test --workspace` / `cargo nextest run --workspace` build every package's binaries
/// next to the test executables' `deps/` folder, so the binary is looked up there.
pub fn workspace_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target profile directory");
    let path = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is missing: run the tests with `cargo nextest run --workspace` (or `cargo build --workspace`) so the binaries are built",
        path.display()
    );
    path
}

/// Write the preset `name` into `workspace`'s `.agent-lsp/presets/`: the built-in `standard`
/// with `sandbox` as its `[sandbox]` table (`mode = "off"` for a test about something else that
/// needs a command's own pids, which a sandbox's PID namespace renumbers).
pub fn standard_with_sandbox(workspace: &Path, name: &str, sandbox: &str) {
    let standard = agent_lsp::preset::catalog::builtin_text("standard").expect("standard");
    let (before, after) = standard
        .split_once("[sandbox]\n")
        .expect("standard has a [sandbox] table");
    let rest = &after[after.find("\n[").expect("a table after [sandbox]")..];
    let presets = workspace.join(".agent-lsp/presets");
    std::fs::create_dir_all(&presets).expect("presets folder");
    std::fs::write(
        presets.join(format!("{name}.toml")),
        format!("{before}[sandbox]\n{sandbox}\n{rest}"),
    )
    .expect("preset written");
}

/// `agent-lsp --workspace WORKSPACE ARGS…` isolated from the machine it runs on: its own state
/// directory and configuration file, no API key from the environment, no stdin.
pub fn agent_lsp_command(
    state: &std::path::Path,
    config: &std::path::Path,
    workspace: &std::path::Path,
    args: &[&str],
) -> std::process::Command {
    let mut command = std::process::Command::new(workspace_bin("agent-lsp"));
    command
        .env("AGENT_LSP_STATE_DIR", state)
        .env("AGENT_LSP_CONFIG", config)
        .env_remove("DEEPSEEK_API_KEY")
        .arg("--workspace")
        .arg(workspace)
        .args(args)
        .stdin(std::process::Stdio::null());
    command
}

/// Check the wire-level pairing rule on a derived history: every assistant message with tool
/// calls is followed directly by tool messages answering exactly those calls; only the last such
/// message may still wait for some of its results, and then nothing but its results follow it.
pub fn assert_tool_pairing(messages: &[Message]) {
    let mut index = 0;
    while index < messages.len() {
        match &messages[index] {
            Message::Assistant { tool_calls, .. } if !tool_calls.is_empty() => {
                let mut open = tool_calls
                    .iter()
                    .map(|call| call.id.clone())
                    .collect::<Vec<_>>();
                index += 1;
                while let Some(Message::Tool { call_id, .. }) = messages.get(index) {
                    let position = open.iter().position(|id| id == call_id).unwrap_or_else(|| {
                        panic!("tool result `{call_id}` answers no open call: {messages:#?}")
                    });
                    open.remove(position);
                    index += 1;
                }
                assert!(
                    open.is_empty() || index == messages.len(),
                    "calls {open:?} are separated from their results: {messages:#?}"
                );
            }
            Message::Tool { call_id, .. } => {
                panic!("orphan tool result `{call_id}`: {messages:#?}")
            }
            _ => index += 1,
        }
    }
}

/// Run the Node script `tests/SCRIPT` (a real client of one of our servers, from the npm
/// packages `.ci/tools.sh` installs) with `request` as its JSON argument, and return the one
/// JSON object it prints: what it saw.
pub fn node_client(script: &str, request: &serde_json::Value) -> serde_json::Value {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = std::process::Command::new("node")
        .arg(root.join(script))
        .arg(root.join("../.ci/tools/node_modules"))
        .arg(request.to_string())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("node runs (installed with .ci/tools.sh)");
    assert!(
        output.status.success(),
        "the client tests/{script} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "tests/{script} printed no JSON ({error}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

/// `PATH` with the npm-installed language servers of `.ci/tools` (see `.ci/tools.sh`) in
/// front, for the processes a test spawns.
pub fn tools_path() -> std::ffi::OsString {
    let tools =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/tools/node_modules/.bin");
    let mut paths = vec![tools];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(paths).expect("PATH entries without separators")
}

/// Write `files` (`/`-separated paths relative to `root`, and their text) under `root`,
/// making the folders they need.
pub fn write_tree(root: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("a file path has a parent"))
            .expect("make the folders");
        std::fs::write(path, text).expect("write the file");
    }
}

/// A copy of one of `tests/fixtures/`'s projects in a fresh temporary directory.
pub fn fixture(name: &str) -> tempfile::TempDir {
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name);
    let target = tempfile::tempdir().expect("temporary directory");
    copy_tree(&source, target.path());
    target
}

fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("create fixture directory");
    for entry in std::fs::read_dir(from)
        .unwrap_or_else(|error| panic!("fixture {}: {error}", from.display()))
    {
        let entry = entry.expect("fixture entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy fixture file");
        }
    }
}

/// What the host offers the plugins of `preset` in `workspace`, with no state directory.
pub fn plugin_host(
    preset: &agent_lsp::preset::Preset,
    workspace: &Path,
    provider: Option<agent_lsp::llm::provider::Provider>,
) -> agent_lsp::plugin::registry::PluginHost {
    agent_lsp::plugin::registry::PluginHost {
        provider,
        ..agent_lsp::plugin::registry::PluginHost::detached(
            workspace,
            &preset.name,
            preset.file.model.context_window,
        )
    }
}

/// The plugins of `preset` and the tools they bring (`recall_history` with compaction), for
/// tests that build a tool runtime without an agent.
pub fn plugin_assembly(
    preset: &agent_lsp::preset::Preset,
    workspace: &Path,
) -> agent_lsp::plugin::registry::Assembly {
    agent_lsp::host::assembly::assemble(preset, &plugin_host(preset, workspace, None))
        .expect("the preset's plugins")
}

/// The tool runtime of `preset` on `workspace` over a bridge of its own to `servers`, as a
/// host makes it (its catalog, permissions and write observer), and that bridge, to shut its
/// servers down.
pub fn tool_runtime(
    preset: &agent_lsp::preset::Preset,
    workspace: &Path,
    servers: lsp_bridge::BridgeConfig,
) -> (agent_lsp::tools::ToolRuntime, lsp_bridge::Bridge) {
    let host = agent_lsp::host::ToolHost::standalone(workspace, servers).expect("a tool host");
    let runtime = host
        .runtime(
            preset,
            &plugin_assembly(preset, workspace),
            &std::sync::Arc::default(),
        )
        .expect("the preset's tools");
    (runtime, host.bridge)
}

/// The built-in language servers, with each command that is not on `PATH` looked up in
/// `.ci/tools` instead, so in-process tests need no `PATH` changes.
pub fn bridge_config() -> lsp_bridge::BridgeConfig {
    let mut config = lsp_bridge::BridgeConfig::builtin();
    for server in &mut config.servers {
        for dir in std::env::split_paths(&tools_path()) {
            let candidate = dir.join(&server.command);
            if candidate.is_file() {
                server.command = candidate.display().to_string();
                break;
            }
        }
    }
    config
}

/// The messages `fake-lsp record PATH` has written so far: its complete lines only (the one
/// being written when we read may be cut short).
pub fn fake_lsp_record(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    complete
        .lines()
        .map(|line| serde_json::from_str(line).expect("fake-lsp records JSON lines"))
        .collect()
}

/// A config that sends `*.fake` files (and documents whose languageId is `fake`) to the scripted
/// `fake-lsp` child, started with `args`.
pub fn fake_lsp_config(args: &[&str]) -> String {
    let args = args
        .iter()
        .map(|arg| format!("{arg:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "[server.fake]\ncommand = {:?}\nargs = [{args}]\nlanguages = [\"fake\"]\nfile_patterns = [\"*.fake\"]\nrequest_timeout_secs = 30\n",
        workspace_bin("fake-lsp").display().to_string()
    )
}

/// `agent-lsp serve` for `workspace`, with `config` as its config file's text (written into
/// `state`, which is also its state folder) and the test tools on `PATH`.
pub fn serve_command(
    workspace: &std::path::Path,
    state: &std::path::Path,
    config: &str,
) -> std::process::Command {
    let config_path = state.join("config.toml");
    std::fs::write(&config_path, config).unwrap();
    let mut command = std::process::Command::new(workspace_bin("agent-lsp"));
    command
        .env("PATH", tools_path())
        .env("AGENT_LSP_STATE_DIR", state)
        .env("AGENT_LSP_CONFIG", &config_path)
        .args(["--workspace", workspace.to_str().unwrap(), "serve"]);
    command
}
