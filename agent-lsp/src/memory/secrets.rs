//! The secret check every memory passes before it is stored: memories are plain text on disk and
//! go into the system prompt of every later session, so a key that slipped into one would leak
//! into every request from then on.
//!
//! The text is looked at in several forms (`forms.rs`): as written, without invisible characters,
//! with split strings joined, percent-encoding and escapes decoded, and base64 and hex runs
//! decoded. Every form is matched against known token shapes kept as data (`rules.rs`, most of
//! them detect-secrets' patterns), then against secrets given to a name (`assignments.rs`), then
//! checked for free-standing random-looking tokens (`values.rs`). The refusal
//! says which rule matched and in which form, so it can be understood and the text reworded.
//! What this cannot catch is listed in the README ("Memory across sessions").

mod assignments;
mod forms;
mod rules;
mod values;

#[cfg(test)]
mod tests;

use std::sync::LazyLock;

use regex::Regex;

use forms::Form;

/// Runs of a key alphabet (base62, base64 and base64url, with `.` for JWT-like tokens left out
/// so a dotted token is looked at piece by piece).
static TOKEN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[A-Za-z0-9+/=_-]{20,}").expect("valid pattern"));

/// What may look random and is public by design: an SSH public key after its type, and a
/// subresource-integrity hash (`sha512-…`, as in lock files).
static PUBLIC: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?:ssh-(?:rsa|dss|ed25519)|ecdsa-sha2-nistp\d+|sk-ssh-ed25519@openssh\.com) AAAA[A-Za-z0-9+/]+=*|\bsha(?:1|256|384|512)-[A-Za-z0-9+/]+=*",
    )
    .expect("valid pattern")
});

/// Why `text` looks like it holds a secret, or `None` when it does not.
pub fn secret_reason(text: &str) -> Option<String> {
    let forms = forms::of(&PUBLIC.replace_all(text, " "));
    let found = |check: &dyn Fn(&str) -> Option<String>| {
        forms
            .iter()
            .find_map(|form| check(&form.text).map(|found| describe(&found, form)))
    };
    found(&|text| {
        rules::find(text).map(|rule| format!("contains {} (rule `{}`)", rule.what, rule.id))
    })
    .or_else(|| found(&|text| assignments::find(text).map(|what| format!("contains {what}"))))
    .or_else(|| found(&random_token))
}

/// A free-standing random-looking token of `text`, described.
///
/// A token that decodes to text is left to the decoded form, which is checked on its own: base64
/// of an ordinary sentence is no secret.
fn random_token(text: &str) -> Option<String> {
    TOKEN
        .find_iter(text)
        .map(|token| token.as_str())
        .find(|token| values::generated_token(token) && !forms::decodes_to_text(token))
        .map(|token| {
            format!(
                "contains a random-looking string of {} characters (a key or token?)",
                token.chars().count()
            )
        })
}

fn describe(found: &str, form: &Form) -> String {
    if form.how.is_empty() {
        format!("it looks like it {found}")
    } else {
        format!("it looks like it {found} once {}", form.how)
    }
}

/// The ids of the data rules, for tests that check every rule loads.
#[cfg(test)]
fn rule_ids() -> Vec<&'static str> {
    rules::RULES.iter().map(|rule| rule.id.as_str()).collect()
}
