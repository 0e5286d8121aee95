//! Whether a value looks generated (a key, a token, a password) rather than written: the
//! character classes it mixes, its Shannon entropy, and how much of it is made of words.
//! People describe where a secret is kept with placeholders (`$VAR`, `${VAR}`, `<name>`), which
//! never count.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;

/// Shortest value assigned to a secret-sounding name that can count as a secret.
const MIN_NAMED_LEN: usize = 12;
/// Shortest value assigned to any other name in a config-like line that can count as a password.
const MIN_UNNAMED_LEN: usize = 10;
/// Shortest free-standing token the entropy check looks at.
pub const MIN_TOKEN_LEN: usize = 20;

/// Whether `value` is how one writes where a secret is, not the secret: `$VAR`, `${VAR}`,
/// `%VAR%`, `<name>`, `{{ name }}`, `***` or `...`.
pub fn placeholder(value: &str) -> bool {
    let value = value.trim_matches(|c| c == '"' || c == '\'' || c == '`');
    value.is_empty()
        || value.starts_with('$')
        || value.starts_with('<')
        || value.starts_with('{')
        || value.starts_with('%')
        || value
            .chars()
            .all(|c| c == '*' || c == '.' || c == 'x' || c == 'X')
}

/// A value given to a name that says it is a secret (`password`, `api_key`, `--token`): long
/// enough, letters with digits or symbols, random-looking; or a long run of letters that no
/// words make up (some tokens have no digits).
pub fn named_secret(value: &str) -> bool {
    if placeholder(value) || code_like(value) {
        return false;
    }
    let classes = Classes::of(value);
    let len = value.chars().count();
    let letters = value.chars().filter(char::is_ascii_alphabetic).count();
    (len >= MIN_NAMED_LEN
        && classes.count() >= 2
        && classes.digit
        && letters >= 4
        && entropy(value) >= 3.0)
        || (len >= MIN_TOKEN_LEN && classes.upper && classes.lower && wordy_share(value) < 0.5)
}

/// A value given to any name in a config-like line (`pw = "…"`, `-p…`): it must look like a
/// password someone generated or was told to make strong, mixing upper and lower case letters,
/// digits (or symbols), and not read as words, so identifiers, versions and paths stay allowed.
pub fn unnamed_secret(value: &str) -> bool {
    if placeholder(value) || code_like(value) || value.chars().count() < MIN_UNNAMED_LEN {
        return false;
    }
    let classes = Classes::of(value);
    classes.upper
        && classes.lower
        && (classes.digit || classes.symbol)
        && classes.count() >= 3
        && wordy_share(value) < 0.5
        && entropy(value) >= 3.0
}

/// Whether `value` reads as code or a URL rather than a literal (`self.max_tokens.unwrap_or(128)`,
/// `Token::generate()`, `//host/path`): the value of an assignment in code is an expression.
fn code_like(value: &str) -> bool {
    value.contains("://")
        || value.contains("::")
        || value.starts_with("//")
        || value.contains(['(', ')', '[', ']', '<', '>', '\\'])
}

/// A free-standing token of at least [`MIN_TOKEN_LEN`] characters of a key alphabet that looks
/// generated: upper and lower case letters (two of each at least, so `0x9E37_79B9_7F4A_7C15` is
/// no token) and digits, few words, high entropy. Hex alone (commit
/// ids, hashes, UUIDs) never counts: it is far more often an id than a secret.
pub fn generated_token(token: &str) -> bool {
    let len = token.chars().count();
    if len < MIN_TOKEN_LEN {
        return false;
    }
    let count = |test: fn(&char) -> bool| token.chars().filter(&test).count();
    count(char::is_ascii_uppercase) >= 2
        && count(char::is_ascii_lowercase) >= 2
        && count(char::is_ascii_digit) >= 1
        && wordy_share(token) < 0.4
        && entropy(token) >= token_entropy_floor(len)
}

/// The entropy a token of `len` characters must reach: 3.5 bits per character, or less for
/// tokens so short that even a random one rarely reaches it (a random 20-character base62
/// string has about 4 bits).
fn token_entropy_floor(len: usize) -> f64 {
    (0.8 * (len as f64).log2()).min(3.5)
}

/// Shannon entropy of the characters of `value`, in bits per character.
pub fn entropy(value: &str) -> f64 {
    let mut counts = HashMap::new();
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

/// Words: a lower-case run of three or more letters, capitalised or not, or an upper-case run
/// of four or more.
static WORD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[A-Za-z][a-z]{2,}|[A-Z]{4,}").expect("valid pattern"));

/// The share of `value`'s characters that are in words: near 1 for identifiers, paths and
/// names (`JohnSmith1234567`), low for random strings, where three lower-case letters in a row
/// are rare.
pub fn wordy_share(value: &str) -> f64 {
    let total = value.chars().count();
    if total == 0 {
        return 0.0;
    }
    let in_words: usize = WORD
        .find_iter(value)
        .map(|word| word.as_str().chars().count())
        .sum();
    in_words as f64 / total as f64
}

/// Which character classes a value has.
struct Classes {
    lower: bool,
    upper: bool,
    digit: bool,
    symbol: bool,
}

impl Classes {
    fn of(value: &str) -> Self {
        let has = |test: fn(&char) -> bool| value.chars().any(|c| test(&c));
        Classes {
            lower: has(char::is_ascii_lowercase),
            upper: has(char::is_ascii_uppercase),
            digit: has(char::is_ascii_digit),
            symbol: has(|c| !c.is_ascii_alphanumeric()),
        }
    }

    fn count(&self) -> usize {
        [self.lower, self.upper, self.digit, self.symbol]
            .into_iter()
            .filter(|present| *present)
            .count()
    }
}
