//! The secret check every memory passes before it is stored: memories are plain text on disk and
//! go into the system prompt of every later session, so a key that slipped into one would leak
//! into every request from then on. The check is deliberately simple (known token shapes, PEM
//! private keys, and long random-looking values assigned to secret-sounding names) and says which
//! rule matched, so a refusal can be understood and the text reworded.

use std::sync::LazyLock;

use regex::Regex;

/// Known token shapes, each with the reason a refusal gives.
static SHAPES: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        (
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
            "a private key (a `-----BEGIN … PRIVATE KEY-----` block)",
        ),
        (r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", "an AWS access key id"),
        (
            r"\bgithub_pat_[A-Za-z0-9_]{20,}",
            "a GitHub fine-grained token (`github_pat_…`)",
        ),
        (
            r"\bgh[pousr]_[A-Za-z0-9]{30,}",
            "a GitHub token (`ghp_…`, `gho_…`, `ghs_…`)",
        ),
        (
            r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
            "a Slack token (`xoxb-…`, `xoxp-…`)",
        ),
        (
            r"\bsk-[A-Za-z0-9_-]{20,}",
            "an API secret key (`sk-…`, as OpenAI, Anthropic and DeepSeek issue them)",
        ),
        (r"\bAIza[0-9A-Za-z_-]{35}\b", "a Google API key (`AIza…`)"),
        (
            r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}",
            "a JSON Web Token (`eyJ….eyJ….…`)",
        ),
    ]
    .into_iter()
    .map(|(pattern, reason)| (Regex::new(pattern).expect("valid pattern"), reason))
    .collect()
});

/// `NAME = value`, `NAME: value`, `"NAME": "value"` where the name sounds like a secret.
static ASSIGNMENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)([A-Za-z0-9_.-]*(?:api[_-]?key|access[_-]?key|private[_-]?key|secret|token|passw(?:or)?d|passwd|pwd|credential)[A-Za-z0-9_.-]*)["']?\s*[:=]\s*["']?([^\s"'`,;]+)"#,
    )
    .expect("valid pattern")
});

/// Shortest assigned value that can count as a secret.
const MIN_ASSIGNED_LEN: usize = 12;

/// Why `text` looks like it holds a secret, or `None` when it does not.
pub fn secret_reason(text: &str) -> Option<String> {
    for (pattern, reason) in SHAPES.iter() {
        if pattern.is_match(text) {
            return Some(format!("it looks like it contains {reason}"));
        }
    }
    for captures in ASSIGNMENT.captures_iter(text) {
        let (name, value) = (&captures[1], &captures[2]);
        if random_looking(value) {
            return Some(format!(
                "it assigns a random-looking value of {} characters to `{name}`, which looks like a password, token or key",
                value.chars().count()
            ));
        }
    }
    None
}

/// Whether a value looks generated rather than written: long enough, with letters and digits
/// mixed (or other classes), and a high character entropy. `$VAR`, `${VAR}`, `<placeholder>`
/// and plain words are what people write when they describe where a secret is kept.
fn random_looking(value: &str) -> bool {
    if value.chars().count() < MIN_ASSIGNED_LEN
        || value.starts_with('$')
        || value.starts_with('<')
        || value.starts_with('{')
        || value.contains("://")
    {
        return false;
    }
    let has = |test: fn(&char) -> bool| value.chars().any(|c| test(&c));
    let classes = [
        has(char::is_ascii_lowercase),
        has(char::is_ascii_uppercase),
        has(char::is_ascii_digit),
        has(|c| !c.is_ascii_alphanumeric()),
    ]
    .into_iter()
    .filter(|present| *present)
    .count();
    classes >= 2 && has(char::is_ascii_digit) && entropy_bits_per_char(value) >= 3.0
}

/// Shannon entropy of the characters of `value`, in bits per character.
fn entropy_bits_per_char(value: &str) -> f64 {
    let mut counts = std::collections::HashMap::new();
    let mut total = 0usize;
    for c in value.chars() {
        *counts.entry(c).or_insert(0usize) += 1;
        total += 1;
    }
    counts
        .values()
        .map(|&count| {
            let share = count as f64 / total as f64;
            -share * share.log2()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::secret_reason;

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
    fn random_values_assigned_to_secret_names_are_refused() {
        check(
            "DB_PASSWORD=hX9kq2Lm7ZpR4vT8",
            Some("`DB_PASSWORD`, which looks like a password"),
        );
        check(r#"{"api_key": "f3a9c2e17b4d8a6e05c1"}"#, Some("`api_key`"));
        check("auth_token: 9f86d081884c7d659a2feaa0", Some("`auth_token`"));
        check("PRIVATE_KEY='q8Zr2mW7xK4pL9vT'", Some("`PRIVATE_KEY`"));
    }

    #[test]
    fn descriptions_of_where_secrets_live_are_accepted() {
        check("the API key is in $DEEPSEEK_API_KEY", None);
        check("API_KEY=${DEEPSEEK_API_KEY} in .env", None);
        check("password: <ask the user>", None);
        check("token = placeholderplaceholder", None);
        check("run tests with `cargo nextest run -p agent-tests`", None);
        check(
            "the secret manager is at https://vault.example.com/v1/a1b2c3d4",
            None,
        );
        check("sk- prefixes mark keys; never store one", None);
        check("the tokenizer is tiktoken cl100k_base", None);
        check("commit 1a2b3c4d5e6f7a8b9c0d fixed the parser", None);
        check("author: JohnSmith1234567", None);
        check("", None);
    }
}
