//! Tests of `@path` quoting, parsing, completion data and resolution.

use proptest::prelude::*;

use super::*;
use crate::file_index::entry::{insert_text, mention_spelling};
use crate::file_index::tests::Fixture;

/// Odd names a workspace can hold, and what completion must insert for each.
const ODD_NAMES: &[(&str, EntryKind, &str)] = &[
    ("src/main.rs", EntryKind::File, "@src/main.rs"),
    ("src", EntryKind::Directory, "@src/"),
    (
        "name with spaces.md",
        EntryKind::File,
        "@\"name with spaces.md\"",
    ),
    ("tab\there", EntryKind::File, "@\"tab\there\""),
    ("quote\"d.md", EntryKind::File, "@\"quote\\\"d.md\""),
    ("back\\slash", EntryKind::File, "@\"back\\\\slash\""),
    ("\"", EntryKind::File, "@\"\\\"\""),
    ("ünïcødé/文件.rs", EntryKind::File, "@ünïcødé/文件.rs"),
    ("emoji 🎉/x", EntryKind::Directory, "@\"emoji 🎉/x/\""),
    ("@scope/pkg", EntryKind::Directory, "@\"@scope/pkg/\""),
    ("a@b.rs", EntryKind::File, "@a@b.rs"),
    ("ends.", EntryKind::File, "@\"ends.\""),
    ("notes(1)", EntryKind::File, "@\"notes(1)\""),
    ("(paren", EntryKind::File, "@(paren"),
    ("~tilde", EntryKind::File, "@./~tilde"),
    ("c:/drive.txt", EntryKind::File, "@./c:/drive.txt"),
    (
        "dir with space",
        EntryKind::Directory,
        "@\"dir with space/\"",
    ),
    ("new\nline", EntryKind::File, "@\"new\nline\""),
    ("bell\u{7}", EntryKind::File, "@\"bell\u{7}\""),
    ("'single'", EntryKind::File, "@\"'single'\""),
];

#[test]
fn completion_inserts_a_mention_that_parses_back_to_the_path() {
    for (path, kind, expected) in ODD_NAMES {
        let inserted = insert_text(path, *kind);
        assert_eq!(&inserted, expected, "{path:?}");
        let prompt = format!("look at {inserted}, then fix it");
        let mentions = parse_mentions(&prompt);
        assert_eq!(mentions.len(), 1, "{prompt:?}: {mentions:?}");
        let parsed = mentions[0].path.clone().unwrap();
        let mut want = mention_spelling(path).into_owned();
        if *kind == EntryKind::Directory {
            want.push('/');
        }
        assert_eq!(parsed, want, "{prompt:?}");
        assert_eq!(&prompt[mentions[0].span.clone()], inserted, "{prompt:?}");
    }
}

proptest! {
    #[test]
    fn any_path_round_trips_through_completion(path in "[^\u{0}]{1,40}", dir in any::<bool>()) {
        let kind = if dir { EntryKind::Directory } else { EntryKind::File };
        let inserted = insert_text(&path, kind);
        let prompt = format!("see {inserted}. next");
        let mentions = parse_mentions(&prompt);
        prop_assert_eq!(mentions.len(), 1);
        let mut want = mention_spelling(&path).into_owned();
        if dir && !want.ends_with('/') {
            want.push('/');
        }
        prop_assert_eq!(mentions[0].path.clone().unwrap(), want);
    }
}

/// Parse `text` and compare the mentions' paths (`Err` shown as `!error`).
#[track_caller]
fn check_parse(text: &str, expected: &[&str]) {
    let found: Vec<String> = parse_mentions(text)
        .into_iter()
        .map(|mention| match mention.path {
            Ok(path) => path,
            Err(error) => format!("!{error}"),
        })
        .collect();
    assert_eq!(found, expected, "{text:?}");
}

#[test]
fn mentions_are_found_where_a_person_would_see_them() {
    check_parse("@a.rs", &["a.rs"]);
    check_parse("fix @src/main.rs.", &["src/main.rs"]);
    check_parse("(see @src/lib.rs), and @docs/", &["src/lib.rs", "docs/"]);
    check_parse("compare @a.rs, @b.rs; @c.rs!", &["a.rs", "b.rs", "c.rs"]);
    check_parse("mail me@example.com or x@y", &[]);
    check_parse("`@code.rs` and \"@quoted.rs\"", &["code.rs", "quoted.rs"]);
    check_parse(
        "@\"with space.md\" then @plain",
        &["with space.md", "plain"],
    );
    check_parse("@\"esc \\\"q\\\" \\\\ \\n\"", &["esc \"q\" \\ \\n"]);
    check_parse(
        "@\"never closed",
        &["!the quoted mention has no closing `\"`"],
    );
    check_parse("@@scope/pkg", &["@scope/pkg"]);
    check_parse("@ alone, @. and @, are not mentions", &[]);
    check_parse("@.. and @../x and @...", &["..", "../x", "..."]);
    check_parse("line1\n@next/line.rs\n", &["next/line.rs"]);
    check_parse("@a.rs@b.rs", &["a.rs@b.rs"]);
}

#[track_caller]
fn check_at(line: &str, expected: Option<(&str, &str)>) {
    let cursor = line.find('|').expect("a | marks the cursor");
    let line = line.replace('|', "");
    let found = bare_mention_at(&line, cursor).map(|m| (m.typed, m.query));
    let expected = expected.map(|(typed, query)| (typed.to_owned(), query.to_owned()));
    assert_eq!(found, expected, "{line:?} at {cursor}");
}

#[test]
fn the_mention_being_typed_is_found_at_the_cursor() {
    check_at("fix @src/ma|", Some(("@src/ma", "src/ma")));
    check_at("fix @src/ma| later", Some(("@src/ma", "src/ma")));
    check_at("@|", Some(("@", "")));
    check_at("see (@|", Some(("@", "")));
    check_at("@\"|", Some(("@\"", "")));
    check_at("@\"with sp|", Some(("@\"with sp", "with sp")));
    check_at("@\"a \\\"b|", Some(("@\"a \\\"b", "a \"b")));
    check_at("@\"done\"|", None);
    check_at("me@exam|", None);
    check_at("@src/main.rs |", None);
    check_at("no mention|", None);
    check_at("@src.|", Some(("@src.", "src.")));
}

#[test]
fn completion_entries_keep_the_index_order_and_survive_editor_filtering() {
    let candidates = vec![
        Candidate {
            path: "src/main.rs".into(),
            kind: EntryKind::File,
            score: 90,
        },
        Candidate {
            path: "my docs".into(),
            kind: EntryKind::Directory,
            score: 40,
        },
    ];
    let typed = bare_mention_at("see @mn", 7).unwrap();
    let entries = completion_entries(&typed, &candidates);
    assert_eq!(
        entries,
        [
            CompletionEntry {
                label: "src/main.rs".into(),
                insert_text: "@src/main.rs".into(),
                snippet: "@src/main.rs".into(),
                filter_text: "@mn".into(),
                sort_text: "00000".into(),
                kind: EntryKind::File,
            },
            CompletionEntry {
                label: "my docs/".into(),
                // Left open: the next completion continues inside the folder.
                insert_text: "@\"my docs/".into(),
                // As a snippet: closed, with the cursor inside.
                snippet: "@\"my docs/$0\"".into(),
                filter_text: "@mn".into(),
                sort_text: "00001".into(),
                kind: EntryKind::Directory,
            },
        ]
    );
    assert_eq!(typed.start, 4);
}

#[test]
fn snippets_keep_dollars_braces_and_backslashes_literal() {
    let candidates = vec![
        Candidate {
            path: "a $b}/c\\\"d".into(),
            kind: EntryKind::File,
            score: 1,
        },
        Candidate {
            path: "$x y".into(),
            kind: EntryKind::Directory,
            score: 1,
        },
    ];
    let typed = bare_mention_at("@a", 2).unwrap();
    let entries = completion_entries(&typed, &candidates);
    assert_eq!(entries[0].insert_text, "@\"a $b}/c\\\\\\\"d\"");
    assert_eq!(entries[0].snippet, "@\"a \\$b\\}/c\\\\\\\\\\\\\"d\"");
    assert_eq!(entries[1].snippet, "@\"\\$x y/$0\"");
}

#[test]
fn hostile_mentions_are_refused_with_the_reason() {
    let fx = Fixture::new();
    fx.hostile_layout();
    let ws = fx.workspace();
    let outside = fx.outside.display().to_string();
    let cases: Vec<(String, &str)> = vec![
        ("@..".into(), "climbs above"),
        ("@../outside/secret.txt".into(), "climbs above"),
        ("@../ws/a.txt".into(), "climbs above"),
        ("@sub/deeper/../../../x".into(), "climbs above"),
        ("@/etc/passwd".into(), "absolute path outside"),
        (format!("@{outside}/secret.txt"), "absolute path outside"),
        ("@link_out_dir".into(), "points outside"),
        ("@link_out_dir/inner.txt".into(), "points outside"),
        ("@link_out_file".into(), "points outside"),
        ("@chain_out/inner.txt".into(), "points outside"),
        ("@link_up/outside/secret.txt".into(), "points outside"),
        ("@rel_out".into(), "points outside"),
        ("@sub/deeper/deep_out/secret.txt".into(), "points outside"),
        ("@link_fs_root/etc/passwd".into(), "points outside"),
        ("@link_passwd".into(), "points outside"),
        ("@dangling".into(), "does not exist"),
        ("@loop_a".into(), "could not be checked"),
        ("@self_loop".into(), "could not be checked"),
        ("@\"a\0b\"".into(), "NUL"),
        ("@..\\..\\x".into(), "Windows"),
        ("@C:\\Windows".into(), "Windows"),
        ("@\\\\server\\share".into(), "UNC"),
        ("@~/x".into(), "`~`"),
        ("@file:///etc/passwd".into(), "URL"),
        (format!("@{}", "d/".repeat(2100)), "at most 4096"),
        (format!("@{}", "y".repeat(300)), "at most 255"),
        ("@missing.txt".into(), "does not exist"),
        ("@a.txt/x".into(), "does not exist"),
        ("@\"unterminated".into(), "no closing"),
    ];
    for (mention, reason) in &cases {
        let prompt = format!("please read {mention} now");
        let resolved = resolve_mentions(&ws, &prompt);
        assert!(resolved.references.is_empty(), "{mention:?}: {resolved:?}");
        assert_eq!(resolved.refused.len(), 1, "{mention:?}: {resolved:?}");
        let refused = &resolved.refused[0];
        assert!(
            refused.reason.contains(reason),
            "{mention:?}: `{}` does not contain `{reason}`",
            refused.reason
        );
    }
    assert!(cases.len() >= 20);
}

#[test]
fn mentions_inside_resolve_to_physical_paths_and_kinds() {
    let fx = Fixture::new();
    fx.hostile_layout();
    let ws = fx.workspace();
    let prompt = "Compare @a.txt with @link_in_file and @link_in_dir/x.txt, \
        look in @sub/ and @\"name with spaces.md\" and @./~tilde.txt and @./, \
        @abs_in/y.txt, @chain_in/x.txt, @a.txt again, and @../nope.";
    let resolved = resolve_mentions(&ws, prompt);
    let found: Vec<(&str, EntryKind)> = resolved
        .references
        .iter()
        .map(|r| (r.path.as_str(), r.kind))
        .collect();
    assert_eq!(
        found,
        [
            ("a.txt", EntryKind::File),
            ("sub/x.txt", EntryKind::File),
            ("sub", EntryKind::Directory),
            ("name with spaces.md", EntryKind::File),
            ("~tilde.txt", EntryKind::File),
            (".", EntryKind::Directory),
            ("sub/deeper/y.txt", EntryKind::File),
        ]
    );
    // `@link_in_file` and `@chain_in/x.txt` name files mentioned already.
    assert_eq!(resolved.references[1].mention, "@link_in_dir/x.txt");
    assert_eq!(resolved.refused.len(), 1);
    assert_eq!(resolved.refused[0].mention, "@../nope");

    let rendered = resolved.render().unwrap();
    assert!(rendered.contains("- `a.txt` (file)\n"), "{rendered}");
    assert!(rendered.contains("- `sub/` (directory)\n"), "{rendered}");
    assert!(rendered.contains("- `./` (directory)\n"), "{rendered}");
    assert!(
        rendered.contains("- `@../nope`: `../nope` climbs above"),
        "{rendered}"
    );
    // References, never contents.
    assert!(
        !rendered.contains("a.txt\n\n") && !rendered.contains("secret"),
        "{rendered}"
    );
    assert_eq!(resolve_mentions(&ws, "no mentions here").render(), None);
}
