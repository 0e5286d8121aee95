//! The `jobs` plugin: its preset table, the tools it brings (`shell` with `background`,
//! `job_output`, `job_kill`, `job_list`, all sharing one [`JobTable`], which posts its jobs on
//! the host's activity board), and the runtime-context notice of a job that ended by itself or
//! was stopped from the editor.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;

use super::JobTable;
use super::tools::{JobKill, JobList, JobOutput, JobShell};
use crate::plugin::registry::{InvalidSetting, Parts, PluginHost, PluginSettings};
use crate::plugin::{Plugin, RuntimeContribution};
use crate::session::History;

/// The plugin's name, in presets and in the sources of its runtime-context messages.
pub const PLUGIN: &str = "jobs";

/// `[plugins.jobs]` of a preset.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobsSettings {
    pub enabled: bool,
    /// The most output one `job_output` returns, in bytes: its first and last half when there
    /// is more (the rest is one `since` away).
    #[serde(default = "default_output_bytes")]
    pub output_bytes: u64,
    /// The output a job keeps on disk, in bytes; older output is dropped, and a read that asks
    /// for it says so.
    #[serde(default = "default_spool_bytes")]
    pub spool_bytes: u64,
    /// The last lines of output a job's end notice shows.
    #[serde(default = "default_notice_lines")]
    pub notice_lines: usize,
    /// Jobs that may run at once; `shell` refuses another until one ends.
    #[serde(default = "default_max_running")]
    pub max_running: usize,
}

fn default_output_bytes() -> u64 {
    16 * 1024
}

fn default_spool_bytes() -> u64 {
    8 * 1024 * 1024
}

fn default_notice_lines() -> usize {
    10
}

fn default_max_running() -> usize {
    8
}

impl JobsSettings {
    /// The settings of a table without a preset (tests).
    pub fn enabled() -> JobsSettings {
        JobsSettings {
            enabled: true,
            output_bytes: default_output_bytes(),
            spool_bytes: default_spool_bytes(),
            notice_lines: default_notice_lines(),
            max_running: default_max_running(),
        }
    }
}

impl PluginSettings for JobsSettings {
    fn enabled(&self) -> bool {
        self.enabled
    }

    fn validate(&self) -> Result<(), InvalidSetting> {
        InvalidSetting::within("output_bytes", self.output_bytes, 1024..=128 * 1024)?;
        InvalidSetting::at_least("spool_bytes", self.spool_bytes, 64 * 1024)?;
        InvalidSetting::within("notice_lines", self.notice_lines, 1..=200)?;
        InvalidSetting::at_least("max_running", self.max_running, 1)?;
        Ok(())
    }
}

/// Announces the jobs that ended without `job_kill`.
pub struct JobsPlugin {
    table: Arc<JobTable>,
}

impl JobsPlugin {
    /// The registry entry: one table for the plugin and its tools.
    pub fn parts(settings: JobsSettings, host: &PluginHost) -> anyhow::Result<Parts> {
        let table = JobTable::new(settings, host.state_dir.clone(), host.activity.clone());
        Ok(Parts {
            plugin: Some(Box::new(JobsPlugin {
                table: table.clone(),
            })),
            shell: Some(Arc::new(JobShell::new(table.clone()))),
            tools: vec![
                Arc::new(JobOutput::new(table.clone())),
                Arc::new(JobKill::new(table.clone())),
                Arc::new(JobList::new(table)),
            ],
        })
    }
}

impl Plugin for JobsPlugin {
    fn name(&self) -> &'static str {
        PLUGIN
    }

    fn runtime_contexts(&mut self, _history: &History) -> anyhow::Result<Vec<RuntimeContribution>> {
        let settings = self.table.settings();
        Ok(self
            .table
            .jobs()
            .iter()
            .filter_map(|job| {
                let end = job.take_announcement()?;
                let facts = BTreeMap::from([
                    ("job".to_owned(), job.id.clone()),
                    ("pid".to_owned(), job.pid.to_string()),
                    ("started".to_owned(), job.started_at.clone()),
                    ("status".to_owned(), end.status()),
                ]);
                let total = job.spool.total();
                let unread = total.saturating_sub(job.read_to());
                let last = job
                    .spool
                    .last_lines(settings.notice_lines, settings.output_bytes / 2);
                let mut text = format!(
                    "<job-ended id=\"{}\">\nThe background job {} (`{}`) ended: {}{} after {:.1} s.\n",
                    job.id,
                    job.id,
                    job.shown_command(),
                    end.status(),
                    end.stopped_clause(),
                    end.after.as_secs_f64()
                );
                if last.is_empty() {
                    text.push_str("It printed nothing.\n");
                } else {
                    text.push_str(&format!(
                        "Its last lines ({total} bytes of output in all, {unread} not read with job_output):\n{last}\n"
                    ));
                }
                text.push_str("</job-ended>");
                Some(RuntimeContribution {
                    source: Some(format!("{PLUGIN}:{}", job.id)),
                    facts,
                    text,
                })
            })
            .collect())
    }
}
