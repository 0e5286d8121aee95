//! The secret check against the table of bypass spellings and ordinary notes
//! (`tests/fixtures/secret_spellings.json`, which the end-to-end test uses too), and against
//! smaller cases of each check.

use serde::Deserialize;

use super::{rule_ids, secret_reason};

#[derive(Deserialize)]
struct Table {
    refused: Vec<Refused>,
    accepted: Vec<String>,
}

#[derive(Deserialize)]
struct Refused {
    family: String,
    text: String,
    reason: String,
}

fn table() -> Table {
    serde_json::from_str(include_str!(
        "../../../../tests/fixtures/secret_spellings.json"
    ))
    .expect("the table parses")
}

/// `text` is refused with a reason containing `expected`, or accepted when it is `None`.
fn check(text: &str, expected: Option<&str>) {
    let reason = secret_reason(text);
    match (expected, &reason) {
        (None, None) => {}
        (Some(part), Some(reason)) => {
            assert!(
                reason.contains(part),
                "`{text}`: `{part}` not in `{reason}`"
            )
        }
        _ => panic!("`{text}`: expected {expected:?}, got {reason:?}"),
    }
}

#[test]
fn every_bypass_spelling_of_the_table_is_refused_with_what_it_hides() {
    let table = table();
    let mut families: Vec<&str> = table
        .refused
        .iter()
        .map(|row| row.family.as_str())
        .collect();
    families.dedup();
    assert_eq!(families.len(), 12, "{families:?}");
    assert_eq!(table.refused.len(), 24);
    let missed: Vec<String> = table
        .refused
        .iter()
        .filter_map(|row| match secret_reason(&row.text) {
            Some(reason) if reason.contains(&row.reason) => None,
            other => Some(format!(
                "{} `{}`: wanted `{}`, got {other:?}",
                row.family, row.text, row.reason
            )),
        })
        .collect();
    assert!(missed.is_empty(), "{missed:#?}");
}

#[test]
fn every_ordinary_note_of_the_table_is_accepted() {
    let refused: Vec<String> = table()
        .accepted
        .iter()
        .filter_map(|text| secret_reason(text).map(|reason| format!("`{text}`: {reason}")))
        .collect();
    assert!(refused.is_empty(), "{refused:#?}");
}

#[test]
fn the_rule_data_loads_with_detect_secrets_and_own_rules() {
    let ids = rule_ids();
    assert!(ids.len() >= 40, "{ids:?}");
    for id in [
        "aws.access_key_id",
        "basic_auth",
        "stripe",
        "huggingface",
        "npm.token",
    ] {
        assert!(ids.contains(&id), "no rule `{id}`");
    }
}

#[test]
fn known_token_shapes_are_refused_with_what_they_look_like() {
    check(
        "aws key AKIAIOSFODNN7EXAMPLE in ci",
        Some("AWS access key id"),
    );
    check(
        "use sk-proj-abcdefghijklmnopqrstuvwx12 for tests",
        Some("`sk-…`"),
    );
    check(
        "token ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        Some("GitHub token"),
    );
    check(
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
        Some("fine-grained"),
    );
    check("slack xoxb-123456789012-abcdefABCDEF", Some("Slack"));
    check(
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----",
        Some("private key"),
    );
    check("-----BEGIN RSA PRIVATE KEY-----", Some("private key"));
    check("AIzaSyA-1234567890abcdefghijklmnopqrstu", Some("Google"));
    check(
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        Some("JSON Web Token"),
    );
}

#[test]
fn random_values_given_to_secret_names_are_refused() {
    check(
        "DB_PASSWORD=hX9kq2Lm7ZpR4vT8",
        Some("`DB_PASSWORD`, which looks like a password"),
    );
    check(r#"{"api_key": "f3a9c2e17b4d8a6e05c1"}"#, Some("`api_key`"));
    check("auth_token: 9f86d081884c7d659a2feaa0", Some("`auth_token`"));
    check("PRIVATE_KEY='q8Zr2mW7xK4pL9vT'", Some("`PRIVATE_KEY`"));
    check(
        "passphrase = correct-horse-battery-staple",
        Some("`passphrase`, which looks like a password"),
    );
    check("deploy --password Zq8rT2mK5xWp", Some("`--password`"));
    check("curl -u admin:s3cretpass https://x", Some("`-u user:`"));
}

#[test]
fn free_standing_random_tokens_are_refused_in_any_form() {
    check(
        "the fixture token is 7fG2kL9pQ1xZ3vB8nM4cR6tY",
        Some("random-looking string of 24 characters"),
    );
    check(
        "dGhlIGtleSBpcyA3Zkcya0w5cFExeFozdkI4bk00Y1I2dFk=",
        Some("random-looking string of 24 characters (a key or token?) once decoded from base64"),
    );
}

#[test]
fn descriptions_of_where_secrets_live_are_accepted() {
    check("the API key is in $DEEPSEEK_API_KEY", None);
    check("API_KEY=${DEEPSEEK_API_KEY} in .env", None);
    check("password: <ask the user>", None);
    check("token = placeholderplaceholder", None);
    check("pass `--password-stdin` and `--token $GITHUB_TOKEN`", None);
    check("password_file = /etc/agent/db-password.txt", None);
    check(
        "the secret manager is at https://vault.example.com/v1/a1b2c3d4",
        None,
    );
    check("https://user:<password>@example.com is the URL shape", None);
    check("sk- prefixes mark keys; never store one", None);
    check("the tokenizer is tiktoken cl100k_base", None);
    check("commit 1a2b3c4d5e6f7a8b9c0d fixed the parser", None);
    check("token_expiry: 2026-12-04T22:00:15Z", None);
    check(
        "\"integrity\": \"sha512-9aQ2xP7kLm3Zr8Vt4Wb1Nc6Yd0Fg5Hj2Kl7Mn9Pq3Rs==\"",
        None,
    );
    check("", None);
}

/// The limits the README names ("What it cannot catch"), as they are today: if one of these
/// starts being refused, the README is out of date.
#[test]
fn what_the_readme_says_it_cannot_catch_is_stored() {
    // A short or low-entropy password, in prose or given to a plain name.
    check("the admin password is hunter2", None);
    check("pw = hunter2", None);
    // A split that is not obvious: each piece alone is no secret.
    check(
        "''.join(['ghp_', 'abcdefghijklmnopqrstuvwxyz0123456789'])",
        None,
    );
    // Obfuscated beyond the decodings: ROT13 of a GitHub token.
    check("tuc_nopqrstuvwxyzabcdefghijklm0123456789", None);
    // Half of a key now, the other half in another memory.
    check("the key starts sk-proj-Q3xF8k", None);
}
