//! Presets as assemblies of registry entries, through the real binary: a preset made of plugin
//! names runs with exactly those plugins, and a preset naming an unknown plugin or key is refused
//! before anything runs, with the file, the line and the key.

use std::path::{Path, PathBuf};

use agent_lsp::session::event::{EventBody, EventKind};
use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, Reply};

type Fixture = agent_tests::cli::CliFixture;

fn fixture() -> Fixture {
    Fixture::new("").with_files(&[("notes.txt", "hello\n")])
}

fn write_preset(fixture: &Fixture, name: &str, text: &str) -> PathBuf {
    let path = fixture.state.path().join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

const HEAD: &str = "description = \"assembled\"\n[model]\nmax_steps = 4\ncontext_window = 64000\n[tools]\nenabled = [\"read\", \"recall_history\"]\n[permissions]\ndefault = \"allow\"\n";

fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|line| line.starts_with(needle))
        .unwrap()
        + 1
}

fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn a_preset_made_of_plugin_names_runs_with_exactly_those_plugins() {
    let fixture = fixture();
    let text = format!(
        "{HEAD}[plugins.runtime_context]\nenabled = true\n[plugins.compaction]\nenabled = true\nsummarizer = \"template\"\n"
    );
    let preset = write_preset(&fixture, "assembled", &text);
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    endpoint.push(Reply::from_fn(|request| {
        let tools = request.tool_names();
        // `recall_history` came with the compaction plugin.
        assert_eq!(tools, ["read", "recall_history"], "{tools:?}");
        Reply::text("done")
    }));
    let output = fixture.run(&[
        "run",
        "--preset",
        path_str(&preset),
        "--base-url",
        &endpoint.base_url(),
        "say done",
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    endpoint.assert_no_violations();
    let store = fixture.store();
    let history = store.load("last").unwrap();
    assert_eq!(history.header().unwrap().preset, "assembled");
    // The environment plugin injected its runtime context once.
    let runtime = history
        .events()
        .iter()
        .filter(|event| event.kind() == EventKind::RuntimeContext)
        .count();
    assert_eq!(runtime, 1);

    // Without the runtime-context table, nothing is injected: the loop builds no plugin itself.
    let bare = write_preset(
        &fixture,
        "bare",
        &format!("{HEAD}[plugins.compaction]\nenabled = true\n"),
    );
    endpoint.push(Reply::text("done"));
    let output = fixture.run(&[
        "run",
        "--preset",
        path_str(&bare),
        "--base-url",
        &endpoint.base_url(),
        "say done",
    ]);
    assert!(output.status.success());
    let ids = store.ids().unwrap();
    assert_eq!(ids.len(), 2);
    let history = ids
        .iter()
        .map(|id| store.load(id).unwrap())
        .find(|history| history.header().unwrap().preset == "bare")
        .expect("the session of the bare preset");
    assert!(
        !history
            .events()
            .iter()
            .any(|event| matches!(event.body, EventBody::RuntimeContext(_)))
    );
}

#[test]
fn an_unknown_plugin_or_key_is_refused_with_file_line_and_key_before_anything_runs() {
    let fixture = fixture();
    let cases = [
        (
            "unknown-plugin",
            format!("{HEAD}[plugins.memroy]\nenabled = true\n"),
            "[plugins.memroy]",
            "there is no plugin named `memroy`",
        ),
        (
            "unknown-key",
            format!("{HEAD}[plugins.compaction]\nenabled = true\nsoft_ration = 0.5\n"),
            "soft_ration",
            "[plugins.compaction] `soft_ration`: unknown field `soft_ration`",
        ),
        (
            "bad-value",
            format!("{HEAD}[plugins.compaction]\nenabled = true\nhard_ratio = 1.5\n"),
            "hard_ratio",
            "[plugins.compaction] `soft_ratio`: and hard_ratio need 0 < soft_ratio <= hard_ratio <= 1",
        ),
    ];
    for (name, text, at, message) in cases {
        let preset = write_preset(&fixture, name, &text);
        let line = match name {
            // A range check names the first key of the pair; the line is that key's (absent:
            // the table's).
            "bad-value" => line_of(&text, "[plugins.compaction]"),
            _ => line_of(&text, at),
        };
        let expected = format!("preset {}, line {line}: ", preset.display());
        for args in [
            vec![
                "run",
                "--preset",
                path_str(&preset),
                "--base-url",
                "http://127.0.0.1:9",
                "hi",
            ],
            vec!["tool", "--list", "--preset", path_str(&preset)],
        ] {
            let output = fixture.run(&args);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(1), "{name} {args:?}: {stderr}");
            assert!(
                stderr.contains(&expected) && stderr.contains(message),
                "{name} {args:?}: expected `{expected}` … `{message}` in {stderr}"
            );
        }
    }
    // Nothing ran: no session was made for any of them.
    assert!(fixture.store().ids().unwrap().is_empty());
}
