//! Skills through the real binary: the user's and the workspace's skill folders with a
//! duplicate name, a bad front matter and a folder that links out; the model's request lists
//! the good skills only; the model loads a skill and reads its file, is refused a link out of
//! the skill's folder and a write into it; a resumed session keeps its section while the
//! folders change; and `agent-lsp skills list --json` reports what was skipped and why, with
//! the files.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use agent_tests::model_endpoint::{EndpointConfig, ModelEndpoint, Reply};
use serde_json::{Value, json};

type Fixture = agent_tests::cli::CliFixture;

fn skill_md(name: &str, description: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\nlicense: MIT\n---\n{body}\n")
}

/// The user's skills (beside the config file, in the state directory): `review` and `pdf`,
/// whose folder has a reference file and a link to a secret outside it. The workspace's:
/// another `review`, a good `deploy`, a `broken` one and a `stolen` folder that links out.
fn fixture(outside: &Path) -> (Fixture, PathBuf) {
    let fixture = Fixture::new("").with_files(&[
        ("README.md", "# demo\n"),
        (
            ".agent-lsp/skills/review/SKILL.md",
            &skill_md(
                "review",
                "Review code, the repo's way.",
                "Approve everything.",
            ),
        ),
        (
            ".agent-lsp/skills/deploy/SKILL.md",
            &skill_md("deploy", "Deploy the service.", "Run the deploy script."),
        ),
        (
            ".agent-lsp/skills/broken/SKILL.md",
            "---\nname: broken\ndescription: [never closed\n---\nBody.\n",
        ),
    ]);
    let user = fixture.state.path().canonicalize().unwrap().join("skills");
    agent_tests::write_tree(
        &user,
        &[
            (
                "review/SKILL.md",
                &skill_md("review", "Review code, the user's way.", "Be kind."),
            ),
            (
                "pdf/SKILL.md",
                &skill_md(
                    "pdf",
                    "Fill in PDF forms.",
                    "Look up the field names in forms/fields.md first.",
                ),
            ),
            ("pdf/forms/fields.md", "name, date, signature\n"),
        ],
    );
    std::fs::write(outside.join("secret.txt"), "the secret\n").unwrap();
    symlink(outside.join("secret.txt"), user.join("pdf/escape")).unwrap();
    std::fs::create_dir_all(outside.join("stolen")).unwrap();
    std::fs::write(
        outside.join("stolen/SKILL.md"),
        skill_md("stolen", "Not from here.", "x"),
    )
    .unwrap();
    symlink(
        outside.join("stolen"),
        fixture.workspace.path().join(".agent-lsp/skills/stolen"),
    )
    .unwrap();
    (fixture, user)
}

#[test]
fn the_model_gets_the_good_skills_loads_one_and_reads_only_its_files() {
    let outside = tempfile::tempdir().unwrap();
    let outside_path = outside.path().canonicalize().unwrap();
    let (fixture, user) = fixture(&outside_path);
    let folder = user.join("pdf");
    let fields = folder.join("forms/fields.md").display().to_string();
    let escape = folder.join("escape").display().to_string();
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();
    let (fields_arg, escape_arg) = (fields.clone(), escape.clone());
    let expected_folder = folder.display().to_string();
    endpoint.push_all([
        Reply::from_fn(|request| {
            let system = request.system_text().unwrap();
            let start = system.find("# Skills\n").expect("a skills section");
            let section = &system[start..];
            assert!(
                section.ends_with(
                    "\n\n- deploy: Deploy the service.\n- pdf: Fill in PDF forms.\n- review: Review code, the user's way."
                ),
                "{section}"
            );
            assert!(!system.contains("repo's way") && !system.contains("broken"));
            assert!(!system.contains("stolen"), "{system}");
            assert!(request.tool_names().contains(&"skill".to_owned()));
            Reply::tool_call("skill", r#"{"name":"pdf"}"#)
        }),
        Reply::from_fn(move |request| {
            let result = request.tool_result_text();
            assert!(
                result.starts_with(&format!(
                    "<skill name=\"pdf\" folder=\"{expected_folder}\">\nLook up the field names in forms/fields.md first.\n</skill>"
                )),
                "{result}"
            );
            assert!(result.ends_with(&format!("\n- {fields_arg}")), "{result}");
            Reply::tool_call("read", json!({"path": fields_arg}).to_string())
        }),
        Reply::from_fn(move |request| {
            let result = request.tool_result_text();
            assert!(result.contains("name, date, signature"), "{result}");
            Reply::tool_call("read", json!({"path": escape_arg}).to_string())
        }),
        Reply::from_fn(move |request| {
            let result = request.tool_result_text();
            assert!(
                result.starts_with("error: path refused:")
                    && result.contains("a folder this session may only read")
                    && result.contains("symlink `escape`"),
                "{result}"
            );
            assert!(!result.contains("the secret"));
            Reply::tool_call(
                "write",
                json!({"path": fields, "content": "changed\n"}).to_string(),
            )
        }),
        Reply::from_fn(|request| {
            let result = request.tool_result_text();
            assert!(
                result.starts_with("error: path refused:")
                    && result.contains("outside the workspace root"),
                "{result}"
            );
            Reply::text("done")
        }),
    ]);
    let base_url = endpoint.base_url();
    fixture.ok(&["run", "--base-url", &base_url, "fill in the form"]);
    assert_eq!(
        std::fs::read_to_string(folder.join("forms/fields.md")).unwrap(),
        "name, date, signature\n"
    );

    // The folders change; the resumed session keeps its section byte for byte.
    agent_tests::write_tree(
        &user,
        &[("late/SKILL.md", &skill_md("late", "Added later.", "x"))],
    );
    endpoint.push_all([Reply::from_fn(|request| {
        assert!(!request.system_text().unwrap().contains("late"));
        Reply::text("again")
    })]);
    fixture.ok(&["run", "--session", "last", "--base-url", &base_url, "again"]);
    endpoint.assert_no_violations();
    assert_eq!(endpoint.remaining_replies(), 0);
    let requests = endpoint.chat_requests();
    let system = |index: usize| requests[index].body.as_ref().unwrap()["messages"][0].clone();
    assert!((1..requests.len()).all(|index| system(index) == system(0)));
    std::fs::remove_dir_all(user.join("late")).unwrap();

    // The terminal's view: the good ones, and the others with why and which files.
    let listed: Value = serde_json::from_str(&fixture.ok(&["skills", "list", "--json"])).unwrap();
    assert_eq!(listed["enabled"], true);
    let names = listed["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|skill| {
            (
                skill["name"].as_str().unwrap(),
                skill["origin"].as_str().unwrap(),
            )
        })
        .collect::<Vec<_>>();
    assert_eq!(
        names,
        [("deploy", "workspace"), ("pdf", "user"), ("review", "user")]
    );
    let skills_dir = fixture
        .workspace
        .path()
        .canonicalize()
        .unwrap()
        .join(".agent-lsp/skills");
    let reason = |path: &Path| {
        let skipped = listed["skipped"].as_array().unwrap();
        let found = skipped
            .iter()
            .find(|skip| skip["path"] == path.display().to_string())
            .unwrap_or_else(|| panic!("{} not in {skipped:#?}", path.display()));
        found["reason"].as_str().unwrap().to_owned()
    };
    let shadowed = reason(&skills_dir.join("review/SKILL.md"));
    assert!(
        shadowed.contains("shadowed: the name `review` belongs to")
            && shadowed.contains(&user.join("review/SKILL.md").display().to_string()),
        "{shadowed}"
    );
    let broken_file = skills_dir.join("broken/SKILL.md");
    let broken = reason(&broken_file);
    assert!(
        broken.starts_with(&format!(
            "{}: its front matter is not valid YAML",
            broken_file.display()
        )) && broken.ends_with("expected ',' or ']' (line 4, column 1)"),
        "{broken}"
    );
    let stolen = reason(&skills_dir.join("stolen"));
    assert!(stolen.contains("the skill folder is a link to"), "{stolen}");
    assert_eq!(listed["skipped"].as_array().unwrap().len(), 3);

    let text = fixture.ok(&["skills", "list"]);
    assert!(
        text.starts_with("deploy  workspace  Deploy the service.\n"),
        "{text}"
    );
    assert!(text.contains("\nskipped:\n  "), "{text}");
}
