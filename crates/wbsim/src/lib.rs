//! wbsim: an executable model of the Linux writeback and mount-teardown
//! machinery. Layers (DESIGN.md), top to bottom: `cli`, `experiment`,
//! `workload`, `model` (laid out like `linux/`); the engine is the `sim` crate.

pub mod cli;
pub mod experiment;
pub mod model;
pub mod workload;
