//! `agent-lsp files QUERY`: the ranked `@path` candidates for a query, for scripts and
//! benchmarks. It walks the workspace once, exactly as the editor-facing index does, and ranks
//! with the same code, so what it prints is what completion would offer.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use serde_json::json;

use crate::config::Config;
use crate::file_index::{FileIndex, FilesConfig};
use crate::workspace::Workspace;

#[derive(Debug, clap::Args)]
pub struct FilesArgs {
    /// Candidates to print at most (also capped by `[files] max_candidates`).
    #[arg(long, default_value_t = 20)]
    limit: usize,
    /// One JSON object: the index status and the candidates with score and insert text.
    #[arg(long)]
    json: bool,
    /// Fuzzy query in fzf syntax (`^prefix`, `suffix$`, `'exact`, `!not`); several words must
    /// all match. Empty: the shortest paths.
    #[arg(num_args = 0.., value_name = "QUERY")]
    query: Vec<String>,
}

pub fn run(workspace_dir: &Path, args: FilesArgs) -> anyhow::Result<ExitCode> {
    let config = Config::load()?;
    let workspace = Workspace::new(workspace_dir)?;
    let index = FileIndex::build(&workspace, FilesConfig::from_options(&config.files))?;
    let query = args.query.join(" ");
    let candidates = index
        .query(&query, args.limit)
        .with_context(|| format!("the query `{query}` is refused"))?;
    let status = index.status();

    let mut out = std::io::stdout().lock();
    if args.json {
        let candidates: Vec<_> = candidates
            .iter()
            .map(|candidate| {
                json!({
                    "path": candidate.path,
                    "kind": candidate.kind,
                    "score": candidate.score,
                    "insert_text": candidate.insert_text(),
                })
            })
            .collect();
        let value = json!({
            "query": query,
            "status": status,
            "status_message": status.message(),
            "candidates": candidates,
        });
        writeln!(out, "{value}")?;
    } else {
        if let Some(message) = status.message() {
            eprintln!("agent-lsp: {message}");
        }
        for candidate in &candidates {
            writeln!(out, "{}", candidate.label())?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
