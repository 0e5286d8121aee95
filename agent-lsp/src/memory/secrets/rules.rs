//! The token shapes of `rules.toml` (detect-secrets' patterns and this project's own), kept as
//! data so they can be compared with and updated from their source, compiled once on first use.

use std::sync::LazyLock;

use regex::Regex;
use serde::Deserialize;

use super::values;

/// One shape: what a refusal calls it, and the pattern that finds it.
pub struct Rule {
    pub id: String,
    pub what: String,
    regex: Regex,
    /// The capture group holding the secret itself, when the pattern matches around it.
    secret_group: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRules {
    rule: Vec<RawRule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    id: String,
    what: String,
    regex: String,
    /// `detect-secrets` or `agent-lsp`: where the rule comes from, which decides its license.
    source: String,
    secret_group: Option<usize>,
}

/// The rules of `rules.toml`, which is part of the binary: a rule that does not load is a bug
/// the unit tests catch, so it panics rather than leaving the filter without rules.
pub static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    load(include_str!("rules.toml")).unwrap_or_else(|error| panic!("secrets/rules.toml: {error}"))
});

fn load(text: &str) -> anyhow::Result<Vec<Rule>> {
    let raw: RawRules = toml::from_str(text)?;
    raw.rule
        .into_iter()
        .map(|rule| {
            let regex = Regex::new(&rule.regex)
                .map_err(|error| anyhow::anyhow!("rule `{}`: {error}", rule.id))?;
            if !["detect-secrets", "agent-lsp"].contains(&rule.source.as_str()) {
                anyhow::bail!("rule `{}`: unknown source `{}`", rule.id, rule.source);
            }
            if let Some(group) = rule.secret_group
                && group >= regex.captures_len()
            {
                anyhow::bail!("rule `{}`: it has no capture group {group}", rule.id);
            }
            Ok(Rule {
                id: rule.id,
                what: rule.what,
                regex,
                secret_group: rule.secret_group,
            })
        })
        .collect()
}

/// The first rule that finds a secret in `text`.
pub fn find(text: &str) -> Option<&'static Rule> {
    RULES.iter().find(|rule| match rule.secret_group {
        None => rule.regex.is_match(text),
        Some(group) => rule.regex.captures_iter(text).any(|captures| {
            captures
                .get(group)
                .is_some_and(|secret| !values::placeholder(secret.as_str()))
        }),
    })
}
