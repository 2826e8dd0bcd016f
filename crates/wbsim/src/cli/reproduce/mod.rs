//! `wbsim reproduce [--quick] [--only ID]... [--jobs N] [--out DIR]
//! [--live FILE]... [--scenario FILE]...`: runs every built-in experiment
//! that has a scenario (every variant x sweep point x repetition) in
//! parallel across runs, writes one file per run to DIR/results, then
//! DIR/report.md and DIR/index.html made from the results files, and a
//! summary table on stdout.
//!
//! Which built-in experiments run without `--only` is [`IN_REPRODUCE`]
//! (one line each); `--only ID` runs any experiment with a scenario.
//!
//! Each run is single-threaded (docs/design.md principle 4); a rayon pool of
//! `--jobs` threads runs several at once, sweep points included (each
//! variant x sweep point x repetition is its own run). Runs start longest
//! first (by simulated duration), so a slow sweep does not trail alone. A failed (or panicking) run
//! leaves a failed-run record instead of results, the others go on, the
//! report marks it, and the exit code is 1. Files of earlier runs of the
//! selected scenarios are removed first; results of other experiments in
//! DIR/results stay and are reported too. Leaves out scheduling by
//! measured cost (simulated duration stands in for it).

mod plan;
mod progress;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::Args as ClapArgs;
use rayon::prelude::*;

use crate::experiment::catalog::{self, EXPERIMENTS};
use crate::experiment::report::{self, input, FailedRun};
use crate::experiment::runner::{run_one, RunOptions};
use crate::experiment::scenario::{self, Scenario};

use plan::Planned;
use progress::Progress;

/// The built-in experiments `wbsim reproduce` runs when no `--only` is
/// given, with whether each is in. One line per experiment: turning one on
/// or off is a one-line change. An experiment without a built-in scenario
/// is reported as still to come either way.
pub const IN_REPRODUCE: &[(&str, bool)] = &[
    ("cgwb-umount", true),
    ("btrfs-csum-commit-root", true),
    ("lazy-umount", true),
    // E4: off: its full sweep (24 points of 40 s simulated) took 9 min of
    // wall time with --jobs 2 on 2026-11-28 (loaded machine; `--quick`
    // about 3 min with one job), far from the 60 s target, because the
    // model writes back 9-29x the published rate (see docs/experiments.md
    // E4); `--only E4` runs it.
    ("parallel-writeback", false),
    ("dontcache", true),
];

/// Whether `id` runs by default (an experiment the list does not name
/// runs: a new catalog entry is in until listed otherwise).
pub fn in_reproduce(id: &str) -> bool {
    IN_REPRODUCE
        .iter()
        .find(|(e, _)| *e == id)
        .is_none_or(|(_, on)| *on)
}

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Shortened runs (for tests and a first look).
    #[arg(long)]
    pub quick: bool,
    /// Only this experiment (id like `lazy-umount` or code like `E3`, or the
    /// name of a `--scenario`); repeatable.
    #[arg(long = "only", value_name = "ID")]
    pub only: Vec<String>,
    /// Runs at once (default: the number of CPUs).
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Output directory: DIR/results/*.json, DIR/report.md, DIR/index.html.
    #[arg(long, value_name = "DIR", default_value = "report")]
    pub out: PathBuf,
    /// Live probe results to show beside the simulated ones; repeatable.
    #[arg(long, value_name = "FILE")]
    pub live: Vec<PathBuf>,
    /// Also run this scenario file (its `[scenario] name` is its id; one
    /// named like a built-in experiment replaces it); repeatable.
    #[arg(long = "scenario", value_name = "FILE")]
    pub scenarios: Vec<PathBuf>,
    /// Keep every fio clone's own statistics entry (results `jobs` and
    /// `fio.JOB.N.*` metrics) even beyond 128 clones without
    /// group_reporting, where they are otherwise aggregated per job (as
    /// `[measure] per_job = true`).
    #[arg(long)]
    pub per_job: bool,
    /// Refuse a `--scenario` whose run is estimated to need more memory
    /// than this (bytes, or 4g, 512m...), as `wbsim run` does.
    #[arg(long, value_name = "SIZE", default_value = "4g",
          value_parser = crate::experiment::validate::parse_max_memory)]
    pub max_memory: u64,
}

/// The scenarios selected by `--only` (all if none): built-ins with a
/// scenario, then `--scenario` files.
fn select(args: &Args) -> anyhow::Result<Vec<Scenario>> {
    let mut extra = Vec::new();
    for p in &args.scenarios {
        let s = scenario::load(p)?;
        crate::experiment::validate::validate_with_limit(&s, args.max_memory, args.per_job)?;
        extra.push(s);
    }
    for name in &args.only {
        if catalog::find(name).is_none() && !extra.iter().any(|s| s.name == *name) {
            let mut known: Vec<_> = EXPERIMENTS.iter().map(|e| e.id.to_string()).collect();
            known.extend(extra.iter().map(|s| s.name.clone()));
            anyhow::bail!(
                "--only {name}: no such experiment (known: {})",
                known.join(", ")
            );
        }
    }
    let wanted = |id: &str| {
        (args.only.is_empty() && in_reproduce(id))
            || args
                .only
                .iter()
                .any(|n| n == id || catalog::find(n).is_some_and(|e| e.id == id))
    };
    let mut out = Vec::new();
    if args.only.is_empty() {
        for e in EXPERIMENTS.iter().filter(|e| !in_reproduce(e.id)) {
            println!(
                "{} {:<24} not in the default set (cli/reproduce IN_REPRODUCE); --only {} runs it",
                e.code, e.id, e.code
            );
        }
    }
    for e in EXPERIMENTS.iter().filter(|e| wanted(e.id)) {
        if extra.iter().any(|s| s.name == e.id) {
            continue;
        }
        match e.load_scenario() {
            Some(s) => out.push(s?),
            None => println!(
                "{} {:<24} still to come: no built-in scenario yet (comes with {})",
                e.code, e.id, e.comes_with
            ),
        }
    }
    out.extend(extra.into_iter().filter(|s| wanted(&s.name)));
    Ok(out)
}

/// Removes result and failed-run files of `scenarios` from `dir`.
fn remove_stale(dir: &Path, scenarios: &[Scenario]) -> anyhow::Result<()> {
    for f in input::json_files(dir)? {
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if scenarios
            .iter()
            .any(|s| name.starts_with(&format!("{}__", input::sanitize(&s.name))))
        {
            std::fs::remove_file(&f).with_context(|| format!("{}: cannot remove", f.display()))?;
        }
    }
    Ok(())
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

/// Makes one run and writes its file; returns the error if it failed.
fn execute(p: &Planned<'_>, opts: &RunOptions, dir: &Path) -> Result<(), String> {
    let name = &p.scenario.name;
    let outcome = match &p.variant {
        Err(e) => Err(e.clone()),
        Ok(v) => match catch_unwind(AssertUnwindSafe(|| run_one(p.scenario, v, p.seed, opts))) {
            Ok(Ok(mut r)) => {
                super::run::annotate(&mut r, p.scenario, &v.name);
                Ok(r)
            }
            Ok(Err(e)) => Err(e.message),
            Err(panic) => Err(format!("the run panicked: {}", panic_text(panic.as_ref()))),
        },
    };
    match outcome {
        Ok(r) => r
            .save(input::results_path(dir, name, &p.label, p.seed))
            .map_err(|e| e.to_string()),
        Err(e) => {
            let rec = FailedRun::new(name, &p.label, p.seed, &e);
            let path = input::failed_path(dir, name, &p.label, p.seed);
            rec.save(&path).map_err(|w| format!("{e}; and {w}"))?;
            Err(e)
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    println!(
        "wbsim reproduce{}",
        if args.quick { " --quick" } else { "" }
    );
    let scenarios = select(&args)?;
    let live = super::report::load_live(&args.live)?;
    let results_dir = args.out.join("results");
    std::fs::create_dir_all(&results_dir)
        .with_context(|| format!("{}: cannot create", results_dir.display()))?;
    remove_stale(&results_dir, &scenarios)?;

    let mut planned = plan::plan(&scenarios, args.quick);
    plan::longest_first(&mut planned, args.quick);
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
        .max(1);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .build()
        .context("cannot start the thread pool")?;
    let opts = RunOptions {
        quick: args.quick,
        per_job: args.per_job,
        ..RunOptions::default()
    };
    let progress = Progress::new(planned.len());
    let outcomes: Vec<Result<(), String>> = pool.install(|| {
        planned
            .par_iter()
            .map(|p| {
                let t = Instant::now();
                let r = execute(p, &opts, &results_dir);
                let what = format!("{} [{}] seed {}", p.scenario.name, p.label, p.seed);
                match &r {
                    Ok(()) => progress.finished(
                        &what,
                        true,
                        &format!("({:.1} s)", t.elapsed().as_secs_f64()),
                    ),
                    Err(e) => progress.finished(&what, false, e),
                }
                r
            })
            .collect()
    });
    progress.finish();
    let failed = outcomes.iter().filter(|r| r.is_err()).count();

    let files = input::json_files(&results_dir)?;
    let runs = if files.is_empty() {
        Vec::new()
    } else {
        report::load_runs(std::slice::from_ref(&results_dir))?
    };
    let rep = report::build(&runs, &live);
    let (md, html) = rep.write(&args.out)?;
    println!();
    print!("{}", rep.summary);
    println!(
        "{} run(s) of {} scenario(s) on {jobs} thread(s): {} ok, {failed} failed",
        planned.len(),
        scenarios.len(),
        planned.len() - failed
    );
    println!(
        "wrote {}, {} and {}",
        results_dir.display(),
        md.display(),
        html.display()
    );
    Ok(if failed > 0 { 1 } else { 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reproduce_list_names_every_experiment_once() {
        for e in EXPERIMENTS {
            let n = IN_REPRODUCE.iter().filter(|(id, _)| *id == e.id).count();
            assert_eq!(n, 1, "{} in IN_REPRODUCE", e.id);
        }
        assert_eq!(IN_REPRODUCE.len(), EXPERIMENTS.len());
        assert!(!in_reproduce("parallel-writeback"));
        assert!(in_reproduce("dontcache"));
        assert!(in_reproduce("a-new-experiment"));
    }
}
