//! What holds the agent's servers and says so: `agent-lsp servers` names the default preset's
//! sandbox, and a preset with `[sandbox] mcp_servers = true` starts its MCP servers inside it
//! (a real filesystem server cannot write outside the workspace), where by default they run
//! with the user's rights.

use serde_json::{Value, json};

use crate::sandbox::World;

/// `agent-lsp servers` says what holds the default preset's commands: the policy and the
/// mechanism, or that nothing does and why.
#[test]
fn servers_says_which_mechanism_holds_the_commands() {
    let world = World::new();
    let servers = |config: &str| {
        std::fs::write(&world.config, config).unwrap();
        let json = world.command(&["servers", "--json"]).output().unwrap();
        let json: Value = serde_json::from_slice(&json.stdout).unwrap();
        let text = world.command(&["servers"]).output().unwrap();
        (
            json["sandbox"].clone(),
            String::from_utf8_lossy(&text.stdout).into_owned(),
        )
    };
    let (json, text) = servers("");
    assert_eq!(
        json,
        json!({"preset": "standard", "mode": "workspace-write", "network": false, "mechanism": "bubblewrap"})
    );
    assert!(
        text.contains("sandbox: commands of preset `standard` run in a sandbox: workspace-write, no network, bubblewrap"),
        "{text}"
    );
    world.preset("open", "mode = \"off\"");
    let (json, text) = servers("preset = \"open\"\n");
    assert_eq!(json["mechanism"], "none: the policy is `off`");
    assert!(
        text.contains("sandbox: commands of preset `open` run with every right of the user (the policy is `off`)"),
        "{text}"
    );
}

/// The filesystem MCP server, allowed a folder outside the workspace, asked to write there:
/// under a preset with `mcp_servers = true` its process is in the sandbox and the write fails;
/// under `standard` (the servers are the user's own tools) it succeeds.
#[test]
fn a_preset_may_run_its_mcp_servers_in_the_sandbox() {
    use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, Reply};

    let server = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../.ci/tools/node_modules/.bin/mcp-server-filesystem");
    assert!(
        server.exists(),
        "{} is missing: run .ci/tools.sh",
        server.display()
    );
    // Started through a link under /tmp, which the sandbox's private /tmp must show again
    // (as in a checkout under /tmp).
    let installed = tempfile::tempdir_in("/tmp").unwrap();
    let link = installed.path().join("mcp-server-filesystem");
    std::os::unix::fs::symlink(server.canonicalize().unwrap(), &link).unwrap();
    let server = link;
    let world = World::new();
    let outside = world.outside("");
    std::fs::write(
        &world.config,
        format!(
            "[mcp.servers.fs]\ncommand = {:?}\nargs = [{:?}]\n",
            server.display().to_string(),
            outside.display().to_string()
        ),
    )
    .unwrap();
    world.preset("boxed", "mode = \"workspace-write\"\nmcp_servers = true");
    let write = |preset: &str, name: &str| {
        let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
        let path = outside.join(name).display().to_string();
        endpoint.push_all([
            Reply::tool_call(
                "mcp__fs__write_file",
                json!({"path": path, "content": "written"}).to_string(),
            ),
            Reply::from_fn(|request| Reply::text(request.tool_result_text())),
        ]);
        let printed = world.run_ok(&[
            "run",
            "--yes",
            "--preset",
            preset,
            "--base-url",
            &endpoint.base_url(),
            "Write",
        ]);
        endpoint.assert_no_violations();
        printed
    };

    let held = write("boxed", "held.txt");
    assert!(!outside.join("held.txt").exists(), "{held}");
    assert!(
        held.contains("read-only file system") || held.contains("EROFS"),
        "{held}"
    );
    let free = write("standard", "free.txt");
    assert_eq!(
        std::fs::read_to_string(outside.join("free.txt")).unwrap(),
        "written",
        "{free}"
    );
}

/// The pid namespaces `pid` is in, as `/proc` counts them (2 inside bubblewrap's).
fn pid_namespaces(pid: &str) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("NSpid:"))
        .map_or(0, |pids| pids.split_whitespace().count())
}

/// The live `pyright-langserver` processes below the process `ancestor` (not bubblewrap's,
/// which names the server in its arguments).
fn pyright_below(ancestor: u32) -> Vec<String> {
    let parent_of = |pid: &str| -> Option<String> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let after_name = stat.rsplit_once(')')?.1;
        after_name.split_whitespace().nth(1).map(str::to_owned)
    };
    let below = |pid: &str| {
        let mut at = pid.to_owned();
        for _ in 0..32 {
            match parent_of(&at) {
                Some(parent) if parent == ancestor.to_string() => return true,
                Some(parent) if parent != "0" => at = parent,
                _ => return false,
            }
        }
        false
    };
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|pid| {
            let argv = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let argv = String::from_utf8_lossy(&argv);
            !argv
                .split('\0')
                .next()
                .unwrap_or_default()
                .ends_with("bwrap")
                && argv.contains("pyright-langserver")
                && below(pid)
        })
        .collect()
}

/// A language server named under `[server_sandbox.NAME]` in the config file starts inside the
/// sandbox (pyright in bubblewrap's PID namespace) and still answers the editor; without the
/// table it runs as the user's own process.
#[test]
fn the_config_file_may_run_a_language_server_in_the_sandbox() {
    use agent_tests::editor::Editor;

    for (config, namespaces) in [
        ("[server_sandbox.pyright]\nmode = \"workspace-write\"\n", 2),
        ("", 1),
    ] {
        let workspace = tempfile::tempdir().unwrap();
        let root = workspace.path().canonicalize().unwrap();
        let file = root.join("app.py");
        std::fs::write(
            &file,
            "def greet(name: str) -> str:\n    return name\n\ngreet('x')\n",
        )
        .unwrap();
        let state = tempfile::tempdir().unwrap();
        let mut editor = Editor::start(agent_tests::serve_command(&root, state.path(), config));
        editor.initialize(&root);
        editor.open(&file, "python");
        let hover = editor.request(
            "textDocument/hover",
            json!({"textDocument": {"uri": agent_tests::editor::url(&file)}, "position": {"line": 3, "character": 1}}),
        );
        let text = hover["result"]["contents"].to_string();
        assert!(text.contains("greet"), "{config:?}: {hover}");
        let servers = pyright_below(editor.pid());
        assert!(!servers.is_empty(), "{config:?}: pyright runs");
        for pid in &servers {
            assert_eq!(pid_namespaces(pid), namespaces, "{config:?}: pyright {pid}");
        }
        editor.shutdown();
    }
}
