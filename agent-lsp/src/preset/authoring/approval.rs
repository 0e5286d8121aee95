//! When `preset_write` needs the user's approval (see `super`'s module docs): the saved
//! preset lets a session do more without asking than the preset running now, or than the
//! preset of that name it replaces or hides (`Rights::beyond`), or it takes the name of the
//! preset new sessions get. A call the tool refuses anyway (a bad or built-in name, a preset
//! that does not parse, an existing preset without `overwrite`) needs none.

use super::{Args, PresetWrite};
use crate::preset::Preset;
use crate::preset::catalog::{self, PresetDirs, Scope, Source, WORKSPACE_PRESETS_DIR};
use crate::workspace::Workspace;

/// Each reason the call needs approval, joined; `None` when it needs none.
pub(super) fn reason(write: &PresetWrite, workspace: &Workspace, args: &Args) -> Option<String> {
    let name = args.name.as_str();
    if catalog::check_name(name).is_err() || catalog::builtin_text(name).is_some() {
        return None;
    }
    let saved = Preset::parse(name, name, &args.text).ok()?.rights();
    let mut reasons = Vec::new();
    if name == write.default_preset {
        reasons.push(format!(
            "`{name}` is the preset every new session gets (the config file's `preset`)"
        ));
    }
    match &write.running {
        (running, Some(rights)) => {
            let more = saved.beyond(rights);
            if !more.is_empty() {
                reasons.push(format!(
                    "it lets a session do more without asking than `{running}`, the preset running now: {}",
                    more.join(", ")
                ));
            }
        }
        (_, None) => reasons.push(
            "what the running preset allows is not known, so the preset cannot be shown to allow no more"
                .to_owned(),
        ),
    }
    let dirs = PresetDirs {
        user: write.user_dir.clone(),
        workspace: Some(workspace.resolve(WORKSPACE_PRESETS_DIR).ok()?),
    };
    let found = catalog::candidates(name, &dirs);
    // A preset the call may not replace or hide is refused by the tool: nothing to ask.
    if let Ok(found) = &found
        && found.iter().any(|other| {
            (other.source == args.scope.source() && !args.overwrite)
                || (args.scope == Scope::Workspace && other.source == Source::User)
        })
    {
        return None;
    }
    // The preset the name stands for now is what the saved one replaces, or hides.
    match found.map(|found| found.into_iter().next()) {
        Ok(None) => {}
        Ok(Some(replaced)) => match replaced.parse() {
            Ok(preset) => {
                let more = saved.beyond(&preset.rights());
                if !more.is_empty() {
                    reasons.push(format!(
                        "it lets a session do more without asking than the preset it replaces ({}): {}",
                        replaced.origin(),
                        more.join(", ")
                    ));
                }
            }
            Err(_) => reasons.push(format!(
                "it replaces {}, which cannot be read to compare",
                replaced.origin()
            )),
        },
        Err(error) => reasons.push(format!(
            "the preset it would replace cannot be read to compare ({error:#})"
        )),
    }
    (!reasons.is_empty()).then(|| reasons.join("; and "))
}

#[cfg(test)]
mod tests {
    use super::super::tests::tool;
    use super::*;
    use crate::plugin::tool::Tool;
    use crate::tools::testing::Fixture;
    use serde_json::{Value, json};

    /// A preset enabling `enabled` with these `[permissions]` lines.
    fn preset(enabled: &[&str], permissions: &str) -> String {
        format!(
            "description = \"x\"\n[model]\nmax_steps = 3\ncontext_window = 1000\n[tools]\nenabled = {enabled:?}\n[permissions]\n{permissions}\n"
        )
    }

    #[test]
    fn a_preset_allowing_more_or_taking_the_default_name_needs_approval() {
        let fx = Fixture::new();
        let user = tempfile::tempdir().unwrap();
        let creative = Preset::builtin("creative").unwrap();
        let write = tool(user.path())
            .running("creative", Some(creative.rights()))
            .default_preset("daily".into());
        let reason = |args: Value| write.approval_reason(&fx.workspace, &args.into());
        let narrow = preset(&["read", "grep"], "default = \"deny\"\nread = \"allow\"");
        assert_eq!(reason(json!({"name": "reader", "text": narrow})), None);
        // Allowing a tool creative lacks, even `ask` (which --yes answers).
        let shell = preset(&["read", "shell"], "default = \"allow\"\nshell = \"ask\"");
        let asked = reason(json!({"name": "runner", "text": shell})).unwrap();
        assert_eq!(
            asked,
            "it lets a session do more without asking than `creative`, the preset running now: `shell`: ask (not enabled there)"
        );
        // The default preset's name, however narrow the preset.
        let asked = reason(json!({"name": "daily", "text": narrow})).unwrap();
        assert!(
            asked.starts_with("`daily` is the preset every new session gets"),
            "{asked}"
        );
        // Replacing a preset by a looser one: the replaced preset is named.
        std::fs::write(
            user.path().join("team.toml"),
            preset(&["read", "shell"], "default = \"deny\"\nshell = \"ask\""),
        )
        .unwrap();
        let looser = preset(&["read", "shell"], "default = \"deny\"\nshell = \"allow\"");
        let asked = reason(json!({"name": "team", "text": looser, "overwrite": true})).unwrap();
        assert!(
            asked.ends_with(&format!(
                "than the preset it replaces ({}): `shell`: allow (ask there)",
                user.path().join("team.toml").display()
            )),
            "{asked}"
        );
        // Calls the tool refuses anyway are not asked about.
        for args in [
            json!({"name": "team", "text": looser}),
            json!({"name": "standard", "text": looser}),
            json!({"name": "x", "text": "not toml"}),
        ] {
            assert_eq!(reason(args), None);
        }
        // Without the running preset's rights, every save is asked about.
        let unknown = tool(user.path());
        assert!(
            unknown
                .approval_reason(
                    &fx.workspace,
                    &json!({"name": "reader", "text": narrow}).into()
                )
                .is_some()
        );
    }
}
