//! The report: report.md and a self-contained index.html made from results
//! files only (docs/design.md "Results"), per experiment: the setup, the switch,
//! simulated results per variant, the published figures with the ratio
//! simulated/published, live probe figures, failed runs, and (HTML) plots.
//!
//! One file per job: [`input`] reads runs, [`group`] groups and averages,
//! [`compare`] matches published and live figures, [`plots`] chooses plots,
//! [`svg`] draws them, [`markdown`] and [`html`] write the documents,
//! [`summary`] the short stdout table. Nothing here runs the model, and
//! nothing in the documents depends on the host, the date or thread
//! scheduling: the same inputs give byte-identical files.

pub mod compare;
pub mod format;
pub mod group;
pub mod headline;
pub mod html;
pub mod input;
pub mod markdown;
pub mod plots;
pub mod setup;
pub mod stats;
pub mod summary;
pub mod svg;
pub mod tables;

use std::path::{Path, PathBuf};

pub use input::{load_runs, FailedRun, ReportError, Run};

/// The generated documents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// report.md.
    pub markdown: String,
    /// index.html.
    pub html: String,
    /// The stdout summary table.
    pub summary: String,
}

/// Builds the report of `runs`, with `live` probe runs beside them.
pub fn build(runs: &[Run], live: &[Run]) -> Report {
    let groups = group::group(runs);
    let live_groups = group::group(live);
    Report {
        markdown: markdown::render(&groups, &live_groups, runs.len()),
        html: html::render(&groups, &live_groups, runs.len()),
        summary: summary::render(&groups),
    }
}

impl Report {
    /// Writes `DIR/report.md` and `DIR/index.html`; returns their paths.
    pub fn write(&self, dir: &Path) -> Result<(PathBuf, PathBuf), ReportError> {
        std::fs::create_dir_all(dir).map_err(|e| ReportError::io(dir, e))?;
        let md = dir.join("report.md");
        let html = dir.join("index.html");
        std::fs::write(&md, &self.markdown).map_err(|e| ReportError::io(&md, e))?;
        std::fs::write(&html, &self.html).map_err(|e| ReportError::io(&html, e))?;
        Ok((md, html))
    }
}
