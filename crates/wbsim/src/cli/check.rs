//! `wbsim check SCENARIO`: validate a scenario (and its fio jobs and every
//! variant and sweep point) without running it.

use std::path::PathBuf;

use clap::Args as ClapArgs;

use crate::experiment::runner::{plan, RunOptions};
use crate::experiment::scenario;
use crate::workload::fio;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// The scenario file (TOML).
    pub scenario: PathBuf,
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    let sc = scenario::load(&a.scenario)?;
    let mut nr_jobs = 0;
    for j in &sc.jobs {
        let jf = fio::parse_str_at(&j.fio.text, &j.fio.origin, j.fio.line_offset)?;
        nr_jobs += jf.jobs.len();
    }
    let runs = plan(&sc, &RunOptions::default())?;
    println!(
        "{}: ok: scenario '{}', {} variant(s), {} run(s), {} fio job(s), {} actor(s)",
        a.scenario.display(),
        sc.name,
        sc.variant_names().len(),
        runs.len(),
        nr_jobs,
        sc.actors.len()
    );
    Ok(0)
}
