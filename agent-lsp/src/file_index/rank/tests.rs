//! Tests of the ranking, against a plain reference scorer too.

use super::*;

fn keyed<S: AsRef<str>>(keys: &[S]) -> Vec<Key<'_>> {
    keys.iter()
        .enumerate()
        .map(|(slot, key)| Key {
            text: key.as_ref(),
            facts: KeyFacts::of(key.as_ref()),
            slot: slot as u32,
        })
        .collect()
}

/// Rank `keys` (directories end in `/`) for `query` and compare the labels, best first.
#[track_caller]
fn check(keys: &[&str], query: &str, boosts: &Boosts, expected: &[&str]) {
    let limit = expected.len().max(1) + 5;
    let keys = keyed(keys);
    let ranked = rank(
        &Scorer::new(query),
        vec![keys.iter().copied()],
        boosts,
        limit,
    )
    .candidates;
    // Scored in two chunks (two threads), as many keys are, the answer is the same.
    let (left, right) = keys.split_at(keys.len() / 2);
    let split = rank(
        &Scorer::new(query),
        vec![left.iter().copied(), right.iter().copied()],
        boosts,
        limit,
    )
    .candidates;
    assert_eq!(ranked, split, "query {query:?} in two chunks");
    let labels: Vec<String> = ranked.iter().map(Candidate::label).collect();
    assert_eq!(labels, expected, "query {query:?}");
}

#[test]
fn file_name_matches_rank_above_directory_matches() {
    check(
        &["main_module/lib.rs", "src/main.rs", "docs/domain/index.md"],
        "main",
        &Boosts::default(),
        &["src/main.rs", "main_module/lib.rs", "docs/domain/index.md"],
    );
}

#[test]
fn segment_starts_rank_above_matches_inside_words() {
    check(
        &["xfoobar.rs", "foo/bar.rs"],
        "fb",
        &Boosts::default(),
        &["foo/bar.rs", "xfoobar.rs"],
    );
    check(
        &["src/unconfigured.rs", "src/config.rs"],
        "config",
        &Boosts::default(),
        &["src/config.rs", "src/unconfigured.rs"],
    );
}

#[test]
fn ties_break_by_length_then_byte_order_whatever_the_input_order() {
    let keys = ["b/x.rs", "a/x.rs", "x.rs", "c/d/x.rs"];
    let expected = ["x.rs", "a/x.rs", "b/x.rs", "c/d/x.rs"];
    check(&keys, "x.rs", &Boosts::default(), &expected);
    let mut reversed = keys;
    reversed.reverse();
    check(&reversed, "x.rs", &Boosts::default(), &expected);
}

#[test]
fn directories_are_candidates() {
    check(
        &["src/", "src/lib.rs", "tests/"],
        "src",
        &Boosts::default(),
        &["src/", "src/lib.rs"],
    );
}

#[test]
fn open_and_recent_files_are_boosted_among_comparable_matches() {
    let keys = ["a/util.rs", "b/util.rs", "c/util.rs"];
    let mut boosts = Boosts::default();
    check(
        &keys,
        "util",
        &boosts,
        &["a/util.rs", "b/util.rs", "c/util.rs"],
    );
    boosts.touch("b/util.rs");
    check(
        &keys,
        "util",
        &boosts,
        &["b/util.rs", "a/util.rs", "c/util.rs"],
    );
    boosts.set_open(["c/util.rs".to_owned()].into());
    check(
        &keys,
        "util",
        &boosts,
        &["c/util.rs", "b/util.rs", "a/util.rs"],
    );
    // The most recent edit wins among recent ones.
    boosts.set_open(HashSet::new());
    boosts.touch("a/util.rs");
    check(
        &keys,
        "util",
        &boosts,
        &["a/util.rs", "b/util.rs", "c/util.rs"],
    );
}

#[test]
fn a_boost_does_not_lift_a_poor_match_over_a_good_one() {
    let mut boosts = Boosts::default();
    boosts.set_open(["src/a/b/c/d_e_f.rs".to_owned()].into());
    check(
        &["src/a/b/c/d_e_f.rs", "src/parser.rs"],
        "parser",
        &boosts,
        &["src/parser.rs"],
    );
    check(
        &["src/x/pxaxrxsxexr.rs", "src/parser.rs"],
        "parser",
        &{
            let mut boosts = Boosts::default();
            boosts.touch("src/x/pxaxrxsxexr.rs");
            boosts
        },
        &["src/parser.rs", "src/x/pxaxrxsxexr.rs"],
    );
}

#[test]
fn an_empty_query_lists_boosted_files_then_short_paths() {
    let mut boosts = Boosts::default();
    boosts.touch("deep/er/file.rs");
    check(
        &["zz.rs", "deep/er/file.rs", "a.rs", "deep/"],
        "",
        &boosts,
        &["deep/er/file.rs", "a.rs", "deep/", "zz.rs"],
    );
}

#[test]
fn case_never_hides_a_path_and_capitals_prefer_the_paths_they_match() {
    let keys = ["src/Parser.rs", "src/parser_test.rs", "README.md"];
    // Capitals: both match, the one whose case matches first.
    check(
        &keys,
        "Parser",
        &Boosts::default(),
        &["src/Parser.rs", "src/parser_test.rs"],
    );
    // No capitals: case is ignored, so the shorter file name wins the tie of shape.
    check(
        &keys,
        "parser",
        &Boosts::default(),
        &["src/Parser.rs", "src/parser_test.rs"],
    );
    // All capitals match paths written in lowercase.
    check(
        &keys,
        "PARSER_T",
        &Boosts::default(),
        &["src/parser_test.rs"],
    );
    check(
        &["rich/console.py", "rich/_console_x.py", "rich/table.py"],
        "CONS",
        &Boosts::default(),
        &["rich/console.py", "rich/_console_x.py"],
    );
    check(
        &["rich/console.py", "tests/test_console.py"],
        "RICH/Cons",
        &Boosts::default(),
        &["rich/console.py"],
    );
}

#[test]
fn fzf_syntax() {
    let keys = ["src/Parser.rs", "src/parser_test.rs", "README.md"];
    check(
        &keys,
        "parser !test",
        &Boosts::default(),
        &["src/Parser.rs"],
    );
    check(&keys, "^read", &Boosts::default(), &["README.md"]);
    check(&keys, "^READ", &Boosts::default(), &["README.md"]);
    check(&keys, ".md$", &Boosts::default(), &["README.md"]);
}

#[test]
fn the_limit_keeps_the_best() {
    let keys: Vec<String> = (0..100).map(|i| format!("dir{i:03}/file.rs")).collect();
    let keys = keyed(&keys);
    let ranked = rank(
        &Scorer::new("file"),
        vec![keys.iter().copied()],
        &Boosts::default(),
        3,
    )
    .candidates;
    let labels: Vec<String> = ranked.iter().map(Candidate::label).collect();
    assert_eq!(
        labels,
        ["dir000/file.rs", "dir001/file.rs", "dir002/file.rs"]
    );
    assert!(
        rank(
            &Scorer::new("file"),
            vec![keys.iter().copied()],
            &Boosts::default(),
            0
        )
        .candidates
        .is_empty()
    );
}

#[test]
fn unicode_paths_match() {
    check(
        &["docs/über.md", "docs/uber.md", "src/日本語.rs"],
        "日本",
        &Boosts::default(),
        &["src/日本語.rs"],
    );
}

/// The ranking without any shortcut (no masks, no pruning, no threads): every key scored
/// in full with nucleo, everything sorted.
fn reference(keys: &[String], query: &str, limit: usize) -> Vec<(u32, String)> {
    let scorer = Scorer::new(query);
    let mut matcher = Matcher::new(Config::DEFAULT.match_paths());
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut all: Vec<(u32, &str)> = keys
        .iter()
        .filter_map(|key| {
            let path = Utf32Str::new(key, &mut a);
            let mut score = 0;
            for (atom, greedy) in scorer.pattern.atoms.iter().zip(&scorer.greedy) {
                score += u32::from(if *greedy {
                    matcher.config.ignore_case = true;
                    matcher.config.normalize = true;
                    matcher.fuzzy_match_greedy(path, atom.needle_text())?
                } else {
                    atom.score(path, &mut matcher)?
                });
            }
            let name = Utf32Str::new(basename(key), &mut b);
            score += scorer.pattern.score(name, &mut matcher).unwrap_or(0) / 2;
            let path = Utf32Str::new(key, &mut a);
            let case_matches = scorer.respecting_case.as_ref().is_some_and(|pattern| {
                pattern
                    .atoms
                    .iter()
                    .all(|atom| atom.score(path, &mut matcher).is_some())
            });
            if case_matches {
                score = score * (100 + CASE_BOOST_PERCENT) / 100;
            }
            Some((score, key.as_str()))
        })
        .collect();
    all.sort_by(better);
    all.truncate(limit);
    all.into_iter().map(|(s, k)| (s, k.to_owned())).collect()
}

proptest::proptest! {
    #[test]
    fn pruning_never_changes_the_answer(
        keys in proptest::collection::btree_set("[a-eé]{1,3}(/[a-eA-E_.é]{1,6}){0,3}/?", 1..80),
        query in "[a-eA-E/.]{1,4}( [a-e]{1,2})?",
        limit in 1usize..8,
    ) {
        let keys: Vec<String> = keys.into_iter().collect();
        let expected = reference(&keys, &query, limit);
        let (left, right) = keys.split_at(keys.len() / 2);
        let (left, right) = (keyed(left), keyed(right));
        let found = rank(
            &Scorer::new(&query),
            vec![left.iter().copied(), right.iter().copied()],
            &Boosts::default(),
            limit,
        ).candidates;
        let found: Vec<(u32, String)> =
            found.into_iter().map(|c| (c.score, c.label())).collect();
        proptest::prop_assert_eq!(found, expected);
    }

    #[test]
    fn the_name_cap_bounds_any_name_score(
        name in "[a-zA-Z0-9_./-]{1,40}",
        query in "[a-zA-Z0-9_.]{1,8}",
    ) {
        let scorer = Scorer::new(&query);
        let mut matcher = Matcher::new(Config::DEFAULT.match_paths());
        fn key(text: &str) -> Key<'_> {
            Key { text, facts: KeyFacts::of(text), slot: 0 }
        }
        let score = scorer.name_score(key(&name), &mut matcher, &mut Vec::new());
        proptest::prop_assert!(score <= scorer.name_cap, "{} > {}", score, scorer.name_cap);
        // Also for the best possible name: the query itself.
        let best = scorer.name_score(key(&query), &mut matcher, &mut Vec::new());
        proptest::prop_assert!(best <= scorer.name_cap, "{} > {}", best, scorer.name_cap);
    }
}
