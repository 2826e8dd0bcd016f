//! `wbsim check SCENARIO`: validate a scenario (and its fio jobs and every
//! variant and sweep point) without running it.

use std::path::PathBuf;

use clap::Args as ClapArgs;

use crate::experiment::runner::{plan, RunOptions};
use crate::experiment::{scenario, validate};

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// The scenario file (TOML).
    pub scenario: PathBuf,
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    let sc = scenario::load(&a.scenario)?;
    let nr_jobs = validate::validate(&sc)?.fio_jobs;
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
