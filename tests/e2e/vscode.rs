//! The VS Code extension, through npm: its TypeScript build and unit tests, its package (the
//! `.vsix`), and its end-to-end test in a real VS Code (code-server with the `.vsix` installed,
//! pyright behind the `agent-lsp` built here, the loopback model endpoint as a process, the
//! system Chromium driven by playwright-core; editors/vscode/e2e/). `.ci/tools.sh` installs
//! the npm packages and code-server. The nextest configuration runs this test alone: a browser
//! and a VS Code beside other tests on two cores would make its waits the slowest in the suite.

use std::path::Path;
use std::process::Command;

fn npm(dir: &Path, args: &[&str], bin_dir: &Path) {
    let output = Command::new("npm")
        .current_dir(dir)
        .args(args)
        .env("AGENT_LSP_BIN_DIR", bin_dir)
        .env_remove("DEEPSEEK_API_KEY")
        .output()
        .unwrap_or_else(|error| panic!("cannot run npm {args:?}: {error}"));
    assert!(
        output.status.success(),
        "npm {args:?} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn vscode_extension_builds_packages_and_works_in_a_real_vs_code() {
    let extension = crate::editors::repo().join("editors/vscode");
    assert!(
        extension.join("node_modules").is_dir(),
        "editors/vscode/node_modules is missing: run `bash .ci/tools.sh`"
    );
    let bin_dir = agent_tests::workspace_bin("agent-lsp")
        .parent()
        .unwrap()
        .to_owned();
    // The model endpoint the UI test starts as a process is built with the tests.
    agent_tests::workspace_bin("model-endpoint");
    npm(&extension, &["run", "--silent", "compile"], &bin_dir);
    npm(&extension, &["test"], &bin_dir);
    npm(&extension, &["run", "--silent", "package"], &bin_dir);
    npm(&extension, &["run", "--silent", "test:ui"], &bin_dir);
}
