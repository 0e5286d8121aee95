//! Test support for the tools: a real workspace in a tempdir, with real symlinks pointing out.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::plugin::outcomes::ToolOutput;

use crate::plugin::tool::{Tool, ToolContext};
use crate::workspace::Workspace;

/// `tmp/ws` is the workspace (with an empty `sub/`); `tmp/outside` holds `secret.txt`
/// (`needle outside`), which the links `ws/link_file` and `ws/link_dir` point at, and
/// `ws/dangling` points at the missing `tmp/outside/new.txt`.
pub(crate) struct Fixture {
    pub tmp: tempfile::TempDir,
    pub workspace: Arc<Workspace>,
}

impl Fixture {
    pub fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ws");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret.txt"), "needle outside\n").unwrap();
        std::os::unix::fs::symlink(outside.join("secret.txt"), root.join("link_file")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link_dir")).unwrap();
        std::os::unix::fs::symlink(outside.join("new.txt"), root.join("dangling")).unwrap();
        let workspace = Arc::new(Workspace::new(&root).unwrap());
        Fixture { tmp, workspace }
    }

    pub fn root(&self) -> &Path {
        self.workspace.root()
    }

    pub fn outside(&self) -> PathBuf {
        self.tmp.path().join("outside")
    }

    /// Write a file under the root, creating its directories.
    pub fn file(&self, relative: &str, content: &str) {
        let path = self.root().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    pub fn context(&self) -> ToolContext {
        ToolContext::outside_session(
            self.workspace.clone(),
            CancellationToken::new(),
            "test-call",
        )
    }
}

/// Run one tool directly, without the runtime (no permissions, caps or session).
pub(crate) async fn run(tool: &dyn Tool, fx: &Fixture, args: Value) -> ToolOutput {
    tool.run(fx.context(), args.into()).await
}
