//! `agent-lsp servers`: which language servers the workspace would use, and how they are; and
//! what holds the commands the agent runs here (the default preset's sandbox, and the
//! mechanism this machine offers for it).

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::config::Config;
use crate::preset::{DEFAULT_PRESET, Preset, PresetDirs};
use crate::sandbox::{Mechanism, Sandbox};
use crate::session::store::Store;
use crate::shared_bridge::{self, Ownership};

/// At most this many files are looked at to find the workspace's languages.
const MAX_FILES: usize = 20_000;

/// Who owns the workspace's shared bridge, then the configured servers (command, available on
/// PATH, languages); with `start`, start each one the workspace has files for, wait until it is
/// ready, and report its health.
pub fn run(store: &Store, start: bool, json_output: bool) -> anyhow::Result<ExitCode> {
    let config = Config::load()?;
    let bridge_config = config.bridge_config()?;
    let root = store.workspace().to_owned();
    let bridge = lsp_bridge::Bridge::new(bridge_config.clone(), vec![root.clone()]);

    // One sample file per server the workspace has files for.
    let mut samples = std::collections::BTreeMap::new();
    for path in bridge.sample_files(MAX_FILES) {
        if let Some(server) = bridge.config_for(&path) {
            samples.entry(server.name.clone()).or_insert(path);
        }
    }

    let mut rows = Vec::new();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // The servers of the process that owns the workspace's bridge are the ones `run`, `tool`
    // and `mcp serve` here use: the table shows them rather than "not started".
    let ownership = runtime.block_on(shared_bridge::ownership(store));
    let owners_servers: Vec<serde_json::Value> = match &ownership {
        Ownership::Owned(owner) => owner.servers.as_array().cloned().unwrap_or_default(),
        _ => Vec::new(),
    };
    for server in &bridge_config.servers {
        let mut row = json!({
            "name": server.name,
            "command": server.command,
            "available": server.is_available(),
            "languages": server.languages,
            "used_by_workspace": samples.contains_key(&server.name),
        });
        // Found but unable to run (its probe failed): the whole output is shown here, while
        // the model is told one line.
        let in_owner = owners_servers
            .iter()
            .find(|theirs| theirs["name"] == server.name.as_str());
        if let Some(theirs) = in_owner {
            row["in_owner"] = theirs.clone();
        }
        if in_owner.is_none()
            && server.is_available()
            && let Some(failure) = bridge.probe_failure(&server.name)
        {
            row["probe_error"] = json!(failure.brief());
            // The lines the one-line summary does not already show.
            row["probe_stderr"] = json!(failure.further_stderr());
        }
        if start
            && in_owner.is_none()
            && let Some(sample) = samples.get(&server.name)
        {
            let started = Instant::now();
            let result = runtime.block_on(async {
                let child = bridge.child_for(sample).await?;
                child.wait_ready(Duration::from_secs(30)).await;
                Ok::<_, lsp_bridge::Error>(child)
            });
            row["startup_ms"] = json!(started.elapsed().as_millis() as u64);
            if let Err(error) = result {
                row["error"] = json!(error.to_string());
            }
            if let Some(health) = bridge
                .health()
                .into_iter()
                .find(|health| health.name == server.name)
            {
                row["health"] = serde_json::to_value(&health)?;
            }
        }
        rows.push(row);
    }
    runtime.block_on(bridge.shutdown_all());

    // What holds the commands of the sessions the default preset starts here.
    let preset_name = config.preset.as_deref().unwrap_or(DEFAULT_PRESET);
    let preset = Preset::load(preset_name, &PresetDirs::for_workspace(&root))?;
    let sandbox = Sandbox::detect(preset.file.sandbox.clone(), &root);

    let mut out = std::io::stdout().lock();
    if json_output {
        let mut held = sandbox.describe();
        held["preset"] = json!(preset.name);
        let value = json!({
            "bridge": ownership_json(&ownership),
            "sandbox": held,
            "servers": rows,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&value)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(out, "bridge: {}", ownership_line(&ownership))?;
    writeln!(out, "sandbox: {}", sandbox_line(&preset.name, &sandbox))?;
    writeln!(
        out,
        "{:<28} {:<10} {:<10} state",
        "server", "on PATH", "workspace"
    )?;
    let owner = match &ownership {
        Ownership::Owned(owner) => format!("`agent-lsp {}` (pid {})", owner.role, owner.pid),
        _ => String::new(),
    };
    for row in &rows {
        let theirs = &row["in_owner"];
        let state = match (&row["health"], &row["error"]) {
            _ if theirs.is_object() => format!(
                "{} (pid {}) in the bridge's owner, {owner}",
                theirs["state"].as_str().unwrap_or("?"),
                theirs["pid"]
            ),
            _ if row["probe_error"].is_string() => {
                format!(
                    "cannot run: {}",
                    row["probe_error"].as_str().unwrap_or_default()
                )
            }
            (_, serde_json::Value::String(error)) => format!("failed: {error}"),
            (health, _) if health.is_object() => format!(
                "{} (pid {}, {} ms to ready)",
                health["state"].as_str().unwrap_or_default(),
                health["pid"],
                row["startup_ms"]
            ),
            _ if row["used_by_workspace"] == true && !start => {
                "not started (--start starts it)".to_owned()
            }
            _ => "-".to_owned(),
        };
        writeln!(
            out,
            "{:<28} {:<10} {:<10} {state}",
            row["name"].as_str().unwrap_or_default(),
            if row["available"] == true {
                "yes"
            } else {
                "no"
            },
            if row["used_by_workspace"] == true {
                "has files"
            } else {
                "-"
            },
        )?;
        if let Some(tail) = row["probe_stderr"]
            .as_array()
            .or(row["health"]["stderr_tail"]
                .as_array()
                .filter(|_| row["error"].is_string()))
        {
            for line in tail {
                writeln!(out, "    | {}", line.as_str().unwrap_or_default())?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One line on what holds the default preset's commands, and what that means for asking.
fn sandbox_line(preset: &str, sandbox: &Sandbox) -> String {
    match sandbox.mechanism() {
        Mechanism::Unconfined(why) => format!(
            "commands of preset `{preset}` run with every right of the user ({why}); its permissions for `shell` apply"
        ),
        _ => format!(
            "commands of preset `{preset}` run in a sandbox: {}",
            sandbox.summary()
        ),
    }
}

fn ownership_json(ownership: &Ownership) -> serde_json::Value {
    match ownership {
        Ownership::Owned(owner) => json!({"state": "owned", "owner": owner}),
        Ownership::Nobody => json!({"state": "none"}),
        Ownership::Stale(socket) => json!({"state": "stale", "socket": socket}),
        Ownership::Silent(why) => json!({"state": "silent", "why": why}),
        Ownership::Unshared(why) => json!({"state": "unshared", "why": why}),
    }
}

/// One line on the shared bridge: who owns it and what its servers are doing.
fn ownership_line(ownership: &Ownership) -> String {
    match ownership {
        Ownership::Owned(owner) => {
            let since = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |now| now.as_millis() as u64)
                .saturating_sub(owner.since_ms)
                / 1000;
            let servers = owner
                .servers
                .as_array()
                .into_iter()
                .flatten()
                .map(|server| {
                    format!(
                        "{} {} (pid {})",
                        server["name"].as_str().unwrap_or("?"),
                        server["state"].as_str().unwrap_or("?"),
                        server["pid"]
                    )
                })
                .collect::<Vec<_>>();
            format!(
                "owned by `agent-lsp {}` (pid {}, agent-lsp {}, for {since} s); its servers: {}; \
                 `run`, `tool` and `mcp serve` here use them",
                owner.role,
                owner.pid,
                owner.version,
                if servers.is_empty() {
                    "none started yet".to_owned()
                } else {
                    servers.join(", ")
                }
            )
        }
        Ownership::Nobody => {
            "no owner; the next process that queries a server publishes its own".to_owned()
        }
        Ownership::Stale(socket) => format!(
            "no owner; {} was left by one that is gone, and the next owner replaces it",
            socket.display()
        ),
        Ownership::Silent(why) => format!("its owner holds the lock but does not answer ({why})"),
        Ownership::Unshared(why) => format!("not shared: {why}"),
    }
}
