//! wbsim: an executable model of the Linux writeback and mount-teardown
//! machinery. Layers (docs/design.md), top to bottom: `cli`, `experiment`,
//! `workload`, `model` (laid out like `linux/`); the engine is the `sim` crate.
//! `probe` runs the same experiments on the live kernel.

pub mod cli;
pub mod experiment;
pub mod model;
#[cfg(target_os = "linux")]
pub mod probe;
pub mod workload;
