//! `[plugins.preset_authoring]`: the agent builds presets (the `creative` preset's plugin).
//!
//! The plugin brings the `preset_write` tool and one system-prompt section, [`GUIDE`]: the
//! preset reference people read (`presets/README.md`) and the built-in `standard` preset as an
//! example, compiled in, so the agent is told exactly what the documentation says and the
//! section is the same for the session's whole life.
//!
//! `preset_write` checks the text before anything is written, with the checks a session's start
//! runs on a preset (the strict parse, the plugin tables, the tool names); those are given to the
//! tool as a value ([`Validate`]), because the part that knows every plugin sits above the tools
//! and the presets. An invalid preset is not saved, and the model gets the checker's error as it
//! is (the file it would have been, the line and the key), so it can correct the text and call
//! again.
//!
//! What the tool may write is narrow: a file named after a preset name (see
//! [`catalog::check_name`]) in the user's presets folder or the workspace's
//! `.agent-lsp/presets/`, nothing else. It never takes a built-in preset's name (a user preset
//! of that name would replace the built-in for every later session; `agent-lsp preset new` is
//! how a person does that), never writes a workspace preset that a user preset of the same name
//! would hide, and replaces an existing preset only when the call says `overwrite`.
//!
//! A preset is permissions, so saving one is a way to give the agent rights: a preset the user
//! runs by name, or the one every session gets (the config file's `preset`), replaced by one
//! that allows `shell` means the next plain `run` runs commands unasked. So `preset_write`
//! needs the user's approval, whatever the running preset says of it, when the preset it saves
//! lets a session do more without asking than the preset running now or than the preset of
//! that name it replaces (a permission looser by any step, `ask` to `allow` as much as a tool
//! not enabled to `ask`, since `--yes` answers every question; MCP servers started; a looser
//! `protected_paths`), and always when it takes the name of the preset new sessions get
//! (`approval.rs`). A preset no looser than both is saved without asking.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::Deserialize;

use super::catalog::{self, PresetDirs, Scope, Source, WORKSPACE_PRESETS_DIR};
use crate::context::system_prompt::SystemPrompt;
use crate::permissions::Rights;
use crate::plugin::Plugin;
use crate::plugin::outcomes::ToolOutput;
use crate::plugin::registry::{Parts, PluginSettings};
use crate::plugin::tool::ToolContext;
use crate::plugin::typed::TypedTool;
use crate::session::Session;
use crate::tools::blocking;
use crate::workspace::Workspace;

mod approval;

/// The checks a preset's text must pass to be saved: `(workspace, name, origin, text)`, where
/// `origin` is how errors name the file.
pub type Validate = Arc<dyn Fn(&Path, &str, &str, &str) -> anyhow::Result<()> + Send + Sync>;

/// The system-prompt section of `[plugins.preset_authoring]`.
pub const GUIDE: &str = concat!(
    "# Building presets\n\n",
    "You build agent-lsp presets with the user: TOML files that choose the model settings, the tools, the permissions and the plugins of a session. ",
    "Ask what the preset is for when the request does not say; look at the workspace (`read`, `list`, `glob`, `grep`) when the preset should fit the project. ",
    "Save each preset with `preset_write`. It checks the text as `--preset` does and saves nothing when something is wrong: its error names the file, the line and the key, so correct exactly that and call it again. ",
    "Prefer the fewest tools and the strictest permissions that do the job, and never allow `shell` unless the user asks for it. ",
    "When a preset is saved, tell the user its name, where it is and how to start it (`agent-lsp run --preset NAME`).\n\n",
    "The preset reference (presets/README.md) follows, then the built-in `standard` preset as an example.\n\n",
    "<preset-reference file=\"presets/README.md\">\n",
    include_str!("../../../presets/README.md"),
    "</preset-reference>\n\n<preset-example file=\"presets/standard.toml\">\n",
    include_str!("../../../presets/standard.toml"),
    "</preset-example>",
);

/// `[plugins.preset_authoring]` of a preset.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PresetAuthoringSettings {
    /// Whether the preset guide and `preset_write` are in the session.
    pub enabled: bool,
}

impl PluginSettings for PresetAuthoringSettings {
    fn enabled(&self) -> bool {
        self.enabled
    }
}

/// The plugin: [`GUIDE`] as a section, and the `preset_write` tool its [`parts`] bring.
pub struct PresetAuthoring;

/// The plugin and its tool.
pub fn parts(tool: PresetWrite) -> Parts {
    Parts {
        plugin: Some(Box::new(PresetAuthoring)),
        tools: vec![Arc::new(tool)],
        shell: None,
    }
}

impl Plugin for PresetAuthoring {
    fn name(&self) -> &'static str {
        "preset_authoring"
    }

    fn contribute(
        &mut self,
        prompt: &mut SystemPrompt,
        _session: &mut Session,
        _turn: u32,
    ) -> anyhow::Result<()> {
        // After the agent's own section (order 0); compiled-in text, so nothing to record.
        prompt.section("preset_authoring", 50, GUIDE);
        Ok(())
    }
}

/// The `preset_write` tool.
#[derive(Clone)]
pub struct PresetWrite {
    /// The user's presets folder; the workspace's comes from each call's workspace.
    user_dir: Option<PathBuf>,
    validate: Validate,
    /// The running preset's name and what it lets a session do; without them every preset
    /// saved is asked for, since nothing tells it allows no more.
    running: (String, Option<Rights>),
    /// The name of the preset new sessions get (the config file's `preset`).
    default_preset: String,
}

impl PresetWrite {
    /// The tool for `user_dir`, the user's presets folder, saving presets that pass `validate`.
    pub fn new(user_dir: Option<PathBuf>, validate: Validate) -> PresetWrite {
        PresetWrite {
            user_dir,
            validate,
            running: (String::new(), None),
            default_preset: super::DEFAULT_PRESET.to_owned(),
        }
    }

    /// The preset running now, which the saved presets are compared with.
    pub fn running(mut self, name: &str, rights: Option<Rights>) -> PresetWrite {
        self.running = (name.to_owned(), rights);
        self
    }

    /// The name of the preset new sessions get.
    pub fn default_preset(mut self, name: String) -> PresetWrite {
        self.default_preset = name;
        self
    }
}

/// The arguments of `preset_write`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The preset's name, which is also its file name without .toml.
    #[schemars(pattern(r"^[a-z0-9][a-z0-9_-]{0,63}$"))]
    name: String,
    /// The whole preset file.
    text: String,
    /// Where to save it (default user).
    #[serde(default)]
    scope: Scope,
    /// Replace an existing preset of this name (default false).
    #[serde(default)]
    overwrite: bool,
}

impl TypedTool for PresetWrite {
    type Args = Args;

    fn name(&self) -> &str {
        "preset_write"
    }

    fn description(&self) -> String {
        "Save a preset (TOML text) under a name, so that `agent-lsp run --preset NAME` uses it. \
                The text is checked first with the same strict checks `--preset` runs: unknown keys, missing required \
                keys, bad values, unknown plugins and unknown tools are errors naming the file, the line and the key, and \
                an invalid preset is not saved; fix the text and call again. scope `user` (default) saves it for every workspace, \
                `workspace` into this workspace's .agent-lsp/presets/. Built-in preset names are taken, and an existing \
                preset is only replaced with overwrite: true."
                .into()
    }

    fn read_only(&self) -> bool {
        false
    }

    /// Why saving this preset needs the user's approval (see the module docs and
    /// `approval.rs`).
    fn approval_reason(&self, workspace: &Workspace, args: &Args) -> Option<String> {
        approval::reason(self, workspace, args)
    }

    fn run(&self, ctx: ToolContext, args: Args) -> BoxFuture<'static, ToolOutput> {
        let tool = self.clone();
        Box::pin(blocking(move || {
            tool.write(&ctx, &args).unwrap_or_else(|output| output)
        }))
    }
}

impl PresetWrite {
    fn write(&self, ctx: &ToolContext, args: &Args) -> Result<ToolOutput, ToolOutput> {
        let name = args.name.as_str();
        catalog::check_name(name).map_err(|error| ToolOutput::error(error.to_string()))?;
        if catalog::builtin_text(name).is_some() {
            return Err(ToolOutput::error(format!(
                "`{name}` is a built-in preset's name, and a preset saved under it would replace the built-in one; choose another name"
            )));
        }
        // The workspace's folder, confined like every path a tool writes.
        let workspace_dir = ctx.resolve(WORKSPACE_PRESETS_DIR)?;
        let dirs = PresetDirs {
            user: self.user_dir.clone(),
            workspace: Some(workspace_dir.clone()),
        };
        let dir = dirs
            .dir(args.scope)
            .map_err(|error| ToolOutput::error(format!("{error:#}")))?
            .to_owned();
        let others = catalog::candidates(name, &dirs)
            .map_err(|error| ToolOutput::error(format!("{error:#}")))?;
        if args.scope == Scope::Workspace && others.iter().any(|found| found.source == Source::User)
        {
            return Err(ToolOutput::error(format!(
                "a user preset named `{name}` exists, and it would be used instead of a workspace preset of that name; choose another name, or save to scope `user` with overwrite: true"
            )));
        }
        let shown = self.shown(ctx, &dir.join(format!("{name}.toml")));
        if let Err(error) = (self.validate)(ctx.workspace.root(), name, &shown, &args.text) {
            return Err(ToolOutput::error(format!(
                "preset `{name}` was not saved, because it is not valid:\n{error:#}\nFix the text and call preset_write again."
            ))
            .with_meta("valid", false));
        }
        let existed = others
            .iter()
            .any(|found| found.source == args.scope.source());
        let within = (args.scope == Scope::Workspace).then(|| ctx.workspace.root());
        let path =
            catalog::save(&dir, name, &args.text, args.overwrite, within).map_err(|error| {
                let hint = if existed && !args.overwrite {
                    "; pass overwrite: true to replace it"
                } else {
                    ""
                };
                ToolOutput::error(format!("{error:#}{hint}"))
            })?;
        let shown = self.shown(ctx, &path);
        let mut text = format!(
            "saved preset `{name}` to {shown} ({} preset); start a session with it: agent-lsp run --preset {name}",
            args.scope.source().as_str()
        );
        if args.scope == Scope::User && others.iter().any(|found| found.source == Source::Workspace)
        {
            text.push_str(&format!(
                "\nit is used instead of the workspace preset `{name}`"
            ));
        }
        Ok(ToolOutput::ok(text)
            .with_meta("source", shown.as_str())
            .with_meta("scope", args.scope.source().as_str())
            .with_meta("replaced", existed)
            .with_meta("valid", true))
    }

    /// A preset file as the model is shown it: relative to the workspace when it is inside it.
    fn shown(&self, ctx: &ToolContext, path: &Path) -> String {
        ctx.workspace.display(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preset::Preset;
    use crate::tools::testing::{Fixture, run};
    use serde_json::json;

    /// `preset_write` saving the user's presets into `user`, checking a text by its parse
    /// alone (also for `approval.rs`'s tests).
    pub(super) fn tool(user: &Path) -> PresetWrite {
        PresetWrite::new(
            Some(user.to_owned()),
            Arc::new(|_, name, origin, text| Preset::parse(name, origin, text).map(|_| ())),
        )
    }

    fn minimal() -> String {
        catalog::builtin_text("minimal").unwrap().to_owned()
    }

    #[tokio::test]
    async fn an_invalid_preset_gets_the_parsers_error_and_is_not_saved() {
        let fx = Fixture::new();
        let user = tempfile::tempdir().unwrap();
        let tool = tool(user.path());
        let broken = minimal().replace("max_steps = 20", "max_steps = 20\nmax_stepz = 3");
        let out = run(
            &tool,
            &fx,
            json!({"name": "mine", "text": broken, "scope": "workspace"}),
        )
        .await;
        assert!(out.is_error, "{}", out.text);
        assert!(
            out.text.contains(".agent-lsp/presets/mine.toml"),
            "{}",
            out.text
        );
        assert!(out.text.contains("line 8"), "{}", out.text);
        assert!(out.text.contains("max_stepz"), "{}", out.text);
        assert!(!fx.root().join(".agent-lsp/presets/mine.toml").exists());

        let out = run(
            &tool,
            &fx,
            json!({"name": "mine", "text": minimal(), "scope": "workspace"}),
        )
        .await;
        assert!(!out.is_error, "{}", out.text);
        assert!(
            out.text.contains("agent-lsp run --preset mine"),
            "{}",
            out.text
        );
        let dirs = PresetDirs {
            user: Some(user.path().to_owned()),
            workspace: Some(fx.root().join(WORKSPACE_PRESETS_DIR)),
        };
        let found = catalog::find("mine", &dirs).unwrap();
        assert_eq!(found.source, Source::Workspace);
        assert_eq!(found.text, minimal());
    }

    #[tokio::test]
    async fn names_built_ins_and_existing_presets_are_guarded() {
        let fx = Fixture::new();
        let user = tempfile::tempdir().unwrap();
        let tool = tool(user.path());
        for (args, expected) in [
            (
                json!({"name": "../x", "text": minimal()}),
                "is not a preset name",
            ),
            (
                json!({"name": "standard", "text": minimal()}),
                "built-in preset's name",
            ),
            (
                json!({"name": "a", "text": minimal(), "scope": "elsewhere"}),
                "invalid arguments",
            ),
        ] {
            let out = run(&tool, &fx, args).await;
            assert!(out.is_error && out.text.contains(expected), "{}", out.text);
        }
        let out = run(&tool, &fx, json!({"name": "mine", "text": minimal()})).await;
        assert!(!out.is_error, "{}", out.text);
        assert!(user.path().join("mine.toml").exists());

        let again = minimal().replace("max_steps = 20", "max_steps = 21");
        let out = run(&tool, &fx, json!({"name": "mine", "text": again})).await;
        assert!(
            out.is_error && out.text.contains("overwrite: true"),
            "{}",
            out.text
        );
        let out = run(
            &tool,
            &fx,
            json!({"name": "mine", "text": again, "overwrite": true}),
        )
        .await;
        assert!(!out.is_error, "{}", out.text);
        assert_eq!(out.meta["replaced"], true);
        assert_eq!(
            std::fs::read_to_string(user.path().join("mine.toml")).unwrap(),
            again
        );

        // A workspace preset the user's `mine` would hide is refused.
        let out = run(
            &tool,
            &fx,
            json!({"name": "mine", "text": minimal(), "scope": "workspace"}),
        )
        .await;
        assert!(
            out.is_error && out.text.contains("user preset"),
            "{}",
            out.text
        );
    }

    #[tokio::test]
    async fn a_workspace_presets_folder_linked_out_is_refused() {
        let fx = Fixture::new();
        let user = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), fx.root().join(".agent-lsp")).unwrap();
        let out = run(
            &tool(user.path()),
            &fx,
            json!({"name": "mine", "text": minimal(), "scope": "workspace"}),
        )
        .await;
        assert!(
            out.is_error && out.text.contains("path refused"),
            "{}",
            out.text
        );
        assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
    }
}
