//! The configured servers as the registry uses them: each with its file matcher compiled once,
//! its program looked up once and its probe run at most once, so "which server serves this
//! path" is cheap on every `didOpen`, query and file of a workspace walk.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::config::{
    BridgeConfig, FileMatcher, ProbeFailure, ServerConfig, find_program, language_id, probe,
};

/// One configured server.
pub(super) struct Server {
    pub(super) config: Arc<ServerConfig>,
    matcher: FileMatcher,
    /// Where its command was found when the bridge was made; `None`: not installed.
    program: Option<PathBuf>,
    /// The outcome of its probe, once asked.
    probe: OnceLock<Result<(), ProbeFailure>>,
}

impl Server {
    /// Found and not known to be broken; runs the probe the first time it is asked.
    fn usable(&self) -> bool {
        self.program.is_some() && self.probe().is_ok()
    }

    fn probe(&self) -> &Result<(), ProbeFailure> {
        self.probe
            .get_or_init(|| match (&self.program, &self.config.probe_args) {
                (Some(program), Some(args)) => probe(&self.config, program, args),
                _ => Ok(()),
            })
    }

    fn probed(&self) -> bool {
        self.program.is_none() || self.probe.get().is_some()
    }
}

/// Every configured server, in preference order.
pub(super) struct Catalog {
    servers: Vec<Server>,
}

impl Catalog {
    pub(super) fn new(config: &BridgeConfig) -> Catalog {
        let servers: Vec<_> = config
            .servers
            .iter()
            .map(|server| Server {
                config: Arc::new(server.clone()),
                matcher: FileMatcher::new(server),
                program: find_program(&server.command),
                probe: OnceLock::new(),
            })
            .collect();
        tracing::info!(
            found = ?servers.iter().filter(|server| server.program.is_some()).map(|server| server.config.name.as_str()).collect::<Vec<_>>(),
            "language servers found"
        );
        Catalog { servers }
    }

    /// The first server that matches `path`, is installed and can run (probing it if that is
    /// not known yet: a blocking call of at most a few seconds, once per server).
    pub(super) fn serving(&self, path: &Path) -> Option<Arc<ServerConfig>> {
        self.servers
            .iter()
            .filter(|server| server.matcher.is_match(path))
            .find(|server| server.usable())
            .map(|server| server.config.clone())
    }

    /// Whether [`Catalog::serving`] may have to run a probe for `path`.
    pub(super) fn needs_probe(&self, path: &Path) -> bool {
        self.servers
            .iter()
            .any(|server| !server.probed() && server.matcher.is_match(path))
    }

    /// The probe failure of server `name`, if it was probed and cannot run.
    pub(super) fn probe_failure(&self, name: &str) -> Option<ProbeFailure> {
        let server = self
            .servers
            .iter()
            .find(|server| server.config.name == name)?;
        server.probe().as_ref().err().cloned()
    }

    /// Why no server serves `path`, in one line: none configured, none installed, or the
    /// installed ones cannot run.
    pub(super) fn no_server_reason(&self, path: &Path) -> String {
        let kind = language_id(path).map(str::to_owned).unwrap_or_else(|| {
            path.extension().map_or("these".to_owned(), |extension| {
                format!(".{}", extension.to_string_lossy())
            })
        });
        let candidates: Vec<_> = self
            .servers
            .iter()
            .filter(|server| server.matcher.is_match(path))
            .collect();
        if candidates.is_empty() {
            return format!(
                "no configured language server handles {kind} files; add a [server.NAME] table for one"
            );
        }
        if let Some(failure) = candidates
            .iter()
            .find_map(|server| server.probe.get().and_then(|probe| probe.as_ref().err()))
        {
            return format!(
                "{} (`agent-lsp servers` shows its output); install it properly or set its `command`",
                failure.brief()
            );
        }
        let names: Vec<_> = candidates
            .iter()
            .map(|server| {
                format!(
                    "`{}` (command `{}`)",
                    server.config.name, server.config.command
                )
            })
            .collect();
        format!(
            "{} would serve {kind} files but none is installed (not found on PATH); install one or set its `command`",
            names.join(", ")
        )
    }
}
