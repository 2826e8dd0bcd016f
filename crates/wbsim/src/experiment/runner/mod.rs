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

use super::results::Results;
use super::scenario::{ResolvedVariant, Scenario};
use crate::workload::actor_exec::spawn_actor;
use crate::workload::fio_exec::spawn_job_set;

/// How a run is shortened or observed.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// `--quick`: the scenario's shortened form (`[scenario] quick_duration`,
    /// `quick_repeat`).
    pub quick: bool,
    /// Repetitions per variant, overriding the scenario's (`--repeat`).
    pub repeat: Option<u32>,
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
    let duration = if opts.quick {
        scenario.quick_duration_ns
    } else {
        scenario.duration_ns
    };
    let sim = Sim::new(seed);
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
    for set in job_sets {
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
    if let Err(d) = outcome {
        return Err(fail(format!("the model deadlocked:\n{d}")));
    }
    if let Some(e) = world.errors.borrow().first() {
        return Err(fail(e.clone()));
    }
    Ok(collect::results(
        scenario, variant, seed, &world, &devices, &samples, wall,
    ))
}
