//! The memory secret check through the real binary: a scripted model asks the `memory` tool to
//! remember every row of `tests/fixtures/secret_spellings.json` in one turn, secrets spelled to
//! slip past a filter (split, base64, hex, percent-encoded, with zero-width characters, in a
//! URL, tokens of Stripe, Hugging Face, GitLab, npm and Slack, passwords under plain names) and
//! ordinary notes; each secret comes back as a refusal naming what it hides, each note is kept,
//! and the memory file holds the notes and nothing of the secrets.

use agent_lsp::memory::Memories;
use agent_tests::model_endpoint::{ChatRequest, EndpointConfig, ModelEndpoint, ModelTurn, Reply};
use serde::Deserialize;
use serde_json::json;

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

#[test]
fn every_bypass_spelling_is_refused_through_the_memory_tool_and_ordinary_notes_are_kept() {
    let table: Table =
        serde_json::from_str(include_str!("../fixtures/secret_spellings.json")).unwrap();
    let fixture = agent_tests::cli::CliFixture::new(
        "[provider]\nbackoff_base_ms = 20\nbackoff_cap_ms = 2000\nrequest_timeout_secs = 20\n",
    )
    .with_files(&[("README.md", "# demo\n")]);
    let endpoint = ModelEndpoint::start(EndpointConfig::default()).unwrap();

    // Two turns, the secrets and then the notes: a turn may make at most 32 calls.
    let remember = |text: &str| json!({"action": "remember", "text": text}).to_string();
    let mut secrets = ModelTurn::new();
    for (index, row) in table.refused.iter().enumerate() {
        secrets =
            secrets.tool_call_with_id(format!("secret_{index:02}"), "memory", remember(&row.text));
    }
    let mut notes = ModelTurn::new();
    for (index, text) in table.accepted.iter().enumerate() {
        notes = notes.tool_call_with_id(format!("note_{index:02}"), "memory", remember(text));
    }
    endpoint.push(secrets);
    let refused: Vec<(String, String, String)> = table
        .refused
        .iter()
        .map(|row| (row.family.clone(), row.text.clone(), row.reason.clone()))
        .collect();
    endpoint.push(Reply::from_fn(move |request| {
        let missed: Vec<String> = refused
            .iter()
            .enumerate()
            .filter_map(|(index, (family, text, reason))| {
                let result = result_of(request, &format!("secret_{index:02}"));
                let refused = result.starts_with("error: refused: it looks like it ");
                (!(refused && result.contains(reason.as_str())))
                    .then(|| format!("{family} {text:?}: wanted `{reason}`, got {result:?}"))
            })
            .collect();
        assert!(missed.is_empty(), "{missed:#?}");
        notes.into()
    }));
    let n_notes = table.accepted.len();
    endpoint.push(Reply::from_fn(move |request| {
        let not_kept: Vec<String> = (0..n_notes)
            .map(|index| result_of(request, &format!("note_{index:02}")))
            .filter(|result| !result.starts_with("remembered as w"))
            .collect();
        assert!(not_kept.is_empty(), "{not_kept:#?}");
        Reply::text("Kept the notes; refused the secrets.")
    }));
    fixture.ok(&[
        "run",
        "--preset",
        "standard",
        "--base-url",
        &endpoint.base_url(),
        "Remember these.",
    ]);
    endpoint.assert_no_violations();
    assert_eq!(endpoint.remaining_replies(), 0);

    // What is on disk: every note, and no part of any secret.
    let kept: Vec<String> = Memories::for_store(&fixture.store())
        .list()
        .unwrap()
        .into_iter()
        .map(|memory| memory.text)
        .collect();
    let mut wanted = table.accepted.clone();
    wanted.sort();
    let mut kept_sorted = kept.clone();
    kept_sorted.sort();
    assert_eq!(kept_sorted, wanted);
    for row in &table.refused {
        assert!(
            !kept.iter().any(|text| text.contains(&row.text)),
            "{} was stored",
            row.text
        );
    }
}

/// The result the tool call `id` got, as the request carries it.
fn result_of(request: &ChatRequest, id: &str) -> String {
    request
        .tool_result(id)
        .unwrap_or_else(|| panic!("no result for {id}"))
        .to_owned()
}
