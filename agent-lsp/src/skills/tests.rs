//! Tests of skills: the front matter, the folders and their rules, the section and its record,
//! and the `skill` tool with the `read` it opens.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::front_matter::{check_name, parse};
use super::plugin::{Known, RecordedSkills, SkillsPlugin};
use super::tool::SkillTool;
use super::*;
use crate::context::system_prompt::SystemPrompt;
use crate::plugin::Plugin;
use crate::plugin::state as plugin_state;
use crate::plugin::tool::Tool;
use crate::session::Session;
use crate::session::event::SessionHeader;
use crate::session::log::Durability;

fn skill_md(name: &str, description: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n")
}

#[track_caller]
fn check_error(text: &str, expected: &str) {
    let error = parse(text).unwrap_err();
    assert!(error.contains(expected), "`{error}` lacks `{expected}`");
}

#[test]
fn front_matter_takes_name_and_description_and_ignores_other_keys() {
    let text = "\u{feff}---\r\nname: pdf-forms\r\nlicense: MIT\r\nallowed-tools: [read, shell]\r\ndescription: >\r\n  Fill in PDF\r\n  forms.\r\nmetadata:\r\n  version: 2\r\n---\r\n\r\n# Steps\r\n\r\nRun it.\r\n";
    let front = parse(text).unwrap();
    assert_eq!(front.name, "pdf-forms");
    assert_eq!(front.description, "Fill in PDF forms.");
    assert_eq!(front.body, "# Steps\r\n\r\nRun it.");
    let front = parse(&skill_md("x_1", "\"Quoted: yes\"", "")).unwrap();
    assert_eq!(
        (front.description.as_str(), front.body.as_str()),
        ("Quoted: yes", "")
    );
}

#[test]
fn bad_front_matter_says_what_and_where() {
    check_error("# Just markdown\n", "does not start with front matter");
    check_error("---\nname: a\ndescription: b\n", "no closing `---`");
    check_error(
        "---\nname: a\ndescription: [unclosed\n---\n",
        "not valid YAML",
    );
    // The line is the file's: `description` is on line 3.
    let error = parse("---\nname: a\ndescription: \"open\n---\n").unwrap_err();
    assert!(error.ends_with("(line 3, column 14)"), "{error}");
    // A colon in a description is the usual slip: the error says to quote it.
    check_error(
        "---\nname: a\ndescription: Release: bump, tag\n---\n",
        "needs quotes",
    );
    check_error("---\n- a\n- b\n---\n", "not a mapping");
    check_error("---\ndescription: b\n---\n", "has no `name`");
    check_error("---\nname: a\n---\n", "has no `description`");
    check_error(
        "---\nname: 12\ndescription: b\n---\n",
        "`name` in its front matter is not a string",
    );
    check_error(
        &skill_md("Bad Name", "b", ""),
        "the name `Bad Name` is not 1 to 64",
    );
    check_error(&skill_md("-a", "b", ""), "the name `-a`");
    check_error(
        &skill_md("a", "''", ""),
        "`description` in its front matter is empty",
    );
    check_error(
        &skill_md("a", &"d".repeat(1025), ""),
        "has 1025 characters; at most 1024",
    );
    assert!(check_name(&"a".repeat(64)).is_ok());
    assert!(check_name(&"a".repeat(65)).is_err());
}

/// A user folder, an extra folder, a workspace and a place outside all of them.
struct World {
    tmp: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        let world = World {
            tmp: tempfile::tempdir().unwrap(),
        };
        for dir in ["user/skills", "extra", "ws/.agent-lsp/skills", "outside"] {
            std::fs::create_dir_all(world.path(dir)).unwrap();
        }
        world
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.tmp.path().canonicalize().unwrap().join(relative)
    }

    fn file(&self, relative: &str, text: &str) {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn skill(&self, folder: &str, name: &str, description: &str) {
        self.file(
            &format!("{folder}/SKILL.md"),
            &skill_md(name, description, &format!("Instructions of {name}.")),
        );
    }

    fn roots(&self) -> Roots {
        Roots {
            user: Some(self.path("user/skills")),
            extra: vec![self.path("extra")],
            workspace: self.path("ws"),
            max_skills: 100,
        }
    }
}

fn names(found: &Found) -> Vec<&str> {
    found
        .skills
        .iter()
        .map(|skill| skill.name.as_str())
        .collect()
}

/// The reason of the skip about `path`.
#[track_caller]
fn reason(found: &Found, path: &Path) -> String {
    let skips = found
        .skipped
        .iter()
        .filter(|skip| skip.path == path)
        .collect::<Vec<_>>();
    assert_eq!(skips.len(), 1, "{path:?} in {:#?}", found.skipped);
    skips[0].reason.clone()
}

#[test]
fn the_first_folder_owns_a_name_and_the_others_are_reported() {
    let world = World::new();
    world.skill(
        "user/skills/review",
        "review",
        "Review code, the user's way.",
    );
    world.skill(
        "ws/.agent-lsp/skills/review",
        "review",
        "Review code, the repo's way.",
    );
    world.skill(
        "ws/.agent-lsp/skills/deploy",
        "deploy",
        "Deploy the service.",
    );
    world.skill("extra/pdf", "pdf", "Fill in PDF forms.");
    // Same folder, same name: neither loads.
    world.skill("extra/twin-a", "twin", "One.");
    world.skill("extra/twin-b", "twin", "Two.");
    world.file(
        "extra/broken/SKILL.md",
        "---\nname: broken\ndescription: [\n---\n",
    );
    world.file("extra/empty/notes.md", "no SKILL.md here");
    world.file("extra/README.md", "a file beside the skills is not a skill");
    world.skill("extra/.hidden", "hidden", "Not looked at.");

    let found = discover(&world.roots());
    assert_eq!(names(&found), ["deploy", "pdf", "review"]);
    let review = &found.skills[2];
    assert_eq!(review.origin, Origin::User);
    assert_eq!(review.description, "Review code, the user's way.");
    assert_eq!(review.folder, world.path("user/skills/review"));

    let shadowed = reason(&found, &world.path("ws/.agent-lsp/skills/review/SKILL.md"));
    assert!(
        shadowed.contains("shadowed: the name `review` belongs to")
            && shadowed.contains(
                &world
                    .path("user/skills/review/SKILL.md")
                    .display()
                    .to_string()
            ),
        "{shadowed}"
    );
    let twin_a = world.path("extra/twin-a/SKILL.md");
    let twin_b = world.path("extra/twin-b/SKILL.md");
    let twin = reason(&found, &twin_a);
    assert!(
        twin.contains("the name `twin` is also the name of")
            && twin.contains(&twin_b.display().to_string())
            && twin.contains("neither is loaded"),
        "{twin}"
    );
    assert!(reason(&found, &twin_b).contains(&twin_a.display().to_string()));
    let broken = reason(&found, &world.path("extra/broken/SKILL.md"));
    assert!(
        broken.starts_with(&format!(
            "{}: ",
            world.path("extra/broken/SKILL.md").display()
        )) && broken.contains("not valid YAML"),
        "{broken}"
    );
    assert!(reason(&found, &world.path("extra/empty/SKILL.md")).contains("has no SKILL.md"));
    assert_eq!(found.skipped.len(), 5, "{:#?}", found.skipped);

    let capped = discover(&Roots {
        max_skills: 2,
        ..world.roots()
    });
    // Precedence order: the user's, then the extra folder's, then the workspace's.
    assert_eq!(names(&capped), ["pdf", "review"]);
    assert!(
        reason(&capped, &world.path("ws/.agent-lsp/skills/deploy/SKILL.md"))
            .contains("max_skills (2)")
    );
}

#[test]
fn links_out_of_a_skills_folder_or_a_skill_folder_are_refused() {
    let world = World::new();
    world.skill("outside/stolen", "stolen", "Lives elsewhere.");
    world.file(
        "outside/SKILL.md",
        &skill_md("linked", "A linked file.", "x"),
    );
    world.skill("user/skills/good", "good", "Stays.");
    symlink(
        world.path("outside/stolen"),
        world.path("user/skills/stolen"),
    )
    .unwrap();
    std::fs::create_dir_all(world.path("user/skills/linked")).unwrap();
    symlink(
        world.path("outside/SKILL.md"),
        world.path("user/skills/linked/SKILL.md"),
    )
    .unwrap();
    symlink(
        world.path("outside/missing"),
        world.path("user/skills/dangling"),
    )
    .unwrap();
    // A link inside the skills folder is fine.
    symlink("good", world.path("user/skills/alias")).unwrap();

    let found = discover(&world.roots());
    let out = reason(&found, &world.path("user/skills/stolen"));
    assert!(
        out.contains("the skill folder is a link to") && out.contains("outside"),
        "{out}"
    );
    let linked = reason(&found, &world.path("user/skills/linked/SKILL.md"));
    assert!(
        linked.contains("symlink `SKILL.md`, which points outside"),
        "{linked}"
    );
    assert!(reason(&found, &world.path("user/skills/dangling")).contains("does not exist"));
    // `alias` is `good` again, not a second skill of the same name.
    assert_eq!(names(&found), ["good"]);
    assert_eq!(found.skills[0].folder, world.path("user/skills/good"));
    assert_eq!(found.skipped.len(), 3, "{:#?}", found.skipped);

    // The workspace's skills folder must be inside the workspace.
    std::fs::remove_dir_all(world.path("ws/.agent-lsp/skills")).unwrap();
    symlink(
        world.path("user/skills"),
        world.path("ws/.agent-lsp/skills"),
    )
    .unwrap();
    let found = discover(&Roots {
        user: None,
        extra: Vec::new(),
        ..world.roots()
    });
    assert!(found.skills.is_empty());
    let refused = reason(&found, &world.path("ws/.agent-lsp/skills"));
    assert!(
        refused.contains("the workspace's skills folder is not used"),
        "{refused}"
    );
}

#[test]
fn settings_are_checked_and_home_is_expanded() {
    let table = |text: &str| crate::plugin::registry::PluginTable {
        name: PLUGIN.into(),
        line: 3,
        key_lines: Default::default(),
        table: toml::from_str(text).unwrap(),
    };
    let error = |text: &str| {
        table(text)
            .settings::<SkillsSettings>("p.toml")
            .unwrap_err()
            .to_string()
    };
    assert!(
        error("enabled = true\nextra_dirs = [\"skills\"]")
            .contains("neither absolute nor under `~/`")
    );
    assert!(error("enabled = true\nmax_skills = 0").contains("`max_skills`: must be at least 1"));
    assert!(error("enabled = true\nmax_body_bytes = 10").contains("at least 1024"));
    assert!(error("enabled = true\ndirs = []").contains("unknown field `dirs`"));
    let settings = table("enabled = true\nextra_dirs = [\"~/.claude/skills\", \"/opt/skills\"]")
        .settings::<SkillsSettings>("p.toml")
        .unwrap();
    let home = dirs::home_dir().unwrap();
    assert_eq!(
        settings.extra_paths(),
        [home.join(".claude/skills"), PathBuf::from("/opt/skills")]
    );
    assert_eq!(settings.max_skills, SkillsSettings::defaults().max_skills);
}

fn session(dir: &Path, id: &str) -> Session {
    let path = dir.join(format!("{id}.jsonl"));
    Session::create(
        &path,
        SessionHeader::for_test(id, "standard"),
        Durability::Sync,
    )
    .unwrap()
}

fn system(plugin: &mut SkillsPlugin, session: &mut Session, turn: u32) -> String {
    let mut prompt = SystemPrompt::default();
    prompt.section("base", 0, "Base.");
    plugin.contribute(&mut prompt, session, turn).unwrap();
    prompt.assemble().unwrap().system
}

#[test]
fn the_section_is_recorded_once_and_stays_while_the_folders_change() {
    let world = World::new();
    world.skill("user/skills/zeta", "zeta", "Last by name.");
    world.skill("ws/.agent-lsp/skills/alpha", "alpha", "First by name.");
    let mut plugin = SkillsPlugin::new(world.roots(), Known::default());
    let mut first = session(world.tmp.path(), "s1");
    let text = system(&mut plugin, &mut first, 1);
    let section = text.strip_prefix("Base.\n\n").unwrap();
    assert!(section.starts_with("# Skills\n\n"), "{section}");
    assert!(
        section.ends_with("\n\n- alpha: First by name.\n- zeta: Last by name."),
        "{section}"
    );

    world.skill("user/skills/beta", "beta", "Added later.");
    std::fs::remove_dir_all(world.path("user/skills/zeta")).unwrap();
    assert_eq!(system(&mut plugin, &mut first, 2), text);
    let path = first.path().to_owned();
    drop(first);
    let mut resumed = Session::open(&path, Durability::Sync).unwrap();
    let mut fresh = SkillsPlugin::new(world.roots(), Known::default());
    assert_eq!(system(&mut fresh, &mut resumed, 3), text);
    let records = plugin_state::records(resumed.history(), PLUGIN).collect::<Vec<_>>();
    assert_eq!(records.len(), 1, "recorded once");
    let recorded: RecordedSkills = serde_json::from_value(records[0].1.clone()).unwrap();
    assert_eq!(recorded.digest, Some(crate::canonical::sha256_hex(section)));
    assert_eq!(recorded.skills.len(), 2);

    // A new session sees the folders as they are now.
    let mut next = session(world.tmp.path(), "s2");
    let text = system(&mut fresh, &mut next, 1);
    assert!(
        text.contains("- beta: Added later.") && !text.contains("zeta"),
        "{text}"
    );

    // Without skills, no section, and that is recorded too.
    let empty = World::new();
    let mut plugin = SkillsPlugin::new(empty.roots(), Known::default());
    let mut session = session(empty.tmp.path(), "s3");
    assert_eq!(system(&mut plugin, &mut session, 1), "Base.");
    assert_eq!(plugin_state::records(session.history(), PLUGIN).count(), 1);
}

#[tokio::test]
async fn the_tool_loads_a_skill_and_read_opens_its_files_only_there() {
    let fx = crate::tools::testing::Fixture::new();
    let world = World::new();
    world.skill("user/skills/pdf", "pdf", "Fill in PDF forms.");
    world.file("user/skills/pdf/scripts/fill.py", "print('fill')\n");
    world.file("user/skills/pdf/reference.md", "Field names.\n");
    symlink(world.path("outside"), world.path("user/skills/pdf/escape")).unwrap();
    world.file("outside/secret.txt", "secret\n");
    let roots = Roots {
        workspace: fx.root().to_owned(),
        ..world.roots()
    };
    let known = Known::default();
    let tool = SkillTool::new(roots.clone(), known.clone(), 1024);
    let mut ctx = fx.context();
    ctx.session_id = Some("s1".into());

    let output = tool.run(ctx.clone(), json!({"name": "nope"}).into()).await;
    assert!(output.is_error);
    assert!(
        output
            .text
            .contains("no skill is named `nope`; the skills of this session are `pdf`"),
        "{}",
        output.text
    );

    let folder = world.path("user/skills/pdf");
    let output = tool.run(ctx.clone(), json!({"name": "pdf"}).into()).await;
    assert!(!output.is_error, "{}", output.text);
    assert!(
        output.text.starts_with(&format!(
            "<skill name=\"pdf\" folder=\"{}\">\nInstructions of pdf.\n</skill>\n",
            folder.display()
        )),
        "{}",
        output.text
    );
    let listed = format!(
        "\n- {}\n- {}",
        folder.join("reference.md").display(),
        folder.join("scripts/fill.py").display()
    );
    assert!(output.text.ends_with(&listed), "{}", output.text);

    let read = crate::tools::fs::Read;
    let file = folder.join("scripts/fill.py").display().to_string();
    let output = read.run(ctx.clone(), json!({"path": file}).into()).await;
    assert!(
        !output.is_error && output.text.contains("print('fill')"),
        "{}",
        output.text
    );
    let escape = format!("{}/escape/secret.txt", folder.display());
    let output = read.run(ctx.clone(), json!({"path": escape}).into()).await;
    assert!(
        output.is_error && output.text.contains("may only read"),
        "{}",
        output.text
    );
    // Another session has not loaded it.
    let mut other = ctx.clone();
    other.session_id = Some("s2".into());
    let output = read.run(other, json!({"path": file}).into()).await;
    assert!(
        output.is_error && output.text.contains("outside the workspace root"),
        "{}",
        output.text
    );

    // A session the plugin recorded loads from its record, not from the folders.
    known_record(&known, "s3", Vec::new());
    let mut third = ctx.clone();
    third.session_id = Some("s3".into());
    let output = tool.run(third, json!({"name": "pdf"}).into()).await;
    assert!(
        output.text.contains("this session has no skills"),
        "{}",
        output.text
    );

    // Long instructions are cut, and say how to read the rest.
    world.skill("user/skills/long", "long", &"x".repeat(10));
    world.file(
        "user/skills/long/SKILL.md",
        &skill_md("long", "Long.", &"é".repeat(1000)),
    );
    let output = tool.run(ctx, json!({"name": "long"}).into()).await;
    assert!(
        output
            .text
            .contains("[… cut: the instructions have 2000 bytes and only the first 1024"),
        "{}",
        output.text
    );
}

/// Record `skills` for `session` as the plugin does when it contributes.
fn known_record(known: &Known, session: &str, skills: Vec<Skill>) {
    let world = World::new();
    let mut plugin = SkillsPlugin::new(world.roots(), known.clone());
    let mut log = self::session(world.tmp.path(), session);
    system(&mut plugin, &mut log, 1);
    assert_eq!(known.get(session), Some(skills));
}
