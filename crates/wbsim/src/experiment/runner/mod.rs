//! Runs one scenario variant with one seed: boots the modelled machine, mounts
//! the filesystems, starts the fio jobs and actors, samples metrics, checks the
//! invariants, and returns the results document. Not kernel code.
//!
//! One run is single-threaded and deterministic (docs/design.md principle 4);
//! parallelism is across runs (`wbsim reproduce`). A run ends at the
//! scenario's duration, when every finite workload task (fio clones, actors
//! with a repeat count) has finished, or when an actor's `end_run_after`
//! fires. A model deadlock (every task blocked, no timer) fails the run with
//! the list of blocked tasks.

mod boot;
mod collect;
mod mounts;
mod sampler;

use std::rc::Rc;

use sim::Sim;

use boot::Booted;

use super::results::JobReporting;
use super::results::Results;
use super::scenario::{ResolvedVariant, Scenario};
use crate::workload::actor_exec::spawn_actor;
use crate::workload::fio_exec::{separate_entries, spawn_job_set, PER_JOB_DETAIL_MAX};

/// How a run is shortened or observed.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// `--quick`: the scenario's shortened form (`[scenario] quick_duration`,
    /// `quick_repeat`).
    pub quick: bool,
    /// Repetitions per variant, overriding the scenario's (`--repeat`).
    pub repeat: Option<u32>,
    /// Where the run's trace events go (`--trace`), and which tracepoint
    /// names to keep (`--trace-events`; empty: all). One run only.
    pub trace: Option<TraceOptions>,
    /// `--per-job`: keep every fio clone's own statistics entry even beyond
    /// [`PER_JOB_DETAIL_MAX`] separate clones (as `[measure] per_job`).
    pub per_job: bool,
}

/// `--trace FILE [--trace-events a,b]`: the model's tracepoints, one line
/// per event in the kernel trace buffer's style.
#[derive(Clone, Debug, Default)]
pub struct TraceOptions {
    /// The file written.
    pub path: std::path::PathBuf,
    /// Tracepoint names kept (empty: every event).
    pub events: Vec<String>,
}

/// A line writer that keeps the trace lines whose tracepoint name (the
/// text between `] ` and the next `:`) is in `keep`.
struct TraceFilter {
    out: std::io::BufWriter<std::fs::File>,
    keep: Vec<String>,
    line: Vec<u8>,
}

impl std::io::Write for TraceFilter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        for &b in buf {
            self.line.push(b);
            if b == b'\n' {
                let l = String::from_utf8_lossy(&self.line);
                let name = l
                    .split_once("] ")
                    .and_then(|(_, r)| r.split_once(':'))
                    .map_or("", |(n, _)| n);
                if self.keep.is_empty() || self.keep.iter().any(|k| k == name) {
                    self.out.write_all(&self.line)?;
                }
                self.line.clear();
            }
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Why a run failed (a model deadlock, an invariant violation that stops the
/// run, a workload the model cannot run).
#[derive(Debug, thiserror::Error)]
#[error("{scenario} [{variant}] seed {seed}: {message}")]
pub struct RunError {
    pub scenario: String,
    pub variant: String,
    pub seed: u64,
    pub message: String,
}

/// Runs per variant and sweep point: `--repeat`, else the scenario's
/// `quick_repeat` under `--quick`, else its `repeat`.
pub fn repetitions(scenario: &Scenario, opts: &RunOptions) -> u32 {
    match (opts.repeat, opts.quick) {
        (Some(n), _) => n,
        (None, true) => scenario.quick_repeat,
        (None, false) => scenario.repeat,
    }
    .max(1)
}

/// The runs a scenario asks for: every variant x sweep point x repetition, as
/// (variant, seed) in a fixed order.
pub fn plan(
    scenario: &Scenario,
    opts: &RunOptions,
) -> Result<Vec<(ResolvedVariant, u64)>, super::scenario::ScenarioError> {
    let reps = repetitions(scenario, opts);
    let mut out = Vec::new();
    for v in scenario.variant_names() {
        for p in scenario.sweep_points() {
            let rv = scenario.resolve(v, p)?;
            for r in 0..u64::from(reps) {
                out.push((rv.clone(), scenario.seed + r));
            }
        }
    }
    Ok(out)
}

/// Runs `scenario` under `variant` with `seed`.
pub fn run_one(
    scenario: &Scenario,
    variant: &ResolvedVariant,
    seed: u64,
    opts: &RunOptions,
) -> Result<Results, RunError> {
    run_one_with_progress(scenario, variant, seed, opts, &mut |_, _| {})
}

/// Events between two calls of a progress callback.
const PROGRESS_EVERY: u64 = 1 << 14;

/// [`run_one`], calling `progress(simulated_now_ns, limit_ns)` every
/// [`PROGRESS_EVERY`] simulation steps (for a progress bar; it cannot change
/// the run).
pub fn run_one_with_progress(
    scenario: &Scenario,
    variant: &ResolvedVariant,
    seed: u64,
    opts: &RunOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Results, RunError> {
    let wall = std::time::Instant::now();
    let fail = |message: String| RunError {
        scenario: scenario.name.clone(),
        variant: variant.label.clone(),
        seed,
        message,
    };
    let duration = scenario.run_duration_ns(opts.quick);
    let sim = Sim::new(seed);
    if let Some(t) = &opts.trace {
        let f = std::fs::File::create(&t.path)
            .map_err(|e| fail(format!("--trace {}: {e}", t.path.display())))?;
        sim.set_trace(sim::TraceSink::Writer(Box::new(TraceFilter {
            out: std::io::BufWriter::new(f),
            keep: t.events.clone(),
            line: Vec::new(),
        })));
    }
    let booted = boot::boot(&sim, scenario, variant).map_err(&fail)?;
    let world = booted.world.clone();
    let ops = Rc::new(mounts::RunnerMounts::new(&booted));
    ops.mount_at_boot(&world).map_err(&fail)?;
    let Booted {
        job_sets,
        actor_cgroups,
        devices,
        ..
    } = booted;
    let reporting = job_reporting(&job_sets, opts.per_job || scenario.measure.per_job);
    for mut set in job_sets {
        set.aggregate = reporting.as_ref().is_some_and(|r| r.mode == "aggregated");
        spawn_job_set(&world, set);
    }
    for (actor, cg) in scenario.actors.iter().zip(actor_cgroups) {
        spawn_actor(&world, actor, cg, ops.clone());
    }
    let samples = sampler::start(
        &world,
        &devices,
        scenario.measure.sample_interval_ns,
        duration,
    );
    let has_finite = world.active.get() > 0;
    let w2 = world.clone();
    let sim2 = sim.clone();
    let mut steps = 0u64;
    let outcome = sim.run_while(duration, move || {
        steps += 1;
        if steps.is_multiple_of(PROGRESS_EVERY) {
            progress(sim2.now(), duration);
        }
        !(w2.end_requested.get() || (has_finite && w2.active.get() == 0))
    });
    if opts.trace.is_some() {
        sim.flush_trace()
            .map_err(|e| fail(format!("--trace: cannot write the trace: {e}")))?;
    }
    if let Err(d) = outcome {
        return Err(fail(format!("the model deadlocked:\n{d}")));
    }
    if let Some(e) = world.errors.borrow().first() {
        return Err(fail(e.clone()));
    }
    let mut r = collect::results(scenario, variant, seed, &world, &devices, &samples, wall);
    r.job_reporting = reporting;
    Ok(r)
}

/// How the run reports its fio jobs when they have more separate clones
/// than [`PER_JOB_DETAIL_MAX`]: aggregated per job (the default) or per
/// clone (`per_job`); None when within the limit (every job as its file
/// asks).
fn job_reporting(
    job_sets: &[crate::workload::fio_exec::JobSet],
    per_job: bool,
) -> Option<JobReporting> {
    let jobs = || job_sets.iter().flat_map(|s| s.jobs.iter());
    let separate = separate_entries(jobs());
    if separate <= PER_JOB_DETAIL_MAX {
        return None;
    }
    Some(if per_job {
        JobReporting {
            mode: "per_clone".to_string(),
            separate_clones: separate,
            limit: PER_JOB_DETAIL_MAX,
            aggregated_jobs: Vec::new(),
            note: format!(
                "{separate} clones without group_reporting, over the {PER_JOB_DETAIL_MAX} \
                 beyond which wbsim aggregates; kept per clone as asked (--per-job or \
                 [measure] per_job)"
            ),
        }
    } else {
        JobReporting {
            mode: "aggregated".to_string(),
            separate_clones: separate,
            limit: PER_JOB_DETAIL_MAX,
            aggregated_jobs: jobs()
                .filter(|j| !j.group_reporting && j.numjobs > 1)
                .map(|j| j.name.clone())
                .collect(),
            note: format!(
                "{separate} clones without group_reporting, over {PER_JOB_DETAIL_MAX}: each \
                 job's clones are reported as one entry, as with fio's group_reporting; \
                 --per-job (or [measure] per_job = true) keeps one entry per clone"
            ),
        }
    })
}
