//! `wbsim check SCENARIO`: validate a scenario (and its fio jobs and every
//! variant and sweep point) without running it. A fio job file (any name but
//! `.toml`) is checked as `wbsim run JOB.fio` would run it, on the default
//! machine, filesystem and device.

use std::path::PathBuf;

use clap::Args as ClapArgs;

use crate::experiment::runner::{plan, RunOptions};
use crate::experiment::{scenario, validate};

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// The scenario file (TOML), or a fio job file (any other name).
    pub scenario: PathBuf,
    /// Refuse a scenario whose run is estimated to need more memory than
    /// this (bytes, or 4g, 512m...); the same limit `wbsim run` applies.
    #[arg(long, value_name = "SIZE", default_value = "4g",
          value_parser = validate::parse_max_memory)]
    pub max_memory: u64,
    /// Keep every fio clone's own statistics entry (results `jobs` and
    /// `fio.JOB.N.*` metrics) even beyond 128 clones without
    /// group_reporting, where they are otherwise aggregated per job (as
    /// `[measure] per_job = true`).
    #[arg(long)]
    pub per_job: bool,
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    let sc = if crate::cli::fio_run::is_fio_file(&a.scenario) {
        let target = crate::cli::fio_run::Target {
            machine: crate::cli::fio_run::DEFAULT_MACHINE.to_string(),
            fs: crate::cli::fio_run::DEFAULT_FS.to_string(),
            device: crate::cli::fio_run::DEFAULT_DEVICE.to_string(),
            duration_ns: None,
        };
        crate::cli::fio_run::build(&a.scenario, &target)?.0
    } else {
        scenario::load(&a.scenario)?
    };
    let summary = validate::validate_with_limit(&sc, a.max_memory, a.per_job)?;
    let nr_jobs = summary.fio_jobs;
    let runs = plan(&sc, &RunOptions::default())?;
    println!(
        "{}: ok: scenario '{}', {} variant(s), {} run(s), {} fio job(s), {} actor(s), \
         about {} MiB per run{}",
        a.scenario.display(),
        sc.name,
        sc.variant_names().len(),
        runs.len(),
        nr_jobs,
        sc.actors.len(),
        summary.est_bytes >> 20,
        if summary.aggregated {
            format!(
                "; {} fio clones: statistics aggregated per job (more than {} without \
                 group_reporting; --per-job keeps one entry per clone)",
                summary.clones,
                crate::workload::fio_exec::PER_JOB_DETAIL_MAX
            )
        } else {
            String::new()
        }
    );
    Ok(0)
}
