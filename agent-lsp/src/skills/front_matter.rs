//! The front matter of a `SKILL.md`: a YAML mapping between a first `---` line and the next
//! `---` (or `...`) line, then the body.
//!
//! Parsed with `yaml-rust2`: pure Rust, YAML 1.2, and its errors carry the line and column,
//! which a message naming the file needs. (`serde_yaml` is unmaintained; `serde_yml` has had
//! soundness advisories; `serde_norway` carries libyaml translated to unsafe Rust; `saphyr`,
//! the same authors' successor, still changes its API between releases. The front matter is a
//! handful of keys, so no serde layer is needed.)

use yaml_rust2::{Yaml, YamlLoader};

use super::MAX_DESCRIPTION_CHARS;

/// What a `SKILL.md` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrontMatter {
    pub name: String,
    /// On one line: YAML's folded and literal blocks may span several.
    pub description: String,
    /// The instructions, without the front matter.
    pub body: String,
}

/// Parse a `SKILL.md`. The error says what is wrong and where (lines of the file, from 1),
/// without the file's name, which the caller adds.
pub fn parse(text: &str) -> Result<FrontMatter, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let is_fence = |line: &str, closing: bool| {
        let line = line.trim_end();
        line == "---" || closing && line == "..."
    };
    if !lines.next().is_some_and(|line| is_fence(line, false)) {
        return Err(
            "it does not start with front matter: a `---` line, then `name:` and `description:`, then a closing `---` line"
                .into(),
        );
    }
    let mut yaml = String::new();
    let mut closed = false;
    for line in lines.by_ref() {
        if is_fence(line, true) {
            closed = true;
            break;
        }
        yaml.push_str(line);
    }
    if !closed {
        return Err("its front matter has no closing `---` line".into());
    }
    let body = lines.collect::<String>().trim().to_owned();

    let documents = YamlLoader::load_from_str(&yaml).map_err(|error| {
        // The YAML starts on the file's second line.
        let marker = error.marker();
        // The usual cause: a description with `: ` in it, which YAML reads as a second key.
        let hint = if error.info().contains("mapping values are not allowed") {
            "; a value that holds `: ` needs quotes (description: \"…\")"
        } else {
            ""
        };
        format!(
            "its front matter is not valid YAML: {} (line {}, column {}){hint}",
            error.info(),
            marker.line() + 1,
            marker.col() + 1
        )
    })?;
    let Some(Yaml::Hash(mapping)) = documents.first() else {
        return Err("its front matter is not a mapping of keys to values (`name: …`)".into());
    };
    let text_of = |key: &str| match mapping.get(&Yaml::String(key.to_owned())) {
        None | Some(Yaml::Null) => Err(format!("its front matter has no `{key}`")),
        Some(Yaml::String(value)) => Ok(value.clone()),
        Some(_) => Err(format!("`{key}` in its front matter is not a string")),
    };
    let name = text_of("name")?;
    check_name(&name).map_err(|error| format!("`name` in its front matter: {error}"))?;
    let description = text_of("description")?
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if description.is_empty() {
        return Err("`description` in its front matter is empty".into());
    }
    let chars = description.chars().count();
    if chars > MAX_DESCRIPTION_CHARS {
        return Err(format!(
            "`description` in its front matter has {chars} characters; at most {MAX_DESCRIPTION_CHARS} are allowed"
        ));
    }
    Ok(FrontMatter {
        name,
        description,
        body,
    })
}

/// A skill's name: 1 to 64 characters of `a-z`, `0-9`, `-` and `_`, starting with a letter or
/// a digit, as a preset's name.
pub fn check_name(name: &str) -> Result<(), String> {
    let plain = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let valid = (1..=64).contains(&name.len())
        && name.starts_with(plain)
        && name.chars().all(|c| plain(c) || c == '-' || c == '_');
    if valid {
        Ok(())
    } else {
        Err(format!(
            "the name `{name}` is not 1 to 64 characters of a-z, 0-9, `-` and `_` starting with a letter or a digit"
        ))
    }
}
