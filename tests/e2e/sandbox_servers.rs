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
        let output = world
            .command(&[
                "run",
                "--yes",
                "--preset",
                preset,
                "--base-url",
                &endpoint.base_url(),
                "Write",
            ])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        endpoint.assert_no_violations();
        String::from_utf8_lossy(&output.stdout).into_owned()
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
