//! The forms of a text the secret checks look at: as written; without invisible characters;
//! with obviously split strings joined; with percent-encoding and escapes decoded; and each
//! base64 or hex run decoded, when it decodes to text. A secret respelled in one of these ways
//! is found in the form that undoes the spelling.

use std::sync::LazyLock;

use regex::Regex;

/// How deep decoded text is decoded again (base64 of hex, percent-encoded base64).
const MAX_DEPTH: usize = 2;
/// A bound on the forms of one text, so a memory full of runs cannot make the check slow.
const MAX_FORMS: usize = 48;
/// Shortest base64 or hex run that is decoded.
const MIN_RUN: usize = 16;

/// One form of the text, and how it was made from what was written (empty when it is that).
pub struct Form {
    pub text: String,
    pub how: String,
}

/// Characters that show as nothing: Unicode's format characters (zero-width space and joiners,
/// the word joiner, the byte-order mark, the soft hyphen, bidirectional marks) and the few
/// blank letters and fillers that are not in that category.
static INVISIBLE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[\p{Cf}\u{034F}\u{115F}\u{1160}\u{17B4}\u{17B5}\u{3164}\u{FFA0}]")
        .expect("valid pattern")
});

/// The seams of a split string: a closing quote, an optional concatenation operator (`+`, `.`,
/// `..`, `~`, `||`, `&`) or line continuations, and an opening quote; or a backslash at the end
/// of a line and the next line's indentation.
static SEAM: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"["'`][ \t]*(?:\\\r?\n[ \t]*)*(?:\+|\.\.?|~|\|\||&)?[ \t]*(?:\\?\r?\n[ \t]*)*["'`]|\\\r?\n[ \t]*"#,
    )
    .expect("valid pattern")
});

/// `%41`, `\x41`, `\u0041`, `\u{41}`, `&#65;`, `&#x41;`.
static ESCAPE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"%([0-9A-Fa-f]{2})|\\x([0-9A-Fa-f]{2})|\\u([0-9A-Fa-f]{4})|\\u\{([0-9A-Fa-f]{1,6})\}|&#([0-9]{1,7});|&#[xX]([0-9A-Fa-f]{1,6});",
    )
    .expect("valid pattern")
});

/// A run of base64 (standard or URL-safe alphabet) with its padding.
static BASE64_RUN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[A-Za-z0-9+/_-]{16,}={0,2}").expect("valid pattern"));

/// A run of hex digits, optionally `0x`-prefixed, or hex bytes separated by `:`, `-` or spaces.
static HEX_RUN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:0[xX])?[0-9A-Fa-f]{16,}|(?:[0-9A-Fa-f]{2}[:\- ]){7,}[0-9A-Fa-f]{2}")
        .expect("valid pattern")
});

/// A rewrite of the whole text that undoes one respelling.
type Step = fn(&str) -> String;

/// Every form of `text`, the text as written first.
pub fn of(text: &str) -> Vec<Form> {
    let mut forms = vec![Form {
        text: text.to_owned(),
        how: String::new(),
    }];
    expand(text, "", 0, &mut forms);
    forms
}

/// Adds the forms made from `text` (itself made as `how`) to `forms`.
fn expand(text: &str, how: &str, depth: usize, forms: &mut Vec<Form>) {
    let mut current = text.to_owned();
    let mut current_how = how.to_owned();
    let steps: [(Step, &str); 3] = [
        (
            |text| INVISIBLE.replace_all(text, "").into_owned(),
            "invisible characters are removed",
        ),
        (
            |text| SEAM.replace_all(text, "").into_owned(),
            "its split parts are joined",
        ),
        (unescape, "percent-encoding and escapes are decoded"),
    ];
    for (step, what) in steps {
        let made = step(&current);
        if made != current {
            current_how = then(&current_how, what);
            current = made;
            push(forms, &current, &current_how);
        }
    }
    if depth >= MAX_DEPTH {
        return;
    }
    for run in BASE64_RUN.find_iter(&current) {
        if let Some(decoded) = base64(run.as_str()).and_then(text_of) {
            let how = then(&current_how, "decoded from base64");
            if push(forms, &decoded, &how) {
                expand(&decoded, &how, depth + 1, forms);
            }
        }
    }
    for run in HEX_RUN.find_iter(&current) {
        if let Some(decoded) = hex(run.as_str()).and_then(text_of) {
            let how = then(&current_how, "decoded from hex");
            if push(forms, &decoded, &how) {
                expand(&decoded, &how, depth + 1, forms);
            }
        }
    }
}

/// Whether `token` is base64 or hex of text.
pub fn decodes_to_text(token: &str) -> bool {
    base64(token).and_then(text_of).is_some() || hex(token).and_then(text_of).is_some()
}

/// Adds a form unless there are enough already or it is one of them; says whether it did.
fn push(forms: &mut Vec<Form>, text: &str, how: &str) -> bool {
    if forms.len() >= MAX_FORMS || forms.iter().any(|form| form.text == text) {
        return false;
    }
    forms.push(Form {
        text: text.to_owned(),
        how: how.to_owned(),
    });
    true
}

fn then(how: &str, what: &str) -> String {
    if how.is_empty() {
        what.to_owned()
    } else {
        format!("{how}, then {what}")
    }
}

/// `text` with its percent-encoding and `\x`, `\u` and HTML escapes decoded. Percent-encoded
/// bytes are gathered first, so a UTF-8 sequence split over several `%XX` decodes whole.
fn unescape(text: &str) -> String {
    let mut bytes = Vec::with_capacity(text.len());
    let mut last = 0;
    for captures in ESCAPE.captures_iter(text) {
        let whole = captures.get(0).expect("group 0");
        bytes.extend_from_slice(&text.as_bytes()[last..whole.start()]);
        last = whole.end();
        // Groups 1 and 2 are bytes (`%XX`, `\xXX`), 5 a decimal code point, the others hex ones.
        let (group, digits) = (1..=6)
            .find_map(|group| captures.get(group).map(|m| (group, m.as_str())))
            .expect("one group matches");
        let (radix, byte) = match group {
            1 | 2 => (16, true),
            5 => (10, false),
            _ => (16, false),
        };
        let value = u32::from_str_radix(digits, radix).expect("digits");
        if byte {
            bytes.push(value as u8);
        } else {
            let c = char::from_u32(value).unwrap_or(char::REPLACEMENT_CHARACTER);
            bytes.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
        }
    }
    bytes.extend_from_slice(&text.as_bytes()[last..]);
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The bytes of a base64 run in either alphabet, padded or not.
fn base64(run: &str) -> Option<Vec<u8>> {
    let digits = run.trim_end_matches('=');
    if digits.len() < MIN_RUN || digits.len() % 4 == 1 {
        return None;
    }
    let mut bytes = Vec::with_capacity(digits.len() * 3 / 4);
    let (mut buffer, mut bits) = (0u32, 0u32);
    for c in digits.bytes() {
        let value = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        buffer = (buffer << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            bytes.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    Some(bytes)
}

/// The bytes of a hex run (`0x`-prefixed, or with separators between bytes).
fn hex(run: &str) -> Option<Vec<u8>> {
    let run = run
        .strip_prefix("0x")
        .or_else(|| run.strip_prefix("0X"))
        .unwrap_or(run);
    let digits: Vec<u8> = run.bytes().filter(u8::is_ascii_hexdigit).collect();
    if digits.len() < MIN_RUN || digits.len() % 2 == 1 {
        return None;
    }
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect()
}

/// Decoded bytes as text, when they are text: UTF-8 without control characters other than
/// line breaks and tabs. Random bytes (a hash, a compressed blob) almost never are.
fn text_of(bytes: Vec<u8>) -> Option<String> {
    let text = String::from_utf8(bytes).ok()?;
    let printable = text
        .chars()
        .all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t'));
    (printable && !text.trim().is_empty()).then_some(text)
}
