//! `wbsim report RESULTS... [--out DIR] [--live FILE]...`: regenerates
//! DIR/report.md and DIR/index.html from results files (or directories of
//! them) alone, with live probe results beside them.
//!
//! Exits 0 when the report is written, even if it marks failed runs (they
//! were reported when they ran); bad input is an error naming the file.

use std::path::PathBuf;

use clap::Args as ClapArgs;

use crate::experiment::report::{self, Run};

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Results files (*.json) or directories of them.
    #[arg(value_name = "RESULTS", required = true)]
    pub results: Vec<PathBuf>,
    /// Where report.md and index.html go.
    #[arg(long, value_name = "DIR", default_value = "report")]
    pub out: PathBuf,
    /// Live probe results (same format) to show beside the simulated ones;
    /// repeatable; files or directories.
    #[arg(long, value_name = "FILE")]
    pub live: Vec<PathBuf>,
}

/// Loads `--live` inputs (none given: none).
pub fn load_live(paths: &[PathBuf]) -> anyhow::Result<Vec<Run>> {
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    Ok(report::load_runs(paths)?)
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let runs = report::load_runs(&args.results)?;
    let live = load_live(&args.live)?;
    let r = report::build(&runs, &live);
    let (md, html) = r.write(&args.out)?;
    print!("{}", r.summary);
    println!("wrote {} and {}", md.display(), html.display());
    Ok(0)
}
