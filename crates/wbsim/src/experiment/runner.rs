//! Runs one scenario variant with one seed: boots the modelled machine, mounts
//! the filesystems, starts the fio jobs and actors, samples metrics, checks the
//! invariants, and returns the results document. Not kernel code.
//!
//! One run is single-threaded and deterministic (DESIGN.md principle 4);
//! parallelism is across runs (`wbsim reproduce`).

use super::results::Results;
use super::scenario::{ResolvedVariant, Scenario};

/// How a run is shortened or observed.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// `--quick`: the scenario's shortened form (`[scenario] quick_duration`,
    /// `quick_repeat`).
    pub quick: bool,
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

/// Runs `scenario` under `variant` with `seed`.
pub fn run_one(
    scenario: &Scenario,
    variant: &ResolvedVariant,
    seed: u64,
    opts: &RunOptions,
) -> Result<Results, RunError> {
    let _ = opts;
    Err(RunError {
        scenario: scenario.name.clone(),
        variant: variant.label.clone(),
        seed,
        message: "the scenario runner is not built yet".into(),
    })
}
