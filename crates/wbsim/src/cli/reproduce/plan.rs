//! The runs `wbsim reproduce` makes: every variant x sweep point x
//! repetition of each selected scenario, seed = scenario seed + repetition
//! index, in a fixed order (scenario, variant in file order, sweep point,
//! repetition).
//!
//! [`longest_first`] reorders them for the pool (results do not depend on
//! the order). Leaves out running them (reproduce.rs) and the shortened
//! durations of `--quick` (the runner applies those).

use crate::experiment::runner::{repetitions, RunOptions};
use crate::experiment::scenario::{ResolvedVariant, Scenario};

/// One run to make.
#[derive(Clone, Debug)]
pub struct Planned<'s> {
    /// Its scenario.
    pub scenario: &'s Scenario,
    /// The variant, or why it could not be resolved.
    pub variant: Result<ResolvedVariant, String>,
    /// The variant label (`name[key=value]` at a sweep point).
    pub label: String,
    /// Seed.
    pub seed: u64,
}

/// Every run of `scenarios`, in order.
pub fn plan(scenarios: &[Scenario], quick: bool) -> Vec<Planned<'_>> {
    let opts = RunOptions {
        quick,
        ..RunOptions::default()
    };
    let mut out = Vec::new();
    for s in scenarios {
        for name in s.variant_names() {
            for point in s.sweep_points() {
                let variant = s.resolve(name, point).map_err(|e| e.to_string());
                let label = match (&variant, point) {
                    (Ok(v), _) => v.label.clone(),
                    (Err(_), Some(i)) => format!("{name}[point {i}]"),
                    (Err(_), None) => name.to_string(),
                };
                for rep in 0..repetitions(s, &opts) {
                    out.push(Planned {
                        scenario: s,
                        variant: variant.clone(),
                        label: label.clone(),
                        seed: s.seed.wrapping_add(u64::from(rep)),
                    });
                }
            }
        }
    }
    out
}

/// Sorts `planned` by simulated duration, longest first (stable: ties
/// keep plan order), so the pool starts the slow runs (sweeps of long
/// scenarios) first instead of leaving one to finish alone.
pub fn longest_first(planned: &mut [Planned<'_>], quick: bool) {
    planned.sort_by_key(|p| std::cmp::Reverse(p.scenario.run_duration_ns(quick)));
}
