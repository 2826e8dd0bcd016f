//! fio job files: fio's ini syntax, resolved into typed jobs, and fio's JSON
//! output shape.
//!
//! Models fio (not the kernel): `init.c` `parse_jobs_ini()` (sections,
//! `[global]`, comments), `parse.c` (value syntax: `str_to_decimal()`,
//! `get_mult_bytes()`, `get_mult_time()`), `options.c` `fio_options[]` (the
//! options and their defaults), `filesetup.c` `setup_files()` ("you need to
//! specify size="), and `stat.c` `show_thread_status_json()` (output). Units
//! follow fio's HOWTO with the default `kb_base=1024`. The kernel side these
//! jobs exercise is `O_DIRECT`, `RWF_DONTCACHE` (`include/linux/fs.h`
//! `IOCB_DONTCACHE`, `mm/filemap.c`) and `fsync(2)`.
//!
//! Simplified / left out: only the options in [`options::OPTIONS`] are
//! modelled, and those in [`options::NOT_MODELLED`] accepted and reported
//! (anything else is an error naming the file, line and option); ranges
//! (`bs=4k-8k`), `rw=...:N`, percent sizes and `kb_base=1000` are errors;
//! `iodepth` is clamped to 1 for sync engines.
//!
//! ```
//! use wbsim::workload::fio::{parse_str, RwMode};
//! let jf = parse_str("[global]\nsize=1g\n[seq]\nrw=write\nbs=1m\n", "inline").unwrap();
//! assert_eq!(jf.jobs[0].rw, RwMode::Write);
//! assert_eq!(jf.jobs[0].bs_write_bytes, 1 << 20);
//! ```

pub mod dist;
pub mod iolog;
pub mod job;
pub mod options;
pub mod output;
mod parse;
pub mod units;

use std::fmt;
use std::path::{Path, PathBuf};

pub use job::{BdiKnob, BdiWrite, Fallocate, FioInstance, FioJob, IoEngine, OptionSource, RwMode};
pub use output::{
    FioDdirStats, FioJobOutput, FioLatStats, FioOutput, FioPercentiles, FioSyncStats,
    FIO_DEFAULT_PERCENTILES,
};

/// A parsed job file: every job section, fully resolved, in file order.
#[derive(Clone, Debug, PartialEq)]
pub struct JobFile {
    /// The file read, or the origin name given to [`parse_str`].
    pub path: PathBuf,
    /// Job sections in order (not expanded by `numjobs`; see [`FioJob::instances`]).
    pub jobs: Vec<FioJob>,
    /// Options accepted but not modelled, once each, where first set.
    pub not_modelled: Vec<NotModelled>,
}

/// An option the file sets that wbsim accepts but does not model
/// ([`options::NOT_MODELLED`]).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NotModelled {
    /// File it was first set in.
    pub origin: String,
    /// Line there.
    pub line: u32,
    /// The option.
    pub option: String,
    /// Why it changes nothing the model represents.
    pub why: String,
}

/// What went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FioErrorKind {
    /// The file could not be read.
    Io,
    /// Malformed line or section header.
    Syntax,
    /// An option not in the supported table.
    UnknownOption,
    /// A value that does not parse, or a missing value.
    BadValue,
    /// fio syntax wbsim does not support (`$VAR`, `include`).
    Unsupported,
    /// A resolved job that fio would refuse, or options that conflict.
    Semantic,
}

/// An error in a job file, located by origin, line and option.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct FioError {
    /// File path or scenario origin name.
    pub origin: String,
    /// Line (1-based, line offset applied); 0 when no line applies.
    pub line: u32,
    /// The option concerned, if any.
    pub option: Option<String>,
    pub kind: FioErrorKind,
    /// The message, naming the option.
    pub message: String,
}

impl fmt::Display for FioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.origin, self.message)
        } else {
            write!(f, "{}:{}: {}", self.origin, self.line, self.message)
        }
    }
}

/// Parses job-file text; `origin` names it in errors and becomes `JobFile::path`.
pub fn parse_str(text: &str, origin: &str) -> Result<JobFile, FioError> {
    parse_str_at(text, origin, 0)
}

/// Like [`parse_str`] for text embedded in a larger file: `line_offset` is
/// added to every line number (pass the enclosing file's line just before the
/// first line of `text`).
pub fn parse_str_at(text: &str, origin: &str, line_offset: u32) -> Result<JobFile, FioError> {
    let (jobs, not_modelled) = parse::parse_text(text, origin, line_offset)?;
    Ok(JobFile {
        path: PathBuf::from(origin),
        jobs,
        not_modelled,
    })
}

/// Reads and parses a job file.
pub fn parse_file(path: impl AsRef<Path>) -> Result<JobFile, FioError> {
    let path = path.as_ref();
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| FioError {
        origin: origin.clone(),
        line: 0,
        option: None,
        kind: FioErrorKind::Io,
        message: format!("cannot read fio job file: {e}"),
    })?;
    let (jobs, not_modelled) = parse::parse_text(&text, &origin, 0)?;
    Ok(JobFile {
        path: path.to_path_buf(),
        jobs,
        not_modelled,
    })
}

impl JobFile {
    /// Same as [`parse_file`].
    pub fn from_path(path: impl AsRef<Path>) -> Result<JobFile, FioError> {
        parse_file(path)
    }

    /// Options accepted but not modelled, once each.
    pub fn not_modelled(&self) -> &[NotModelled] {
        &self.not_modelled
    }

    /// The job with this name, if any.
    pub fn job(&self, name: &str) -> Option<&FioJob> {
        self.jobs.iter().find(|j| j.name == name)
    }
}
