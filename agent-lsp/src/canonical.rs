//! Canonical JSON: compact, object keys sorted at every depth.
//!
//! Digests and request bodies must be byte-stable across runs and across dependency feature
//! flags (serde_json's `preserve_order` would silently change key order), so they are written
//! through this function instead of relying on the map type.

use serde_json::Value;

/// Serialize `value` compactly with object keys in byte order at every depth.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_value(value, &mut out);
    out
}

fn write_value(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries = map.iter().collect::<Vec<_>>();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (index, (key, value)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_scalar(&Value::String(key.clone()), out);
                out.push(':');
                write_value(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_value(item, out);
            }
            out.push(']');
        }
        scalar => write_scalar(scalar, out),
    }
}

fn write_scalar(value: &Value, out: &mut String) {
    // Serializing a scalar cannot fail: there is no map key or custom Serialize involved.
    out.push_str(&serde_json::to_string(value).unwrap_or_default());
}

/// Hex SHA-256 of `text`, used for system prompt and tool catalog digests.
pub fn sha256_hex(text: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorts_keys_at_every_depth() {
        let value = json!({"b": {"z": 1, "a": [ {"y": 2, "x": "é\n"} ]}, "a": null});
        assert_eq!(
            canonical_json(&value),
            r#"{"a":null,"b":{"a":[{"x":"é\n","y":2}],"z":1}}"#
        );
    }
}
