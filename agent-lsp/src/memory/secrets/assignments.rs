//! Secrets given to a name rather than recognisable by their shape: `NAME = value` where the
//! name sounds like a secret, a strong-password-looking value given to any name in a
//! config-like line (`pw = "…"`), and secret flags on a command line (`--password X`,
//! `mysql -pX`, `curl -u user:X`).

use std::sync::LazyLock;

use regex::Regex;

use super::values;

/// `NAME = value`, `NAME: value`, `"NAME": "value"`, `NAME := value` where the name sounds like
/// a secret.
static NAMED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)([A-Za-z0-9_.-]*(?:api[_-]?key|auth[_-]?key|access[_-]?key|private[_-]?key|client[_-]?key|secret|token|passw(?:or)?d|passwd|pwd|credential)[A-Za-z0-9_.-]*)["'\]]{0,2}\s*(?::=|=|:)\s*["'`]?([^\s"'`,;:/][^\s"'`,;]*)"#,
    )
    .expect("valid pattern")
});

/// A name that says the value is a password (`db_password`, `pw`, `pass`, `passphrase`): a long
/// value counts even when it is made of words (`correct-horse-battery-staple`).
static PASSWORD_NAMED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)(?:^|[^A-Za-z0-9_])([A-Za-z0-9_.-]*(?:passw(?:or)?d|passwd|pwd|passphrase)|pw|pass)["'\]]{0,2}\s*(?::=|=|:)\s*["'`]?([^\s"'`,;:/][^\s"'`,;]*)"#,
    )
    .expect("valid pattern")
});

/// Shortest value given to a password name that counts as a password whatever it looks like.
const MIN_PASSWORD_LEN: usize = 16;

/// Any name given a value in a config-like line: at the start of a line or after `{`, `(`, `,`,
/// `;` or a space, `name = value`, `name: value`, `"name": "value"`, `export NAME=value`.
static ANY_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?m)(?:^|[\s{(,;])["']?([A-Za-z_][A-Za-z0-9_.-]{0,40})["']?\s*(?::=|=|:)\s*["'`]?([^\s"'`,;:/][^\s"'`,;]*)"#,
    )
    .expect("valid pattern")
});

/// A secret flag with its value: `--password X`, `--password=X`, `--token X`, `--api-key X`.
static FLAG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)(?:^|\s)(--?(?:password|passwd|pass|pwd|token|secret|api-?key|access-?key|auth-?token))(?:=|\s+)["']?([^\s"'`]+)"#,
    )
    .expect("valid pattern")
});

/// A password stuck to `-p` (`mysql -pX`), or after `user:` in `-u user:X` / `--user user:X`
/// (`curl`).
static SHORT_FLAG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?:^|\s)(?:-p([^\s"'`]+)|(?:-u|--user)\s+[^\s:"'`]+:([^\s"'`]+))"#)
        .expect("valid pattern")
});

/// Why `text` gives a secret to a name, or `None`.
pub fn find(text: &str) -> Option<String> {
    for captures in NAMED.captures_iter(text) {
        let (name, value) = (&captures[1], &captures[2]);
        if values::named_secret(value) {
            return Some(format!(
                "a random-looking value of {} characters given to `{name}`, which looks like a password, token or key",
                value.chars().count()
            ));
        }
    }
    for captures in PASSWORD_NAMED.captures_iter(text) {
        let (name, value) = (&captures[1], &captures[2]);
        if !values::placeholder(value)
            && value.chars().count() >= MIN_PASSWORD_LEN
            && !value.contains('/')
        {
            return Some(format!(
                "a value of {} characters given to `{name}`, which looks like a password",
                value.chars().count()
            ));
        }
    }
    for captures in FLAG.captures_iter(text) {
        let (flag, value) = (&captures[1], &captures[2]);
        if !values::placeholder(value)
            && value.chars().count() >= 6
            && (value.chars().any(|c| !c.is_ascii_alphabetic()) || values::named_secret(value))
        {
            return Some(format!(
                "a value given to `{flag}` on a command line, which looks like a password or token"
            ));
        }
    }
    for captures in SHORT_FLAG.captures_iter(text) {
        if let Some(value) = captures.get(1)
            && values::unnamed_secret(value.as_str())
        {
            return Some("a password stuck to `-p` on a command line (`mysql -p…`)".to_owned());
        }
        if let Some(value) = captures.get(2)
            && !values::placeholder(value.as_str())
            && value.as_str().chars().count() >= 6
        {
            return Some("a password after `-u user:` on a command line".to_owned());
        }
    }
    for captures in ANY_NAME.captures_iter(text) {
        let (name, value) = (&captures[1], &captures[2]);
        if values::unnamed_secret(value) {
            return Some(format!(
                "a strong-password-looking value of {} characters given to `{name}`",
                value.chars().count()
            ));
        }
    }
    None
}
