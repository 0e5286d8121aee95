//! Each language server's capabilities as it last answered `initialize`, kept under the state
//! root (`<state>/servers/<name>/<version>.json`) so that the next `serve` can announce them to
//! an editor that reads capabilities at `initialize` only, before the server has started.
//!
//! The version is the server's `serverInfo.version` (`unknown` for a server that sends none,
//! such as pyright): an upgraded server records a file of its own, and the newest file of a
//! server is the one read, so a downgrade is seen at its next start too.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// Where the servers' capabilities live under the state root.
fn dir(state_root: &Path, name: &str) -> PathBuf {
    state_root.join("servers").join(file_name(name))
}

/// A name or version as a file name: anything but letters, digits, `.`, `-` and `_` becomes
/// `_`, so a version string such as clangd's (with spaces and `+`) or a configured name never
/// leaves the folder.
fn file_name(text: &str) -> String {
    let name: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    match name.trim_start_matches('.') {
        "" => "_".to_owned(),
        _ => name,
    }
}

/// Keep the capabilities of a server's `initialize` result, written only when they changed.
pub(super) fn record(
    state_root: &Path,
    name: &str,
    initialize_result: &Value,
) -> anyhow::Result<()> {
    use anyhow::Context;
    let capabilities = &initialize_result["capabilities"];
    if !capabilities.is_object() {
        return Ok(());
    }
    let version = initialize_result["serverInfo"]["version"]
        .as_str()
        .unwrap_or("unknown");
    let folder = dir(state_root, name);
    let path = folder.join(format!("{}.json", file_name(version)));
    let record = json!({"server": name, "version": version, "capabilities": capabilities});
    if read(&path).is_some_and(|seen| seen == *capabilities) {
        // Touched, so that it stays the newest of the server's records.
        let _ = std::fs::File::open(&path)
            .and_then(|file| file.set_modified(std::time::SystemTime::now()));
        return Ok(());
    }
    std::fs::create_dir_all(&folder)
        .with_context(|| format!("failed to create {}", folder.display()))?;
    crate::tools::fs::write_atomically(&path, &serde_json::to_vec_pretty(&record)?)
        .with_context(|| format!("failed to write {}", path.display()))
}

/// The capabilities a server announced when it last started, if it ever did here.
pub(super) fn load(state_root: &Path, name: &str) -> Option<Value> {
    let newest = std::fs::read_dir(dir(state_root, name))
        .ok()?
        .filter_map(Result::ok)
        .filter(|entry| entry.path().extension().is_some_and(|ext| ext == "json"))
        .filter_map(|entry| Some((entry.metadata().ok()?.modified().ok()?, entry.path())))
        .max()?;
    read(&newest.1)
}

/// The capabilities of one record (an unreadable file counts as none).
fn read(path: &Path) -> Option<Value> {
    let record: Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    let capabilities = record.get("capabilities")?;
    capabilities.is_object().then(|| capabilities.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_record_of_a_server_is_read_back() {
        let state = tempfile::tempdir().unwrap();
        assert_eq!(load(state.path(), "clangd"), None);
        let old = json!({"capabilities": {"hoverProvider": true}, "serverInfo": {"version": "clangd 14 linux+grpc"}});
        record(state.path(), "clangd", &old).unwrap();
        assert_eq!(
            load(state.path(), "clangd"),
            Some(json!({"hoverProvider": true}))
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
        let new = json!({"capabilities": {"definitionProvider": true}, "serverInfo": {"version": "clangd 19"}});
        record(state.path(), "clangd", &new).unwrap();
        assert_eq!(
            load(state.path(), "clangd"),
            Some(json!({"definitionProvider": true}))
        );
        // pyright sends no version; a name with a slash stays in its folder.
        record(
            state.path(),
            "../py right",
            &json!({"capabilities": {"renameProvider": true}}),
        )
        .unwrap();
        assert!(
            state
                .path()
                .join("servers/.._py_right/unknown.json")
                .is_file()
        );
        assert_eq!(
            load(state.path(), "../py right"),
            Some(json!({"renameProvider": true}))
        );
    }
}
