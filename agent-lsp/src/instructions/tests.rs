use super::*;
use crate::session::event::SessionHeader;
use crate::session::log::Durability;

struct Setup {
    workspace: tempfile::TempDir,
    user: tempfile::TempDir,
    logs: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        Setup {
            workspace: tempfile::tempdir().unwrap(),
            user: tempfile::tempdir().unwrap(),
            logs: tempfile::tempdir().unwrap(),
        }
    }

    fn write(&self, relative: &str, text: &str) {
        let path = self.workspace.path().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn plugin(&self, file_names: &[&str]) -> ProjectInstructions {
        let settings = InstructionsSettings {
            enabled: true,
            file_names: file_names.iter().map(|name| name.to_string()).collect(),
            max_bytes: 64,
        };
        ProjectInstructions::new(
            settings,
            self.workspace.path(),
            Some(self.user.path().to_owned()),
        )
    }

    fn session(&self) -> Session {
        let header = SessionHeader::for_test("s", "standard");
        Session::create(&self.logs.path().join("s.jsonl"), header, Durability::Sync).unwrap()
    }
}

fn system(plugin: &mut ProjectInstructions, session: &mut Session) -> String {
    let mut prompt = SystemPrompt::default();
    plugin.contribute(&mut prompt, session, 1).unwrap();
    prompt.assemble().unwrap().system
}

#[test]
fn root_and_user_files_are_sections_with_their_paths_and_stay_fixed_for_the_session() {
    let setup = Setup::new();
    setup.write("AGENTS.md", "Run `make check` before you finish.");
    setup.write("CLAUDE.md", "Prefer small diffs.");
    std::fs::write(setup.user.path().join("AGENTS.md"), "Answer briefly.").unwrap();
    let mut plugin = setup.plugin(&["AGENTS.md", "CLAUDE.md"]);
    let mut session = setup.session();
    let first = system(&mut plugin, &mut session);
    let user_path = setup.user.path().join("AGENTS.md").display().to_string();
    assert_eq!(
        first,
        format!(
            "# The user's instructions ({user_path})\n\nAnswer briefly.\n\n# Project instructions (AGENTS.md at the workspace root; a subfolder's own AGENTS.md adds to them for its files)\n\nRun `make check` before you finish.\n\n# Project instructions (CLAUDE.md at the workspace root; a subfolder's own CLAUDE.md adds to them for its files)\n\nPrefer small diffs."
        )
    );
    let mut prompt = SystemPrompt::default();
    plugin.contribute(&mut prompt, &mut session, 2).unwrap();
    let sources = prompt.assemble().unwrap().sections;
    assert_eq!(
        sources
            .iter()
            .map(|s| s.source.as_str())
            .collect::<Vec<_>>(),
        [user_path.as_str(), "AGENTS.md", "CLAUDE.md"]
    );

    // A change mid-session leaves the prompt as it was, also for a new process on the session.
    setup.write("AGENTS.md", "Run `make test` instead.");
    assert_eq!(system(&mut plugin, &mut session), first);
    let path = session.path().to_owned();
    drop(session);
    let mut session = Session::open(&path, Durability::Sync).unwrap();
    let mut fresh = setup.plugin(&["AGENTS.md", "CLAUDE.md"]);
    assert_eq!(system(&mut fresh, &mut session), first);
    let states = session
        .history()
        .events()
        .iter()
        .filter(|event| matches!(event.body, EventBody::PluginState(_)))
        .count();
    assert_eq!(states, 1, "recorded once");
}

#[test]
fn a_change_is_announced_once_and_a_revert_once_more() {
    let setup = Setup::new();
    setup.write("AGENTS.md", "one");
    let mut plugin = setup.plugin(&["AGENTS.md"]);
    let mut session = setup.session();
    system(&mut plugin, &mut session);
    let project = |plugin: &mut ProjectInstructions, session: &mut Session| {
        let mut appended = Vec::new();
        for contribution in plugin.runtime_contexts(session.history()).unwrap() {
            let seq = RuntimeContextProjection::project_from(
                session,
                1,
                1,
                contribution.source.as_deref(),
                &contribution.facts,
                contribution.text.clone(),
            )
            .unwrap();
            appended.extend(seq.map(|_| contribution.text));
        }
        appended
    };
    assert!(project(&mut plugin, &mut session).is_empty());
    setup.write("AGENTS.md", "two");
    assert_eq!(
        project(&mut plugin, &mut session),
        [
            "<project-instructions path=\"AGENTS.md\">\nThe workspace's AGENTS.md changed during this session. Its current text replaces the one in the system prompt:\n\ntwo\n</project-instructions>"
        ]
    );
    assert!(project(&mut plugin, &mut session).is_empty());
    setup.write("AGENTS.md", "one");
    assert_eq!(
        project(&mut plugin, &mut session),
        [
            "<project-instructions path=\"AGENTS.md\">\nThe workspace's AGENTS.md is back to the text in the system prompt; follow that text again.\n</project-instructions>"
        ]
    );
    assert!(project(&mut plugin, &mut session).is_empty());
    std::fs::remove_file(setup.workspace.path().join("AGENTS.md")).unwrap();
    assert_eq!(project(&mut plugin, &mut session).len(), 1);
}

#[test]
fn long_files_are_cut_and_links_out_of_the_workspace_are_not_read() {
    let setup = Setup::new();
    setup.write("AGENTS.md", &"é".repeat(40));
    let mut plugin = setup.plugin(&["AGENTS.md"]);
    let mut session = setup.session();
    let text = system(&mut plugin, &mut session);
    assert!(
        text.ends_with(&format!(
            "{}\n[… cut: the file has 80 bytes and only the first 64 are used]",
            "é".repeat(32)
        )),
        "{text}"
    );

    let setup = Setup::new();
    let secret = setup.user.path().join("id_rsa");
    std::fs::write(&secret, "PRIVATE KEY").unwrap();
    std::os::unix::fs::symlink(&secret, setup.workspace.path().join("AGENTS.md")).unwrap();
    let mut plugin = setup.plugin(&["AGENTS.md"]);
    let mut session = setup.session();
    assert_eq!(system(&mut plugin, &mut session), "");
}

#[test]
fn file_names_must_be_plain_names() {
    for bad in [
        vec![],
        vec!["../AGENTS.md"],
        vec!["docs/AGENTS.md"],
        vec![""],
    ] {
        let settings = InstructionsSettings {
            enabled: true,
            file_names: bad.iter().map(|name| name.to_string()).collect(),
            max_bytes: 10,
        };
        assert_eq!(settings.validate().unwrap_err().key, "file_names");
    }
}
