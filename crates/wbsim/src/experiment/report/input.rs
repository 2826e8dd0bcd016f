//! The report's inputs: results files (one run each), failed-run records,
//! and directories of them; the file names `wbsim reproduce` gives them.
//!
//! A failed run has no results document, so `reproduce` writes a small
//! record beside the results (`NAME.failed.json`:
//! `{"wbsim_failed_run": 1, "scenario", "variant", "seed", "error"}`) and the
//! report, made from files only, can still mark it. Leaves out recursion
//! into subdirectories and any file not ending in `.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::experiment::results::{Results, ResultsError};

/// Suffix of a failed-run record.
pub const FAILED_SUFFIX: &str = ".failed.json";

/// A run that produced no results.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailedRun {
    /// Format marker and version (1).
    pub wbsim_failed_run: u32,
    /// Scenario name (experiment id).
    pub scenario: String,
    /// Variant label.
    pub variant: String,
    /// Seed.
    pub seed: u64,
    /// Why it failed.
    pub error: String,
}

impl FailedRun {
    /// A record of version 1.
    pub fn new(scenario: &str, variant: &str, seed: u64, error: &str) -> FailedRun {
        FailedRun {
            wbsim_failed_run: 1,
            scenario: scenario.to_string(),
            variant: variant.to_string(),
            seed,
            error: error.to_string(),
        }
    }

    /// Writes the record (pretty JSON) to `path`.
    pub fn save(&self, path: &Path) -> Result<(), ReportError> {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        std::fs::write(path, text).map_err(|e| ReportError::io(path, e))
    }
}

/// One run as the report sees it.
#[derive(Clone, Debug)]
pub enum Run {
    /// It produced results.
    Done(Box<Results>),
    /// It failed.
    Failed(FailedRun),
}

impl Run {
    /// (scenario, variant label, seed).
    pub fn key(&self) -> (&str, &str, u64) {
        match self {
            Run::Done(r) => (&r.scenario, &r.variant, r.seed),
            Run::Failed(f) => (&f.scenario, &f.variant, f.seed),
        }
    }
}

/// Errors reading inputs or writing the report.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A results file is unreadable or malformed.
    #[error(transparent)]
    Results(#[from] ResultsError),
    /// A file or directory could not be read or written.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A failed-run record is malformed.
    #[error("{path}: not a wbsim failed-run record: {message}")]
    FailedRecord {
        /// The file.
        path: String,
        /// serde_json's message.
        message: String,
    },
    /// The same run appears in two files.
    #[error("{second}: run {scenario} [{variant}] seed {seed} is also in {first}")]
    Duplicate {
        /// The first file.
        first: String,
        /// The second file.
        second: String,
        /// Scenario.
        scenario: String,
        /// Variant label.
        variant: String,
        /// Seed.
        seed: u64,
    },
    /// Nothing to report.
    #[error("no results files (*.json) in {0}")]
    Empty(String),
}

impl ReportError {
    /// An I/O error on `path`.
    pub fn io(path: &Path, e: std::io::Error) -> ReportError {
        ReportError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        }
    }
}

/// `s` with every character outside `[A-Za-z0-9._-]` replaced by `_`
/// (`ino_mod[nr_wb_ctx=4]` -> `ino_mod_nr_wb_ctx_4_`).
pub fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The file stem of a run: `SCENARIO__VARIANT__seedN`.
pub fn run_stem(scenario: &str, variant: &str, seed: u64) -> String {
    format!("{}__{}__seed{seed}", sanitize(scenario), sanitize(variant))
}

/// The results file of a run in `dir`.
pub fn results_path(dir: &Path, scenario: &str, variant: &str, seed: u64) -> PathBuf {
    dir.join(format!("{}.json", run_stem(scenario, variant, seed)))
}

/// The failed-run record of a run in `dir`.
pub fn failed_path(dir: &Path, scenario: &str, variant: &str, seed: u64) -> PathBuf {
    dir.join(format!(
        "{}{FAILED_SUFFIX}",
        run_stem(scenario, variant, seed)
    ))
}

/// Reads one file: a failed-run record (by its marker) or a results document.
pub fn load_run(path: &Path) -> Result<Run, ReportError> {
    let text = std::fs::read_to_string(path).map_err(|e| ReportError::io(path, e))?;
    let origin = path.display().to_string();
    let is_failed = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .is_some_and(|v| v.get("wbsim_failed_run").is_some());
    if is_failed {
        let f: FailedRun = serde_json::from_str(&text).map_err(|e| ReportError::FailedRecord {
            path: origin,
            message: e.to_string(),
        })?;
        return Ok(Run::Failed(f));
    }
    Ok(Run::Done(Box::new(Results::from_json(&text, &origin)?)))
}

/// The `*.json` files of `dir`, sorted by name.
pub fn json_files(dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| ReportError::io(dir, e))? {
        let p = entry.map_err(|e| ReportError::io(dir, e))?.path();
        if p.is_file() && p.extension().is_some_and(|x| x == "json") {
            files.push(p);
        }
    }
    files.sort();
    Ok(files)
}

/// Reads every run in `paths` (files, or directories of `*.json`), sorted
/// by (scenario, variant, seed) so the order never depends on the order of
/// the arguments or of the directory. Errors name the file; the same run
/// in two files is an error; no run at all is [`ReportError::Empty`].
pub fn load_runs(paths: &[PathBuf]) -> Result<Vec<Run>, ReportError> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            files.extend(json_files(p)?);
        } else {
            files.push(p.clone());
        }
    }
    files.sort();
    files.dedup();
    let mut by_key: BTreeMap<(String, String, u64), (PathBuf, Run)> = BTreeMap::new();
    for f in files {
        let run = load_run(&f)?;
        let (s, v, seed) = run.key();
        let key = (s.to_string(), v.to_string(), seed);
        if let Some((first, _)) = by_key.get(&key) {
            return Err(ReportError::Duplicate {
                first: first.display().to_string(),
                second: f.display().to_string(),
                scenario: key.0,
                variant: key.1,
                seed,
            });
        }
        by_key.insert(key, (f, run));
    }
    if by_key.is_empty() {
        let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        return Err(ReportError::Empty(shown.join(", ")));
    }
    Ok(by_key.into_values().map(|(_, r)| r).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_file_safe() {
        assert_eq!(
            run_stem("parallel-writeback", "ino_mod[nr_wb_ctx=4]", 3),
            "parallel-writeback__ino_mod_nr_wb_ctx_4___seed3"
        );
        assert_eq!(sanitize("a/b c"), "a_b_c");
    }
}
